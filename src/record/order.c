/* Causal repair and emission (docs/record.md, "Order"). Events come out of the merge in time
 * order, except those published too late for it; either way the trace must never show a free
 * before its allocation, a free of no allocation, or a block freed twice:
 *   - an allocation at a free address and a free of the block live at its address are written at
 *     once (the usual case, without a call);
 *   - anything else (a free where nothing is live, an allocation where a block still is) unsettles
 *     the address: its records wait in unsettled.c, which pairs frees with allocations across
 *     clock skew, until they explain each other or the hold bound passes; unknown frees are never
 *     written (a collect of an unknown id crashes memtrace_viewer);
 *   - output times never decrease: a late event is written at the time of the last one.
 * malloc blocks are External allocations of ceil(size / 8) words, mapped regions Major ones; a
 * munmap of part of a region collects it and allocates the pieces still mapped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "format/writer_fast.h"
#include "memtap/tracer.h"
#include "record/record_internal.h"

bool rec_order_init(rec_order *o, int64_t skew_ns, int64_t bound_ns) {
  memset(o, 0, sizeof *o);
  uint64_t seed = mt_hashmap_random_seed();
  o->live.seed = o->unsettled.seed = o->stacks.seed = seed;
  o->skew_ns = skew_ns;
  o->bound_ns = bound_ns;
  o->rate = 1;
  o->full = true;
  o->rng = mt_hashmap_random_seed() | 1;
  o->recent = calloc(REC_RECENT_SLOTS, sizeof *o->recent);
  return o->recent != NULL;
}

/* --- writing ------------------------------------------------------------------------------- */

static inline __attribute__((always_inline)) int64_t out_time(rec_order *o, rec_sink *sink,
                                                              int64_t ns) {
  if (ns < o->last_time_ns) {
    ns = o->last_time_ns;
    sink->stats->reordered++;
  }
  o->last_time_ns = ns;
  int64_t us = ns / 1000;
  if (us < sink->start_us)
    return sink->start_us;
  if (sink->resolution_us > 1)
    us -= (us - sink->start_us) % sink->resolution_us;
  return us;
}

static int resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  rec_sink *sink = user;
  if (code == REC_CODE_THREAD_STACK || code == REC_CODE_START_UP) {
    static const mt_location thread_stack = {.filename = "", .defname = "<thread stack>"},
                             start_up = {.filename = "",
                                         .defname = "<start-up, before backtraces>"};
    *entries = code == REC_CODE_START_UP ? &start_up : &thread_stack;
    *count = 1;
    return MT_OK;
  }
  return rec_symboliser_resolve(sink->symboliser, sink->modules, sink->sites, code, entries, count);
}

/* The writer's general path for an allocation (a new stack, a flush due, a failure...), out of
 * line: the usual allocation goes through mt_writer_alloc_fast without a call. */
__attribute__((noinline)) static int64_t write_alloc_slow(rec_sink *sink, int64_t t, int64_t words,
                                                          int64_t nsamples, mt_source source,
                                                          const uint64_t *codes, long ncodes) {
  rec_output *out = sink->out;
  int64_t id = -1;
  mt_error err; /* filled by the writer on failure (not zeroed: 272 bytes per event) */
  if (mt_writer_put_alloc_general(out->writer, t, words, nsamples, source, codes, (size_t)ncodes,
                                  resolve, sink, &id, &err)) {
    rec_output_fail(out, &err);
    return -1;
  }
  return id;
}

/* Writes an allocation of `codes`; returns its object id, or -1 when nothing can be written. */
static inline __attribute__((always_inline)) int64_t
write_alloc(rec_order *o, rec_sink *sink, int64_t ns, int64_t words, int64_t nsamples,
            mt_source source, const uint64_t *codes, long ncodes, bool same) {
  rec_output *out = sink->out;
  if (!out->writer) /* first: it sets the trace's start and time resolution that out_time uses */
    sink->ensure_writer(sink->user);
  int64_t t = out_time(o, sink, ns);
  if (nsamples < 1)
    nsamples = 1;
  sink->stats->allocations++;
  sink->stats->samples += (uint64_t)nsamples;
  if (!out->writer || out->failed)
    return -1;
  int64_t id;
  if (mt_writer_alloc_fast(out->writer, t, words, nsamples, source, codes, (size_t)ncodes, same,
                           &id))
    return id;
  return write_alloc_slow(sink, t, words, nsamples, source, codes, ncodes);
}

