/* The live heap over time and the report's cells (model.h). Neither knows the trace's duration in
 * advance: both grids start 1 µs wide and double their width (merging buckets pairwise) whenever
 * an event falls past their last bucket, so they stay bounded however long the trace is. The cells
 * also widen when there are more than MT_CELL_LIMIT of them, as long as that can merge any. */
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
}

void mt_timeline_free(mt_analysis *a) {
  mt_hashmap_free(&a->cell_index);
  free(a->cells);
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

/* Cells ------------------------------------------------------------------------------------- */

static int64_t cell_key(uint32_t stack, unsigned alloc_bucket, unsigned free_bucket, unsigned size,
                        unsigned lifetime) {
  return (int64_t)((uint64_t)lifetime << 56 | (uint64_t)stack << 24 | alloc_bucket << 16 |
                   free_bucket << 8 | size);
}

static bool cell_put(mt_analysis *a, uint32_t stack, unsigned ab, unsigned fb, unsigned sc,
                     unsigned lc, const mt_amount *amount) {
  int64_t key = cell_key(stack, ab, fb, sc, lc);
  uint64_t index;
  if (!mt_hashmap_get(&a->cell_index, key, &index)) {
    if (a->ncells == a->cells_cap) {
      size_t n = a->cells_cap ? a->cells_cap * 2 : 1024;
      mt_cell *p = realloc(a->cells, n * sizeof *p);
      if (!p)
        return false;
      a->cells = p;
      a->cells_cap = n;
    }
    index = a->ncells;
    if (!mt_hashmap_put(&a->cell_index, key, index))
      return false;
    a->cells[a->ncells++] = (mt_cell){.stack = stack,
                                      .alloc_bucket = (uint8_t)ab,
                                      .free_bucket = (uint8_t)fb,
                                      .size_class = (uint8_t)sc,
                                      .lifetime_class = (uint8_t)lc};
  }
  mt_amount *to = &a->cells[index].amount;
  mt_amount_add(to, amount->objects, amount->samples, amount->objects_estimated);
  return true;
}

/* Doubles the cells' bucket width, merging cells that now share a key. */
static bool cells_double(mt_analysis *a) {
  mt_cell *old = a->cells;
  size_t n = a->ncells;
  a->cells = NULL;
  a->ncells = a->cells_cap = 0;
  mt_hashmap_free(&a->cell_index);
  a->cell_width *= 2;
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++) {
    const mt_cell *c = &old[i];
    unsigned ab = c->alloc_bucket == MT_CELL_BEFORE ? MT_CELL_BEFORE : c->alloc_bucket / 2u;
    unsigned fb = c->free_bucket == MT_CELL_NEVER ? MT_CELL_NEVER : c->free_bucket / 2u;
    ok = cell_put(a, c->stack, ab, fb, c->size_class, c->lifetime_class, &c->amount);
  }
  free(old);
  return ok;
}

bool mt_cells_reach(mt_analysis *a, int64_t t) {
  if (!a->want_cells)
    return true;
  int64_t rel = t - a->summary.from;
  while (rel >= 0 && rel / a->cell_width >= MT_CELL_TIME_BUCKETS)
    if (!cells_double(a))
      return false;
  return true;
}

bool mt_cells_add(mt_analysis *a, const live_obj *o, int64_t free_time, double objects_est) {
  if (!a->want_cells)
    return true;
  int64_t from = a->summary.from;
  if (!mt_cells_reach(a, free_time >= 0 ? free_time : o->time))
    return false;
  unsigned ab = o->before ? MT_CELL_BEFORE : (unsigned)((o->time - from) / a->cell_width);
  unsigned fb = free_time < 0 ? MT_CELL_NEVER : (unsigned)((free_time - from) / a->cell_width);
  int sc = mt_size_class_of(o->words * (int64_t)a->word_bytes);
  int lc = free_time < 0 ? MT_LIFETIME_CLASSES - 1 : mt_lifetime_class_of(free_time - o->time);
  mt_amount amount = {1, o->samples, objects_est};
  if (!cell_put(a, o->stack, ab, fb, (unsigned)sc, (unsigned)lc, &amount))
    return false;
  /* Coarser time is the only way to fewer cells here; stop when one bucket spans everything.
   * Past that the cells grow with the backtraces (at most 2 x 2 x size x lifetime classes each),
   * and the report merges backtraces and classes to keep its own cap (src/export/html.c). */
  int64_t span = (free_time >= 0 ? free_time : o->time) - from;
  while (a->ncells > MT_CELL_LIMIT && a->cell_width <= span)
    if (!cells_double(a))
      return false;
  return true;
}

const mt_cell *mt_analysis_cells(const mt_analysis *a, size_t *count, int64_t *width) {
  *count = a->ncells;
  *width = a->cell_width;
  return a->cells;
}
