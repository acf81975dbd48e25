/* Internal entry points of the consumer (consumer.c) used by the fuzzer and tests. */
#ifndef MEMTAP_SRC_RING_CONSUMER_H
#define MEMTAP_SRC_RING_CONSUMER_H

#include "memtap/ring.h"

/* A cursor over `size` bytes of ring file already in memory (8-byte aligned), validated exactly
 * as a file would be. The memory is borrowed and must outlive the cursor; the cursor never
 * writes to it and cannot become the primary. */
int mt_cursor_open_memory(mt_cursor **out, void *file, size_t size, mt_error *err);

#endif
