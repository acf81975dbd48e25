/* The (parent, item) -> value map of pairmap.h: linear probing, grown at half load. */
#include "analysis/pairmap.h"

#include <stdlib.h>

#include "common/hashmap.h"

static size_t slot_of(const mt_pairmap *m, uint32_t parent, uint64_t item) {
  return (size_t)mt_hash64(item * 0x9E3779B97F4A7C15u ^ parent) & (m->cap - 1);
}

uint32_t mt_pairmap_get(const mt_pairmap *m, uint32_t parent, uint64_t item) {
  if (!m->cap)
    return UINT32_MAX;
  for (size_t i = slot_of(m, parent, item);; i = (i + 1) & (m->cap - 1)) {
    const mt_pair_slot *s = &m->slots[i];
    if (s->value == UINT32_MAX)
      return UINT32_MAX;
    if (s->item == item && s->parent == parent)
      return s->value;
  }
}

static void place(mt_pairmap *m, uint32_t parent, uint64_t item, uint32_t value) {
  size_t i = slot_of(m, parent, item);
  while (m->slots[i].value != UINT32_MAX)
    i = (i + 1) & (m->cap - 1);
  m->slots[i] = (mt_pair_slot){item, parent, value};
}

static bool grow(mt_pairmap *m) {
  mt_pairmap n = {.cap = m->cap ? m->cap * 2 : 1024, .count = m->count};
  n.slots = malloc(n.cap * sizeof *n.slots);
  if (!n.slots)
    return false;
  for (size_t i = 0; i < n.cap; i++)
    n.slots[i].value = UINT32_MAX;
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].value != UINT32_MAX)
      place(&n, m->slots[i].parent, m->slots[i].item, m->slots[i].value);
  free(m->slots);
  *m = n;
  return true;
}

bool mt_pairmap_put(mt_pairmap *m, uint32_t parent, uint64_t item, uint32_t value) {
  if ((m->count + 1) * 2 > m->cap && !grow(m))
    return false;
  place(m, parent, item, value);
  m->count++;
  return true;
}

void mt_pairmap_free(mt_pairmap *m) {
  free(m->slots);
  *m = (mt_pairmap){0};
}
