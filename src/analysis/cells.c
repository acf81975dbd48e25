/* The report's cells (model.h, analysis.h): each object counted once, when freed or at the end,
 * into the cell of its (stack, allocation step, free step, size class, lifetime class). The time
 * steps start 1 µs wide and double (merging cells pairwise) whenever an object falls past the
 * last step, or while there are more than MT_CELL_LIMIT cells and coarser time can merge any.
 * Objects wait in a log of up to CELL_LOG and are counted when it fills and at the end, at the
 * steps that reach the latest time seen then: a trace of fewer objects is counted once at its final
 * steps, without merging cells step after step. The cells are found by an index map of their packed
 * key. */
#include <stdlib.h>

#include "analysis/model.h"

#define CELL_LOG 131072 /* objects waiting to be counted, at most (5 MB) */

struct cell_obj {
  int64_t time, free_time; /* µs since the start; free_time < 0: not freed */
  uint64_t samples;
  double objects_est;
  uint32_t stack;
  uint8_t size_class, lifetime_class;
  bool before;
};

static uint64_t cell_key(uint32_t stack, unsigned alloc_bucket, unsigned free_bucket, unsigned size,
                         unsigned lifetime) {
  return (uint64_t)lifetime << 56 | (uint64_t)stack << 24 | alloc_bucket << 16 | free_bucket << 8 |
         size;
}

/* The cell of the key, made empty at the end of a->cells if new (the caller made room for one);
 * NULL out of memory. */
static inline mt_cell *cell_find(mt_analysis *a, uint32_t stack, unsigned ab, unsigned fb,
                                 unsigned sc, unsigned lc) {
  bool added;
  uint32_t index = mt_indexmap_get_or_add(&a->cell_index, cell_key(stack, ab, fb, sc, lc),
                                          (uint32_t)a->ncells, &added);
  if (index == MT_INDEXMAP_NONE)
    return NULL;
  mt_cell *c = &a->cells[index];
  if (added) {
    *c = (mt_cell){.stack = stack,
                   .alloc_bucket = (uint8_t)ab,
                   .free_bucket = (uint8_t)fb,
                   .size_class = (uint8_t)sc,
                   .lifetime_class = (uint8_t)lc};
    a->ncells++;
  }
  return c;
}

/* Adds `amount` to the cell of the key, made at the end of a->cells if new. */
static bool cell_put(mt_analysis *a, uint32_t stack, unsigned ab, unsigned fb, unsigned sc,
                     unsigned lc, const mt_amount *amount) {
  if (a->ncells == a->cells_cap) {
    size_t n = a->cells_cap ? a->cells_cap * 2 : 1024;
    mt_cell *p = n < MT_INDEXMAP_NONE ? realloc(a->cells, n * sizeof *p) : NULL;
    if (!p)
      return false;
    a->cells = p;
    a->cells_cap = n;
  }
  mt_cell *c = cell_find(a, stack, ab, fb, sc, lc);
  if (!c)
    return false;
  c->amount.objects += amount->objects;
  c->amount.samples += amount->samples;
  c->amount.objects_estimated += amount->objects_estimated;
  return true;
}

/* Doubles the cells' step width, merging cells that now share a key: in place, in their order. */
static bool cells_double(mt_analysis *a) {
  size_t n = a->ncells;
  a->ncells = 0;
  mt_indexmap_clear(&a->cell_index);
  a->cell_width *= 2;
  for (size_t i = 0; i < n; i++) {
    mt_cell c = a->cells[i]; /* a->ncells <= i: the cell it lands in is at or before i */
    unsigned ab = c.alloc_bucket == MT_CELL_BEFORE ? MT_CELL_BEFORE : c.alloc_bucket / 2u;
    unsigned fb = c.free_bucket == MT_CELL_NEVER ? MT_CELL_NEVER : c.free_bucket / 2u;
    if (!cell_put(a, c.stack, ab, fb, c.size_class, c.lifetime_class, &c.amount))
      return false;
  }
  return true;
}

bool mt_cells_reach(mt_analysis *a, int64_t t) {
  if (t > a->cell_last) /* the steps widen when objects are counted */
    a->cell_last = t;
  return true;
}

