/* The live malloc blocks by address (docs/record.md, "Order"): an open-addressing table of
 * (address, object id, allocation stamp, thread) entries stored inline, linear probing with
 * backward-shift deletion (no tombstones), at most half full. One probe sequence per lookup and
 * no indirection: the consumer looks an address up at every allocation and every free. Address
 * 0 marks an empty slot (no block lives at 0). Header-only so that the lookups inline. */
#ifndef MEMTAP_RECORD_ADDRMAP_H
#define MEMTAP_RECORD_ADDRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct rec_live {
  uint64_t addr;   /* 0: an empty slot */
  int64_t id;      /* object id (-1: not written) */
  int64_t time_ns; /* its allocation's stamp */
  uint64_t source; /* the thread that allocated it */
} rec_live;

typedef struct rec_addrmap {
  rec_live *slots;
  size_t mask; /* slots - 1 (a power of two), 0 before the first insertion */
  size_t count;
  unsigned shift; /* 64 - log2(slots) */
  uint64_t seed;  /* mixed into the hash: addresses come from the traced program */
} rec_addrmap;

static inline size_t rec_addrmap_home(const rec_addrmap *m, uint64_t addr) {
  return (size_t)(((addr ^ m->seed) * 0x9E3779B97F4A7C15ull) >> m->shift);
}

/* The entry of `addr`, or NULL; valid until the next insertion or removal. */
static inline rec_live *rec_addrmap_get(const rec_addrmap *m, uint64_t addr) {
  if (!m->count)
    return NULL;
  for (size_t i = rec_addrmap_home(m, addr);; i = (i + 1) & m->mask) {
    rec_live *s = &m->slots[i];
    if (s->addr == addr)
      return s;
    if (!s->addr)
      return NULL;
  }
}

static inline bool rec_addrmap_grow(rec_addrmap *m) {
  size_t old_size = m->slots ? m->mask + 1 : 0, size = old_size ? old_size * 2 : 1024;
  rec_live *slots = calloc(size, sizeof *slots), *old = m->slots;
  if (!slots)
    return false;
  unsigned bits = 0;
  while (((size_t)1 << bits) < size)
    bits++;
  m->slots = slots;
  m->mask = size - 1;
  m->shift = 64 - bits;
  for (size_t i = 0; i < old_size; i++) {
    if (!old[i].addr)
      continue;
    size_t j = rec_addrmap_home(m, old[i].addr);
    while (slots[j].addr)
      j = (j + 1) & m->mask;
    slots[j] = old[i];
  }
  free(old);
  return true;
}

/* Inserts `l` (its address must not be present). False when memory runs out. */
static inline bool rec_addrmap_put(rec_addrmap *m, const rec_live *l) {
  if ((m->count + 1) * 2 > (m->slots ? m->mask + 1 : 0) && !rec_addrmap_grow(m))
    return false;
  size_t i = rec_addrmap_home(m, l->addr);
  while (m->slots[i].addr)
    i = (i + 1) & m->mask;
  m->slots[i] = *l;
  m->count++;
  return true;
}

/* Removes the entry `s` points at (from rec_addrmap_get), shifting later entries of its probe
 * run back so that no lookup stops early. */
static inline void rec_addrmap_remove(rec_addrmap *m, rec_live *s) {
  size_t hole = (size_t)(s - m->slots);
  for (size_t i = (hole + 1) & m->mask;; i = (i + 1) & m->mask) {
    rec_live *e = &m->slots[i];
    if (!e->addr)
      break;
    size_t home = rec_addrmap_home(m, e->addr);
    /* e may move to the hole if its home is not in (hole, i] cyclically. */
    if (((i - home) & m->mask) >= ((i - hole) & m->mask)) {
      m->slots[hole] = *e;
      hole = i;
    }
  }
  m->slots[hole].addr = 0;
  m->count--;
}

static inline void rec_addrmap_free(rec_addrmap *m) {
  free(m->slots);
  m->slots = NULL;
  m->mask = m->count = 0;
}

#endif
