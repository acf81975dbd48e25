/* The set of live sampled blocks (docs/tracer.md, "Frees in sampled mode"): a counting filter in
 * front of an exact lock-free set. Almost every free is of a block that was not sampled, and the
 * filter says so with one load; only a filter hit probes the set. Both live in mmap'd memory
 * (never the interposed allocator) and every operation is lock-free and async-signal-safe. */
#ifndef MEMTAP_SRC_TRACER_SAMPLED_SET_H
#define MEMTAP_SRC_TRACER_SAMPLED_SET_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

/* The table is mapped in pages of this many bytes (sampled_set.c). */
#define MT_SET_PAGE_BYTES 65536u
#define MT_SET_PAGE_SLOTS (MT_SET_PAGE_BYTES / sizeof(uintptr_t))

typedef struct mt_sampled_set {
  _Atomic uint8_t *filter; /* per 256-byte granule modulo the filter: members (255 sticks) */
  uintptr_t filter_mask;   /* filter buckets - 1 */
  /* The table's pages (MT_SET_PAGE_SLOTS each), mapped when an insert first needs one: NULL reads
   * as empty slots. Open addressing, linear probing; 0 empty, 1 removed. */
  _Atomic(_Atomic uintptr_t *) *pages;
  uint64_t slot_mask;    /* slots - 1 (at least a page's) */
  unsigned window_shift; /* log2 of the address span the table covers (home slots) */
  _Atomic uint64_t members;
  _Atomic uint64_t insert_failures; /* no free slot within the probe window */
} mt_sampled_set;

/* Maps a filter of 2^filter_bits counters (reserved with MAP_NORESERVE, touched only where used)
 * and the directory of a table of 2^slot_bits slots, whose pages are mapped as inserts need them.
 * Returns 0, or -1 if a mapping failed. */
int mt_sampled_set_init(mt_sampled_set *set, unsigned filter_bits, unsigned slot_bits);
void mt_sampled_set_destroy(mt_sampled_set *set);
/* Empties the set in place (its pages go back to the kernel and read as zero): for a new tracing
 * session. An operation racing with it sees the set before or after, never a fault. */
void mt_sampled_set_clear(mt_sampled_set *set);

static inline uint64_t mt_sampled_set_hash(uintptr_t p) {
  return (uint64_t)p * 0x9e3779b97f4a7c15ull;
}

/* The filter bucket of `p`: its 256-byte granule, modulo the filter's size. Not a hash, so that
 * the frees of a program's (clustered) heap read few cache lines of the filter: one byte covers
 * 256 bytes of heap, so a 200 KB heap reads 800 bytes of it (with 16-byte granules, 12.5 KB: churn
 * ran measurably slower, the filter crowding its heap out of the L1 cache). A live sampled block
 * sends the frees of its neighbours in the same 256 bytes to the exact set (a few dozen
 * instructions more, for a few blocks per sampled one); aliases are 256 * buckets bytes apart. */
static inline uintptr_t mt_sampled_set_bucket(const mt_sampled_set *set, const void *p) {
  return ((uintptr_t)p >> 8) & set->filter_mask;
}

/* False when `p` is certainly not a member: one load. */
/* How many pages the table has room for (its directory's entries). */
static inline size_t mt_sampled_set_pages(const mt_sampled_set *set) {
  return (size_t)((set->slot_mask + 1) / MT_SET_PAGE_SLOTS);
}

static inline bool mt_sampled_set_maybe(const mt_sampled_set *set, const void *p) {
  return atomic_load_explicit(&set->filter[mt_sampled_set_bucket(set, p)], memory_order_relaxed) !=
         0;
}

/* Adds `p` (not NULL). False if there is no room, or no memory for a page of the table (the
 * caller then treats the block as not sampled). Adding a member that is already present keeps one
 * copy and returns true. */
bool mt_sampled_set_insert(mt_sampled_set *set, const void *p);

/* Removes `p`; true if it was a member. */
bool mt_sampled_set_remove(mt_sampled_set *set, const void *p);

/* Whether `p` is a member (exact). */
bool mt_sampled_set_contains(const mt_sampled_set *set, const void *p);

#endif