/* Widens the steps until they reach a->cell_last. */
static bool widen(mt_analysis *a) {
  int64_t rel = a->cell_last - a->summary.from;
  while (rel >= 0 && rel / a->cell_width >= MT_CELL_TIME_BUCKETS)
    if (!cells_double(a))
      return false;
  return true;
}

bool mt_cells_flush(mt_analysis *a) {
  if (!widen(a))
    return false;
  /* Room for every object in a cell of its own, at once rather than doubling on the way; in the
   * map for half as many (objects share cells: ocamlopt_v1's 84 270 make 51 000), past which it
   * grows. */
  size_t most = a->ncells + a->ncell_log;
  if (most > a->cells_cap) {
    mt_cell *p = most < MT_INDEXMAP_NONE ? realloc(a->cells, most * sizeof *p) : NULL;
    if (!p || !mt_indexmap_reserve(&a->cell_index, a->ncells + a->ncell_log / 2)) {
      if (p)
        a->cells = p;
      return false;
    }
    a->cells = p;
    a->cells_cap = most;
  }
  /* Each object at the current steps (a power of two wide: a shift, not a division). */
  int64_t from = a->summary.from;
  int shift = __builtin_ctzll((uint64_t)a->cell_width);
  for (size_t i = 0; i < a->ncell_log; i++) {
    const struct cell_obj *o = &a->cell_log[i];
    unsigned ab = o->before ? MT_CELL_BEFORE : (unsigned)((uint64_t)(o->time - from) >> shift);
    unsigned fb =
        o->free_time < 0 ? MT_CELL_NEVER : (unsigned)((uint64_t)(o->free_time - from) >> shift);
    mt_cell *c = cell_find(a, o->stack, ab, fb, o->size_class, o->lifetime_class);
    if (!c)
      return false;
    c->amount.objects++;
    c->amount.samples += o->samples;
    c->amount.objects_estimated += o->objects_est;
    if (a->ncells <= MT_CELL_LIMIT)
      continue;
    /* Coarser time is the only way to fewer cells here; stop when one step spans everything.
     * Past that the cells grow with the backtraces (at most 2 x 2 x size x lifetime classes
     * each), and the report merges backtraces and classes to keep its own cap (export/html.c). */
    int64_t span = (o->free_time >= 0 ? o->free_time : o->time) - from;
    while (a->ncells > MT_CELL_LIMIT && a->cell_width <= span)
      if (!cells_double(a))
        return false;
    shift = __builtin_ctzll((uint64_t)a->cell_width);
  }
  a->ncell_log = 0;
  return true;
}

bool mt_cells_add(mt_analysis *a, const live_obj *o, int64_t free_time, double objects_est) {
  if (!a->want_cells)
    return true;
  int64_t last = free_time >= 0 ? free_time : o->time;
  if (last > a->cell_last) /* mt_cells_reach */
    a->cell_last = last;
  if (a->ncell_log == a->cell_log_cap) {
    if (a->cell_log_cap == CELL_LOG) {
      if (!mt_cells_flush(a))
        return false;
    } else {
      size_t n = a->cell_log_cap ? a->cell_log_cap * 2 : 1024;
      struct cell_obj *p = realloc(a->cell_log, n * sizeof *p);
      if (!p)
        return false;
      a->cell_log = p;
      a->cell_log_cap = n;
    }
  }
  a->cell_log[a->ncell_log++] = (struct cell_obj){
      .time = o->time,
      .free_time = free_time,
      .samples = o->samples,
      .objects_est = objects_est,
      .stack = o->stack,
      .size_class = (uint8_t)mt_size_class_of_words(o->words, a->word_bytes),
      .lifetime_class = (uint8_t)(free_time < 0 ? MT_LIFETIME_CLASSES - 1
                                                : mt_lifetime_class_of(free_time - o->time)),
      .before = o->before};
  return true;
}

void mt_cells_free(mt_analysis *a) {
  mt_indexmap_free(&a->cell_index);
  free(a->cells);
  free(a->cell_log);
}

const mt_cell *mt_analysis_cells(const mt_analysis *a, size_t *count, int64_t *width) {
  *count = a->ncells;
  *width = a->cell_width;
  return a->cells;
}
