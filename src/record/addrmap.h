/* The live malloc blocks by address (docs/record.md, "Order"): an open-addressing table of
 * (address, object id, allocation stamp, thread) entries stored inline, linear probing. One probe
 * sequence per lookup and no indirection: the consumer looks an address up at every allocation
 * and every free. Address 0 marks an empty slot (no block lives at 0). A freed block leaves its
 * address behind as a tombstone (id REC_LIVE_FREED), which the next allocation at that address
 * takes over in place: allocators hand freed addresses out again first, so a free and the
 * allocation after it cost one probe each and no moves. Tombstones are dropped when the table is
 * rebuilt (when live entries and tombstones fill half of it). A table of REC_ADDRMAP_HUGE_MIN to
 * REC_ADDRMAP_HUGE_MAX bytes is mapped on its own with transparent huge pages asked for: every
 * lookup is a random probe, and with 4 KiB pages nearly every probe of such a table also misses
 * the TLB (bench_tracer_tree, 328,000 blocks live in a 32 MiB table: 19% less consumer CPU).
 * Larger tables keep small pages: the kernel may compact memory to find huge pages at their
 * first touch, and for a table of 128 MiB that cost more system time than the TLB saved.
 * Header-only so that the lookups inline. */
#ifndef MEMTAP_RECORD_ADDRMAP_H
#define MEMTAP_RECORD_ADDRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define REC_LIVE_FREED INT64_MIN /* id of a tombstone: the address was freed */

typedef struct rec_live {
  uint64_t addr;   /* 0: an empty slot */
  int64_t id;      /* object id (-1: not written; REC_LIVE_FREED: a tombstone) */
  int64_t time_ns; /* its allocation's stamp */
  uint64_t source; /* the thread that allocated it */
} rec_live;

typedef struct rec_addrmap {
  rec_live *slots;
  bool mapped;    /* slots come from rec_addrmap_map, not calloc */
  size_t mask;    /* slots - 1 (a power of two), 0 before the first insertion */
  size_t count;   /* live entries */
  size_t used;    /* live entries and tombstones */
  unsigned shift; /* 64 - log2(slots) */
  uint64_t seed;  /* mixed into the hash: addresses come from the traced program */
} rec_addrmap;

static inline size_t rec_addrmap_home(const rec_addrmap *m, uint64_t addr) {
  return (size_t)(((addr ^ m->seed) * 0x9E3779B97F4A7C15ull) >> m->shift);
}

/* The slot of `addr`, live or a tombstone, or NULL; valid until the next insertion. An address
 * has at most one slot. */
static inline rec_live *rec_addrmap_find(const rec_addrmap *m, uint64_t addr) {
  if (!m->used)
    return NULL;
  for (size_t i = rec_addrmap_home(m, addr);; i = (i + 1) & m->mask) {
    rec_live *s = &m->slots[i];
    if (s->addr == addr)
      return s;
    if (!s->addr)
      return NULL;
  }
}

/* The live entry of `addr`, or NULL; valid until the next insertion. */
static inline rec_live *rec_addrmap_get(const rec_addrmap *m, uint64_t addr) {
  rec_live *s = rec_addrmap_find(m, addr);
  return s && s->id != REC_LIVE_FREED ? s : NULL;
}

#define REC_ADDRMAP_HUGE_MIN ((size_t)8 << 20)
#define REC_ADDRMAP_HUGE_MAX ((size_t)64 << 20)
#define REC_ADDRMAP_HUGE_PAGE ((size_t)2 << 20)

/* `bytes` of zeroed memory aligned to a huge page, with huge pages asked for, or NULL. */
static inline void *rec_addrmap_map(size_t bytes) {
  size_t span = bytes + REC_ADDRMAP_HUGE_PAGE;
  char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  size_t head =
      (REC_ADDRMAP_HUGE_PAGE - (uintptr_t)p % REC_ADDRMAP_HUGE_PAGE) % REC_ADDRMAP_HUGE_PAGE;
  if (head)
    munmap(p, head);
  if (span - head > bytes)
    munmap(p + head + bytes, span - head - bytes);
#ifdef MADV_HUGEPAGE
  madvise(p + head, bytes, MADV_HUGEPAGE); /* a hint: without it the table works the same */
#endif
  return p + head;
}

