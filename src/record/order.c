/* Causal repair and emission (docs/record.md, "Order"). Events come out of the merge in time
 * order, except those published too late for it; either way the trace must never show a free
 * before its allocation, two live objects at one address, or a free of the wrong object:
 *   - an allocation at an address still live is held until the free in flight for it arrives;
 *   - a free of an address not live is held until its allocation arrives (stamped on another
 *     thread no later than the free plus the skew tolerance), or counted as unknown after the
 *     hold bound; unknown frees are never written (a collect of an unknown id crashes
 *     memtrace_viewer);
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
  o->live.seed = o->held.seed = o->pending.seed = o->stacks.seed = seed;
  o->skew_ns = skew_ns;
  o->bound_ns = bound_ns;
  o->rate = 1;
  o->full = true;
  o->rng = mt_hashmap_random_seed() | 1;
  return true;
}

static void fifo_append(rec_order *o, rec_event *e) {
  e->fifo_next = NULL;
  e->epoch = o->epoch;
  if (o->fifo_tail)
    o->fifo_tail->fifo_next = e;
  else
    o->fifo_head = e;
  o->fifo_tail = e;
}

static rec_event *chain_first(const mt_hashmap *m, uint64_t addr) {
  uint64_t v;
  return mt_hashmap_get(m, (int64_t)addr, &v) ? (rec_event *)(uintptr_t)v : NULL;
}

static void chain_append(mt_hashmap *m, rec_event *e) {
  rec_event *first = chain_first(m, e->addr);
  e->next = NULL;
  if (!first) {
    mt_hashmap_put(m, (int64_t)e->addr, (uint64_t)(uintptr_t)e);
    return;
  }
  while (first->next)
    first = first->next;
  first->next = e;
}

/* Unlinks `e` from its address's chain and marks it dead (the FIFO frees it). */
static void chain_remove(mt_hashmap *m, rec_event *e) {
  rec_event *first = chain_first(m, e->addr);
  if (first == e) {
    if (e->next)
      mt_hashmap_put(m, (int64_t)e->addr, (uint64_t)(uintptr_t)e->next);
    else
      mt_hashmap_remove(m, (int64_t)e->addr);
  } else {
    for (rec_event *p = first; p; p = p->next)
      if (p->next == e) {
        p->next = e->next;
        break;
      }
  }
  e->next = NULL;
  e->dead = true;
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
  return us < sink->start_us ? sink->start_us : us;
}

