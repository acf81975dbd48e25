/* Binary files of memtap's own (the reader's saved decoder state, the analysis'
 * checkpoint index): a growable little-endian byte builder, and a bounded cursor that reads one
 * back. */
#ifndef MEMTAP_SRC_COMMON_BYTES_H
#define MEMTAP_SRC_COMMON_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Zero-initialise. After a failed allocation `failed` is set and further writes do nothing. */
typedef struct mt_bytes {
  uint8_t *data;
  size_t len, cap;
  bool failed;
} mt_bytes;

void mt_bytes_u8(mt_bytes *b, uint8_t v);
void mt_bytes_u16(mt_bytes *b, uint16_t v);
void mt_bytes_u32(mt_bytes *b, uint32_t v);
void mt_bytes_u64(mt_bytes *b, uint64_t v);
void mt_bytes_data(mt_bytes *b, const void *data, size_t n);
/* A string as a u32 length and its bytes (no NUL). */
void mt_bytes_string(mt_bytes *b, const char *s);
/* Overwrites 8 bytes at `at` (< len - 7): for lengths known once their content is written. */
void mt_bytes_patch_u64(mt_bytes *b, size_t at, uint64_t v);
void mt_bytes_free(mt_bytes *b);

/* A read cursor over [p, end). A read that does not fit returns false and consumes nothing; the
 * offset of the field is then mt_bytes_reader_offset. */
typedef struct mt_bytes_reader {
  const uint8_t *base, *p, *end;
} mt_bytes_reader;

static inline void mt_bytes_reader_init(mt_bytes_reader *r, const void *data, size_t size) {
  r->base = r->p = data;
  r->end = r->p + size;
}
static inline size_t mt_bytes_reader_offset(const mt_bytes_reader *r) {
  return (size_t)(r->p - r->base);
}
static inline size_t mt_bytes_reader_left(const mt_bytes_reader *r) {
  return (size_t)(r->end - r->p);
}
bool mt_bytes_get_u8(mt_bytes_reader *r, uint8_t *v);
bool mt_bytes_get_u16(mt_bytes_reader *r, uint16_t *v);
bool mt_bytes_get_u32(mt_bytes_reader *r, uint32_t *v);
bool mt_bytes_get_u64(mt_bytes_reader *r, uint64_t *v);
bool mt_bytes_get_i64(mt_bytes_reader *r, int64_t *v);
/* `n` bytes: a pointer into the data. */
bool mt_bytes_get_data(mt_bytes_reader *r, size_t n, const uint8_t **data);
/* A string written by mt_bytes_string: a pointer into the data and its length (not terminated). */
bool mt_bytes_get_string(mt_bytes_reader *r, const char **s, size_t *len);

/* 64-bit FNV-1a over bytes, finished with a mixer: a checksum against damage, not an adversary. */
uint64_t mt_bytes_checksum(const void *data, size_t n);

#endif
