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

/* --- reader ------------------------------------------------------------------------------- */

typedef struct mt_backtrace_decoder {
  int64_t loc[MT_CACHE_BUCKETS];
  uint16_t next[MT_CACHE_BUCKETS];
} mt_backtrace_decoder;

#endif
