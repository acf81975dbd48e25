/* The live sampled blocks (sampled_set.h). The table uses linear probing within a window of
 * MT_SET_WINDOW slots from the home slot; a removed member leaves a tombstone (1) that a later
 * insert may reuse, and tombstones never turn back into empty slots, so a lookup may stop at the
 * first empty slot: every member sits before it. Each slot changes only by compare-and-swap, so
 * threads and signal handlers may insert, remove and look up at the same time. A pointer is
 * inserted by the thread that allocated it before the block reaches the program, and removed by
 * the thread that frees it before the block returns to the allocator, so one pointer is never
 * inserted and removed at the same time.
 *
 * The table is mapped a page at a time, when an insert first needs a slot there: a directory of
 * page pointers (NULL: every slot of the page is empty) stands in front of it. Reserved whole, the
 * table was 32 MiB of the address space, which a program that lowers its own address-space limit
 * (RLIMIT_AS, counted whole, reserved or not) lost from the room it has untraced; by need it is
 * a page or two per cluster of live sampled blocks. A page, once mapped, stays until the set is
 * destroyed: a lookup on another thread may be reading it. Pages of 64 KiB (8192 slots), not 4:
 * each is a mapping of its own to the kernel, and a program's mappings are limited
 * (vm.max_map_count): 512 of them at most for the whole table, not 8192. */
#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>

#include "common/map_unlocked.h"

#include "tracer/sampled_set.h"

#define MT_SET_EMPTY ((uintptr_t)0)
#define MT_SET_TOMBSTONE ((uintptr_t)1)
#define MT_SET_WINDOW 256u
#define MT_SET_LIKELY(x) __builtin_expect(!!(x), 1)

int mt_sampled_set_init(mt_sampled_set *set, unsigned filter_bits, unsigned slot_bits) {
  size_t filter_size = (size_t)1 << filter_bits;
  while (((uint64_t)1 << slot_bits) < MT_SET_PAGE_SLOTS) /* a page at least */
    slot_bits++;
  size_t pages_size = sizeof(void *) * (((size_t)1 << slot_bits) / MT_SET_PAGE_SLOTS);
  void *f = mmap(NULL, filter_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (f == MAP_FAILED)
    return -1;
  void *d = mmap(NULL, pages_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (d == MAP_FAILED) {
    munmap(f, filter_size);
    return -1;
  }
  set->filter = f;
  set->filter_mask = ((uintptr_t)1 << filter_bits) - 1;
  set->pages = d;
  set->slot_mask = ((uint64_t)1 << slot_bits) - 1;
  set->window_shift = 4 + slot_bits;
  atomic_store(&set->members, 0);
  atomic_store(&set->insert_failures, 0);
  return 0;
}

void mt_sampled_set_clear(mt_sampled_set *set) {
  for (size_t i = 0; i < mt_sampled_set_pages(set); i++) {
    _Atomic uintptr_t *page = atomic_load_explicit(&set->pages[i], memory_order_acquire);
    if (page && madvise((void *)page, MT_SET_PAGE_BYTES, MADV_DONTNEED) != 0)
      for (size_t k = 0; k < MT_SET_PAGE_SLOTS; k++) /* locked after all (EINVAL): by hand */
        atomic_store_explicit(&page[k], MT_SET_EMPTY, memory_order_relaxed);
  }
  madvise((void *)set->filter, set->filter_mask + 1, MADV_DONTNEED);
  atomic_store(&set->members, 0);
  atomic_store(&set->insert_failures, 0);
}

void mt_sampled_set_destroy(mt_sampled_set *set) {
  munmap((void *)set->filter, set->filter_mask + 1);
  for (size_t i = 0; i < mt_sampled_set_pages(set); i++) {
    _Atomic uintptr_t *page = atomic_load_explicit(&set->pages[i], memory_order_acquire);
    if (page)
      munmap((void *)page, MT_SET_PAGE_BYTES);
  }
  munmap((void *)set->pages, sizeof(void *) * mt_sampled_set_pages(set));
  set->filter = NULL;
  set->pages = NULL;
}

/* Slot `i`, or NULL when its page is not mapped (every slot there reads as empty). */
static _Atomic uintptr_t *slot_at(const mt_sampled_set *set, uint64_t i) {
  i &= set->slot_mask;
  _Atomic uintptr_t *page =
      atomic_load_explicit(&set->pages[i / MT_SET_PAGE_SLOTS], memory_order_acquire);
  return page ? &page[i % MT_SET_PAGE_SLOTS] : NULL;
}

/* Slot `i`, its page mapped first if need be (mmap is async-signal-safe; errno is kept); NULL if
 * that failed. Two threads that map the same page at once keep the first. */
static _Atomic uintptr_t *slot_made(mt_sampled_set *set, uint64_t i) {
  _Atomic uintptr_t *slot = slot_at(set, i);
  if (MT_SET_LIKELY(slot))
    return slot;
  i &= set->slot_mask;
  int saved_errno = errno;
  /* Never locked nor faulted in whole in a program that called mlockall(MCL_FUTURE): the set is
   * the shim's, not the program's (mlock.c leaves its pages out of the program's too). */
  void *m =
      mt_map_unlocked(MT_SET_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  errno = saved_errno;
  if (m == MAP_FAILED)
    return NULL;
  _Atomic uintptr_t *expected = NULL;
  if (!atomic_compare_exchange_strong_explicit(&set->pages[i / MT_SET_PAGE_SLOTS], &expected,
                                               (_Atomic uintptr_t *)m, memory_order_acq_rel,
                                               memory_order_acquire)) {
    munmap(m, MT_SET_PAGE_BYTES);
    errno = saved_errno;
  }
  return slot_at(set, i);
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
    _Atomic uintptr_t *slot = slot_at(set, h + i);
    if (!slot)
      return false; /* an empty slot */
    uintptr_t v = atomic_load_explicit(slot, memory_order_acquire);
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
    _Atomic uintptr_t *slot = slot_made(set, h + i);
    if (!slot)
      break; /* no memory for its page: no room */
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
    _Atomic uintptr_t *slot = slot_at(set, h + i);
    if (!slot)
      return false; /* an empty slot */
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
