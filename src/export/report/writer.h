/* The HTML report's output buffer (src/export/html.c): its data arrays hold hundreds of thousands
 * of numbers, so they are formatted straight into a buffer (no fprintf, no bound check per
 * character): a writer asks for room once per array item (rw_room), formats into it, and says
 * where it stopped (rw_end). Numbers below RW_SMALL, most of them, are copied from a table of their
 * text made when the writer starts. Formats as printf would: "%" PRIu64, "%" PRId64, "%.3f"
 * below 10^12, "%.0f" of a non-negative double below 10^15. */
#ifndef MEMTAP_SRC_EXPORT_REPORT_WRITER_H
#define MEMTAP_SRC_EXPORT_REPORT_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define RW_BUFFER (1 << 16)

#define RW_SMALL 10000 /* numbers below this are copied from a table of their text */

typedef struct report_writer {
  FILE *out;
  size_t n;
  char buf[RW_BUFFER];
  char small[RW_SMALL][4];
  uint8_t small_len[RW_SMALL];
} report_writer;

static inline char *rw_uint_digits(char *p, uint64_t v);

/* A writer to `out`, its table of small numbers filled. */
static inline void rw_init(report_writer *w, FILE *out) {
  w->out = out;
  w->n = 0;
  memset(w->small, 0, sizeof w->small);
  for (unsigned v = 0; v < RW_SMALL; v++)
    w->small_len[v] = (uint8_t)(rw_uint_digits(w->small[v], v) - w->small[v]);
}

static inline void rw_flush(report_writer *w) {
  fwrite(w->buf, 1, w->n, w->out);
  w->n = 0;
}

/* Where to write at most `need` (< RW_BUFFER) bytes. */
static inline char *rw_room(report_writer *w, size_t need) {
  if (w->n + need > sizeof w->buf)
    rw_flush(w);
  return w->buf + w->n;
}

/* Where to write at most `need` more bytes after `p`, what was written before `p` kept. */
static inline char *rw_room_after(report_writer *w, char *p, size_t need) {
  if ((size_t)(p - w->buf) + need <= sizeof w->buf)
    return p;
  w->n = (size_t)(p - w->buf);
  rw_flush(w);
  return w->buf;
}

static inline void rw_end(report_writer *w, char *end) {
  w->n = (size_t)(end - w->buf);
}

static inline void rw_char(report_writer *w, char c) {
  *rw_room(w, 1) = c;
  w->n++;
}

/* `v` in decimal at `p` (at most 20 bytes); returns the end. */
static inline char *rw_uint_digits(char *p, uint64_t v) {
  static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233"
                              "34353637383940414243444546474849505152535455565758596061626364656667"
                              "6869707172737475767778798081828384858687888990919293949596979899";
  /* clang-format off */
  static const uint64_t pow10[20] = {
      1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000, 10000000000u,
      100000000000u, 1000000000000u, 10000000000000u, 100000000000000u, 1000000000000000u,
      10000000000000000u, 100000000000000000u, 1000000000000000000u, 10000000000000000000u};
  /* clang-format on */
  if (v < 10) {
    *p = (char)('0' + v);
    return p + 1;
  }
  if (v < 100) {
    memcpy(p, pairs + 2 * v, 2);
    return p + 2;
  }
  if (v < 10000) { /* most frame and stack numbers */
    unsigned hi = (unsigned)v / 100, lo = (unsigned)v % 100;
    if (hi >= 10) {
      memcpy(p, pairs + 2 * hi, 2);
      p += 2;
    } else {
      *p++ = (char)('0' + hi);
    }
    memcpy(p, pairs + 2 * lo, 2);
    return p + 2;
  }
  if (v < 1000000) { /* stack numbers of big traces */
    unsigned hi = (unsigned)v / 10000, mid = (unsigned)v / 100 % 100, lo = (unsigned)v % 100;
    if (hi >= 10) {
      memcpy(p, pairs + 2 * hi, 2);
      p += 2;
    } else {
      *p++ = (char)('0' + hi);
    }
    memcpy(p, pairs + 2 * mid, 2);
    memcpy(p + 2, pairs + 2 * lo, 2);
    return p + 4;
  }
  unsigned approx = (unsigned)(64 - __builtin_clzll(v)) * 1233 >> 12; /* log10 of 2^bits */
  char *end = p + approx + (v >= pow10[approx]), *d = end;
  while (v >= 100) {
    d -= 2;
    memcpy(d, pairs + 2 * (v % 100), 2);
    v /= 100;
  }
  if (v >= 10)
    memcpy(d - 2, pairs + 2 * v, 2);
  else
    d[-1] = (char)('0' + v);
  return end;
}

/* The same, from the table below RW_SMALL (4 bytes are written; at most 20 are needed). */
static inline char *rw_uint(const report_writer *w, char *p, uint64_t v) {
  if (v >= RW_SMALL)
    return rw_uint_digits(p, v);
  memcpy(p, w->small[v], 4);
  return p + w->small_len[v];
}

/* At most 21 bytes. */
static inline char *rw_int(const report_writer *w, char *p, int64_t v) {
  if (v >= 0)
    return rw_uint(w, p, (uint64_t)v);
  *p = '-';
  return rw_uint(w, p + 1, (uint64_t)0 - (uint64_t)v);
}

/* A non-negative `v` below 10^12 as "%.3f" writes it (at most 17 bytes). */
static inline char *rw_fixed3(const report_writer *w, char *p, double v) {
  double thousandths = (v - (double)(uint64_t)v) * 1000;
  uint64_t whole = (uint64_t)v, milli = (uint64_t)(thousandths + 0.5);
  if ((double)milli - 0.5 > thousandths) /* the sum rounded up: llround's value is one less */
    milli--;
  if (milli >= 1000) {
    whole++;
    milli -= 1000;
  }
  p = rw_uint(w, p, whole);
  p[0] = '.';
  p[1] = (char)('0' + milli / 100);
  p[2] = (char)('0' + milli / 10 % 10);
  p[3] = (char)('0' + milli % 10);
  return p + 4;
}

#endif
