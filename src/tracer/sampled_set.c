/* The live sampled blocks (sampled_set.h). The table uses linear probing within a window of
 * MT_SET_WINDOW slots from the home slot; a removed member leaves a tombstone (1) that a later
 * insert may reuse, and tombstones never turn back into empty slots, so a lookup may stop at the
 * first empty slot: every member sits before it. Each slot changes only by compare-and-swap, so
 * threads and signal handlers may insert, remove and look up at the same time. A pointer is
 * inserted by the thread that allocated it before the block reaches the program, and removed by
 * the thread that frees it before the block returns to the allocator, so one pointer is never
 * inserted and removed at the same time. */
#include <stddef.h>
#include <sys/mman.h>

#include "tracer/sampled_set.h"

#define MT_SET_EMPTY ((uintptr_t)0)
#define MT_SET_TOMBSTONE ((uintptr_t)1)
#define MT_SET_WINDOW 256u

int mt_sampled_set_init(mt_sampled_set *set, unsigned filter_bits, unsigned slot_bits) {
  size_t filter_size = (size_t)1 << filter_bits;
  size_t slots_size = sizeof(uintptr_t) << slot_bits;
  void *f = mmap(NULL, filter_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (f == MAP_FAILED)
    return -1;
  void *s = mmap(NULL, slots_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (s == MAP_FAILED) {
    munmap(f, filter_size);
    return -1;
  }
  set->filter = f;
  set->filter_mask = ((uintptr_t)1 << filter_bits) - 1;
  set->slots = s;
  set->slot_mask = ((uint64_t)1 << slot_bits) - 1;
  set->window_shift = 4 + slot_bits;
  atomic_store(&set->members, 0);
  atomic_store(&set->insert_failures, 0);
  return 0;
}

void mt_sampled_set_clear(mt_sampled_set *set) {
  madvise((void *)set->slots, sizeof(uintptr_t) * (set->slot_mask + 1), MADV_DONTNEED);
  madvise((void *)set->filter, set->filter_mask + 1, MADV_DONTNEED);
  atomic_store(&set->members, 0);
  atomic_store(&set->insert_failures, 0);
}

void mt_sampled_set_destroy(mt_sampled_set *set) {
  munmap((void *)set->filter, set->filter_mask + 1);
  munmap((void *)set->slots, sizeof(uintptr_t) * (set->slot_mask + 1));
  set->filter = NULL;
  set->slots = NULL;
}

static _Atomic uint8_t *bucket(const mt_sampled_set *set, uintptr_t p) {
  return &set->filter[mt_sampled_set_bucket(set, (const void *)p)];
}

static void filter_add(const mt_sampled_set *set, uintptr_t p, int delta) {
  _Atomic uint8_t *b = bucket(set, p);
  uint8_t c = atomic_load_explicit(b, memory_order_relaxed);
  for (;;) {
    if (c == 255)
      return; /* saturated: stays "maybe" for good */
    if (delta < 0 && c == 0)
      return;
    uint8_t next = (uint8_t)(c + delta);
    if (atomic_compare_exchange_weak_explicit(b, &c, next, memory_order_release,
                                              memory_order_relaxed))
      return;
  }
}

/* The home slot: the pointer's 16-byte granule, so that the blocks of a clustered heap touch few
 * pages of the table (a hash spread each sampled block over its own page: a sampled run of churn
 * touched some 5 000 pages, 20 MB, where its heap spans 50), rotated by a hash of which
 * table-sized window of the address space it is in, so that windows that alias (glibc's 64 MiB
 * thread heaps) do not pile onto the same slots. Blocks are at least 16 bytes apart, so a dense
 * heap has at most one member per home slot. */
static uint64_t home(const mt_sampled_set *set, uintptr_t p) {
  uint64_t window = (uint64_t)p >> set->window_shift;
  uint64_t rotate = mt_sampled_set_hash(window) >> 32;
  return ((p >> 4) + rotate) & set->slot_mask;
}

bool mt_sampled_set_contains(const mt_sampled_set *set, const void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  uint64_t h = home(set, p);
  for (unsigned i = 0; i < MT_SET_WINDOW; i++) {
    uintptr_t v = atomic_load_explicit(&set->slots[(h + i) & set->slot_mask], memory_order_acquire);
    if (v == p)
      return true;
    if (v == MT_SET_EMPTY)
      return false;
  }
  return false;
}

bool mt_sampled_set_insert(mt_sampled_set *set, const void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  if (p <= MT_SET_TOMBSTONE)
    return false;
  if (mt_sampled_set_contains(set, ptr))
    return true; /* a free the shim never saw left it here */
  filter_add(set, p, 1);
  uint64_t h = home(set, p);
  for (unsigned i = 0; i < MT_SET_WINDOW; i++) {
    _Atomic uintptr_t *slot = &set->slots[(h + i) & set->slot_mask];
    uintptr_t v = atomic_load_explicit(slot, memory_order_relaxed);
    while (v == MT_SET_EMPTY || v == MT_SET_TOMBSTONE) {
      if (atomic_compare_exchange_weak_explicit(slot, &v, p, memory_order_release,
                                                memory_order_relaxed)) {
        atomic_fetch_add_explicit(&set->members, 1, memory_order_relaxed);
        return true;
      }
    }
  }
  filter_add(set, p, -1);
  atomic_fetch_add_explicit(&set->insert_failures, 1, memory_order_relaxed);
  return false;
}

bool mt_sampled_set_remove(mt_sampled_set *set, const void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  if (p <= MT_SET_TOMBSTONE)
    return false;
  uint64_t h = home(set, p);
  for (unsigned i = 0; i < MT_SET_WINDOW; i++) {
    _Atomic uintptr_t *slot = &set->slots[(h + i) & set->slot_mask];
    uintptr_t v = atomic_load_explicit(slot, memory_order_acquire);
    if (v == MT_SET_EMPTY)
      return false;
    if (v == p && atomic_compare_exchange_strong_explicit(
                      slot, &v, MT_SET_TOMBSTONE, memory_order_acq_rel, memory_order_relaxed)) {
      atomic_fetch_sub_explicit(&set->members, 1, memory_order_relaxed);
      filter_add(set, p, -1);
      return true;
    }
  }
  return false;
}
