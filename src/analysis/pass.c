/* The streaming pass that builds an mt_analysis (analysis.h): one read of the events, keeping the
 * live sampled objects (id -> backtrace, size, time), the running live total with its peak, and the
 * per-stack totals. Before the window's start the pass only follows the live set; when the window
 * opens, what is live is counted as live at its start; events after the window are not read. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "common/error.h"

/* The per-event arithmetic of estimate.c, inlined: every event goes through several of these. */
static inline void amount_add(mt_amount *to, uint64_t samples, double objects_est) {
  to->objects++;
  to->samples += samples;
  to->objects_estimated += objects_est;
}

static inline void amount_sub(mt_amount *to, uint64_t samples, double objects_est) {
  to->objects--;
  to->samples -= samples;
  to->objects_estimated -= objects_est;
  if (to->objects == 0)
    to->objects_estimated = 0; /* no rounding residue on an empty set */
}

static inline double estimate_objects(mt_analysis *a, int64_t words, mt_source source) {
  int64_t w = mt_sampled_words(words, source);
  if (w >= 1 && w < MT_ESTIMATE_CACHE && a->estimates[w] != 0)
    return a->estimates[w];
  return mt_estimate_objects(a, words, source);
}

/* mt_timeline_change (timeline.c) with its common case inline: the change falls in the current
 * bucket, before tl_next. */
static inline void timeline_change(mt_analysis *a, int64_t t, double allocated, double freed) {
  if (t >= a->tl_next) {
    mt_timeline_change(a, t, allocated, freed);
    return;
  }
  double live = (double)a->live_samples * a->summary.bytes_per_sample;
  mt_timeline_bucket *b = &a->timeline[a->tl_current];
  b->allocated += allocated;
  b->freed += freed;
  if (live > b->live_max)
    b->live_max = live;
  b->live_end = live;
}

mt_analysis_options mt_analysis_default_options(void) {
  return (mt_analysis_options){.from = MT_TIME_UNBOUNDED, .to = MT_TIME_UNBOUNDED};
}

domain_state *mt_domain_of(mt_analysis *a, uint16_t domain) {
  if (domain >= a->ndomains) {
    size_t n = (size_t)domain + 1;
    domain_state *p = realloc(a->domains, n * sizeof *p);
    if (!p)
      return NULL;
    for (size_t i = a->ndomains; i < n; i++)
      p[i] = (domain_state){.last_alloc = -1};
    a->domains = p;
    a->ndomains = n;
  }
  return &a->domains[domain];
}

static void mark_dirty_slow(mt_analysis *a, uint32_t stack);

static inline void mark_dirty(mt_analysis *a, uint32_t stack) {
  if (!a->stacks[stack].dirty)
    mark_dirty_slow(a, stack);
}

static void mark_dirty_slow(mt_analysis *a, uint32_t stack) {
  stack_rec *s = &a->stacks[stack];
  if (a->ndirty == a->dirty_cap) {
    size_t n = a->dirty_cap ? a->dirty_cap * 2 : 256;
    uint32_t *p = realloc(a->dirty, n * sizeof *p);
    if (!p) { /* fall back to snapshotting every stack at the next peak */
      for (size_t i = 0; i < a->nstacks; i++)
        a->stacks[i].stats.peak = a->stacks[i].stats.live;
      return;
    }
    a->dirty = p;
    a->dirty_cap = n;
  }
  s->dirty = true;
  a->dirty[a->ndirty++] = stack;
}

static void snapshot_peak(mt_analysis *a, int64_t t) {
  a->peak_samples = a->live_samples;
  a->summary.peak_time = t;
  a->summary.at_peak = a->summary.live_end;
  for (size_t i = 0; i < a->ndirty; i++) {
    stack_rec *s = &a->stacks[a->dirty[i]];
    s->stats.peak = s->stats.live;
    s->dirty = false;
  }
  a->ndirty = 0;
}