__attribute__((noinline)) static void write_collect_slow(rec_output *out, int64_t t, int64_t id) {
  mt_error err; /* filled by the writer on failure (not zeroed: 272 bytes per event) */
  if (mt_writer_put_collect(out->writer, t, id, &err))
    rec_output_fail(out, &err);
}

static inline __attribute__((always_inline)) void write_collect(rec_order *o, rec_sink *sink,
                                                                int64_t ns, int64_t id) {
  if (id < 0)
    return; /* never written (an unsampled region, or the writer had failed) */
  int64_t t = out_time(o, sink, ns);
  sink->stats->frees++;
  rec_output *out = sink->out;
  if (!out->writer || out->failed)
    return;
  if (!mt_writer_collect_fast(out->writer, t, id))
    write_collect_slow(out, t, id);
}

static inline __attribute__((always_inline)) long event_codes(rec_sink *sink, const rec_event *e,
                                                              const uint64_t **codes) {
  long n = rec_sites_stack_codes(sink->sites, sink->modules, sink->symboliser, e->frames,
                                 e->nframes, e->stack_hash, e->stack_serial,
                                 (e->kind & MT_TRACER_FLAG_TRUNCATED) != 0, codes);
  return n < 0 ? 0 : n;
}

/* --- live objects: address -> (object id, allocation stamp, thread) ----------------------- */

static rec_live *live_get(const rec_order *o, uint64_t addr) {
  return rec_addrmap_get(&o->live, addr);
}

static inline __attribute__((always_inline)) int64_t write_block(rec_order *o, rec_sink *sink,
                                                                 const rec_event *e, int64_t ns) {
  const uint64_t *codes = NULL;
  long n;
  bool same = false;
  static const uint64_t start_up_code = REC_CODE_START_UP;
  bool start_up = !e->nframes && (e->kind & MT_TRACER_FLAG_NO_STACK); /* before it could unwind */
  const rec_stack_entry *last =
      start_up ? NULL
               : rec_sites_repeat(sink->sites, sink->modules, e->nframes, e->stack_hash,
                                  e->stack_serial, (e->kind & MT_TRACER_FLAG_TRUNCATED) != 0);
  if (start_up) {
    codes = &start_up_code;
    n = 1;
  } else if (last) { /* rec_sites_stack_codes's fast path, knowing it was taken */
    codes = last->frames + e->nframes;
    n = last->ncodes;
    same = o->wrote_last_codes;
  } else {
    n = event_codes(sink, e, &codes);
  }
  int64_t words = (int64_t)((e->size + 7) / 8);
  int64_t id = write_alloc(o, sink, ns, words, e->nsamples, MT_SOURCE_EXTERNAL, codes, n, same);
  o->wrote_last_codes = id >= 0;
  return id;
}

/* --- unsettled addresses ------------------------------------------------------------------- */

static rec_unsettled *unsettled_get(const rec_order *o, uint64_t addr) {
  uint64_t v;
  return mt_hashmap_get(&o->unsettled, (int64_t)addr, &v) ? (rec_unsettled *)(uintptr_t)v : NULL;
}

