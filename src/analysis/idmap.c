/* The id map of idmap.h: grown at half load; removal shifts the following entries of the probe run
 * back into the hole (Knuth's algorithm R), so that lookups never walk deleted slots. */
#include "analysis/idmap.h"

#include <stdlib.h>

static void place(mt_idmap *m, int64_t id, uint32_t value) {
  size_t home = mt_idmap_home(m, id), i = home;
  while (m->slots[i].value != MT_IDMAP_EMPTY)
    i = (i + 1) & m->mask;
  m->slots[i] = (mt_idmap_slot){.id = id, .value = value, .home = (uint32_t)home};
}

static bool grow(mt_idmap *m) {
  size_t cap = m->slots ? (m->mask + 1) * 2 : 1024;
  if (cap > UINT32_MAX) /* values are uint32: never that many entries */
    return false;
  mt_idmap_slot *old = m->slots;
  size_t old_cap = old ? m->mask + 1 : 0;
  mt_idmap_slot *slots = malloc(cap * sizeof *slots);
  if (!slots)
    return false;
  for (size_t i = 0; i < cap; i++)
    slots[i].value = MT_IDMAP_EMPTY;
  if (!old && !m->seed)
    m->seed = mt_hashmap_random_seed();
  m->slots = slots;
  m->mask = cap - 1;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].value != MT_IDMAP_EMPTY)
      place(m, old[i].id, old[i].value);
  free(old);
  return true;
}

bool mt_idmap_put_growing(mt_idmap *m, int64_t id, uint32_t value) {
  if ((!m->slots || (m->count + 1) * 2 > m->mask + 1) && !grow(m))
    return false;
  place(m, id, value);
  m->count++;
  return true;
}

void mt_idmap_remove(mt_idmap *m, int64_t id) {
  if (!m->slots)
    return;
  size_t i = mt_idmap_home(m, id);
  for (;; i = (i + 1) & m->mask) {
    if (m->slots[i].value == MT_IDMAP_EMPTY)
      return;
    if (m->slots[i].id == id)
      break;
  }
  /* Slot i is the hole: move back every later entry of the run whose home does not lie
   * (cyclically) in (i, j]. */
  for (size_t j = (i + 1) & m->mask; m->slots[j].value != MT_IDMAP_EMPTY; j = (j + 1) & m->mask) {
    size_t home = m->slots[j].home;
    bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      m->slots[i] = m->slots[j];
      i = j;
    }
  }
  m->slots[i].value = MT_IDMAP_EMPTY;
  m->count--;
}

void mt_idmap_free(mt_idmap *m) {
  free(m->slots);
  *m = (mt_idmap){0};
}
