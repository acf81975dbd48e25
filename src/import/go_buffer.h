/* Byte-level helpers of the Go execution-trace reader (docs/go.md): the unsigned LEB128 varints
 * every Go trace number is written in, a bounded cursor over a batch's bytes, a growable byte
 * buffer, and the one error shape of the reader ("malformed Go trace at byte N: ..."). */
#ifndef MEMTAP_SRC_IMPORT_GO_BUFFER_H
#define MEMTAP_SRC_IMPORT_GO_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/common.h"

/* Reading position inside bytes that start at absolute file offset `base`. */
typedef struct go_cursor {
  const uint8_t *start, *p, *end;
  int64_t base; /* file offset of `start` */
} go_cursor;

static inline go_cursor go_cursor_make(const uint8_t *data, size_t size, int64_t base) {
  go_cursor c = {data, data, data + size, base};
  return c;
}

/* Absolute file offset of the cursor's position. */
static inline int64_t go_cursor_offset(const go_cursor *c) {
  return c->base + (c->p - c->start);
}

static inline size_t go_cursor_left(const go_cursor *c) {
  return (size_t)(c->end - c->p);
}

/* Reads an unsigned LEB128 varint of at most 10 bytes (the runtime pads some to exactly 10); false
 * when the bytes end first or the value overflows 64 bits. The cursor is left where it was then. */
static inline bool go_uvarint(go_cursor *c, uint64_t *value) {
  const uint8_t *p = c->p;
  if (p < c->end && *p < 0x80) { /* most numbers of a trace fit in one byte */
    *value = *p;
    c->p = p + 1;
    return true;
  }
  if (c->end - p >= 10) { /* room for any varint: no bound checks for the usual 2 to 4 bytes */
    uint64_t v = p[0] & 0x7f;
    for (unsigned i = 1; i < 4; i++) {
      if (p[i] < 0x80) {
        *value = v | (uint64_t)p[i] << (7 * i);
        c->p = p + i + 1;
        return true;
      }
      v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
    }
  }
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    if (p >= c->end)
      return false;
    uint8_t b = *p++;
    if (shift == 63 && b > 1)
      return false;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (b < 0x80) {
      *value = v;
      c->p = p;
      return true;
    }
  }
  return false;
}

/* Fills `err` with MT_E_MALFORMED and "malformed Go trace at byte OFFSET: <what>"; returns
 * MT_E_MALFORMED. */
int go_fail(mt_error *err, int64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fills `err` with MT_E_NOMEM; returns MT_E_NOMEM. */
int go_nomem(mt_error *err);

/* A growable array of bytes. */
typedef struct go_bytes {
  uint8_t *data;
  size_t len, cap;
} go_bytes;

/* Makes room for `extra` more bytes; false when memory runs out. */
bool go_bytes_reserve(go_bytes *b, size_t extra);
void go_bytes_free(go_bytes *b);

#endif
