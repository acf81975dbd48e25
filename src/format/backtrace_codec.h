/* The backtrace codec (FORMAT.md §2.7): a 16 384-bucket cache of location codes with a predicted
 * next bucket per entry, on both sides, per domain. The writer hashes codes into buckets and emits
 * codewords (hit, hit with N correct predictions, miss + code); the reader follows them. */
#ifndef MEMTAP_SRC_FORMAT_BACKTRACE_CODEC_H
#define MEMTAP_SRC_FORMAT_BACKTRACE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/buf.h"

#define MT_CACHE_BUCKETS 16384
#define MT_CACHE_MASK (MT_CACHE_BUCKETS - 1)
#define MT_BACKTRACE_ENCODING_MAX 4096 /* one allocation's codewords never exceed this (§2.7) */
#define MT_VERIFY_FIRST 4242
#define MT_VERIFY_STEP 5413

/* --- writer ------------------------------------------------------------------------------- */

typedef struct mt_backtrace_encoder {
  uint64_t loc[MT_CACHE_BUCKETS];
  uint16_t next[MT_CACHE_BUCKETS];
  int64_t date[MT_CACHE_BUCKETS];
} mt_backtrace_encoder;

/* Called for each cache miss, in encoding order: the code must be described by a location event. */
typedef bool (*mt_miss_fn)(void *user, uint64_t code);

/* Encodes frames stack[first] down to stack[0] (outermost new frame first; `stack` is innermost
 * first) as codewords appended to `out`, stopping early at the 4 KiB cut. `alloc_id` dates the
 * buckets used. Returns the number of codewords written, or -1 if on_miss failed. */
long mt_backtrace_encode(mt_backtrace_encoder *enc, mt_wbuf *out, const uint64_t *stack, long first,
                         int64_t alloc_id, mt_miss_fn on_miss, void *user);

/* The writer's two buckets for a code (§2.7). */
static inline unsigned mt_backtrace_hash1(uint64_t code) {
  return (unsigned)((code * 0x4983723u) >> 11) & MT_CACHE_MASK;
}
static inline unsigned mt_backtrace_hash2(uint64_t code) {
  return (unsigned)((code * 0xFDEA731u) >> 21) & MT_CACHE_MASK;
}

/* Whether `code` is in the cache: then encoding it never misses (only a miss evicts). */
static inline bool mt_backtrace_cached(const mt_backtrace_encoder *enc, uint64_t code) {
  return enc->loc[mt_backtrace_hash1(code)] == code || enc->loc[mt_backtrace_hash2(code)] == code;
}

/* mt_backtrace_encode for at most 8 frames that are all in the cache (mt_backtrace_cached): the
 * same codewords and cache updates, written at `o` (room for 3 bytes a frame); returns the number
 * of codewords and sets *end past them. Inline, for the writer's fast path. */
static inline unsigned mt_backtrace_encode_cached(mt_backtrace_encoder *enc, uint8_t *o,
                                                  const uint64_t *stack, long first,
                                                  int64_t alloc_id, uint8_t **end) {
  unsigned codewords = 0, predictor = 0;
  long pos = first;
  while (pos >= 0) {
    uint64_t code = stack[pos];
    unsigned hit = mt_backtrace_hash1(code);
    if (enc->loc[hit] != code)
      hit = mt_backtrace_hash2(code);
    enc->date[hit] = alloc_id;
    enc->next[predictor] = (uint16_t)hit;
    unsigned p = hit, n = 0; /* fewer than 255 predictions: at most 8 frames */
    for (pos--; pos >= 0; pos--) {
      unsigned q = enc->next[p];
      if (enc->loc[q] != stack[pos])
        break; /* the mispredicted frame is examined again from scratch */
      n++;
      p = q;
    }
    if (n < 2) {
      mt_store_u16(o, (uint16_t)(hit << 2 | n));
      o += 2;
    } else {
      mt_store_u16(o, (uint16_t)(hit << 2 | 2));
      o[2] = (uint8_t)n;
      o += 3;
    }
    codewords++;
    predictor = p;
  }
  *end = o;
  return codewords;
}

/* --- reader ------------------------------------------------------------------------------- */

typedef struct mt_backtrace_decoder {
  int64_t loc[MT_CACHE_BUCKETS];
  uint16_t next[MT_CACHE_BUCKETS];
} mt_backtrace_decoder;

#endif
