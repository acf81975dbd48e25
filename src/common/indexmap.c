/* The index map's growth, clearing and release (indexmap.h); lookups are inline in the header.
 * Tables come from calloc (gen 0: empty) and a clear moves to the next gen, so slots are zeroed
 * once per growth, not per clear. */
#include "common/indexmap.h"

#include <stdlib.h>
#include <string.h>

bool mt_indexmap_reserve(mt_indexmap *m, size_t n) {
  size_t cap = m->cap ? m->cap : 16;
  while (n * 2 > cap) {
    if (cap > SIZE_MAX / 2 / sizeof *m->slots)
      return false;
    cap *= 2;
  }
  if (cap == m->cap)
    return true;
  mt_indexmap_slot *slots = calloc(cap, sizeof *slots);
  if (!slots)
    return false;
  size_t mask = cap - 1;
  for (size_t j = 0; j < m->cap; j++) {
    mt_indexmap_slot s = m->slots[j];
    if (s.gen != m->gen)
      continue;
    size_t i = mt_hash64(s.key ^ m->seed) & mask;
    while (slots[i].gen)
      i = (i + 1) & mask;
    s.gen = 1;
    slots[i] = s;
  }
  free(m->slots);
  m->slots = slots;
  m->cap = cap;
  m->gen = 1;
  return true;
}

void mt_indexmap_clear(mt_indexmap *m) {
  m->count = 0;
  if (++m->gen == 0) { /* wrapped: stale slots could match again */
    if (m->slots)
      memset(m->slots, 0, m->cap * sizeof *m->slots);
    m->gen = 1;
  }
}

void mt_indexmap_free(mt_indexmap *m) {
  free(m->slots);
  *m = (mt_indexmap){.seed = m->seed};
}