static rec_recent_free *recent_slot(const rec_order *o, uint64_t addr) {
  return &o->recent[((addr >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - 12)];
}

_Static_assert(REC_RECENT_SLOTS == 1 << 12, "recent_slot takes 12 bits of the hash");

static rec_unsettled_item event_item(const rec_event *e) {
  return (rec_unsettled_item){.time_ns = e->time_ns,
                              .order = e->order,
                              .source = e->source,
                              .live_id = -1,
                              .alloc = e->type == MT_TRACER_REC_ALLOC};
}

/* One write of a commit: an allocation, or the free of item `item`'s block. */
typedef struct commit_step {
  int64_t ns;
  uint32_t rank; /* at one time: the live block's free, then allocations, then frees */
  uint32_t item;
} commit_step;

static int step_before(const void *pa, const void *pb) {
  const commit_step *a = pa, *b = pb;
  if (a->ns != b->ns)
    return a->ns < b->ns ? -1 : 1;
  if (a->rank != b->rank)
    return a->rank < b->rank ? -1 : 1;
  return a->item < b->item ? -1 : a->item > b->item;
}

static void unsettled_unlink(rec_order *o, rec_unsettled *u) {
  mt_hashmap_remove(&o->unsettled, (int64_t)u->addr);
  if (u->prev)
    u->prev->next = u->next;
  else
    o->oldest = u->next;
  if (u->next)
    u->next->prev = u->prev;
  else
    o->newest = u->prev;
  rec_unsettled_clear(u);
  free(u);
}

static void remember(rec_order *o, uint64_t addr, int64_t alloc_ns, uint64_t alloc_source,
                     int64_t free_ns, uint64_t free_source) {
  *recent_slot(o, addr) = (rec_recent_free){.addr = addr,
                                            .alloc_ns = alloc_ns,
                                            .free_ns = free_ns,
                                            .alloc_source = alloc_source,
                                            .free_source = free_source};
}

/* The newest pair across threads that a commit wrote stays open to re-pairing, as the fast
 * path's do (do_free): pairing a free stamped before its allocation may be proved wrong by the
 * address's next records. */
static void remember_last_pair(rec_order *o, const rec_unsettled *u) {
  const rec_unsettled_item *it = u->items, *a = NULL, *f = NULL;
  for (uint32_t i = 0; i < u->count; i++) {
    if (!it[i].alloc || it[i].written || it[i].match < 0 || it[it[i].match].source == it[i].source)
      continue;
    if (!a || it[i].time_ns > a->time_ns) {
      a = &it[i];
      f = &it[it[i].match];
    }
  }
  if (a)
    remember(o, u->addr, a->time_ns, a->source, f->time_ns, f->source);
}

/* Writes the address's records as paired, in time order, and settles it: the allocation left
 * unpaired (the newest, when a record was lost and several are) becomes its live block. Frees
 * left unpaired are of unknown blocks: counted, never written. */
static void unsettled_commit(rec_order *o, rec_sink *sink, rec_unsettled *u) {
  rec_unsettled_item *it = u->items;
  int32_t live = -1; /* the unpaired allocation kept live */
  for (uint32_t i = 0; i < u->count; i++)
    if (it[i].alloc && !it[i].written && it[i].match < 0 &&
        (live < 0 || it[i].time_ns >= it[live].time_ns))
      live = (int32_t)i;
  commit_step *steps = malloc(2 * (size_t)u->count * sizeof *steps);
  int64_t *ids = malloc((size_t)u->count * sizeof *ids);
  if (!steps || !ids) {
    free(steps);
    free(ids);
    for (uint32_t i = 0; i < u->count; i++) /* out of memory: lost, not misread */
      o->lost_nomem += !it[i].written && (it[i].event || !it[i].alloc);
    unsettled_unlink(o, u);
    return;
  }
  size_t n = 0;
  for (uint32_t i = 0; i < u->count; i++) {
    ids[i] = it[i].live_id;
    if (it[i].written)
      continue; /* a block and a free already written: what they pair with writes nothing */
    if (!it[i].alloc) {
      if (it[i].match < 0)
        sink->stats->unknown_frees++;
      continue;
    }
    if (it[i].event)
      steps[n++] = (commit_step){it[i].time_ns, 1, i};
    if ((int32_t)i == live)
      continue;
    int64_t free_ns = it[i].match >= 0 ? it[it[i].match].time_ns : it[live].time_ns;
    if (it[i].match < 0)
      sink->stats->implied_frees++; /* its free was lost: freed when the newer block came */
    steps[n++] =
        (commit_step){free_ns > it[i].time_ns ? free_ns : it[i].time_ns, it[i].event ? 2 : 0, i};
  }
  qsort(steps, n, sizeof *steps, step_before);
  for (size_t k = 0; k < n; k++) {
    const rec_unsettled_item *x = &it[steps[k].item];
    if (steps[k].rank == 1)
      ids[steps[k].item] = write_block(o, sink, x->event, steps[k].ns);
    else
      write_collect(o, sink, steps[k].ns, ids[steps[k].item]);
  }
  remember_last_pair(o, u);
  if (live >= 0) {
    rec_live l = {
        .addr = u->addr, .id = ids[live], .time_ns = it[live].time_ns, .source = it[live].source};
    if (!rec_addrmap_put(&o->live, &l))
      o->lost_nomem++; /* its free will read as unknown */
  }
  free(steps);
  free(ids);
  unsettled_unlink(o, u);
}

static void unsettle(rec_order *o, rec_sink *sink, uint64_t addr, const rec_event *e);

/* Adds `e` to its unsettled address, and settles the address once its records explain each
 * other. A full address is written as far as it pairs and unsettled anew with `e` (once: a new
 * address holds at most the live block and a remembered pair before `e`). */
static void unsettled_add(rec_order *o, rec_sink *sink, rec_unsettled *u, const rec_event *e) {
  rec_unsettled_item item = event_item(e);
  item.event = rec_event_clone(e);
  if (!item.event) {
    o->lost_nomem++; /* out of memory: the record is lost, not misread */
    return;
  }
  if (!rec_unsettled_add(u, &item, o->skew_ns)) {
    free(item.event);
    if (u->count < REC_UNSETTLED_MAX) {
      o->lost_nomem++; /* out of memory: the record is lost, not misread */
      return;
    }
    uint64_t addr = u->addr;
    unsettled_commit(o, sink, u);
    unsettle(o, sink, addr, e);
    return;
  }
  if (rec_unsettled_explained(u))
    unsettled_commit(o, sink, u);
}

/* Record `e` cannot be written as it comes: its address unsettles, with the block live there. */
__attribute__((noinline)) static void unsettle(rec_order *o, rec_sink *sink, uint64_t addr,
                                               const rec_event *e) {
  rec_unsettled *u = calloc(1, sizeof *u);
  if (!u) {
    o->lost_nomem++; /* out of memory: `e` is lost, not misread */
    return;
  }
  u->addr = addr;
  u->since_ns = e->time_ns;
  u->epoch = o->epoch;
  rec_recent_free *r = recent_slot(o, addr);
  if (r->addr == addr && r->free_ns + 2 * o->skew_ns >= e->time_ns) {
    rec_unsettled_item block = {.time_ns = r->alloc_ns,
                                .source = r->alloc_source,
                                .live_id = -1,
                                .alloc = true,
                                .written = true};
    rec_unsettled_item its_free = {
        .time_ns = r->free_ns, .source = r->free_source, .written = true};
    if (!rec_unsettled_add(u, &block, o->skew_ns) || !rec_unsettled_add(u, &its_free, o->skew_ns)) {
      rec_unsettled_clear(u);
      free(u);
      o->lost_nomem++;
      return;
    }
    r->addr = 0;
  }
  rec_live *l = live_get(o, addr);
  if (l) {
    rec_unsettled_item live = {.time_ns = l->time_ns,
                               .source = l->source,
                               .live_id = l->id,
                               .alloc = true}; /* order 0: before every record still to come */
    if (!rec_unsettled_add(u, &live, o->skew_ns)) {
      rec_unsettled_clear(u);
      free(u);
      o->lost_nomem++;
      return;
    }
  }
  if (!mt_hashmap_put(&o->unsettled, (int64_t)addr, (uint64_t)(uintptr_t)u)) {
    rec_unsettled_clear(u);
    free(u);
    o->lost_nomem++;
    return;
  }
  if (l)
    rec_addrmap_remove(&o->live, l);
  u->prev = o->newest;
  if (o->newest)
    o->newest->next = u;
  else
    o->oldest = u;
  o->newest = u;
  unsettled_add(o, sink, u, e);
}

/* A record of an unsettled address, out of line. */
__attribute__((noinline)) static bool to_unsettled(rec_order *o, rec_sink *sink,
                                                   const rec_event *e) {
  rec_unsettled *u = unsettled_get(o, e->addr);
  if (!u)
    return false;
  unsettled_add(o, sink, u, e);
  return true;
}

/* --- malloc blocks ------------------------------------------------------------------------- */

/* Inline into the loops of rec_order_process and rec_order_process_many: what is not the usual
 * allocation or free is out of line. */
static inline __attribute__((always_inline)) void do_alloc(rec_order *o, rec_sink *sink,
                                                           const rec_event *e) {
  if (o->unsettled.count && to_unsettled(o, sink, e))
    return;
  rec_live *s = rec_addrmap_find(&o->live, e->addr);
  if (s && s->id != REC_LIVE_FREED) {
    /* The free of the block still live here is in flight (or, for an allocation stamped before
     * it, this block's own free is). */
    unsettle(o, sink, e->addr, e);
    return;
  }
  /* Writing touches no address map: `s` stays valid. */
  rec_live l = {.addr = e->addr,
                .id = write_block(o, sink, e, e->time_ns),
                .time_ns = e->time_ns,
                .source = e->source};
  if (s)
    rec_addrmap_revive(&o->live, s, &l); /* the address's tombstone: one probe in all */
  else if (!rec_addrmap_put(&o->live, &l))
    o->lost_nomem++; /* out of memory: its free will read as unknown */
}

/* `f` (a FREE of f->addr) frees the block live there when it can be that block's: freed on the
 * thread that allocated it, or stamped no earlier than its allocation less the skew tolerance. */
static inline __attribute__((always_inline)) void do_free(rec_order *o, rec_sink *sink,
                                                          const rec_event *f) {
  if (o->unsettled.count && to_unsettled(o, sink, f))
    return;
  rec_live *l = live_get(o, f->addr);
  if (l && f->source == l->source) {
    write_collect(o, sink, f->time_ns, l->id);
    rec_addrmap_remove(&o->live, l);
    return;
  }
  if (l && l->time_ns <= f->time_ns + o->skew_ns) {
    remember(o, f->addr, l->time_ns, l->source, f->time_ns, f->source);
    write_collect(o, sink, f->time_ns, l->id);
    rec_addrmap_remove(&o->live, l);
    return;
  }
  unsettle(o, sink, f->addr, f);
}

/* --- regions ------------------------------------------------------------------------------- */

static double uniform(rec_order *o) {
  /* xorshift64*: the consumer's own draws, independent of the program's */
  o->rng ^= o->rng >> 12;
  o->rng ^= o->rng << 25;
  o->rng ^= o->rng >> 27;
  return (double)((o->rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

/* Sample points in a region of `words` words: all of them with full tracing; in sampled mode a
 * Poisson draw of mean words * rate, as the shim's byte sampler would give a block of that size
 * (FORMAT.md §3.2), so that nsamples / rate estimates the region's size without bias. 0 means
 * the region is not written. */
static int64_t region_samples(rec_order *o, int64_t words) {
  if (o->full)
    return words > 1 ? words : 1;
  double mean = (double)words * o->rate;
  if (mean < 30) {
    double limit = exp(-mean), product = uniform(o);
    int64_t n = 0;
    while (product > limit) {
      n++;
      product *= uniform(o);
    }
    return n;
  }
  /* Large means: the normal approximation (Box-Muller). */
  double u1 = uniform(o), u2 = uniform(o);
  double z = sqrt(-2 * log(u1 > 0 ? u1 : 1e-300)) * cos(2 * M_PI * u2);
  int64_t n = llround(mean + sqrt(mean) * z);
  return n < 0 ? 0 : n;
}

/* Writes the allocation of region [start, end) at `ns` and files it in `into`; `mapped_ns` is the
 * stamp of the map that made it. */
static void add_region_to(rec_order *o, rec_sink *sink, rec_regions *into, uint64_t start,
                          uint64_t end, int64_t ns, int64_t mapped_ns, const uint64_t *codes,
                          long ncodes) {
  int64_t words = (int64_t)((end - start + 7) / 8);
  rec_region r = {.start = start, .end = end, .mapped_ns = mapped_ns, .nframes = (uint32_t)ncodes};
  o->wrote_last_codes = false; /* the codes cache's last call or the writer's last stack differ */
  r.codes = malloc(((size_t)ncodes + 1) * sizeof *r.codes);
  if (!r.codes) {
    o->lost_nomem++;
    return;
  }
  memcpy(r.codes, codes, (size_t)ncodes * sizeof *codes);
  int64_t nsamples = region_samples(o, words);
  r.obj_id =
      nsamples ? write_alloc(o, sink, ns, words, nsamples, MT_SOURCE_MAJOR, r.codes, ncodes, false)
               : -1; /* not sampled: tracked, so that its munmap is understood */
  if (!rec_regions_insert(into, &r)) {
    free(r.codes);
    o->lost_nomem++;
  }
}

static void add_region(rec_order *o, rec_sink *sink, uint64_t start, uint64_t end, int64_t ns,
                       int64_t mapped_ns, const uint64_t *codes, long ncodes) {
  add_region_to(o, sink, &o->regions, start, end, ns, mapped_ns, codes, ncodes);
}

/* Collects the regions of `rs` overlapping [start, end) that were mapped at or before
 * `mapped_by` (an unmap cannot be of a region mapped after it: its stamp says the region came
 * later, the first records of a new thread or a ring read late being written after it), and
 * allocates the parts left mapped. */
static void unmap_range_in(rec_order *o, rec_sink *sink, rec_regions *rs, uint64_t start,
                           uint64_t end, int64_t ns, int64_t mapped_by) {
  size_t first, last;
  rec_regions_overlapping(rs, start, end, &first, &last);
  if (first == last)
    return;
  size_t n = last - first, ncut = 0, kept = first;
  rec_region *cut = malloc(n * sizeof *cut);
  if (!cut) {
    o->lost_nomem++;
    return;
  }
  for (size_t i = first; i < last; i++) {
    if (rs->items[i].mapped_ns <= mapped_by)
      cut[ncut++] = rs->items[i];
    else
      rs->items[kept++] = rs->items[i];
  }
  memmove(rs->items + kept, rs->items + last, (rs->count - last) * sizeof *cut);
  rs->count -= last - kept;
  for (size_t i = 0; i < ncut; i++) {
    rec_region *r = &cut[i];
    write_collect(o, sink, ns, r->obj_id);
    if (r->start < start)
      add_region_to(o, sink, rs, r->start, start, ns, r->mapped_ns, r->codes, r->nframes);
    if (r->end > end)
      add_region_to(o, sink, rs, end, r->end, ns, r->mapped_ns, r->codes, r->nframes);
    free(r->codes);
  }
  free(cut);
}

static void unmap_range(rec_order *o, rec_sink *sink, uint64_t start, uint64_t end, int64_t ns) {
  unmap_range_in(o, sink, &o->regions, start, end, ns, INT64_MAX);
}

static void do_unmap(rec_order *o, rec_sink *sink, const rec_event *e) {
  if (e->addr + e->size < e->addr)
    return;
  unmap_range_in(o, sink, &o->regions, e->addr, e->addr + e->size, e->time_ns, e->time_ns);
  if (o->late_regions.count)
    unmap_range_in(o, sink, &o->late_regions, e->addr, e->addr + e->size, e->time_ns, e->time_ns);
}

static void do_map(rec_order *o, rec_sink *sink, const rec_event *e) {
  if (!e->size || e->addr + e->size < e->addr)
    return;
  uint64_t start = e->addr, end = e->addr + e->size;
  const uint64_t *codes = NULL;
  long n = event_codes(sink, e, &codes);
  size_t first, last;
  rec_regions_overlapping(&o->regions, start, end, &first, &last);
  for (size_t i = first; i < last; i++) {
    if (o->regions.items[i].mapped_ns > e->time_ns) {
      /* A region mapped after this map holds the range: this one ended before it. (Late
       * regions stay apart from each other too: an older late one overlapping goes.) */
      unmap_range_in(o, sink, &o->late_regions, start, end, e->time_ns, INT64_MAX);
      add_region_to(o, sink, &o->late_regions, start, end, e->time_ns, e->time_ns, codes, n);
      return;
    }
  }
  unmap_range(o, sink, start, end, e->time_ns); /* MAP_FIXED over a region */
  add_region(o, sink, start, end, e->time_ns, e->time_ns, codes, n);
}

/* --- thread stacks -------------------------------------------------------------------------- */

/* The stack of thread `tid`, [low, high), becomes a region of the synthetic site
 * `<thread stack>` until the thread exits. A stack inside a mapping the program made itself
 * (pthread_attr_setstack on its own mmap) is already that mapping's memory: not written twice.
 * The main thread's stack is the kernel's, reserved before the program ran: no allocation of the
 * program's (it would be an 8 MiB site in every trace). */
static void thread_started(rec_order *o, rec_sink *sink, uint64_t tid, uint64_t low, uint64_t high,
                           int64_t ns) {
  if (o->main_tid && tid == (uint64_t)o->main_tid)
    return;
  uint64_t old;
  if (mt_hashmap_get(&o->stacks, (int64_t)tid, &old)) {
    size_t i = 0, j = 0;
    rec_regions_overlapping(&o->regions, old, old + 1, &i, &j);
    if (i < j && o->regions.items[i].thread_stack)
      unmap_range(o, sink, o->regions.items[i].start, o->regions.items[i].end, ns);
    mt_hashmap_remove(&o->stacks, (int64_t)tid);
  }
  if (!low || high <= low)
    return;
  size_t i = 0, j = 0;
  rec_regions_overlapping(&o->regions, low, high, &i, &j);
  if (i < j)
    return;
  static const uint64_t site = REC_CODE_THREAD_STACK;
  add_region(o, sink, low, high, ns, ns, &site, 1);
  rec_regions_overlapping(&o->regions, low, low + 1, &i, &j);
  if (i < j) {
    o->regions.items[i].thread_stack = true;
    mt_hashmap_put(&o->stacks, (int64_t)tid, low);
  }
}

static void thread_exited(rec_order *o, rec_sink *sink, uint64_t tid, int64_t ns) {
  uint64_t low;
  if (!mt_hashmap_get(&o->stacks, (int64_t)tid, &low))
    return;
  mt_hashmap_remove(&o->stacks, (int64_t)tid);
  size_t i = 0, j = 0;
  rec_regions_overlapping(&o->regions, low, low + 1, &i, &j);
  if (i < j && o->regions.items[i].thread_stack)
    unmap_range(o, sink, o->regions.items[i].start, o->regions.items[i].end, ns);
}

void rec_order_end_threads(rec_order *o, rec_sink *sink) {
  for (size_t i = o->regions.count; i-- > 0;) {
    if (i < o->regions.count && o->regions.items[i].thread_stack)
      unmap_range(o, sink, o->regions.items[i].start, o->regions.items[i].end, o->last_time_ns);
  }
  mt_hashmap_free(&o->stacks);
}

/* --- entry points -------------------------------------------------------------------------- */

/* A realloc: the free of the old block, the allocation of the new one. Out of line: its two
 * events on the stack would make every call of rec_order_process set up a large frame. */
__attribute__((noinline)) static void do_realloc(rec_order *o, rec_sink *sink, const rec_event *e) {
  if (e->addr) {
    rec_event f = {.type = MT_TRACER_REC_FREE,
                   .time_ns = e->time_ns,
                   .order = e->order,
                   .source = e->source,
                   .addr = e->addr};
    do_free(o, sink, &f);
  }
  if (e->nsamples > 0 && e->addr2) {
    rec_event a = *e;
    a.type = MT_TRACER_REC_ALLOC;
    a.addr = e->addr2;
    do_alloc(o, sink, &a);
  }
}

/* The events other than malloc and free, out of line so that those two are tail calls. */
__attribute__((noinline)) static void process_other(rec_order *o, rec_sink *sink,
                                                    const rec_event *e) {
  switch (e->type) {
  case MT_TRACER_REC_REALLOC: do_realloc(o, sink, e); return;
  case MT_TRACER_REC_MAP: do_map(o, sink, e); return;
  case MT_TRACER_REC_UNMAP: do_unmap(o, sink, e); return;
  case MT_TRACER_REC_THREAD_START:
    thread_started(o, sink, e->addr2, e->addr, e->addr + e->size, e->time_ns);
    return;
  case MT_TRACER_REC_THREAD_EXIT: thread_exited(o, sink, e->addr2, e->time_ns); return;
  case MT_TRACER_REC_MODULE_UNLOAD: rec_modules_unload(sink->modules, e->size); return;
  default: return;
  }
}

static inline __attribute__((always_inline)) void process_one(rec_order *o, rec_sink *sink,
                                                              const rec_event *e) {
  if (e->type == MT_TRACER_REC_ALLOC)
    do_alloc(o, sink, e);
  else if (e->type == MT_TRACER_REC_FREE)
    do_free(o, sink, e);
  else
    process_other(o, sink, e);
}

void rec_order_process(rec_order *o, rec_sink *sink, const rec_event *e) {
  process_one(o, sink, e);
}

void rec_order_process_many(rec_order *o, rec_sink *sink, rec_event *const *events, size_t n) {
  for (size_t i = 0; i < n; i++)
    process_one(o, sink, events[i]);
}

void rec_order_expire(rec_order *o, rec_sink *sink, int64_t now_ns, bool all) {
  /* Given up after the bound in trace time, and only once the rings have been caught up since
   * the address unsettled: a ring read late (the consumer behind) may still hold a match. */
  while (o->oldest &&
         (all || (o->oldest->since_ns + o->bound_ns < now_ns && o->epoch >= o->oldest->epoch + 2)))
    unsettled_commit(o, sink, o->oldest);
}

void rec_order_free(rec_order *o) {
  while (o->oldest)
    unsettled_unlink(o, o->oldest);
  rec_addrmap_free(&o->live);
  free(o->recent);
  mt_hashmap_free(&o->unsettled);
  mt_hashmap_free(&o->stacks);
  rec_regions_free(&o->regions);
  rec_regions_free(&o->late_regions);
  memset(o, 0, sizeof *o);
}
