/* Generations and batches of a Go execution trace (docs/go.md). After the 16-byte header, a trace
 * is a sequence of batches, each
 *     type byte (EventBatch, or ExperimentalBatch followed by an experiment byte),
 *     varint generation, varint M (thread) id, varint base time, varint size, `size` bytes,
 * and the batches of one generation all come before those of the next, whose number is one more.
 * go_framer reads the batches of one generation at a time into one buffer, so that memory follows
 * the largest generation, not the file. */
#ifndef MEMTAP_SRC_IMPORT_GO_BATCH_H
#define MEMTAP_SRC_IMPORT_GO_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "import/go_buffer.h"
#include "memtap/common.h"

struct mt_input;

/* What a batch holds, decided by its experiment and first byte (go_tables.c). */
typedef enum go_batch_kind {
  GO_BATCH_EVENTS = 0, /* per-M events */
  GO_BATCH_STRINGS,
  GO_BATCH_STACKS,
  GO_BATCH_CPU_SAMPLES,
  GO_BATCH_SYNC, /* the frequency (Go 1.23/1.24: a lone Frequency event; Go 1.25: a Sync batch) */
  GO_BATCH_EXPERIMENT, /* an experimental batch (types or info of the alloc/free experiment) */
} go_batch_kind;

typedef struct go_batch {
  uint64_t m;          /* the thread that wrote it */
  uint64_t time;       /* base time, in the generation's ticks */
  size_t offset;       /* of its data in the generation's buffer */
  uint32_t size;       /* of its data */
  uint8_t experiment;  /* 0 for regular batches */
  uint8_t kind;        /* go_batch_kind */
  int64_t file_offset; /* of its data in the file */
} go_batch;

typedef struct go_generation {
  uint64_t number;
  go_bytes data; /* every batch's data, back to back */
  go_batch *batches;
  size_t nbatches, cap;
  uint64_t min_time;   /* the earliest batch base time */
  int64_t file_offset; /* where its first batch starts */
  bool damaged;        /* the trace is damaged after these batches (go_framer_next) */
} go_generation;

typedef struct go_framer {
  struct mt_input *in;
  int version;
  bool done;
  bool have_spill; /* the first batch of the next generation, read while ending this one */
  go_batch spill;
  uint64_t spill_generation;
  go_bytes spill_data;
  int64_t spill_header_offset;
  /* Damage met after a generation's batches: that generation is handed over first (it may be
   * whole), the damage at the next call. */
  int deferred;
  mt_error deferred_error;
} go_framer;

/* Reads the header of `in` (which stays the caller's) and sets up the framer. */
int go_framer_init(go_framer *f, struct mt_input *in, mt_error *err);
void go_framer_free(go_framer *f);

/* Replaces `g`'s contents by the next generation's batches. Returns 1 when it read one, 0 at the
 * end of the trace, or a negative status (a batch cut by the end of the file is MT_E_MALFORMED).
 * Damage met after some batches of a generation returns those first (1, with `g->damaged` set:
 * the generation is whole if the damage lies in the next one), and the damage at the next call. */
int go_framer_next(go_framer *f, go_generation *g, mt_error *err);

void go_generation_free(go_generation *g);

#endif