static void open_window(mt_analysis *a) {
  a->in_window = true;
  for (size_t i = 0; i < a->nlive; i++) {
    const live_obj *o = &a->live[i];
    if (o->stack == UINT32_MAX)
      continue; /* a free slot */
    double est = estimate_objects(a, o->words, (mt_source)o->source);
    mt_stats *st = &a->stacks[o->stack].stats;
    amount_add(&st->live_start, o->samples, est);
    amount_add(&st->live, o->samples, est);
    amount_add(&a->summary.live_start, o->samples, est);
    amount_add(&a->summary.live_end, o->samples, est);
    a->live_samples += o->samples;
  }
  for (size_t i = 0; i < a->nstacks; i++) {
    a->stacks[i].stats.peak = a->stacks[i].stats.live;
    a->stacks[i].dirty = false;
  }
  a->ndirty = 0;
  a->peak_samples = a->live_samples;
  a->summary.peak_time = a->summary.from;
  a->summary.at_peak = a->summary.live_end;
  mt_timeline_change(a, a->summary.from, 0, 0);
}

static inline __attribute__((always_inline)) bool live_insert(mt_analysis *a, int64_t id,
                                                              const live_obj *o) {
  size_t slot;
  if (a->nlive_free) {
    slot = a->live_free[--a->nlive_free];
  } else {
    if (a->nlive == a->live_cap) {
      size_t n = a->live_cap ? a->live_cap * 2 : 1024;
      live_obj *p = realloc(a->live, n * sizeof *p);
      if (!p)
        return false;
      a->live = p;
      a->live_cap = n;
    }
    slot = a->nlive++;
  }
  a->live[slot] = *o;
  return slot < MT_IDMAP_EMPTY && mt_idmap_put(&a->live_index, id, (uint32_t)slot);
}

bool mt_live_insert(mt_analysis *a, int64_t id, const live_obj *o) {
  return live_insert(a, id, o);
}

static bool live_remove(mt_analysis *a, int64_t id, size_t slot) {
  mt_idmap_remove(&a->live_index, id);
  a->live[slot].stack = UINT32_MAX;
  if (a->nlive_free == a->live_free_cap) {
    size_t n = a->live_free_cap ? a->live_free_cap * 2 : 1024;
    uint32_t *p = realloc(a->live_free, n * sizeof *p);
    if (!p)
      return false;
    a->live_free = p;
    a->live_free_cap = n;
  }
  a->live_free[a->nlive_free++] = (uint32_t)slot;
  return true;
}

/* An object leaves the live set at `t` (freed, or replaced by a duplicate id). */
static inline __attribute__((always_inline)) bool on_free(mt_analysis *a, int64_t id, size_t slot,
                                                          int64_t t, bool counted) {
  live_obj o = a->live[slot];
  if (a->in_window) {
    double est = estimate_objects(a, o.words, (mt_source)o.source);
    stack_rec *s = &a->stacks[o.stack];
    if (counted) {
      a->summary.collects++;
      amount_add(&s->stats.freed, o.samples, est);
      amount_add(&a->summary.freed, o.samples, est);
      if (!o.before)
        amount_add(&a->summary.lifetimes[mt_lifetime_class_of(t - o.time)], o.samples, est);
      if (a->summary.temporary_defined && !o.before && o.domain < a->ndomains &&
          a->domains[o.domain].last_alloc == id) {
        amount_add(&s->stats.temporary, o.samples, est);
        amount_add(&a->summary.temporary, o.samples, est);
      }
    }
    amount_sub(&s->stats.live, o.samples, est);
    amount_sub(&a->summary.live_end, o.samples, est);
    a->live_samples -= o.samples;
    mark_dirty(a, o.stack);
    timeline_change(a, t, 0, (double)o.samples * a->summary.bytes_per_sample);
    if (a->want_cells && !mt_cells_add(a, &o, t, est))
      return false;
  }
  return live_remove(a, id, slot);
}

