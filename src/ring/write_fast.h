/* The producer's fast path (docs/ring.md §4), inline so that a caller inside the library that
 * writes records it built itself (the preload shim) pays for no call and no argument checks:
 * the record fits before the end of the ring, in free space, inside the current sixteenth (all
 * three in one bound, `limit`), nothing is paused or nested, the process is
 * not a copy made without fork handlers (producer.h). Anything else is
 * left to mt_ring_write, which has the same semantics. write.c's mt_ring_write is this, after its
 * argument checks. */
#ifndef MEMTAP_SRC_RING_WRITE_FAST_H
#define MEMTAP_SRC_RING_WRITE_FAST_H

#include "ring/clock.h"
#include "ring/producer.h"
#include "ring/tick.h"

/* write.c: writes the thread's CLOCK record now (the fast path found one due); sets and clears
 * `busy`. */
int mt_ring_calibrate_due(void);

/* write.c: mt_ring_write (memtap/ring.h) for a record stamped `ordered` (mt_ring_commit_fast). */
int mt_ring_write_ordered(unsigned type, unsigned id, const uint64_t *payload, size_t words);

/* Whether ordered records are stamped strictly apart: once a second ring was claimed in the file.
 * Read after the shared tick's word (both seq_cst): a thread that finds one claim has loaded the
 * word before the second claimer's first record, which is ordered, took its step past it; so
 * every record of the second thread is stamped after this thread's record (ring/tick.h). */
static inline bool mt_ring_tick_ordering(struct mt_ring *s) {
  return atomic_load(&s->claims) >= 2;
}

/* How many records a thread stamps with the shared clock tick between two readings of its own
 * clock (docs/ring.md §5): the reading checks that the tick still moves, and bounds how many
 * records a stale tick can stamp (a primary that stalled with its tick up). */
#define MT_RING_TICK_USES 15u

/* write.c: the stamp of a record that does not take the shared tick from the fast path
 * (ring/tick.h): the tick's first use, or its 16th (the clock reading checks that it still moves),
 * a withdrawn or disabled tick, or none offered. An `ordered` record's stamp is strictly after
 * every record before it in the program's order, whatever the thread, and strictly before every
 * record after it (on the fast path too: a step past the word); here it is also at least the clock
 * reading. Sets the thread's tick_uses. */
uint64_t mt_ring_stamp_slow(struct mt_ring_thread *t, bool ordered);

/* The raw stamp of a fast-path record, in the file's clock: the shared clock tick while the primary
 * offers one (a lower bound of now, within the consumer's polling period, that orders every
 * thread's records: ring/tick.h), else a reading of the clock (rdtsc, or clock_gettime through
 * the vDSO). Never less than the thread's previous stamp. */
static inline __attribute__((always_inline)) uint64_t mt_ring_stamp_fast(struct mt_ring_thread *t,
                                                                         bool ordered) {
  _Atomic uint64_t *word = mt_load_relaxed(&mt_ring_session.tick);
  uint64_t w = atomic_load(word); /* seq_cst, before the claims (ring/tick.h): a plain load */
  uint64_t ts = 0;
  /* One compare: a word that holds a tick and no flag, in [1, 2^62). An ordered record takes its
   * step past the word without a clock reading too (a compare-and-swap on the word's line), once
   * there is a second thread to order it against. */
  if (__builtin_expect(w - 1 < MT_RING_TICK_DISABLED - 1 && t->tick_uses != 0, 1)) {
    t->tick_uses--;
    ts = ordered && mt_ring_tick_ordering(&mt_ring_session)
             ? mt_ring_tick_take(word, t->last_time, mt_ring_session.tick_step)
             : w;
  } else if (w == 0) {
    ts = mt_clock_read((mt_ring_clock)t->clock); /* no tick offered: the clock, inline */
  }
  /* The slow path loads the word again, and asks for the claims after it: the `ordered` the
   * caller gave, not the answer to this load's. */
  if (__builtin_expect(ts == 0, 0))
    ts = mt_ring_stamp_slow(t, ordered);
  if (__builtin_expect(ts < t->last_time, 0))
    ts = t->last_time;
  t->last_time = ts;
  return ts;
}

/* A record reserved by mt_ring_reserve_fast: where it goes (its payload 2 words further) and the
 * ring position it starts at. */
typedef struct mt_ring_slot {
  _Atomic uint64_t *d;
  uint64_t tail;
} mt_ring_slot;

/* The fast path in two halves, for a caller that builds the record in place (the shim's ALLOC,
 * whose frames the unwinder writes straight into the ring): reserves room for a record of up to
 * `max_words` payload words in *slot and returns true, with `busy` set until mt_ring_commit_fast
 * or mt_ring_cancel_fast (a signal handler's record meanwhile is the caller's to defer, as during
 * any write); or returns false, having reserved nothing, when the record needs mt_ring_write's
 * general path. Nothing is visible to a consumer before the commit. */
