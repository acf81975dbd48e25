/* The analysis pass's map from object ids to live-set slots (model.h): open addressing with
 * linear probing and deletion by shifting back (so no tombstones pile up over a long trace), a
 * 16-byte slot per entry, lookups inline since every event makes one or two. Ids come from the
 * trace: the hash takes a secret seed, as mt_hashmap's does. */
#ifndef MEMTAP_SRC_ANALYSIS_IDMAP_H
#define MEMTAP_SRC_ANALYSIS_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hashmap.h"

#define MT_IDMAP_EMPTY UINT32_MAX

typedef struct mt_idmap_slot {
  int64_t id;
  uint32_t value; /* MT_IDMAP_EMPTY marks an empty slot */
  uint32_t home;  /* the slot the id hashes to, kept for removal */
} mt_idmap_slot;

typedef struct mt_idmap {
  mt_idmap_slot *slots;
  size_t mask; /* capacity - 1, the capacity a power of two below 2^32 (no slots: NULL) */
  size_t count;
  uint64_t seed;
} mt_idmap;

static inline size_t mt_idmap_home(const mt_idmap *m, int64_t id) {
  return (size_t)mt_hash64((uint64_t)id ^ m->seed) & m->mask;
}

/* The value of `id`, or MT_IDMAP_EMPTY when absent. */
static inline uint32_t mt_idmap_get(const mt_idmap *m, int64_t id) {
  if (!m->slots)
    return MT_IDMAP_EMPTY;
  for (size_t i = mt_idmap_home(m, id);; i = (i + 1) & m->mask) {
    const mt_idmap_slot *s = &m->slots[i];
    if (s->value == MT_IDMAP_EMPTY || s->id == id)
      return s->value;
  }
}

/* Inserts `id` (which must be absent) with `value` (not MT_IDMAP_EMPTY); false when memory runs
 * out. */
bool mt_idmap_put_growing(mt_idmap *m, int64_t id, uint32_t value);
static inline bool mt_idmap_put(mt_idmap *m, int64_t id, uint32_t value) {
  if (!m->slots || (m->count + 1) * 2 > m->mask + 1)
    return mt_idmap_put_growing(m, id, value);
  size_t home = mt_idmap_home(m, id), i = home;
  while (m->slots[i].value != MT_IDMAP_EMPTY)
    i = (i + 1) & m->mask;
  m->slots[i] = (mt_idmap_slot){.id = id, .value = value, .home = (uint32_t)home};
  m->count++;
  return true;
}
/* Removes `id` if present. */
void mt_idmap_remove(mt_idmap *m, int64_t id);
void mt_idmap_free(mt_idmap *m);

#endif
