/* The index map's growth, clearing and release (indexmap.h); lookups are inline in the header.
 * A new table has every slot's gen set to 0 (empty), nothing else written (a quarter of the bytes
 * calloc would zero), and a clear moves to the next gen, so slots are reset once per growth, not
 * per clear. */
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
  mt_indexmap_slot *slots = malloc(cap * sizeof *slots);
  if (!slots)
    return false;
  for (size_t i = 0; i < cap; i += 4) { /* cap is a power of two, at least 16 */
    slots[i].gen = 0;
    slots[i + 1].gen = 0;
    slots[i + 2].gen = 0;
    slots[i + 3].gen = 0;
  }
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