/* Keeps the largest allocations in a min-heap by length (the root is the smallest kept). */
static void keep_largest(mt_analysis *a, const mt_allocation *x) {
  mt_allocation *h = a->largest;
  size_t n = a->nlargest, i;
  if (n < MT_LARGEST_ALLOCATIONS) {
    i = a->nlargest++;
    while (i > 0 && h[(i - 1) / 2].words > x->words) {
      h[i] = h[(i - 1) / 2];
      i = (i - 1) / 2;
    }
    h[i] = *x;
    return;
  }
  if (x->words <= h[0].words)
    return;
  i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    const mt_allocation *best = x;
    if (l < n && h[l].words < best->words)
      m = l, best = &h[l];
    if (r < n && h[r].words < best->words)
      m = r;
    if (m == i)
      break;
    h[i] = h[m];
    i = m;
  }
  h[i] = *x;
}

static int by_time(const void *p, const void *q) {
  const mt_allocation *x = p, *y = q;
  return (x->time > y->time) - (x->time < y->time);
}

const mt_allocation *mt_analysis_largest(const mt_analysis *a, size_t *count) {
  *count = a->nlargest;
  return a->largest;
}

static int on_alloc(mt_analysis *a, const mt_event *ev, int64_t t, mt_error *err) {
  domain_state *d =
      ev->domain < a->ndomains ? &a->domains[ev->domain] : mt_domain_of(a, ev->domain);
  uint32_t code_node = d && a->keep_checkpoints ? mt_index_track(a, d, ev) : 0;
  uint32_t stack = d && code_node != UINT32_MAX ? mt_stacks_intern(a, d, ev) : UINT32_MAX;
  if (stack == UINT32_MAX && a->over_budget)
    return mt_fail(err, MT_E_MALFORMED, ev->offset,
                   "the backtraces expand to more than %zu distinct frames (crafted prediction "
                   "runs?): no analysis goes further",
                   a->fnodes_budget);
  if (stack == UINT32_MAX && a->undescribed)
    return mt_fail(err, MT_E_MALFORMED, ev->offset, "invalid location code 0x%" PRIx64,
                   (uint64_t)a->undescribed_code);
  if (stack == UINT32_MAX)
    return mt_fail(err, MT_E_NOMEM, ev->offset, "out of memory");
  uint64_t samples = ev->nsamples > 0 ? (uint64_t)ev->nsamples : 0;
  int64_t words = ev->length > 0 ? ev->length : 0;
  uint32_t slot = mt_idmap_get(&a->live_index, ev->obj_id);
  if (slot != MT_IDMAP_EMPTY &&
      !on_free(a, ev->obj_id, slot, t, false)) /* a reused id replaces the old object */
    return mt_fail(err, MT_E_NOMEM, ev->offset, "out of memory");
  live_obj o = {.time = t,
                .words = words,
                .samples = samples,
                .stack = stack,
                .domain = ev->domain,
                .source = (uint8_t)ev->source,
                .before = !a->in_window,
                .code_node = code_node};
  if (!live_insert(a, ev->obj_id, &o))
    return mt_fail(err, MT_E_NOMEM, ev->offset, "out of memory");
  d->last_alloc = ev->obj_id;
  if (!a->in_window)
    return MT_OK;
  double est = estimate_objects(a, words, ev->source);
  stack_rec *s = &a->stacks[stack];
  s->stats.sources |= (uint8_t)(1u << ev->source);
  amount_add(&s->stats.allocated, samples, est);
  amount_add(&s->stats.live, samples, est);
  amount_add(&a->summary.allocated, samples, est);
  amount_add(&a->summary.allocated_by_source[ev->source], samples, est);
  amount_add(&a->summary.sizes[mt_size_class_of_words(words, a->word_bytes)], samples, est);
  amount_add(&a->summary.live_end, samples, est);
  a->live_samples += samples;
  mark_dirty(a, stack);
  timeline_change(a, t, (double)samples * a->summary.bytes_per_sample, 0);
  if (a->live_samples > a->peak_samples)
    snapshot_peak(a, t);
  keep_largest(a, &(mt_allocation){t, words, samples, stack, ev->source});
  if (a->want_cells && !mt_cells_reach(a, t))
    return mt_fail(err, MT_E_NOMEM, ev->offset, "out of memory");
  return MT_OK;
}

