/* Open-addressing hash map, int64 -> uint64 (hashmap.h): linear probing, tombstones on removal,
 * rebuilt when full plus deleted slots pass half the capacity; keys hashed with the map's seed. */
#include "common/hashmap.h"

#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

void mt_hashmap_free(mt_hashmap *m) {
  free(m->keys);
  free(m->values);
  free(m->state);
  *m = (mt_hashmap){.seed = m->seed};
}

static size_t find_slot(const mt_hashmap *m, int64_t key, bool *found) {
  size_t mask = m->cap - 1, i = mt_hash64((uint64_t)key ^ m->seed) & mask, tomb = SIZE_MAX;
  for (;;) {
    if (m->state[i] == 0) {
      *found = false;
      return tomb != SIZE_MAX ? tomb : i;
    }
    if (m->state[i] == 1 && m->keys[i] == key) {
      *found = true;
      return i;
    }
    if (m->state[i] == 2 && tomb == SIZE_MAX)
      tomb = i;
    i = (i + 1) & mask;
  }
}

static bool rebuild(mt_hashmap *m, size_t cap) {
  mt_hashmap n = {.cap = cap, .seed = m->seed};
  n.keys = malloc(cap * sizeof *n.keys);
  n.values = malloc(cap * sizeof *n.values);
  n.state = calloc(cap, 1);
  if (!n.keys || !n.values || !n.state) {
    mt_hashmap_free(&n);
    return false;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (m->state[i] != 1)
      continue;
    bool found;
    size_t j = find_slot(&n, m->keys[i], &found);
    n.keys[j] = m->keys[i];
    n.values[j] = m->values[i];
    n.state[j] = 1;
    n.count++;
  }
  n.used = n.count;
  mt_hashmap_free(m);
  *m = n;
  return true;
}

bool mt_hashmap_put(mt_hashmap *m, int64_t key, uint64_t value) {
  if ((m->used + 1) * 2 > m->cap) {
    size_t cap = 16;
    while ((m->count + 1) * 4 > cap) /* live entries at most a quarter after the rebuild */
      cap *= 2;
    if (!rebuild(m, cap))
      return false;
  }
  bool found;
  size_t i = find_slot(m, key, &found);
  if (!found) {
    if (m->state[i] == 0)
      m->used++;
    m->state[i] = 1;
    m->keys[i] = key;
    m->count++;
  }
  m->values[i] = value;
  return true;
}

bool mt_hashmap_get(const mt_hashmap *m, int64_t key, uint64_t *value) {
  if (!m->cap)
    return false;
  bool found;
  size_t i = find_slot(m, key, &found);
  if (found && value)
    *value = m->values[i];
  return found;
}

bool mt_hashmap_remove(mt_hashmap *m, int64_t key) {
  if (!m->cap)
    return false;
  bool found;
  size_t i = find_slot(m, key, &found);
  if (!found)
    return false;
  m->state[i] = 2;
  m->count--;
  return true;
}

uint64_t mt_hashmap_random_seed(void) {
  uint64_t seed;
  if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed)
    return seed;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return mt_hash64((uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)(uintptr_t)&ts);
}

size_t mt_hashmap_longest_run(const mt_hashmap *m) {
  size_t longest = 0, run = 0;
  /* Runs wrap around the end: walk the slots twice over so a wrapped run is counted whole. */
  for (size_t i = 0; i < 2 * m->cap; i++) {
    run = m->state[i & (m->cap - 1)] ? run + 1 : 0;
    if (run > longest)
      longest = run;
  }
  return longest < m->cap ? longest : m->cap;
}

uint64_t mt_hash_bytes(uint64_t seed, const void *data, size_t n) {
  const uint8_t *p = data;
  uint64_t h = UINT64_C(0xcbf29ce484222325) ^ seed;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * UINT64_C(0x100000001b3);
  return mt_hash64(h ^ n);
}
