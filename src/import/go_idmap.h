/* The Go import's hash table from trace ids (object, span, page and stack ids, type ids) to 64-bit
 * values. Open addressing with linear probing and backward-shift deletion: objects are freed as
 * often as they are allocated, and tombstones would make probe runs grow with the churn, not with
 * what is live. Keys are hashed with a per-table secret seed (ids come from the input). */
#ifndef MEMTAP_SRC_IMPORT_GO_IDMAP_H
#define MEMTAP_SRC_IMPORT_GO_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hashmap.h"

typedef struct go_idmap_slot {
  uint64_t key; /* id + 1; 0 marks an empty slot */
  uint64_t value;
} go_idmap_slot;

typedef struct go_idmap {
  go_idmap_slot *slots;
  size_t cap; /* a power of two, or 0 */
  size_t count;
  uint64_t seed;
} go_idmap;

/* An empty table with a fresh seed (no allocation yet). */
go_idmap go_idmap_make(void);
void go_idmap_free(go_idmap *m);
/* Empties the table, keeping its memory. */
void go_idmap_clear(go_idmap *m);

/* Inserts or replaces; false when memory runs out. Ids up to UINT64_MAX - 1. */
bool go_idmap_put(go_idmap *m, uint64_t id, uint64_t value);
bool go_idmap_remove(go_idmap *m, uint64_t id);

/* Keys of one block of GO_IDMAP_BLOCK consecutive ids get consecutive home slots at a place
 * hashed from the block: objects allocated and swept in address order then touch neighbouring
 * slots (memory locality), while the seed keeps the input from choosing where blocks land. */
#ifndef GO_IDMAP_BLOCK_BITS
#define GO_IDMAP_BLOCK_BITS 3
#endif
static inline size_t go_idmap_home(const go_idmap *m, uint64_t key) {
  uint64_t block = mt_hash64((key >> GO_IDMAP_BLOCK_BITS) ^ m->seed) << GO_IDMAP_BLOCK_BITS;
  return (size_t)(block + (key & ((1u << GO_IDMAP_BLOCK_BITS) - 1))) & (m->cap - 1);
}

static inline bool go_idmap_get(const go_idmap *m, uint64_t id, uint64_t *value) {
  if (!m->count)
    return false;
  uint64_t key = id + 1;
  size_t mask = m->cap - 1;
  for (size_t i = go_idmap_home(m, key);; i = (i + 1) & mask) {
    const go_idmap_slot *s = &m->slots[i];
    if (s->key == key) {
      if (value)
        *value = s->value;
      return true;
    }
    if (s->key == 0)
      return false;
  }
}

#endif
