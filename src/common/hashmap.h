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
} mt_hashmap;

/* An empty map needs no allocation: zero-initialise it. */
void mt_hashmap_free(mt_hashmap *m);

/* Inserts or replaces. Returns false only when memory runs out (the map is then unchanged). */
bool mt_hashmap_put(mt_hashmap *m, int64_t key, uint64_t value);

/* Stores the value in *value (if non-NULL) and returns true if `key` is present. */
bool mt_hashmap_get(const mt_hashmap *m, int64_t key, uint64_t *value);

/* Removes `key`; returns whether it was present. */
bool mt_hashmap_remove(mt_hashmap *m, int64_t key);

static inline uint64_t mt_hash64(uint64_t x) {
  x ^= x >> 33;
  x *= UINT64_C(0xff51afd7ed558ccd);
  x ^= x >> 33;
  x *= UINT64_C(0xc4ceb9fe1a85ec53);
  x ^= x >> 33;
  return x;
}

#endif