int64_t mt_analysis_elapsed(int64_t time, int64_t start) {
  int64_t elapsed;
  if (time <= start || __builtin_sub_overflow(time, start, &elapsed))
    return time <= start ? 0 : MT_ANALYSIS_TIME_MAX;
  return elapsed < MT_ANALYSIS_TIME_MAX ? elapsed : MT_ANALYSIS_TIME_MAX;
}

static const char *keep(mt_analysis *a, const char *s) {
  size_t n = strlen(s ? s : "") + 1;
  char *p = mt_arena_alloc(&a->arena, n);
  if (p)
    memcpy(p, s ? s : "", n);
  return p ? p : "";
}

static int finish(mt_analysis *a, int64_t last, bool bounded_to) {
  mt_summary *sum = &a->summary;
  if (!a->in_window)
    open_window(a);
  int64_t end = bounded_to ? sum->to : (last > sum->from ? last : sum->from);
  sum->to = end;
  mt_timeline_finish(a, end);
  if (!mt_cells_reach(a, end))
    return MT_E_NOMEM;
  for (size_t i = 0; i < a->nlive; i++) {
    const live_obj *o = &a->live[i];
    if (o->stack == UINT32_MAX)
      continue;
    double est = estimate_objects(a, o->words, (mt_source)o->source);
    amount_add(&sum->live_end_by_source[o->source], o->samples, est);
    if (!o->before)
      amount_add(&sum->lifetimes[MT_LIFETIME_CLASSES - 1], o->samples, est);
    if (!mt_cells_add(a, o, -1, est))
      return MT_E_NOMEM;
  }
  if (a->want_cells && !mt_cells_flush(a))
    return MT_E_NOMEM;
  qsort(a->largest, a->nlargest, sizeof a->largest[0], by_time);
  /* Stacks first met before the window and gone by its start show nothing: leave them counted
   * but let the queries skip empty ones. */
  mt_hashmap sites = {0};
  for (size_t i = 0; i < a->nstacks; i++) {
    const mt_stats *st = &a->stacks[i].stats;
    if (st->allocated.objects || st->live.objects || st->live_start.objects) {
      sum->distinct_backtraces++;
      if (!mt_hashmap_get(&sites, a->stacks[i].site, NULL)) {
        if (!mt_hashmap_put(&sites, a->stacks[i].site, 0)) {
          mt_hashmap_free(&sites);
          return MT_E_NOMEM;
        }
        sum->sites++;
      }
    }
  }
  mt_hashmap_free(&sites);
  return mt_estimates_round(a) ? MT_OK : MT_E_NOMEM;
}

/* One pass (mt_analysis_run). `start`: where the reader stood, for resuming from a checkpoint;
 * `distrusted`: why an earlier pass could not use the index (NULL the first time). Returns
 * MT_INDEX_START_OVER with `why` set when a checkpoint the pass resumed from does not fit the
 * trace. */
