/* The Go import's id table (go_idmap.h). */
#include "import/go_idmap.h"

#include <stdlib.h>
#include <string.h>

go_idmap go_idmap_make(void) {
  return (go_idmap){.seed = mt_hashmap_random_seed()};
}

void go_idmap_free(go_idmap *m) {
  free(m->slots);
  m->slots = NULL;
  m->cap = m->count = 0;
}

void go_idmap_clear(go_idmap *m) {
  if (m->count)
    memset(m->slots, 0, m->cap * sizeof *m->slots);
  m->count = 0;
}

static bool grow(go_idmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  go_idmap_slot *slots = calloc(cap, sizeof *slots);
  if (!slots)
    return false;
  go_idmap old = *m;
  m->slots = slots;
  m->cap = cap;
  for (size_t i = 0; i < old.cap; i++) {
    if (!old.slots[i].key)
      continue;
    size_t j = go_idmap_home(m, old.slots[i].key);
    while (slots[j].key)
      j = (j + 1) & (cap - 1);
    slots[j] = old.slots[i];
  }
  free(old.slots);
  return true;
}

bool go_idmap_put(go_idmap *m, uint64_t id, uint64_t value) {
  if ((m->count + 1) * 2 > m->cap && !grow(m))
    return false;
  uint64_t key = id + 1;
  size_t mask = m->cap - 1, i = go_idmap_home(m, key);
  while (m->slots[i].key && m->slots[i].key != key)
    i = (i + 1) & mask;
  if (!m->slots[i].key)
    m->count++;
  m->slots[i].key = key;
  m->slots[i].value = value;
  return true;
}

bool go_idmap_remove(go_idmap *m, uint64_t id) {
  if (!m->count)
    return false;
  uint64_t key = id + 1;
  size_t mask = m->cap - 1, i = go_idmap_home(m, key);
  while (m->slots[i].key != key) {
    if (!m->slots[i].key)
      return false;
    i = (i + 1) & mask;
  }
  /* Backward shift: move later entries of the run into the hole when their home allows it. */
  for (size_t j = i;;) {
    j = (j + 1) & mask;
    if (!m->slots[j].key)
      break;
    size_t home = go_idmap_home(m, m->slots[j].key);
    /* The entry at j may fill the hole at i unless its home lies cyclically in (i, j]. */
    bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      m->slots[i] = m->slots[j];
      i = j;
    }
  }
  m->slots[i].key = 0;
  m->count--;
  return true;
}
