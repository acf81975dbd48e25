/* Internal entry points of the consumer (consumer.c) used by the fuzzer and tests. */
#ifndef MEMTAP_SRC_RING_CONSUMER_H
#define MEMTAP_SRC_RING_CONSUMER_H

#include "memtap/ring.h"

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
extern void (*mt_cursor_test_after_copy)(void *user, uint32_t ring, uint64_t *copy,
                                         const _Atomic uint64_t *live, size_t words);
extern void *mt_cursor_test_after_copy_user;

#endif