static int run_pass(mt_analysis **out, mt_reader *r, const mt_analysis_options *options,
                    const mt_reader_mark *start, const char *distrusted, char *why, mt_error *err) {
  *out = NULL;
  const mt_trace_info *info = mt_reader_info(r);
  /* The reader refused a rate outside (0, 1] or too small to estimate with, and a word size that
   * is not whole bytes (reader.c): estimates are finite from here on. */
  int64_t from = options->from == MT_TIME_UNBOUNDED || options->from < 0 ? 0 : options->from;
  bool bounded_to = options->to != MT_TIME_UNBOUNDED;
  int64_t to = bounded_to ? options->to : INT64_MAX;
  if (to < from)
    return mt_fail(err, MT_E_INVALID, -1, "the window ends before it starts");
  mt_analysis *a = calloc(1, sizeof *a);
  if (!a)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  int rc = mt_stacks_init(a, options, err);
  if (rc) {
    mt_analysis_free(a);
    return rc;
  }
  a->reader = r;
  a->rate = info->sample_rate;
  a->word_bytes = info->word_size / 8;
  mt_summary *sum = &a->summary;
  sum->info = *info;
  sum->info.executable_name = keep(a, info->executable_name);
  sum->info.host_name = keep(a, info->host_name);
  sum->info.ocaml_runtime_params = keep(a, info->ocaml_runtime_params);
  sum->info.context = keep(a, info->context);
  a->memtap_trace = !strncmp(sum->info.ocaml_runtime_params, "memtap", 6);
  sum->bytes_per_sample = a->word_bytes / a->rate;
  sum->from = from;
  sum->to = to;
  sum->end_time = info->start_time;
  sum->temporary_defined = a->rate >= 1;
  mt_timeline_init(a, options->cells);
  int64_t last = 0;
  rc = mt_index_begin(a, r, options, start != NULL, distrusted, &last, err);
  if (rc) {
    if (rc == MT_INDEX_START_OVER)
      memcpy(why, a->index_use.problem, sizeof a->index_use.problem);
    mt_analysis_free(a);
    return rc;
  }
  a->in_window = from == 0;
  if (a->in_window)
    open_window(a);

  /* Backtraces as runs only: the pass never needs them flat, and materialising deep ones would
   * cost their depth for every event. The caller's setting comes back at the end. */
  bool runs_only = mt_reader_runs_only(r);
  mt_reader_set_runs_only(r, true, NULL);
  mt_event ev;
  uint64_t n = 0;
  int64_t size = mt_reader_size(r);
  /* Distinct shown frames grow with the trace, a few per new backtrace: a generous bound that a
   * crafted trace's backtraces (dozens of frames per byte) meet long before memory runs out. */
  a->fnodes_budget = (size_t)(8 << 20) + (size > 0 ? 4 * (size_t)size : (size_t)56 << 20);
  while ((rc = mt_reader_next(r, &ev, err)) > 0) {
    if (options->progress && (++n & 0x3FFFF) == 0)
      options->progress(options->progress_user, mt_reader_position(r), size);
    int64_t t = mt_analysis_elapsed(ev.time, info->start_time);
    if (t > to)
      break;
    if (t > last)
      last = t;
    sum->end_time = ev.time;
    if (!a->in_window && t >= from)
      open_window(a);
    uint32_t slot;
    if (ev.kind == MT_EVENT_ALLOC) {
      if ((rc = on_alloc(a, &ev, t, err)) != MT_OK)
        break;
    } else if ((slot = mt_idmap_get(&a->live_index, ev.obj_id)) == MT_IDMAP_EMPTY) {
      if (a->in_window)
        sum->unknown_collects++;
    } else if (ev.kind == MT_EVENT_PROMOTE) {
      if (a->in_window)
        sum->promotes++;
    } else if (!on_free(a, ev.obj_id, slot, t, true)) {
      rc = mt_fail(err, MT_E_NOMEM, ev.offset, "out of memory");
      break;
    }
    if (a->keep_checkpoints && (rc = mt_index_step(a, r, last, err)) != MT_OK)
      break;
  }
  if (!runs_only && mt_reader_set_runs_only(r, false, rc < 0 ? NULL : err) && rc >= 0)
    rc = MT_E_NOMEM;
  /* Past a checkpoint, any failure but memory's may be the index's: a checkpoint that does not
   * fit the trace (another trace's, or one whose state is wrong) decodes it wrong. The index is
   * only a cache: the pass starts over without it, and finds the damage again if it is the
   * trace's. */
  if (rc < 0 && rc != MT_E_NOMEM && a->index_use.resumed) {
    mt_index_distrust(a, err);
    memcpy(why, a->index_use.problem, sizeof a->index_use.problem);
    mt_analysis_free(a);
    return MT_INDEX_START_OVER;
  }
  /* A damaged trace under options.partial: what was read before the damage is the analysis. */
  bool damaged = rc < 0 && options->partial && err && err->code == MT_E_MALFORMED;
  if (damaged) {
    a->damage = *err;
    rc = MT_OK;
  }
  bool read_all = rc == 0 && !damaged;
  /* Read to a cut end: the analysis covers the trace up to its last whole packet. */
  sum->truncated = read_all && mt_reader_truncated(r, NULL);
  bool stopped_at_to = rc > 0;
  if (rc > 0)
    rc = MT_OK; /* stopped at the window's end */
  /* Read to the end: the trace lasts until its last packet ends when that is after its last
   * event (mt_reader_end_time), and so does a window that reaches its end. */
  int64_t packets_end = mt_reader_end_time(r);
  if (rc == 0 && !stopped_at_to && packets_end > sum->end_time) {
    int64_t t = mt_analysis_elapsed(packets_end, info->start_time);
    if (t > to) {
      stopped_at_to = true; /* the window ends first, as if an event came after it */
    } else {
      sum->end_time = packets_end;
      if (t > last)
        last = t;
    }
  }
  sum->stopped_at_to = rc == 0 && bounded_to && stopped_at_to;
  /* A window that ends past the trace's end (or past the damage) ends at the last event read. */
  if (rc == 0 && finish(a, last, bounded_to && stopped_at_to) != MT_OK)
    rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  if (rc == 0) /* only after a good pass */
    mt_index_end(a, !damaged,
                 !read_all                     ? INT64_MIN
                 : packets_end > sum->end_time ? packets_end /* past a --to window */
                                               : sum->end_time);
  a->reader = NULL;
  if (rc < 0) {
    mt_analysis_free(a);
    return rc;
  }
  if (options->progress)
    options->progress(options->progress_user, mt_reader_position(r), size);
  *out = a;
  return MT_OK;
}

