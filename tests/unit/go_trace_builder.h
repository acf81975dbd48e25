/* Building small Go execution traces in tests (docs/go.md describes the format): the header,
 * batches with their varint headers, events with time deltas, and the tables a generation needs. */
#ifndef MEMTAP_TESTS_GO_TRACE_BUILDER_H
#define MEMTAP_TESTS_GO_TRACE_BUILDER_H

#include <stddef.h>
#include <stdint.h>

typedef struct gt_bytes {
  uint8_t *d;
  size_t n, cap;
} gt_bytes;

/* A batch being written: events carry absolute tick times, written as deltas. */
typedef struct gt_batch {
  gt_bytes b;
  uint64_t base, last;
} gt_batch;

void gt_u8(gt_bytes *b, uint8_t v);
void gt_uv(gt_bytes *b, uint64_t v);
void gt_data(gt_bytes *b, const void *data, size_t n);

/* The file: "go 1.<version> trace\0\0\0". */
void gt_header(gt_bytes *file, int version);

void gt_batch_start(gt_batch *b, uint64_t base_time);
/* An event at absolute tick `time` with `nargs` arguments after the time delta. */
void gt_event(gt_batch *b, uint8_t type, uint64_t time, int nargs, ...);
/* Appends the batch to the file (experiment 0: a regular batch) and frees it. */
void gt_batch_end(gt_bytes *file, gt_batch *b, uint8_t experiment, uint64_t gen, uint64_t m);

/* Tables: the frequency (Go 1.23/1.24 batch, or a Go 1.25 sync batch with a clock snapshot at
 * `clock_tick`, `sec`.`nsec`), the alloc/free info batch (min heap 0xc000000000, page 8192,
 * alignment 8, stack 2048), and a types batch of `n` (id, size, name) entries. */
void gt_frequency(gt_bytes *file, int version, uint64_t gen, uint64_t freq, uint64_t clock_tick,
                  uint64_t sec, uint64_t nsec);
void gt_info(gt_bytes *file, uint64_t gen);
typedef struct gt_type {
  uint64_t id, size;
  const char *name;
} gt_type;
void gt_types(gt_bytes *file, uint64_t gen, const gt_type *types, size_t n);

#define GT_MIN_HEAP UINT64_C(0xc000000000)

#endif
