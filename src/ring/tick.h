/* The shared clock tick (docs/ring.md §5): one word in the file header that every writing thread
 * may stamp its records with instead of reading the clock, and that only ever grows. The primary
 * consumer raises it to its clock reading at each poll; a writer raises it to its own reading when
 * it finds it stale or withdrawn; a record that must be ordered exactly against other threads' (a
 * realloc, a mapping) takes the value past the word's and leaves the word past its own stamp.
 *
 * Why that orders records across threads: every modification of the word raises its value, so a
 * load that comes after another in the program's order (through the program's own
 * synchronisation) reads a value no smaller (C11 read-read coherence). A stamp is always a value
 * the word held when the record was written, so a record written after another in the program's
 * order is never stamped before it; an ordered record is stamped strictly after every record
 * before it and strictly before every record after it.
 *
 * Ordered records are stamped so only once a second ring was claimed in the file (one writing
 * thread has nothing to order them against: a compare-and-swap per realloc cost 18 ns there). A
 * thread loads the word, then the claim count, both seq_cst (plain loads on x86-64), and the
 * second claimer bumps the count (seq_cst) before its first record, which is ordered. If the count
 * read 1, this thread's load of the word came before that first record's compare-and-swap in the
 * single order of seq_cst operations, which therefore read a value no smaller and stamped its
 * record a step past it: every record of the second thread is stamped after this one.
 *
 * The word: 0 while no primary has offered a tick (writers read their clock, as before there was a
 * tick); else the tick's value in bits 61..0, and two flags. WITHDRAWN: the primary is not
 * polling (a nap, a pause to read files): writers stamp their own clock readings, raising the word
 * to each, so the value keeps its order when the primary offers again. DISABLED: a writer found
 * the word far ahead of its own clock (a clock stepped back, a consumer in another time
 * namespace): every writer reads its clock from then on. */
#ifndef MEMTAP_SRC_RING_TICK_H
#define MEMTAP_SRC_RING_TICK_H

#include <stdbool.h>
#include <stdint.h>

#include "ring/atomics.h"

#define MT_RING_TICK_WITHDRAWN (1ull << 63)
#define MT_RING_TICK_DISABLED (1ull << 62)
#define MT_RING_TICK_FLAGS (MT_RING_TICK_WITHDRAWN | MT_RING_TICK_DISABLED)

static inline uint64_t mt_ring_tick_value(uint64_t word) {
  return word & ~MT_RING_TICK_FLAGS;
}

/* Raises the word's value to at least `value` (never above 2^62 - 1), keeping its flags, or
 * clearing WITHDRAWN when `offer`; returns the value it then holds. A word still 0 stays 0 unless
 * `offer`: only the primary starts the tick. */
static inline uint64_t mt_ring_tick_raise(_Atomic uint64_t *word, uint64_t value, bool offer) {
  value = mt_ring_tick_value(value);
  uint64_t w = mt_load_relaxed(word);
  for (;;) {
    if (w == 0 && !offer)
      return 0;
    uint64_t v = mt_ring_tick_value(w);
    uint64_t flags = w & (offer ? MT_RING_TICK_DISABLED : MT_RING_TICK_FLAGS);
    uint64_t want = (v > value ? v : value) | flags;
    if (want == w || atomic_compare_exchange_weak(word, &w, want))
      return mt_ring_tick_value(want);
  }
}

/* Sets `flag` in a word that holds a tick (a 0 word stays 0). */
static inline void mt_ring_tick_flag(_Atomic uint64_t *word, uint64_t flag) {
  uint64_t w = mt_load_relaxed(word);
  while (w != 0 && !(w & flag) && !atomic_compare_exchange_weak(word, &w, w | flag)) {
  }
}

/* The stamp of a record ordered strictly against every other thread's: at least `floor` and
 * `step` past the word's value, which it leaves `step` past the stamp. 0 when the word holds no
 * tick (0, or DISABLED): the caller then uses its clock reading. */
static inline uint64_t mt_ring_tick_take(_Atomic uint64_t *word, uint64_t floor, uint64_t step) {
  uint64_t w = mt_load_relaxed(word);
  for (;;) {
    if (w == 0 || (w & MT_RING_TICK_DISABLED))
      return 0;
    uint64_t v = mt_ring_tick_value(w) + step;
    uint64_t stamp = v > floor ? v : mt_ring_tick_value(floor);
    if (atomic_compare_exchange_weak(word, &w, (stamp + step) | (w & MT_RING_TICK_FLAGS)))
      return stamp;
  }
}

#endif
