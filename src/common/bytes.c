/* The byte builder and cursor of bytes.h. */
#include "common/bytes.h"

#include <stdlib.h>
#include <string.h>

#include "common/hashmap.h"

static uint8_t *room(mt_bytes *b, size_t n) {
  if (b->failed)
    return NULL;
  if (b->cap - b->len < n) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
      if (cap > SIZE_MAX / 2) {
        b->failed = true;
        return NULL;
      }
      cap *= 2;
    }
    uint8_t *grown = realloc(b->data, cap);
    if (!grown) {
      b->failed = true;
      return NULL;
    }
    b->data = grown;
    b->cap = cap;
  }
  uint8_t *p = b->data + b->len;
  b->len += n;
  return p;
}

static void store(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t load(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void put(mt_bytes *b, uint64_t v, int n) {
  uint8_t *p = room(b, (size_t)n);
  if (p)
    store(p, v, n);
}

void mt_bytes_u8(mt_bytes *b, uint8_t v) {
  put(b, v, 1);
}
void mt_bytes_u16(mt_bytes *b, uint16_t v) {
  put(b, v, 2);
}
void mt_bytes_u32(mt_bytes *b, uint32_t v) {
  put(b, v, 4);
}
void mt_bytes_u64(mt_bytes *b, uint64_t v) {
  put(b, v, 8);
}

void mt_bytes_data(mt_bytes *b, const void *data, size_t n) {
  uint8_t *p = room(b, n);
  if (p && n)
    memcpy(p, data, n);
}

void mt_bytes_string(mt_bytes *b, const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n > UINT32_MAX) {
    b->failed = true;
    return;
  }
  mt_bytes_u32(b, (uint32_t)n);
  mt_bytes_data(b, s, n);
}

void mt_bytes_patch_u64(mt_bytes *b, size_t at, uint64_t v) {
  if (!b->failed && at + 8 <= b->len)
    store(b->data + at, v, 8);
}

void mt_bytes_free(mt_bytes *b) {
  free(b->data);
  *b = (mt_bytes){0};
}

static bool get(mt_bytes_reader *r, uint64_t *v, int n) {
  if ((size_t)(r->end - r->p) < (size_t)n)
    return false;
  *v = load(r->p, n);
  r->p += n;
  return true;
}

bool mt_bytes_get_u8(mt_bytes_reader *r, uint8_t *v) {
  uint64_t x;
  return get(r, &x, 1) ? (*v = (uint8_t)x, true) : false;
}
bool mt_bytes_get_u16(mt_bytes_reader *r, uint16_t *v) {
  uint64_t x;
  return get(r, &x, 2) ? (*v = (uint16_t)x, true) : false;
}
bool mt_bytes_get_u32(mt_bytes_reader *r, uint32_t *v) {
  uint64_t x;
  return get(r, &x, 4) ? (*v = (uint32_t)x, true) : false;
}
bool mt_bytes_get_u64(mt_bytes_reader *r, uint64_t *v) {
  return get(r, v, 8);
}
bool mt_bytes_get_i64(mt_bytes_reader *r, int64_t *v) {
  uint64_t x;
  return get(r, &x, 8) ? (*v = (int64_t)x, true) : false;
}

bool mt_bytes_get_data(mt_bytes_reader *r, size_t n, const uint8_t **data) {
  if ((size_t)(r->end - r->p) < n)
    return false;
  *data = r->p;
  r->p += n;
  return true;
}

bool mt_bytes_get_string(mt_bytes_reader *r, const char **s, size_t *len) {
  const uint8_t *start = r->p;
  uint32_t n;
  const uint8_t *data;
  if (!mt_bytes_get_u32(r, &n) || !mt_bytes_get_data(r, n, &data)) {
    r->p = start;
    return false;
  }
  *s = (const char *)data;
  *len = n;
  return true;
}

uint64_t mt_bytes_checksum(const void *data, size_t n) {
  return mt_hash_bytes(0, data, n);
}