/* A zeroed table of `size` slots; *mapped says which way it came. */
static inline rec_live *rec_addrmap_alloc(size_t size, bool *mapped) {
  size_t bytes = size * sizeof(rec_live);
  *mapped = bytes >= REC_ADDRMAP_HUGE_MIN && bytes <= REC_ADDRMAP_HUGE_MAX;
  if (*mapped) {
    rec_live *slots = rec_addrmap_map(bytes);
    if (slots)
      return slots;
    *mapped = false;
  }
  return calloc(size, sizeof(rec_live));
}

static inline void rec_addrmap_release(rec_live *slots, size_t size, bool mapped) {
  if (mapped)
    munmap(slots, size * sizeof *slots);
  else
    free(slots);
}

/* Rebuilds the table without its tombstones, twice as large when the live entries alone would
 * fill more than 3/8 of it (so that at least 1/8 is left for tombstones before the next
 * rebuild). */
static inline bool rec_addrmap_rebuild(rec_addrmap *m) {
  size_t old_size = m->slots ? m->mask + 1 : 0, size = old_size ? old_size : 1024;
  while ((m->count + 1) * 8 > size * 3)
    size *= 2;
  bool mapped, old_mapped = m->mapped;
  rec_live *slots = rec_addrmap_alloc(size, &mapped), *old = m->slots;
  if (!slots)
    return false;
  unsigned bits = 0;
  while (((size_t)1 << bits) < size)
    bits++;
  m->slots = slots;
  m->mapped = mapped;
  m->mask = size - 1;
  m->shift = 64 - bits;
  for (size_t i = 0; i < old_size; i++) {
    if (!old[i].addr || old[i].id == REC_LIVE_FREED)
      continue;
    size_t j = rec_addrmap_home(m, old[i].addr);
    while (slots[j].addr)
      j = (j + 1) & m->mask;
    slots[j] = old[i];
  }
  m->used = m->count;
  if (old)
    rec_addrmap_release(old, old_size, old_mapped);
  return true;
}

/* Inserts `l` (its address must not be live): into the address's tombstone if it has one, else
 * into a new slot. False when memory runs out. */
static inline bool rec_addrmap_put(rec_addrmap *m, const rec_live *l) {
  if (m->used) {
    size_t i = rec_addrmap_home(m, l->addr);
    while (m->slots[i].addr && m->slots[i].addr != l->addr)
      i = (i + 1) & m->mask;
    if (m->slots[i].addr) { /* its tombstone */
      m->slots[i] = *l;
      m->count++;
      return true;
    }
  }
  if ((m->used + 1) * 2 > (m->slots ? m->mask + 1 : 0) && !rec_addrmap_rebuild(m))
    return false;
  size_t i = rec_addrmap_home(m, l->addr);
  while (m->slots[i].addr)
    i = (i + 1) & m->mask;
  m->slots[i] = *l;
  m->count++;
  m->used++;
  return true;
}

/* Makes `s` (from rec_addrmap_find, not a tombstone) live with `l` (of the same address) in
 * place. */
static inline void rec_addrmap_revive(rec_addrmap *m, rec_live *s, const rec_live *l) {
  *s = *l;
  m->count++;
}

/* Removes the live entry `s` points at (from rec_addrmap_get): it becomes its address's
 * tombstone. */
static inline void rec_addrmap_remove(rec_addrmap *m, rec_live *s) {
  s->id = REC_LIVE_FREED;
  m->count--;
}

static inline void rec_addrmap_free(rec_addrmap *m) {
  if (m->slots)
    rec_addrmap_release(m->slots, m->mask + 1, m->mapped);
  m->slots = NULL;
  m->mapped = false;
  m->mask = m->count = m->used = 0;
}

#endif
