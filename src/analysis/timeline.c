/* The live heap over time (model.h). It does not know the trace's duration in advance: the grid
 * starts 1 µs wide and doubles its width (merging buckets pairwise) whenever an event falls past
 * its last bucket, so it stays bounded however long the trace is (the report's cells, cells.c, do
 * the same). */
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"

void mt_timeline_init(mt_analysis *a, bool cells) {
  memset(a->timeline, 0, sizeof a->timeline);
  a->tl_width = 1;
  a->tl_current = 0;
  a->tl_next = INT64_MIN;
  a->want_cells = cells;
  a->cell_width = 1;
  a->cell_last = INT64_MIN;
  if (cells) /* cell keys come from the trace */
    a->cell_index.seed = mt_hashmap_random_seed();
}

void mt_timeline_free(mt_analysis *a) {
  mt_cells_free(a);
}

static void timeline_double(mt_analysis *a) {
  size_t cur = a->tl_current;
  for (size_t i = 0; 2 * i <= cur; i++) {
    mt_timeline_bucket m = a->timeline[2 * i];
    if (2 * i + 1 <= cur) {
      const mt_timeline_bucket *b = &a->timeline[2 * i + 1];
      if (b->live_max > m.live_max)
        m.live_max = b->live_max;
      m.live_end = b->live_end;
      m.allocated += b->allocated;
      m.freed += b->freed;
    }
    a->timeline[i] = m;
  }
  memset(&a->timeline[cur / 2 + 1], 0, (MT_TIMELINE_BUCKETS - cur / 2 - 1) * sizeof a->timeline[0]);
  a->tl_current = cur / 2;
  a->tl_width *= 2;
}

/* Moves the current bucket to the one holding `t`, carrying the live heap as it was before `t`
 * (`before`, estimated bytes) across the buckets skipped. */
static mt_timeline_bucket *timeline_at(mt_analysis *a, int64_t t, double before) {
  int64_t rel = t - a->summary.from;
  if (rel < 0)
    rel = 0;
  int shift = __builtin_ctzll((uint64_t)a->tl_width); /* a power of two: no division per event */
  while ((rel >> shift) >= MT_TIMELINE_BUCKETS) {
    timeline_double(a);
    shift++;
  }
  size_t idx = (size_t)(rel >> shift);
  for (size_t j = a->tl_current + 1; j <= idx; j++)
    a->timeline[j] = (mt_timeline_bucket){.live_max = before, .live_end = before};
  if (idx > a->tl_current)
    a->tl_current = idx;
  /* Until the current bucket's end, changes land in it without this walk. */
  a->tl_next = shift < 52 ? a->summary.from + (int64_t)((a->tl_current + 1) << shift) : INT64_MIN;
  return &a->timeline[a->tl_current];
}

void mt_timeline_change(mt_analysis *a, int64_t t, double allocated, double freed) {
  /* Called after the change: the buckets skipped saw the heap as it was before it. */
  double live = (double)a->live_samples * a->summary.bytes_per_sample; /* mt_analysis_bytes */
  mt_timeline_bucket *b =
      t < a->tl_next ? &a->timeline[a->tl_current] : timeline_at(a, t, live - allocated + freed);
  b->allocated += allocated;
  b->freed += freed;
  if (live > b->live_max)
    b->live_max = live;
  b->live_end = live;
}

void mt_timeline_finish(mt_analysis *a, int64_t t) {
  timeline_at(a, t, mt_analysis_bytes(a, a->live_samples));
}

const mt_timeline_bucket *mt_analysis_timeline(const mt_analysis *a, size_t *count,
                                               int64_t *width) {
  *count = a->tl_current + 1;
  *width = a->tl_width;
  return a->timeline;
}
