/* The (parent, item) -> value map of pairmap.h: linear probing, grown at half load. */
#include "analysis/pairmap.h"

#include <stdlib.h>

#include "common/hashmap.h"

static size_t slot_of(const mt_pairmap *m, uint32_t parent, uint64_t item) {
  return (size_t)mt_hash64(item * 31 + parent + ((uint64_t)parent << 40)) & (m->cap - 1);
}

uint32_t mt_pairmap_get(const mt_pairmap *m, uint32_t parent, uint64_t item) {
  if (!m->cap)
    return UINT32_MAX;
  for (size_t i = slot_of(m, parent, item);; i = (i + 1) & (m->cap - 1)) {
    if (m->values[i] == UINT32_MAX)
      return UINT32_MAX;
    if (m->items[i] == item && m->parents[i] == parent)
      return m->values[i];
  }
}

static void place(mt_pairmap *m, uint32_t parent, uint64_t item, uint32_t value) {
  size_t i = slot_of(m, parent, item);
  while (m->values[i] != UINT32_MAX)
    i = (i + 1) & (m->cap - 1);
  m->items[i] = item;
  m->parents[i] = parent;
  m->values[i] = value;
}

static bool grow(mt_pairmap *m) {
  mt_pairmap n = {.cap = m->cap ? m->cap * 2 : 1024, .count = m->count};
  n.items = malloc(n.cap * sizeof *n.items);
  n.parents = malloc(n.cap * sizeof *n.parents);
  n.values = malloc(n.cap * sizeof *n.values);
  if (!n.items || !n.parents || !n.values) {
    mt_pairmap_free(&n);
    return false;
  }
  for (size_t i = 0; i < n.cap; i++)
    n.values[i] = UINT32_MAX;
  for (size_t i = 0; i < m->cap; i++)
    if (m->values[i] != UINT32_MAX)
      place(&n, m->parents[i], m->items[i], m->values[i]);
  mt_pairmap_free(m);
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
  free(m->items);
  free(m->parents);
  free(m->values);
  *m = (mt_pairmap){0};
}