static int resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  rec_sink *sink = user;
  if (code == REC_CODE_THREAD_STACK) {
    static const mt_location thread_stack = {.filename = "", .defname = "<thread stack>"};
    *entries = &thread_stack;
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
  int64_t t = out_time(o, sink, ns);
  sink->stats->allocations++;
  rec_output *out = sink->out;
  if (!out->writer)
    sink->ensure_writer(sink->user);
  if (!out->writer || out->failed)
    return -1;
  if (nsamples < 1)
    nsamples = 1;
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

static void live_put(rec_order *o, uint64_t addr, int64_t id, const rec_event *e) {
  rec_live l = {.addr = addr, .id = id, .time_ns = e->time_ns, .source = e->source};
  rec_addrmap_put(&o->live, &l);
}

static rec_live *live_get(const rec_order *o, uint64_t addr) {
  return rec_addrmap_get(&o->live, addr);
}

static inline __attribute__((always_inline)) int64_t write_block(rec_order *o, rec_sink *sink,
                                                                 const rec_event *e, int64_t ns) {
  const uint64_t *codes = NULL;
  long n;
  bool same = false;
  const rec_stack_entry *last =
      rec_sites_repeat(sink->sites, sink->modules, e->nframes, e->stack_hash, e->stack_serial,
                       (e->kind & MT_TRACER_FLAG_TRUNCATED) != 0);
  if (last) { /* rec_sites_stack_codes's fast path, knowing it was taken */
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

/* Writes the allocation `e` (its address free) and makes it live. */
static void emit_alloc(rec_order *o, rec_sink *sink, const rec_event *e, int64_t ns) {
  live_put(o, e->addr, write_block(o, sink, e, ns), e);
}

/* Holds a copy of `e` in `chain` until its match arrives (or the bound passes). */
static void hold(rec_order *o, mt_hashmap *chain, const rec_event *e) {
  rec_event *c = rec_event_clone(e);
  if (!c)
    return;
  chain_append(chain, c);
  fifo_append(o, c);
}

/* Writes `e` and its free at `free_ns` together: an object whose records arrived after a newer
 * object at its address was written (a late publish); the address's live object is untouched. */
static void emit_pair(rec_order *o, rec_sink *sink, const rec_event *e, int64_t free_ns) {
  int64_t id = write_block(o, sink, e, e->time_ns);
  write_collect(o, sink, free_ns, id);
}

/* --- malloc blocks ------------------------------------------------------------------------- */

/* Whether held allocation `h` and held free `f` of one address are one block: stamped in that
 * order within the skew across threads; in arrival order on one thread. */
static bool pairs(const rec_order *o, const rec_event *h, const rec_event *f) {
  return f->source != h->source ? f->time_ns + o->skew_ns >= h->time_ns : f->order > h->order;
}

/* After the address's state changed: held allocations and held frees that are one block are
 * written together, and while the address is free the earliest held allocation becomes its live
 * object (not before `free_ns`, the free that made room for it). */
static void settle(rec_order *o, rec_sink *sink, uint64_t addr, int64_t free_ns) {
  if (!o->held.count)
    return; /* nothing held anywhere: nothing to pair or to make live */
  for (;;) {
    bool changed = false;
    for (rec_event *h = chain_first(&o->held, addr); h && !changed; h = h->next) {
      for (rec_event *f = chain_first(&o->pending, addr); f; f = f->next) {
        if (pairs(o, h, f)) {
          chain_remove(&o->held, h);
          chain_remove(&o->pending, f);
          emit_pair(o, sink, h, f->time_ns);
          changed = true;
          break;
        }
      }
    }
    if (!changed && !live_get(o, addr)) {
      rec_event *first = NULL;
      for (rec_event *h = chain_first(&o->held, addr); h; h = h->next)
        if (!first || h->time_ns < first->time_ns)
          first = h;
      if (first) {
        chain_remove(&o->held, first);
        emit_alloc(o, sink, first, first->time_ns > free_ns ? first->time_ns : free_ns);
        changed = true;
      }
    }
    if (!changed)
      return;
  }
}

/* A free that arrived before allocation `e`, stamped (give or take the skew) after it by another
 * thread, is this block's: the earliest such is written with it. One from the same thread was
 * written before it: an older block's. False when there is none. */
__attribute__((noinline)) static bool alloc_meets_pending_free(rec_order *o, rec_sink *sink,
                                                               const rec_event *e) {
  rec_event *match = NULL;
  for (rec_event *f = chain_first(&o->pending, e->addr); f; f = f->next)
    if (f->source != e->source && f->time_ns + o->skew_ns >= e->time_ns &&
        (!match || f->time_ns < match->time_ns))
      match = f;
  if (!match)
    return false;
  chain_remove(&o->pending, match);
  emit_pair(o, sink, e, match->time_ns);
  return true;
}

/* Inline into the loops of rec_order_process and rec_order_process_many: what is not the usual
 * allocation or free (something held or pending) is out of line. */
static inline __attribute__((always_inline)) void do_alloc(rec_order *o, rec_sink *sink,
                                                           const rec_event *e) {
  if (o->pending.count && alloc_meets_pending_free(o, sink, e))
    return;
  rec_live *s = rec_addrmap_find(&o->live, e->addr);
  if (s && s->id != REC_LIVE_FREED) {
    /* The free of the block still live here is in flight (or, for an allocation stamped before
     * it, this block's own free is): hold this allocation until it comes. */
    hold(o, &o->held, e);
    return;
  }
  /* Writing touches no address map: `s` stays valid. */
  rec_live l = {.addr = e->addr,
                .id = write_block(o, sink, e, e->time_ns),
                .time_ns = e->time_ns,
                .source = e->source};
  if (s)
    rec_addrmap_revive(&o->live, s, &l); /* the address's tombstone: one probe in all */
  else
    rec_addrmap_put(&o->live, &l);
}

/* do_free when some allocation is held: the held ones are candidates too. */
__attribute__((noinline)) static void do_free_held(rec_order *o, rec_sink *sink,
                                                   const rec_event *f) {
  for (int64_t slack = 0;; slack = o->skew_ns) {
    rec_live *l = live_get(o, f->addr);
    bool live_fits = l && (f->source == l->source || l->time_ns <= f->time_ns + slack);
    rec_event *best = NULL;
    for (rec_event *h = chain_first(&o->held, f->addr); h; h = h->next) {
      bool fits = h->source == f->source ? h->order < f->order : h->time_ns <= f->time_ns + slack;
      if (fits && (!best || h->time_ns > best->time_ns))
        best = h;
    }
    if (best && (!live_fits || best->time_ns > l->time_ns)) {
      chain_remove(&o->held, best);
      emit_pair(o, sink, best, f->time_ns);
      return;
    }
    if (live_fits) {
      write_collect(o, sink, f->time_ns, l->id);
      rec_addrmap_remove(&o->live, l);
      settle(o, sink, f->addr, f->time_ns);
      return;
    }
    if (slack)
      break;
  }
  hold(o, &o->pending, f);
  settle(o, sink, f->addr, f->time_ns);
}

/* A free with no block to take yet waits for its allocation. */
__attribute__((noinline)) static void free_pending(rec_order *o, rec_sink *sink,
                                                   const rec_event *f) {
  hold(o, &o->pending, f);
  settle(o, sink, f->addr, f->time_ns);
}

/* `f` (a FREE of f->addr) is taken. Of the blocks at its address (the live one and the held
 * ones), it frees the one allocated last before it: on one thread by arrival, across threads by
 * stamp; the skew tolerance only when no block was stamped before it. */
static inline __attribute__((always_inline)) void do_free(rec_order *o, rec_sink *sink,
                                                          const rec_event *f) {
  if (o->held.count) {
    do_free_held(o, sink, f);
    return;
  }
  /* Nothing held: only the live block can fit (do_free_held's loop, without held candidates). */
  rec_live *l = live_get(o, f->addr);
  if (l && (f->source == l->source || l->time_ns <= f->time_ns + o->skew_ns)) {
    write_collect(o, sink, f->time_ns, l->id);
    rec_addrmap_remove(&o->live, l);
    return;
  }
  free_pending(o, sink, f);
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

static void add_region(rec_order *o, rec_sink *sink, uint64_t start, uint64_t end, int64_t ns,
                       const uint64_t *codes, long ncodes) {
  int64_t words = (int64_t)((end - start + 7) / 8);
  rec_region r = {.start = start, .end = end, .nframes = (uint32_t)ncodes};
  o->wrote_last_codes = false; /* the codes cache's last call or the writer's last stack differ */
  r.codes = malloc(((size_t)ncodes + 1) * sizeof *r.codes);
  if (!r.codes)
    return;
  memcpy(r.codes, codes, (size_t)ncodes * sizeof *codes);
  int64_t nsamples = region_samples(o, words);
  r.obj_id =
      nsamples ? write_alloc(o, sink, ns, words, nsamples, MT_SOURCE_MAJOR, r.codes, ncodes, false)
               : -1; /* not sampled: tracked, so that its munmap is understood */
  if (!rec_regions_insert(&o->regions, &r))
    free(r.codes);
}

/* Collects every region overlapping [start, end) and allocates the parts left mapped. */
static void unmap_range(rec_order *o, rec_sink *sink, uint64_t start, uint64_t end, int64_t ns) {
  size_t first, last;
  rec_regions_overlapping(&o->regions, start, end, &first, &last);
  if (first == last)
    return;
  size_t n = last - first;
  rec_region *cut = malloc(n * sizeof *cut);
  if (!cut)
    return;
  memcpy(cut, o->regions.items + first, n * sizeof *cut);
  memmove(o->regions.items + first, o->regions.items + last,
          (o->regions.count - last) * sizeof *cut);
  o->regions.count -= n;
  for (size_t i = 0; i < n; i++) {
    rec_region *r = &cut[i];
    write_collect(o, sink, ns, r->obj_id);
    if (r->start < start)
      add_region(o, sink, r->start, start, ns, r->codes, r->nframes);
    if (r->end > end)
      add_region(o, sink, end, r->end, ns, r->codes, r->nframes);
    free(r->codes);
  }
  free(cut);
}

static void do_map(rec_order *o, rec_sink *sink, const rec_event *e) {
  if (!e->size || e->addr + e->size < e->addr)
    return;
  unmap_range(o, sink, e->addr, e->addr + e->size, e->time_ns); /* MAP_FIXED over a region */
  const uint64_t *codes = NULL;
  long n = event_codes(sink, e, &codes);
  add_region(o, sink, e->addr, e->addr + e->size, e->time_ns, codes, n);
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
  add_region(o, sink, low, high, ns, &site, 1);
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
  case MT_TRACER_REC_UNMAP:
    if (e->addr + e->size >= e->addr)
      unmap_range(o, sink, e->addr, e->addr + e->size, e->time_ns);
    return;
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
  while (o->fifo_head) {
    rec_event *e = o->fifo_head;
    if (!e->dead) {
      /* Given up after the bound in trace time, and only once the rings have been caught up
       * since it was held: a ring read late (the consumer behind) may still hold its match. */
      if (!all && (e->time_ns + o->bound_ns >= now_ns || o->epoch < e->epoch + 2))
        break;
      if (e->type == MT_TRACER_REC_FREE) {
        chain_remove(&o->pending, e);
        sink->stats->unknown_frees++;
      } else {
        /* An allocation at a live address whose free never came (lost): if it is the newer
         * one, the live object's free was lost: take that object as freed now; if it is the
         * older one, its own free was lost: write it freed at once. Either way the address is
         * never live twice. */
        chain_remove(&o->held, e);
        int64_t t = e->time_ns > o->last_time_ns ? e->time_ns : o->last_time_ns;
        rec_live *l = live_get(o, e->addr);
        sink->stats->implied_frees++;
        if (l && l->time_ns <= e->time_ns) {
          write_collect(o, sink, t, l->id);
          rec_addrmap_remove(&o->live, l);
          emit_alloc(o, sink, e, t);
        } else if (l) {
          emit_pair(o, sink, e, t);
        } else {
          sink->stats->implied_frees--;
          emit_alloc(o, sink, e, t);
        }
      }
    }
    o->fifo_head = e->fifo_next;
    if (!o->fifo_head)
      o->fifo_tail = NULL;
    free(e);
  }
}

void rec_order_free(rec_order *o) {
  for (rec_event *e = o->fifo_head, *next; e; e = next) {
    next = e->fifo_next;
    free(e);
  }
  rec_addrmap_free(&o->live);
  mt_hashmap_free(&o->held);
  mt_hashmap_free(&o->pending);
  mt_hashmap_free(&o->stacks);
  rec_regions_free(&o->regions);
  memset(o, 0, sizeof *o);
}
