/* A map from distinct uint64 keys to uint32 values, made for get-or-add in one probe when the
 * values index an array the caller fills in the order keys first come (the report's cells, rows,
 * and tree nodes): open addressing with linear probing, no removal, 16-byte slots so a probe
 * touches one cache line, load at most 1/2, and keys hashed with the map's seed (they come from
 * traces: see hashmap.h). Faster than mt_hashmap for this use: one probe instead of a get and a
 * put, one array instead of three, and no tombstones to skip. */
#ifndef MEMTAP_SRC_COMMON_INDEXMAP_H
#define MEMTAP_SRC_COMMON_INDEXMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hashmap.h"

#define MT_INDEXMAP_NONE UINT32_MAX /* "absent"; never a stored value */

typedef struct mt_indexmap_slot {
  uint64_t key;
  uint32_t value;
  uint32_t gen; /* the slot is full when this is the map's gen: a clear is gen + 1, not a memset */
} mt_indexmap_slot;

typedef struct mt_indexmap {
  mt_indexmap_slot *slots; /* made with gen 0: empty */
  size_t cap;              /* a power of two, or 0 */
  size_t count;
  uint64_t seed; /* `mt_indexmap m = {.seed = mt_hashmap_random_seed()}` for keys from a trace */
  uint32_t gen;  /* 0 in a zeroed map: the first reserve makes it 1 */
} mt_indexmap;

/* Makes room for `n` keys in all without growing. False when memory runs out (map unchanged). */
bool mt_indexmap_reserve(mt_indexmap *m, size_t n);
/* Forgets every key, keeping the memory and the seed. */
void mt_indexmap_clear(mt_indexmap *m);
void mt_indexmap_free(mt_indexmap *m);

/* The value of `key`; when absent, adds it with `value` (< MT_INDEXMAP_NONE), sets *added and
 * returns `value`. MT_INDEXMAP_NONE when memory runs out (the map is then unchanged). */
static inline uint32_t mt_indexmap_get_or_add(mt_indexmap *m, uint64_t key, uint32_t value,
                                              bool *added) {
  *added = false;
  if ((m->count + 1) * 2 > m->cap && !mt_indexmap_reserve(m, m->count + 1))
    return MT_INDEXMAP_NONE;
  size_t mask = m->cap - 1;
  for (size_t i = mt_hash64(key ^ m->seed) & mask;; i = (i + 1) & mask) {
    mt_indexmap_slot *s = &m->slots[i];
    if (s->gen != m->gen) {
      s->key = key;
      s->value = value;
      s->gen = m->gen;
      m->count++;
      *added = true;
      return value;
    }
    if (s->key == key)
      return s->value;
  }
}

/* The value of `key`, or MT_INDEXMAP_NONE when absent. */
static inline uint32_t mt_indexmap_get(const mt_indexmap *m, uint64_t key) {
  if (!m->cap)
    return MT_INDEXMAP_NONE;
  size_t mask = m->cap - 1;
  for (size_t i = mt_hash64(key ^ m->seed) & mask;; i = (i + 1) & mask) {
    const mt_indexmap_slot *s = &m->slots[i];
    if (s->gen != m->gen)
      return MT_INDEXMAP_NONE;
    if (s->key == key)
      return s->value;
  }
}

#endif
