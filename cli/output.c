/* Buffered output and JSON string escaping (output.h). */
#include "output.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common/count_text.h"

void out_init(cli_out *o, int fd) {
  o->len = 0;
  o->fd = fd;
  o->failed = false;
  o->error = 0;
  o->terminal = isatty(fd) == 1;
}

void out_defuse(char *text, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)text[i];
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
      text[i] = '?';
  }
}

/* On a terminal: the control characters of buf[from..len) become '?' (output.h). */
static void defuse(cli_out *o, size_t from) {
  if (o->terminal)
    out_defuse(o->buf + from, o->len - from);
}

/* Writes all `n` bytes unless a write fails, which marks the output failed. */
static void write_fully(cli_out *o, const char *data, size_t n) {
  size_t done = 0;
  while (done < n && !o->failed) {
    ssize_t w = write(o->fd, data + done, n - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      o->failed = true;
      o->error = w < 0 ? errno : EIO;
    } else
      done += (size_t)w;
  }
}

bool out_flush(cli_out *o) {
  write_fully(o, o->buf, o->len);
  o->len = 0;
  return !o->failed;
}

bool out_finish(cli_out *o) {
  if (out_flush(o))
    return true;
  cli_error("<stdout>", "writing failed: %s", strerror(o->error));
  return false;
}

void out_bytes(cli_out *o, const void *data, size_t n) {
  if (o->len + n > sizeof o->buf) {
    out_flush(o);
    if (n > sizeof o->buf) {
      if (o->terminal) { /* through the buffer, a part at a time, to be defused */
        for (size_t done = 0; done < n; done += sizeof o->buf) {
          size_t part = n - done < sizeof o->buf ? n - done : sizeof o->buf;
          out_bytes(o, (const char *)data + done, part);
          out_flush(o);
        }
        return;
      }
      write_fully(o, data, n);
      return;
    }
  }
  memcpy(o->buf + o->len, data, n);
  o->len += n;
  defuse(o, o->len - n);
}

void out_str(cli_out *o, const char *s) {
  out_bytes(o, s, strlen(s));
}

void out_line_field(cli_out *o, const char *label, const char *s) {
  out_str(o, label);
  for (s = s ? s : "";;) {
    size_t n = strcspn(s, "\n\r\\");
    out_bytes(o, s, n);
    if (!s[n]) {
      out_str(o, "\n");
      return;
    }
    out_str(o, s[n] == '\n' ? "\\n" : s[n] == '\r' ? "\\r" : "\\\\");
    s += n + 1;
  }
}

void out_printf(cli_out *o, const char *fmt, ...) {
  if (sizeof o->buf - o->len < 512)
    out_flush(o);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->buf + o->len, sizeof o->buf - o->len, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n < sizeof o->buf - o->len) {
    o->len += (size_t)n;
    defuse(o, o->len - (size_t)n);
    return;
  }
  char big[8192];
  va_start(ap, fmt);
  vsnprintf(big, sizeof big, fmt, ap);
  va_end(ap);
  out_str(o, big);
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if the byte at s does not start one. */
static int utf8_length(const unsigned char *s) {
  unsigned c = s[0];
  if (c < 0x80)
    return 1;
  int n;
  unsigned min;
  if ((c & 0xE0) == 0xC0)
    n = 2, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    n = 3, min = 0x800;
  else if ((c & 0xF8) == 0xF0)
    n = 4, min = 0x10000;
  else
    return 0;
  unsigned cp = c & (0x7F >> n);
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

void out_json_string(cli_out *o, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  out_bytes(o, "\"", 1);
  while (*p) {
    unsigned c = *p;
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      out_bytes(o, esc, 2);
      p++;
    } else if (c < 0x20) {
      out_printf(o, "\\u%04x", c);
      p++;
    } else {
      int n = utf8_length(p);
      if (n == 0) {
        out_printf(o, "\\udc%02x", c);
        p++;
      } else {
        out_bytes(o, p, (size_t)n);
        p += n;
      }
    }
  }
  out_bytes(o, "\"", 1);
}

static const char *const iec_units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

const char *out_format_bytes(double bytes, char buf[32]) {
  int u = 0;
  double v = bytes;
  while (fabs(v) >= 1024 && u < 6)
    v /= 1024, u++;
  if (u == 0)
    snprintf(buf, 32, "%.0f B", v);
  else if (fabs(v) < 99.95) /* what would print as "100.0" gets no decimal */
    snprintf(buf, 32, "%.1f %s", v, iec_units[u]);
  else if (fabs(v) < 1e6 || !isfinite(v))
    snprintf(buf, 32, "%.0f %s", v, iec_units[u]);
  else /* estimates of a crafted rate (1e-300): the digits would not fit, the unit would go */
    snprintf(buf, 32, "%.3g %s", v, iec_units[u]);
  return buf;
}

const char *out_format_count(double count, char buf[32]) {
  if (!isfinite(count) || fabs(count) >= 9e18) { /* not a count a program made: 3 digits */
    snprintf(buf, 32, "%.3g", count);
    return buf;
  }
  long long v = llround(count);
  unsigned long long m = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
  if (v < 0)
    buf[0] = '-';
  mt_count_text(m, buf + (v < 0)); /* 1 + MT_COUNT_TEXT_SIZE bytes at most */
  return buf;
}

const char *out_format_exact_bytes(int64_t bytes, char buf[32]) {
  int u = 0;
  while (u < 6 && bytes != 0 && bytes % 1024 == 0)
    bytes /= 1024, u++;
  snprintf(buf, 32, "%lld %s", (long long)bytes, iec_units[u]);
  return buf;
}

const char *out_format_decimal(double value, char buf[40]) {
  if (!isfinite(value) || value == 0 || fabs(value) >= 1e15 || fabs(value) < 1e-15) {
    snprintf(buf, 40, "%g", value);
    return buf;
  }
  int decimals = 5 - (int)floor(log10(fabs(value)));
  if (decimals < 0)
    decimals = 0;
  snprintf(buf, 40, "%.*f", decimals, value);
  if (strchr(buf, '.')) {
    size_t n = strlen(buf);
    while (buf[n - 1] == '0')
      buf[--n] = 0;
    if (buf[n - 1] == '.')
      buf[--n] = 0;
  }
  return buf;
}

const char *out_plural(double n) {
  return n == 1 ? "" : "s";
}