static inline __attribute__((always_inline)) bool mt_ring_reserve_fast(size_t max_words,
                                                                       mt_ring_slot *slot) {
  struct mt_ring_thread *t = &mt_ring_self;
  if (__builtin_expect(t->busy, 0))
    return false;
  t->busy = 1; /* before reading the cached positions: a handler may append between */
  atomic_signal_fence(memory_order_seq_cst);
  uint64_t tail = t->tail;
  /* One bound for the end of the ring, the free space and the next mark. */
  if (__builtin_expect(t->epoch != mt_load_relaxed(&mt_ring_session.epoch) ||
                           !mt_load_relaxed(mt_ring_session.owner) ||
                           mt_load_relaxed(&mt_ring_session.paused) ||
                           tail + max_words + 2 > t->limit || mt_ring_test_before_publish != NULL,
                       0)) {
    atomic_signal_fence(memory_order_seq_cst);
    t->busy = 0;
    return false;
  }
  slot->d = t->data + (tail & t->mask);
  slot->tail = tail;
  return true;
}

/* Gives up a reservation: nothing was published. */
static inline __attribute__((always_inline)) void mt_ring_cancel_fast(void) {
  atomic_signal_fence(memory_order_seq_cst);
  mt_ring_self.busy = 0;
}

/* How far ahead of a thread's tail its ring's lines are asked for (docs/ring.md §4), in words:
 * 512 bytes, several records of a program allocating in a loop, so that the lines arrive during
 * the program's own work between two of them. */
#define MT_RING_PREFETCH_WORDS 64u

/* Asks for the two lines MT_RING_PREFETCH_WORDS past `tail` for writing. Under full tracing the
 * rings are larger than the caches (16 MiB) and the consumer has just read their lines on another
 * core, so a record's first stores otherwise wait for each line to come back for ownership
 * (--full: 4-10% less program CPU on bench/tracer's churn and tree). A prefetch never faults: a
 * line of the ring the thread has not reached yet (a page the file has no space for) is a no-op. */
static inline __attribute__((always_inline)) void
mt_ring_prefetch_ahead(const struct mt_ring_thread *t, uint64_t tail) {
  const void *first = t->data + ((tail + MT_RING_PREFETCH_WORDS) & t->mask);
  const void *second = t->data + ((tail + MT_RING_PREFETCH_WORDS + 8) & t->mask);
#if defined(__x86_64__)
  /* PREFETCHW (ownership, as a store needs): __builtin_prefetch's write hint becomes a plain
   * read prefetch unless the build targets a CPU that has it; CPUs without it take it as a NOP. */
  __asm__ volatile("prefetchw %0" ::"m"(*(const char *)first));
  __asm__ volatile("prefetchw %0" ::"m"(*(const char *)second));
#else
  __builtin_prefetch(first, 1, 3);
  __builtin_prefetch(second, 1, 3);
#endif
}

/* Publishes the reserved record with its header and stamp, its `words` (no more than reserved)
 * written from slot.d + 2; clears `busy`. An `ordered` record's stamp orders it strictly against
 * every other thread's records (mt_ring_stamp_slow): what the merge of threads cannot repair (a
 * realloc, a mapping) is written so. */
static inline __attribute__((always_inline)) void
mt_ring_commit_fast(mt_ring_slot slot, unsigned type, unsigned id, size_t words, bool ordered) {
  struct mt_ring_thread *t = &mt_ring_self;
  uint64_t len = words + 2, tail = slot.tail + len;
  _Atomic uint64_t *d = slot.d;
  mt_ring_block *b = t->block;
  uint64_t ts = mt_ring_stamp_fast(t, ordered);
  uint64_t seq = t->seq;
  mt_store_relaxed(&d[0], mt_ring_header_word(len, type, id, seq));
  mt_store_relaxed(&d[1], ts);
  t->seq = seq + 1;
  t->tail = tail;
  mt_store_relaxed(&b->next_seq, seq + 1);
  mt_store_release(&b->tail, tail);
  atomic_signal_fence(memory_order_seq_cst);
  t->busy = 0;
  mt_ring_prefetch_ahead(t, tail);
  if (__builtin_expect(ts >= t->next_calibration, 0))
    mt_ring_calibrate_due();
}

/* Appends and publishes the record (`type`, `id` and `words` valid for mt_ring_write, `ring` the
 * session; `ordered` as for mt_ring_commit_fast) and returns true; or returns false, having
 * written nothing, when the record needs mt_ring_write's general path (whose records are all
 * ordered, but for CLOCK records). */
static inline __attribute__((always_inline)) bool mt_ring_write_fast(unsigned type, unsigned id,
                                                                     const uint64_t *payload,
                                                                     size_t words, bool ordered) {
  mt_ring_slot slot;
  if (__builtin_expect(!mt_ring_reserve_fast(words, &slot), 0))
    return false;
  _Atomic uint64_t *d = slot.d;
  size_t i = 0;
  for (; i + 2 <= words; i += 2) { /* by pairs: half the loop's own instructions */
    uint64_t a = payload[i], b = payload[i + 1];
    mt_store_relaxed(&d[2 + i], a);
    mt_store_relaxed(&d[3 + i], b);
  }
  if (i < words)
    mt_store_relaxed(&d[2 + i], payload[i]);
  mt_ring_commit_fast(slot, type, id, words, ordered);
  return true;
}

#endif
