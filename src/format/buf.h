/* Bounded little-endian byte access for the memtrace format (FORMAT.md §2.1): a read cursor that
 * never reads past its end and a write buffer that never writes past its capacity. The read side is
 * inline because every event of every trace goes through it. */
#ifndef MEMTAP_SRC_FORMAT_BUF_H
#define MEMTAP_SRC_FORMAT_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A read cursor over [p, end). `origin` is the absolute offset of `base` in the input, so that
 * errors can name the absolute byte offset of a field. */
typedef struct mt_rbuf {
  const uint8_t *p;
  const uint8_t *end;
  const uint8_t *base;
  int64_t origin;
} mt_rbuf;

static inline void mt_rbuf_init(mt_rbuf *b, const uint8_t *data, size_t size, int64_t origin) {
  b->p = b->base = data;
  b->end = data + size;
  b->origin = origin;
}

static inline int64_t mt_rbuf_offset(const mt_rbuf *b) {
  return b->origin + (int64_t)(b->p - b->base);
}

static inline size_t mt_rbuf_left(const mt_rbuf *b) {
  return (size_t)(b->end - b->p);
}

static inline uint16_t mt_load_u16(const uint8_t *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t mt_load_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t mt_load_u64(const uint8_t *p) {
  return (uint64_t)mt_load_u32(p) | (uint64_t)mt_load_u32(p + 4) << 32;
}

/* Each reader returns false, consuming nothing, when the field does not fit in what is left. */
static inline bool mt_rbuf_u8(mt_rbuf *b, uint8_t *v) {
  if (b->p >= b->end)
    return false;
  *v = *b->p++;
  return true;
}
static inline bool mt_rbuf_u16(mt_rbuf *b, uint16_t *v) {
  if (b->end - b->p < 2)
    return false;
  *v = mt_load_u16(b->p);
  b->p += 2;
  return true;
}
static inline bool mt_rbuf_u32(mt_rbuf *b, uint32_t *v) {
  if (b->end - b->p < 4)
    return false;
  *v = mt_load_u32(b->p);
  b->p += 4;
  return true;
}
static inline bool mt_rbuf_u64(mt_rbuf *b, uint64_t *v) {
  if (b->end - b->p < 8)
    return false;
  *v = mt_load_u64(b->p);
  b->p += 8;
  return true;
}

/* vint (FORMAT.md §2.1): < 253 itself; 253 u16 unsigned; 254 32 bits sign-extended; 255 64 bits. */
static inline bool mt_rbuf_vint(mt_rbuf *b, int64_t *v) {
  if (b->p >= b->end)
    return false;
  uint8_t first = b->p[0];
  if (first < 253) {
    *v = first;
    b->p += 1;
    return true;
  }
  ptrdiff_t left = b->end - b->p - 1;
  if (first == 253) {
    if (left < 2)
      return false;
    *v = mt_load_u16(b->p + 1);
    b->p += 3;
  } else if (first == 254) {
    if (left < 4)
      return false;
    *v = (int32_t)mt_load_u32(b->p + 1);
    b->p += 5;
  } else {
    if (left < 8)
      return false;
    *v = (int64_t)mt_load_u64(b->p + 1);
    b->p += 9;
  }
  return true;
}

/* A NUL-terminated string: stores its start and length (NUL excluded) and consumes the NUL. */
static inline bool mt_rbuf_string(mt_rbuf *b, const char **s, size_t *len) {
  const uint8_t *nul = memchr(b->p, 0, (size_t)(b->end - b->p));
  if (!nul)
    return false;
  *s = (const char *)b->p;
  *len = (size_t)(nul - b->p);
  b->p = nul + 1;
  return true;
}

/* A write buffer of fixed capacity. A write that does not fit sets `overflow` and writes nothing;
 * callers size buffers so that this never happens and check the flag once per packet. */
typedef struct mt_wbuf {
  uint8_t *data;
  size_t len;
  size_t cap;
  bool overflow;
} mt_wbuf;

static inline void mt_wbuf_init(mt_wbuf *b, uint8_t *data, size_t cap) {
  b->data = data;
  b->len = 0;
  b->cap = cap;
  b->overflow = false;
}

static inline bool mt_wbuf_room(mt_wbuf *b, size_t n) {
  if (b->cap - b->len < n) {
    b->overflow = true;
    return false;
  }
  return true;
}

static inline void mt_store_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void mt_store_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}
static inline void mt_store_u64(uint8_t *p, uint64_t v) {
  mt_store_u32(p, (uint32_t)v);
  mt_store_u32(p + 4, (uint32_t)(v >> 32));
}

static inline void mt_wbuf_u8(mt_wbuf *b, uint8_t v) {
  if (mt_wbuf_room(b, 1))
    b->data[b->len++] = v;
}
static inline void mt_wbuf_u16(mt_wbuf *b, uint16_t v) {
  if (mt_wbuf_room(b, 2)) {
    mt_store_u16(b->data + b->len, v);
    b->len += 2;
  }
}
static inline void mt_wbuf_u32(mt_wbuf *b, uint32_t v) {
  if (mt_wbuf_room(b, 4)) {
    mt_store_u32(b->data + b->len, v);
    b->len += 4;
  }
}
static inline void mt_wbuf_u64(mt_wbuf *b, uint64_t v) {
  if (mt_wbuf_room(b, 8)) {
    mt_store_u64(b->data + b->len, v);
    b->len += 8;
  }
}

/* vint (FORMAT.md §2.1), for a signed value. */
void mt_wbuf_vint(mt_wbuf *b, int64_t v);

/* The bytes of `s` up to its first NUL (at most `max_len` of them), then a NUL. */
void mt_wbuf_string(mt_wbuf *b, const char *s, size_t max_len);

/* How many bytes mt_wbuf_vint writes for `v`. */
size_t mt_vint_size(int64_t v);

#endif
