/* Buffered output and JSON string escaping (output.h). */
#include "output.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

void out_init(cli_out *o, int fd) {
  o->len = 0;
  o->fd = fd;
  o->failed = false;
  o->error = 0;
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
      write_fully(o, data, n);
      return;
    }
  }
  memcpy(o->buf + o->len, data, n);
  o->len += n;
}

void out_str(cli_out *o, const char *s) {
  out_bytes(o, s, strlen(s));
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