int mt_analysis_run(mt_analysis **out, mt_reader *r, const mt_analysis_options *options,
                    mt_error *err) {
  mt_analysis_options defaults = mt_analysis_default_options();
  if (!options)
    options = &defaults;
  mt_error ignored;
  if (!err)
    err = &ignored; /* a pass resumed from a checkpoint says why it failed */
  /* Where the reader stands, to come back to if a checkpoint of the index proves wrong. */
  mt_reader_mark *start = NULL;
  if (options->index_path && mt_reader_size(r) >= 0 &&
      mt_reader_mark_take(r, &start, NULL) != MT_OK)
    start = NULL; /* nothing left to read, or no memory: no resuming */
  char why[sizeof((mt_index_use *)0)->problem];
  int rc = run_pass(out, r, options, start, NULL, why, err);
  if (rc == MT_INDEX_START_OVER && (rc = mt_reader_rewind(r, start, err)) == MT_OK)
    rc = run_pass(out, r, options, NULL, why, why, err);
  mt_reader_mark_free(start);
  return rc;
}

void mt_analysis_free(mt_analysis *a) {
  if (!a)
    return;
  mt_stacks_free(a);
  mt_timeline_free(a);
  mt_idmap_free(&a->live_index);
  free(a->live);
  free(a->live_free);
  mt_index_end(a, false, INT64_MIN);
  for (size_t i = 0; i < a->ndomains; i++) {
    free(a->domains[i].runs);
    free(a->domains[i].code_run);
  }
  free(a->domains);
  free(a->dirty);
  mt_arena_free(&a->arena);
  free(a);
}

const mt_error *mt_analysis_damage(const mt_analysis *a) {
  return a->damage.code ? &a->damage : NULL;
}

const mt_summary *mt_analysis_summary(const mt_analysis *a) {
  return &a->summary;
}
