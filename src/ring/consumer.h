/* Internal entry points of the consumer (consumer.c) used by the fuzzer and tests. */
#ifndef MEMTAP_SRC_RING_CONSUMER_H
#define MEMTAP_SRC_RING_CONSUMER_H

#include "memtap/ring.h"
#include "ring/layout.h"

/* A cursor over `size` bytes of ring file already in memory (8-byte aligned), validated exactly
 * as a file would be. The memory is borrowed and must outlive the cursor; the cursor never
 * writes to it and cannot become the primary. */
int mt_cursor_open_memory(mt_cursor **out, void *file, size_t size, mt_error *err);

/* How many batches this cursor found overwritten after it had copied them ("lapped while
 * copying", docs/ring.md §6): their words before the new head were discarded, never delivered. */
uint64_t mt_cursor_lapped_copies(const mt_cursor *cursor);

/* Test hook for fault injection (docs/ring.md §6); NULL, and inert, unless a test sets it. Every
 * poll calls it after copying a batch of ring `ring` and before the acquire fence and the second
 * load of the head: `copy` is the cursor's private copy of `words` words, `live` the same words
 * in the file. A test makes the producer overwrite them here, and may copy some of `live` into
 * `copy` to model a copy torn by a producer running concurrently (or by a weakly ordered CPU):
 * the cursor must then skip what the producer reclaimed, count it as lost and deliver nothing
 * torn. */
/* Runs of records for one call (the recorder's path, which otherwise pays a callback and an
 * mt_ring_event per record). The callback gets ring `ring`'s records of thread `generation` from
 * `recs`, each its header word (ring/layout.h), its timestamp and its payload: the first is an
 * intact record of an opaque type (>= MT_RING_TYPE_OPAQUE_FIRST) numbered `first_seq`, and
 * `words` words follow from there, valid during the call only. It consumes records in order while
 * mt_cursor_run_record says the next one is the run's (intact, opaque, numbered on), at most
 * `limit` of them, and returns how many, with the words they take in *used. It does that check
 * itself (the cursor does not scan the run first). Consuming fewer than it could (a run record
 * next and `limit` not reached) ends the poll there, as MT_CURSOR_STOP would. Records the run
 * path does not take (the first of a thread, after a gap or a loss, of the transport's own types)
 * still go to the callbacks. */
typedef size_t (*mt_cursor_run_fn)(void *user, uint32_t ring, uint32_t generation,
                                   uint64_t first_seq, const uint64_t *recs, size_t words,
                                   size_t limit, size_t *used);
/* The length of the record at `rec` if it continues a run at number `seq` within `words` words;
 * 0 if it does not (or nothing is left). */
static inline uint32_t mt_cursor_run_record(const uint64_t *rec, size_t words, uint32_t seq) {
  if (!words)
    return 0;
  uint64_t h = rec[0];
  uint32_t len = mt_ring_header_length(h);
  return len >= 2 && len <= words && mt_ring_header_type(h) >= MT_RING_TYPE_OPAQUE_FIRST &&
                 mt_ring_header_seq(h) == seq
             ? len
             : 0;
}
void mt_cursor_set_run_callback(mt_cursor *cursor, mt_cursor_run_fn fn);
/* Polls read the rings in time order (on) instead of in turn (off, the default): in chunks of up
 * to 1024 records, each from the ring whose next unread record is stamped earliest, so that a
 * reader that merges the rings' records by time holds about one chunk back rather than whatever
 * separates the rings' read positions. Any number of rings: those with records unread are kept
 * in a heap by that stamp. A ring claimed while a poll loads the tails joins that poll: a record
 * below a tail may have been written after that claim and its thread's first records. */
void mt_cursor_set_time_order(mt_cursor *cursor, bool on);
/* During a time-ordered poll's callbacks: how many rings had records to read when the poll loaded
 * their tails (a reader that takes one thread's records as they come, with nothing to merge, must
 * merge from the first record of such a poll: a chunk of one ring can run past the other's). */
uint32_t mt_cursor_rings_in_poll(const mt_cursor *cursor);

/* The stamp of the oldest record published but not yet read, over every ring: true and *stamp,
 * or false when every ring is read to its tail. Read from the file without copying, so in
 * overwrite mode a record being overwritten may give a wrong stamp: a hint for ordering, never
 * for what is delivered. */
bool mt_cursor_oldest_unread(mt_cursor *cursor, uint64_t *stamp);

/* Tests only: every cursor with a run callback reads its batches in place (consumer.c,
 * read_in_place), as a lossless primary does, so that a fuzzer's memory cursor takes that path. */
extern bool mt_cursor_test_in_place;
extern void (*mt_cursor_test_after_copy)(void *user, uint32_t ring, uint64_t *copy,
                                         const _Atomic uint64_t *live, size_t words);
extern void *mt_cursor_test_after_copy_user;

#endif
