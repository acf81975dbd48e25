/* Giving back the address space of rings no thread holds (docs/ring.md §3, "Giving rings back"):
 * a program that lowers its own address-space limit after the file was mapped (16 to 64 GiB of
 * it, almost none touched) would otherwise find its later mappings refused. The data of free rings
 * beyond a number kept for threads to come is unmapped from this process's mapping, and those
 * rings are barred from this process's claims for the rest of the file's life. The file itself
 * does not change (a consumer in another process still reads whatever a ring holds through its own
 * mapping); only its counters say what happened (rings_given_back, claims_failed_limit).
 *
 * The bar is process-local: a bitmap of given-back rings. A ring is taken out of the pool the way
 * a thread claims it (a compare-and-swap of its owner word from FREE), barred, unmapped, and set
 * FREE again; a claim that wins a ring checks the bar after its compare-and-swap and gives the
 * ring up if it is barred. Malloc-free: the shim calls this from the program's setrlimit. */
#include <sys/mman.h>

#include "ring/producer.h"

static _Atomic uint64_t given_back[MT_RING_MAX_RINGS / 64];
static _Atomic uint32_t given_back_any;

bool mt_ring_given_back(uint32_t ring) {
  if (!atomic_load(&given_back_any) || ring >= MT_RING_MAX_RINGS)
    return false;
  return (atomic_load(&given_back[ring / 64]) >> (ring % 64)) & 1;
}

bool mt_ring_given_back_any(void) {
  return atomic_load(&given_back_any) != 0;
}

void mt_ring_given_back_reset(void) {
  for (size_t i = 0; i < MT_RING_MAX_RINGS / 64; i++)
    mt_store_relaxed(&given_back[i], 0);
  atomic_store(&given_back_any, 0);
}

bool mt_ring_mapped_span(const mt_ring_geometry *geo, uint64_t *at, uint64_t *length) {
  uint64_t ring_bytes = geo->ring_words * 8, end = geo->file_size, from = *at;
  if (from >= end)
    return false;
  if (!mt_ring_given_back_any() || !ring_bytes) { /* the whole file, one part */
    *length = end - from;
    return true;
  }
  /* Offsets of ring data name their ring; the header, blocks and registry come before it. */
#define RING_AT(offset) ((uint32_t)(((offset)-geo->data_offset) / ring_bytes))
  while (from < end && from >= geo->data_offset && mt_ring_given_back(RING_AT(from)))
    from += ring_bytes;
  uint64_t to = from < geo->data_offset ? geo->data_offset : from;
  while (to < end && !mt_ring_given_back(RING_AT(to)))
    to += ring_bytes;
#undef RING_AT
  *at = from;
  *length = (to < end ? to : end) - from;
  return from < end;
}

bool mt_ring_mapping_overlaps(const struct mt_ring *s, uint64_t start, uint64_t end) {
  uint64_t base = (uint64_t)(uintptr_t)s->base, length;
  if (!s->base)
    return false;
  for (uint64_t at = 0; mt_ring_mapped_span(&s->geo, &at, &length); at += length)
    if (start < base + at + length && end > base + at)
      return true;
  return false;
}

/* Takes free ring `i` out of the pool for good; false if a thread holds it (or is claiming it). */
static bool bar(struct mt_ring *s, uint32_t i) {
  mt_ring_block *b = mt_ring_block_at(s->base, &s->geo, i);
  uint32_t expected = MT_RING_FREE;
  if (mt_load_relaxed(&b->owner_state) != MT_RING_FREE ||
      !atomic_compare_exchange_strong(&b->owner_state, &expected, MT_RING_CLAIMED))
    return false;
  atomic_store(&given_back_any, 1); /* before the first bit: readers test it first */
  atomic_fetch_or(&given_back[i / 64], (uint64_t)1 << (i % 64));
  return true;
}

/* Unmaps the barred rings [from, to) and puts them back FREE, as they were for every consumer. */
static void unmap_run(struct mt_ring *s, uint32_t from, uint32_t to) {
  if (from == to)
    return;
  munmap(mt_ring_data_at(s->base, &s->geo, from), (size_t)(to - from) * s->geo.ring_words * 8);
  for (uint32_t i = from; i < to; i++)
    mt_store_release(&mt_ring_block_at(s->base, &s->geo, i)->owner_state, MT_RING_FREE);
}

/* One pass over the free rings that have (`used`) or have never had an owner: keeps up to *keep of
 * them, gives back the rest. Returns how many it gave back. */
static uint32_t give_back_pass(struct mt_ring *s, bool used, uint32_t *keep) {
  uint32_t given = 0, run = 0, n = s->geo.ring_count;
  for (uint32_t i = 0; i < n; i++) {
    mt_ring_block *b = mt_ring_block_at(s->base, &s->geo, i);
    bool candidate = !mt_ring_given_back(i) && mt_load_relaxed(&b->owner_state) == MT_RING_FREE &&
                     (mt_load_relaxed(&b->generation) != 0) == used;
    if (candidate && *keep) {
      (*keep)--;
      candidate = false;
    }
    if (candidate && bar(s, i)) {
      given++;
      continue;
    }
    unmap_run(s, run, i);
    run = i + 1;
  }
  unmap_run(s, run, n);
  return given;
}

uint32_t mt_ring_give_back(uint32_t keep) {
  struct mt_ring *s = &mt_ring_session;
  if (!mt_ring_session_lock())
    return 0;
  uint32_t given = 0;
  if (!(mt_ring_writer_epoch(s) & 1)) {
    /* Rings a thread has had keep their disk space: they are the ones to keep first. */
    given = give_back_pass(s, true, &keep);
    given += give_back_pass(s, false, &keep);
    mt_add_relaxed(&s->header->rings_given_back, given);
  }
  mt_ring_session_unlock();
  return given;
}

uint64_t mt_ring_mapped_data_bytes(void) {
  const struct mt_ring *s = &mt_ring_session;
  if (mt_ring_writer_epoch(&mt_ring_session) & 1)
    return 0;
  uint64_t given = 0;
  for (uint32_t i = 0; i < s->geo.ring_count; i++)
    given += mt_ring_given_back(i);
  return (s->geo.ring_count - given) * s->geo.ring_words * 8;
}
