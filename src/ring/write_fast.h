/* The producer's fast path (docs/ring.md §4), inline so that a caller inside the library that
 * writes records it built itself (the preload shim) pays for no call and no argument checks:
 * the record fits before the end of the ring, in free space, inside the current sixteenth, the
 * clock is the TSC (all four in one bound, `limit`), nothing is paused or nested. Anything else is
 * left to mt_ring_write, which has the same semantics. write.c's mt_ring_write is this, after its
 * argument checks. */
#ifndef MEMTAP_SRC_RING_WRITE_FAST_H
#define MEMTAP_SRC_RING_WRITE_FAST_H

#include "ring/clock.h"
#include "ring/producer.h"

/* write.c: writes the thread's CLOCK record now (the fast path found one due); sets and clears
 * `busy`. */
int mt_ring_calibrate_due(void);

/* Appends and publishes the record (`type`, `id` and `words` valid for mt_ring_write, `ring` the
 * session) and returns true; or returns false, having written nothing, when the record needs
 * mt_ring_write's general path. */
static inline __attribute__((always_inline)) bool
mt_ring_write_fast(unsigned type, unsigned id, const uint64_t *payload, size_t words) {
  struct mt_ring_thread *t = &mt_ring_self;
  if (__builtin_expect(t->busy, 0))
    return false;
  t->busy = 1; /* before reading the cached positions: a handler may append between */
  atomic_signal_fence(memory_order_seq_cst);
  uint64_t len = words + 2, tail = t->tail;
  /* One bound for the end of the ring, the free space, the next mark and the clock. */
  if (__builtin_expect(t->epoch != mt_load_relaxed(&mt_ring_session.epoch) ||
                           mt_load_relaxed(&mt_ring_session.paused) || tail + len > t->limit ||
                           mt_ring_test_before_publish != NULL,
                       0)) {
    atomic_signal_fence(memory_order_seq_cst);
    t->busy = 0;
    return false;
  }
  _Atomic uint64_t *d = t->data + (tail & t->mask);
  uint64_t ts = mt_clock_rdtsc();
  if (__builtin_expect(ts < t->last_time, 0))
    ts = t->last_time;
  t->last_time = ts;
  uint64_t seq = t->seq;
  mt_store_relaxed(&d[0], mt_ring_header_word(len, type, id, seq));
  mt_store_relaxed(&d[1], ts);
  size_t i = 0;
  for (; i + 2 <= words; i += 2) { /* by pairs: half the loop's own instructions */
    uint64_t a = payload[i], b = payload[i + 1];
    mt_store_relaxed(&d[2 + i], a);
    mt_store_relaxed(&d[3 + i], b);
  }
  if (i < words)
    mt_store_relaxed(&d[2 + i], payload[i]);
  t->seq = seq + 1;
  t->tail = tail + len;
  mt_store_relaxed(&t->block->next_seq, seq + 1);
  mt_store_release(&t->block->tail, tail + len);
  atomic_signal_fence(memory_order_seq_cst);
  t->busy = 0;
  if (__builtin_expect(ts >= t->next_calibration, 0))
    mt_ring_calibrate_due();
  return true;
}

#endif
