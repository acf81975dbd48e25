/* The per-M event batches of one Go trace generation, decoded and merged into one stream by time
 * (docs/go.md). Each M's batches are read in file order; every event is parsed (type known to the
 * version, arguments present, time deltas that do not overflow, stack and string ids that the
 * generation's tables define) and those memtap converts (the alloc/free experiment's events and
 * GCBegin, which tells sweeps apart) are merged across Ms by their time. Events of one tick are
 * ordered frees first, then GC starts, snapshots and allocations, so that a slot freed and reused
 * within one tick on two threads is seen in the order it happened. */
#ifndef MEMTAP_SRC_IMPORT_GO_MERGE_H
#define MEMTAP_SRC_IMPORT_GO_MERGE_H

#include <stdbool.h>
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

/* Rank of a type among events of one tick: frees (0), GC starts (1), snapshots (2), allocations
 * and everything else (3). */
extern const uint8_t go_merge_rank[256];

/* The events memtap converts: the alloc/free experiment's, and GCBegin. */
static inline bool go_converted(uint8_t type) {
  return type >= GO_EV_SPAN || type == GO_EV_GC_BEGIN;
}

/* A varint of at most 4 bytes at p, with no bound check (the caller knows 10 bytes are there);
 * NULL for a longer one, which the careful path (go_uvarint) reads. */
static inline const uint8_t *go_short_uvarint(const uint8_t *p, uint64_t *value) {
  uint64_t v = p[0];
  if (v < 0x80) {
    *value = v;
    return p + 1;
  }
  v &= 0x7f;
  for (unsigned i = 1; i < 4; i++) {
    if (p[i] < 0x80) {
      *value = v | (uint64_t)p[i] << (7 * i);
      return p + i + 1;
    }
    v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
  }
  return NULL;
}

/* Whether the first stream's pending event still comes before every other stream's (the heap's
 * order then holds without sifting). A stream's `time` is its pending event's. */
static inline bool go_merge_still_first(const go_merge *m, size_t top) {
  const go_stream *s = &m->streams[top];
  if (s->time != m->bound_time)
    return s->time < m->bound_time;
  if (s->rank != m->bound_rank)
    return s->rank < m->bound_rank;
  return top < m->bound_index;
}

/* The careful reading of events (go_merge.c advance) for the usual event, inline: a batch with
 * room for any event's arguments, a type of the version without stack or string arguments,
 * varints of at most 4 bytes, no overflow. Returns 1 with the next converted event in the stream's
 * pending slot, or 0 where the careful reading must go on (from the first event not taken here). */
_Static_assert(GO_MAX_ARGS == 5, "go_merge_advance_fast reads at most 5 arguments");
static inline int go_merge_advance_fast(go_merge *m, go_stream *s) {
  go_event *ev = &s->slot[s->pending ^ 1];
  const go_event_spec *specs = m->specs;
  const uint8_t *p = s->c.p;
  uint64_t time = s->time;
  while (s->c.end - p > 10 * GO_MAX_ARGS) {
    uint8_t type = *p;
    const go_event_spec *spec = &specs[type];
    if (!spec->name || (spec->stack_args | spec->string_args))
      break;
    unsigned n = spec->nargs;
    uint64_t *a = ev->args;
    const uint8_t *q = n ? go_short_uvarint(p + 1, &a[0]) : NULL;
    if (q && n > 1)
      q = go_short_uvarint(q, &a[1]);
    if (q && n > 2)
      q = go_short_uvarint(q, &a[2]);
    if (q && n > 3)
      q = go_short_uvarint(q, &a[3]);
    if (q && n > 4)
      q = go_short_uvarint(q, &a[4]);
    if (!q || a[0] > UINT64_MAX - time)
      break;
    time += a[0];
    m->events++;
    if (go_converted(type)) {
      ev->type = type;
      ev->time = time;
      ev->offset = s->c.base + (p - s->c.start);
      s->c.p = q;
      s->time = time;
      s->rank = go_merge_rank[type];
      s->pending ^= 1;
      return 1;
    }
    p = q;
  }
  s->c.p = p;
  s->time = time;
  return 0;
}

/* The rest of go_merge_next, out of line: the careful reading when the fast one stopped (`got`
 * 0), and the heap when another stream comes first. */
int go_merge_next_slow(go_merge *m, size_t top, int got, mt_error *err);

/* The next converted event in time order: 1 with *ev pointing to it (valid until the next call),
 * 0 at the end of the generation, or an error. */
static inline int go_merge_next(go_merge *m, const go_event **ev, mt_error *err) {
  if (m->heap_len == 0)
    return 0;
  size_t top = m->heap[0];
  go_stream *s = &m->streams[top];
  *ev = &s->slot[s->pending]; /* advancing fills the other slot: *ev stays */
  int got = go_merge_advance_fast(m, s);
  if (got && go_merge_still_first(m, top))
    return 1;
  return go_merge_next_slow(m, top, got, err);
}

void go_merge_free(go_merge *m);

#endif
