/* An open-addressing hash map from int64 keys to uint64 values, with deletion. Used for location
 * codes, object-id maps and caches keyed by code. Memory: 17 bytes per slot, load factor <= 1/2. */
#ifndef MEMTAP_SRC_COMMON_HASHMAP_H
#define MEMTAP_SRC_COMMON_HASHMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mt_hashmap {
  int64_t *keys;
  uint64_t *values;
  uint8_t *state; /* 0 empty, 1 full, 2 deleted */
  size_t cap;     /* a power of two, or 0 */
  size_t count;   /* full slots */
  size_t used;    /* full + deleted slots */
  uint64_t seed;  /* mixed into every key's hash; 0 in a zeroed map */
} mt_hashmap;

/* An empty map needs no allocation: zero-initialise it. A map keyed by untrusted input (codes or
 * ids read from a trace) takes a secret seed first, `mt_hashmap m = {.seed =
 * mt_hashmap_random_seed()}`: the hash below is public and invertible, so without a seed the input
 * can choose keys that all fall into one probe run and make every lookup walk all of them. */
void mt_hashmap_free(mt_hashmap *m);

/* Inserts or replaces. Returns false only when memory runs out (the map is then unchanged). */
bool mt_hashmap_put(mt_hashmap *m, int64_t key, uint64_t value);

/* Stores the value in *value (if non-NULL) and returns true if `key` is present. */
bool mt_hashmap_get(const mt_hashmap *m, int64_t key, uint64_t *value);

/* Removes `key`; returns whether it was present. */
bool mt_hashmap_remove(mt_hashmap *m, int64_t key);

/* A fresh random seed (getrandom; a clock-and-address mix if that fails). */
uint64_t mt_hashmap_random_seed(void);

/* The longest run of occupied slots, i.e. the most probes one lookup can take (statistics, tests).
 */
size_t mt_hashmap_longest_run(const mt_hashmap *m);

/* A hash of `n` bytes (64-bit FNV-1a, `seed` mixed into its start, finished with mt_hash64): for
 * strings read from a trace (with a secret seed) and checksums of memtap's own files (seed 0). */
uint64_t mt_hash_bytes(uint64_t seed, const void *data, size_t n);

static inline uint64_t mt_hash64(uint64_t x) {
  x ^= x >> 33;
  x *= UINT64_C(0xff51afd7ed558ccd);
  x ^= x >> 33;
  x *= UINT64_C(0xc4ceb9fe1a85ec53);
  x ^= x >> 33;
  return x;
}

#endif
