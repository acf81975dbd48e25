/* The per-M event batches of one Go trace generation, decoded and merged into one stream by time
 * (docs/go.md). Each M's batches are read in file order; every event is parsed (type known to the
 * version, arguments present, time deltas that do not overflow, stack and string ids that the
 * generation's tables define) and those memtap converts (the alloc/free experiment's events and
 * GCBegin, which tells sweeps apart) are merged across Ms by their time. Events of one tick are
 * ordered frees first, then GC starts, snapshots and allocations, so that a slot freed and reused
 * within one tick on two threads is seen in the order it happened. */
#ifndef MEMTAP_SRC_IMPORT_GO_MERGE_H
#define MEMTAP_SRC_IMPORT_GO_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "import/go_batch.h"
#include "import/go_events.h"
#include "import/go_tables.h"

typedef struct go_event {
  uint8_t type;
  uint64_t time;              /* ticks */
  int64_t offset;             /* of its type byte in the file */
  uint64_t args[GO_MAX_ARGS]; /* args[0] is the time delta */
} go_event;

typedef struct go_stream {
  size_t next;      /* next batch (index into go_merge.order) */
  size_t end;       /* one past its last batch */
  go_cursor c;      /* inside the current batch */
  uint64_t time;    /* of the last event read */
  go_event slot[2]; /* the next event to hand out, and the one handed out before it */
  unsigned pending; /* which slot holds the next event */
  uint8_t rank;     /* of the pending event's type among events of one tick (go_merge.c) */
} go_stream;

typedef struct go_merge {
  const go_generation *g;
  const go_tables *t;
  const go_event_spec *specs;
  int version;
  size_t *order; /* event batches by M, each M's in file order */
  size_t order_cap;
  go_stream *streams;
  size_t nstreams, streams_cap;
  size_t *heap; /* stream indices, earliest pending event first */
  size_t heap_len;
  /* The earlier of the heap's second and third streams: while the first stream's events come
   * before it, they are handed out without touching the heap. */
  uint64_t bound_time;
  uint8_t bound_rank;
  size_t bound_index;
  uint64_t events; /* events parsed so far, converted or not */
} go_merge;

/* Prepares the merge of `g`'s event batches (go_tables_read must have marked them). */
int go_merge_start(go_merge *m, const go_generation *g, const go_tables *t, int version,
                   mt_error *err);

/* The next converted event in time order: 1 with *ev pointing to it (valid until the next call),
 * 0 at the end of the generation, or an error. */
int go_merge_next(go_merge *m, const go_event **ev, mt_error *err);

void go_merge_free(go_merge *m);

#endif
