/* The recorder handle (memtap/record.h): cursors on ring files, the decoding of the tracer's
 * records (memtap/tracer.h) into events, and the loop that moves them through the merge
 * (merge.c), the causal repair (order.c) and the writer (output.c), flushing periodically. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "common/error.h"
#include "common/grow.h"
#include "memtap/ring.h"
#include "memtap/tracer.h"
#include "record/inflate.h"
#include "record/record_internal.h"
#include "ring/consumer.h"
#include "ring/layout.h"

/* Records per cursor call: the cursor moves to the next ring after each call, so small calls keep
 * the rings read evenly (a ring read late holds the merge back or needs repair). */
#define POLL_BATCH 4096
/* Records read per attachment per poll, so that writing and flushes keep up. */
#define POLL_MAX_PER_CALL (1u << 18)
#define MERGE_MAX_QUEUED (1u << 20)
/* A read that goes through the merge (threads merged; the first poll and mt_recorder_finish,
 * which read every ring's backlog through it) drains it between two cursor calls once this many
 * events wait (one attachment: another's rings are unread yet): the rings are read in time order
 * (mt_cursor_set_time_order), so what is older than every ring's newest record can go, and the
 * queue stays small enough for the caches. Without it, a single-threaded program's first poll
 * queued its 256 K records (37 MB of slots grown by doubling: fresh memory, which this VM pays for
 * at first touch; bench_tracer_tree 0.5 --full: memtap's CPU 0.64 -> 0.46 s). */
#define MERGE_DRAIN_QUEUED (1u << 12)
#define DIRECT_BATCH 16
/* The address map's slots are prefetched only once the map is larger than this (128 KiB of
 * slots, four times L1): a smaller one stays in L1, where hashing every address twice would cost
 * more than the miss. Two threads of churn (8,192 slots): 16.2 -> 16.8 M records/s (bench_record,
 * mean of 6 alternated runs; one thread, 4,096 slots: 31.3 -> 31.9), where the limit of 2^15 slots
 * left that map unprefetched. */
#define PREFETCH_MIN_SLOTS (1u << 12)
#define DIRECT_FRAMES ((2 * DIRECT_BATCH + 2) * MT_TRACER_MAX_FRAMES)

typedef struct attachment {
  mt_cursor *cursor;
  uint32_t index;
  int64_t created_ns, created_realtime_ns;
  bool realtime; /* the file's timestamps are CLOCK_REALTIME already */
  /* Timestamps converted as ns = ns0 + (t - ts0) * 1e9 / hz by multiplications (the cursor's
   * exact conversion of TSC ticks divides in 128 bits, dearer than all the rest of decoding a
   * record): TSC files at their header's rate, the clock_gettime clocks' files at 1e9 (q = 1,
   * frac = 0), so that the decoders' fast paths take every clock. */
  bool calibrated;
  bool tsc; /* the TSC: the calibration's first stamp must be a record's, not one peeked at */
  uint64_t ts0, q, frac; /* 1e9 / hz = q + frac / 2^64 */
  int64_t ns0;
  int64_t to_absolute; /* added to the file's clock in ns: 0, or created_realtime - created */
  int64_t abs0;        /* calibrated: ns0 + to_absolute */
} attachment;

struct mt_recorder {
  mt_recorder_options opt;
  char *exe, *context; /* copies of the options' strings */
  int fd;
  attachment *att;
  size_t natt, att_cap;
  rec_merge merge;
  int64_t poll_now_ns; /* consumer clock at the start of the current read */
  rec_order order;
  rec_modules modules;
  rec_sites sites;
  rec_symboliser *symboliser;
  rec_output out;
  bool writer_tried;
  bool clock_tick; /* mt_recorder_set_clock_tick */
  rec_sink sink;
  mt_recorder_stats stats;
  uint64_t lost_final; /* after finish */
  bool tracer_stopped_final;
  uint64_t claims_failed_space_final, claims_failed_full_final,
      claims_failed_limit_final; /* after finish */
  bool have_process;
  mt_tracer_process process;
  char *process_exe;
  char *process_command; /* its command line, arguments joined by spaces, or NULL */
  uint64_t arrival;
  int64_t last_flush_ns; /* consumer clock */
  uint64_t flushed_at;   /* events written at the last flush */
  attachment *current;   /* during a poll's callbacks */
  /* Until a second writing thread appears, there is nothing to merge: while the consumer keeps
   * up, records go to order.c as they are read (direct), with the stack hash of the thread's
   * previous stack reused. */
  bool merging, direct_seen;
  bool poll_checked; /* this cursor poll's rings with records were looked at (poll_rings) */
  bool direct_ok;    /* this poll: not the first (and one thread wrote so far) */
  uint64_t polls;
  uint64_t direct_key;
  /* The thread's stacks as direct records refer to them: a circular buffer of DIRECT_FRAMES
   * words, the current stack at direct_cur (direct_nframes of them, 0 before the first). */
  uint64_t *direct_frames;
  size_t direct_pos;
  const uint64_t *direct_cur;
  uint32_t direct_serial;
  /* Direct records wait in small batches: the address map's slots of a whole batch are
   * prefetched before the batch is processed, so that a program with many live blocks (a map
   * far larger than the caches) does not pay a cache miss per record one after the other. */
  rec_event *batch[DIRECT_BATCH];
  size_t batched;
  uint32_t direct_nframes, direct_hash;
  bool finished;
  int decode_error;       /* out of memory in a callback */
  int64_t end_ns;         /* mt_recorder_set_end, 0 if not called */
  int64_t process_end_ns; /* the newest MT_TRACER_REC_PROCESS_END's time, 0 before one */
};

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* --- the writer, created once the process has described itself ---------------------------- */

static double trace_rate(const mt_recorder *r) {
  double rate = r->have_process ? r->process.sample_rate : r->opt.sample_rate;
  return mt_sample_rate_is_valid(rate, 64) ? rate : 1; /* a damaged ring file's: full */
}

int64_t mt_recorder_start_time(const mt_recorder *r) {
  int64_t start_ns = r->natt ? r->att[0].created_realtime_ns : real_ns();
  /* A forked child's ring file keeps its parent's clock base, and so its creation time: its trace
   * starts at the fork, when the child registered, not with its parent's life before it. */
  if (r->have_process && r->process.parent_pid > 0 && r->process.start_realtime_ns > start_ns)
    start_ns = r->process.start_realtime_ns;
  return start_ns;
}

static void ensure_writer(void *user) {
  mt_recorder *r = user;
  if (r->writer_tried)
    return;
  r->writer_tried = true;
  double rate = trace_rate(r);
  bool full = r->have_process ? (r->process.flags & MT_TRACER_PROCESS_FULL) != 0 : rate >= 1;
  r->order.rate = rate;
  r->order.full = full;
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  char params[200];
  int at = snprintf(params, sizeof params, "memtap=%s,mode=%s,interval=%.0f", mt_version(),
                    full ? "full" : "sampled", 8 / rate);
  if (r->opt.time_resolution_us > 1 && at > 0 && (size_t)at < sizeof params)
    snprintf(params + at, sizeof params - (size_t)at, ",time_resolution_us=%lld",
             (long long)r->opt.time_resolution_us);
  int64_t start_ns = mt_recorder_start_time(r);
  mt_trace_info info = {
      .version = r->opt.version,
      .start_time = start_ns / 1000,
      .sample_rate = rate,
      .word_size = 64,
      .executable_name = r->exe           ? r->exe
                         : r->process_exe ? r->process_exe
                                          : "",
      .host_name = host,
      .ocaml_runtime_params = params,
      .pid = r->have_process ? r->process.pid : r->stats.pid,
      .context = r->context           ? r->context
                 : r->process_command ? r->process_command
                                      : "",
  };
  r->sink.start_us = info.start_time;
  r->sink.resolution_us = r->opt.time_resolution_us;
  rec_output_open(&r->out, r->fd, r->opt.compress, &info, r->opt.version);
}

/* --- decoding ------------------------------------------------------------------------------ */

/* Sums of times read from a ring file, which may be damaged: wrapped, never undefined. A damaged
 * file's times are garbage either way; the trace writer refuses what goes backwards. */
static inline int64_t add_ns(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a + (uint64_t)b);
}

static inline int64_t sub_ns(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* A stamp before calibration or older than its first stamp: the cursor's exact conversion. */
__attribute__((noinline)) static int64_t absolute_ns_exact(attachment *a, uint64_t timestamp) {
  int64_t ns = mt_cursor_timestamp_ns(a->cursor, timestamp);
  if (!a->calibrated) {
    a->calibrated = true;
    a->ts0 = timestamp;
    a->ns0 = ns;
    a->abs0 = add_ns(ns, a->to_absolute);
  }
  return add_ns(ns, a->to_absolute);
}

/* A stamp at or after the calibration's first, `ticks` past it, in absolute ns: the whole
 * nanoseconds per tick and the 64-bit fraction, no division. */
static inline int64_t scaled_ns(int64_t abs0, uint64_t ticks, uint64_t q, uint64_t frac) {
  return add_ns(abs0, (int64_t)(ticks * q + (uint64_t)(((unsigned __int128)ticks * frac) >> 64)));
}

static inline int64_t absolute_ns(attachment *a, uint64_t timestamp) {
  if (a->calibrated && timestamp >= a->ts0)
    return scaled_ns(a->abs0, timestamp - a->ts0, a->q, a->frac);
  return absolute_ns_exact(a, timestamp);
}

static void prefetch_live(const rec_addrmap *m, uint64_t addr) {
  if (m->slots && addr)
    __builtin_prefetch(&m->slots[rec_addrmap_home(m, addr)]);
}

/* Processes the batched direct records, in order. */
__attribute__((noinline)) static void direct_flush(mt_recorder *r) {
  size_t n = r->batched;
  r->batched = 0;
  if (r->order.live.mask >= PREFETCH_MIN_SLOTS - 1) {
    for (size_t i = 0; i < n; i++) {
      prefetch_live(&r->order.live, r->batch[i]->addr);
      if (r->batch[i]->type == MT_TRACER_REC_REALLOC)
        prefetch_live(&r->order.live, r->batch[i]->addr2);
    }
  }
  rec_order_process_many(&r->order, &r->sink, r->batch, n);
}

/* The frames of a direct record (in the cursor's buffer, valid during the callback only): the
 * thread's previous stack again (a loop allocating from one place) costs one comparison and
 * shares its copy, hash and serial; another is copied into the circular direct_frames. A batched
 * event refers to the copy that was current when it was read, at most DIRECT_BATCH copies ago,
 * and DIRECT_FRAMES leaves room for twice that many of the deepest stacks. */
__attribute__((noinline)) static void direct_new_stack(mt_recorder *r, rec_event *e) {
  uint32_t n = e->nframes;
  size_t at = r->direct_pos;
  if (at + n > DIRECT_FRAMES)
    at = 0;
  uint64_t *copy = r->direct_frames + at;
  memcpy(copy, e->frames, n * sizeof *copy);
  r->direct_pos = at + n;
  r->direct_cur = copy;
  r->direct_nframes = n;
  e->frames = copy;
  e->stack_hash = r->direct_hash = rec_stack_hash(copy, n);
  e->stack_serial = r->direct_serial = rec_merge_new_serial(&r->merge);
}

static inline void direct_stack(mt_recorder *r, rec_event *e) {
  uint32_t n = e->nframes;
  const uint64_t *f = e->frames, *cur = r->direct_cur;
  if (n == r->direct_nframes && rec_same_frames(cur, f, n)) {
    e->frames = cur;
    e->stack_hash = r->direct_hash;
    e->stack_serial = r->direct_serial;
    return;
  }
  direct_new_stack(r, e);
}

/* Decodes a tracer record into `e` (every field but the links, which stay as they are); its
 * frames stay in the cursor's buffer. False when there is nothing to write. */
static inline bool decode(mt_recorder *r, const mt_ring_event *ev, rec_event *e) {
  const uint64_t *p = ev->payload;
  size_t fixed, words = ev->words;
  uint32_t type = ev->type;
  switch (type) {
  case MT_TRACER_REC_ALLOC: fixed = 4; break;
  case MT_TRACER_REC_FREE: fixed = 1; break;
  case MT_TRACER_REC_REALLOC: fixed = 5; break;
  case MT_TRACER_REC_MAP: fixed = 4; break;
  case MT_TRACER_REC_UNMAP: fixed = 2; break;
  case MT_TRACER_REC_MODULE_UNLOAD: fixed = 1; break;
  case MT_TRACER_REC_THREAD_START: fixed = 3; break;
  case MT_TRACER_REC_THREAD_EXIT: fixed = 1; break;
  case MT_TRACER_REC_PROCESS_END: {
    /* Not a vfork child's _exit, written with its parent's memory into its parent's ring. */
    if (words < 1 || !r->have_process || (int64_t)p[0] != r->process.pid)
      return false;
    int64_t t = absolute_ns(r->current, ev->timestamp);
    if (t > r->process_end_ns)
      r->process_end_ns = t;
    return false;
  }
  default: return false; /* unknown types: nothing to write */
  }
  if (type != MT_TRACER_REC_THREAD_START && type != MT_TRACER_REC_THREAD_EXIT)
    r->stats.records++;
  if (words < fixed)
    return false; /* malformed: not ours to crash on */
  e->type = type;
  e->kind = 0;
  e->addr = e->addr2 = e->size = 0;
  e->nsamples = 0;
  e->nframes = 0;
  e->frames = NULL;
  e->stack_hash = 0;
  e->stack_serial = 0;
  switch (type) {
  case MT_TRACER_REC_ALLOC:
    e->addr = p[0], e->size = p[1], e->nsamples = (int64_t)p[2], e->kind = (uint32_t)p[3];
    if (!e->addr)
      return false; /* malloc that failed: nothing happened */
    break;
  case MT_TRACER_REC_FREE:
    e->addr = p[0];
    if (!e->addr)
      return false; /* free(NULL) */
    break;
  case MT_TRACER_REC_REALLOC:
    e->addr = p[0], e->addr2 = p[1], e->size = p[2], e->nsamples = (int64_t)p[3];
    e->kind = (uint32_t)p[4];
    break;
  case MT_TRACER_REC_MAP: e->addr = p[0], e->size = p[1], e->kind = (uint32_t)p[3]; break;
  case MT_TRACER_REC_UNMAP: e->addr = p[0], e->size = p[1]; break;
  case MT_TRACER_REC_MODULE_UNLOAD: e->size = p[0]; break;
  case MT_TRACER_REC_THREAD_START:
    e->addr2 = p[0], e->addr = p[1], e->size = p[2] > p[1] ? p[2] - p[1] : 0;
    break;
  default: e->addr2 = p[0]; break; /* THREAD_EXIT */
  }
  if (type == MT_TRACER_REC_ALLOC || type == MT_TRACER_REC_REALLOC || type == MT_TRACER_REC_MAP) {
    size_t nframes = words - fixed;
    e->nframes = (uint32_t)(nframes > MT_TRACER_MAX_FRAMES ? MT_TRACER_MAX_FRAMES : nframes);
    e->frames = p + fixed;
  }
  if (e->nsamples < 0 || e->nsamples > (int64_t)1 << 56)
    e->nsamples = 1;
  attachment *a = r->current;
  e->time_ns = absolute_ns(a, ev->timestamp);
  e->order = r->arrival++;
  e->source = (uint64_t)a->index << 48 | (uint64_t)(ev->ring & 0xffffff) << 24 |
              (ev->generation & 0xffffff);
  return true;
}

/* The fields of the usual records, ALLOC and FREE, as decode() would set them in `b` (their
 * frames, stack and time are the caller's). 1: decoded; 0: nothing to write (free(NULL), a malloc
 * that failed); -1: another record, or a short one, which decode() must take. */
static inline __attribute__((always_inline)) int decode_usual(uint32_t type, const uint64_t *p,
                                                              size_t words, rec_event *b) {
  if (type == MT_TRACER_REC_FREE && words >= 1) {
    if (!p[0])
      return 0; /* free(NULL) */
    b->type = MT_TRACER_REC_FREE;
    b->kind = 0;
    b->addr = p[0];
    b->size = 0;
    b->nsamples = 0;
    b->nframes = 0;
    return 1;
  }
  if (type == MT_TRACER_REC_ALLOC && words >= 4) {
    if (!p[0])
      return 0; /* malloc that failed */
    int64_t nsamples = (int64_t)p[2];
    b->type = MT_TRACER_REC_ALLOC;
    b->kind = (uint32_t)p[3];
    b->addr = p[0];
    b->size = p[1];
    b->nsamples = nsamples < 0 || nsamples > (int64_t)1 << 56 ? 1 : nsamples;
    size_t nframes = words - 4;
    b->nframes = (uint32_t)(nframes > MT_TRACER_MAX_FRAMES ? MT_TRACER_MAX_FRAMES : nframes);
    return 1;
  }
  return -1;
}

/* The usual records, ALLOC and FREE, decoded as decode() would into `b`. 1: decoded; 0: nothing
 * to write (free(NULL), a malloc that failed); -1: decode() must take the record. */
static inline __attribute__((always_inline)) int decode_fast(mt_recorder *r, attachment *a,
                                                             uint64_t source, uint32_t type,
                                                             const uint64_t *p, size_t words,
                                                             uint64_t timestamp, rec_event *b) {
  int k = decode_usual(type, p, words, b);
  if (k < 0)
    return -1;
  r->stats.records++;
  if (!k)
    return 0;
  b->frames = b->nframes ? p + 4 : NULL;
  b->stack_hash = 0;
  b->stack_serial = 0;
  b->addr2 = 0;
  b->time_ns = absolute_ns(a, timestamp);
  b->order = r->arrival++;
  b->source = source;
  return 1;
}

/* The usual direct records, ALLOC and FREE of the only thread so far (the caller checked that
 * the record is that thread's and that records go direct), decoded as decode() would into the next
 * batch slot; false when decode() must take the record. */
static inline __attribute__((always_inline)) bool direct_fast(mt_recorder *r, attachment *a,
                                                              uint64_t source, uint32_t type,
                                                              const uint64_t *p, size_t words,
                                                              uint64_t timestamp) {
  rec_event *b = r->batch[r->batched];
  int k = decode_fast(r, a, source, type, p, words, timestamp, b);
  if (k <= 0)
    return k == 0;
  if (b->nframes)
    direct_stack(r, b);
  if (++r->batched == DIRECT_BATCH)
    direct_flush(r);
  return true;
}

/* The usual direct records at the start of a run (those direct_fast takes), up to `count`; returns
 * how many it consumed and moves *recp past them. What direct_fast does, with the recorder's
 * counters, the thread's current stack and the clock's constants in locals: stores into the
 * batch's events may alias the recorder and the attachment as far as the compiler knows, which
 * made it load and store them again for every record. */
static size_t direct_run(mt_recorder *r, attachment *a, uint64_t source, const uint64_t **recp,
                         const uint64_t *end, size_t count, uint32_t *seqp) {
  const uint64_t *rec = *recp;
  uint32_t seq = *seqp;
  uint64_t arrival = r->arrival, records = r->stats.records;
  size_t batched = r->batched, k = 0;
  const uint64_t *cur = r->direct_cur;
  uint32_t cur_n = r->direct_nframes;
  bool calibrated = a->calibrated;
  uint64_t ts0 = a->ts0, q = a->q, frac = a->frac;
  int64_t abs0 = a->abs0;
  for (; k < count && rec < end; k++) {
    /* mt_cursor_run_record's checks: the types taken here are opaque ones */
    uint64_t h = rec[0];
    uint32_t len = mt_ring_header_length(h), type = mt_ring_header_type(h);
    if (len < 2 || len > (size_t)(end - rec) || mt_ring_header_seq(h) != seq)
      break;
    const uint64_t *p = rec + 2;
    size_t words = len - 2;
    rec_event *b = r->batch[batched];
    int usual = decode_usual(type, p, words, b);
    if (usual < 0)
      break;
    records++;
    if (!usual) { /* free(NULL), a malloc that failed */
      rec += len;
      seq++;
      continue;
    }
    b->frames = NULL;
    b->stack_hash = 0;
    b->stack_serial = 0;
    uint32_t n = b->nframes;
    if (n) {
      const uint64_t *f = p + 4;
      if (n == cur_n && rec_same_frames(cur, f, n)) {
        b->frames = cur;
        b->stack_hash = r->direct_hash;
        b->stack_serial = r->direct_serial;
      } else {
        b->frames = f;
        direct_new_stack(r, b);
        cur = r->direct_cur;
        cur_n = r->direct_nframes;
      }
    }
    uint64_t t = rec[1];
    if (calibrated && t >= ts0) {
      b->time_ns = scaled_ns(abs0, t - ts0, q, frac);
    } else {
      b->time_ns = absolute_ns(a, t);
      calibrated = a->calibrated;
      ts0 = a->ts0, q = a->q, frac = a->frac, abs0 = a->abs0;
    }
    b->addr2 = 0;
    b->order = arrival++;
    b->source = source;
    rec += len;
    seq++;
    if (++batched == DIRECT_BATCH) {
      r->batched = batched;
      r->arrival = arrival;
      r->stats.records = records;
      direct_flush(r);
      batched = 0;
    }
  }
  r->arrival = arrival;
  r->stats.records = records;
  r->batched = batched;
  *recp = rec;
  *seqp = seq;
  return k;
}

/* The usual records at the start of a run while merging, queued straight into their source's
 * slots, up to `count`; returns how many it consumed and moves *recp past them. Taken only when
 * the previous push was this source's and left events queued (the source is in the merge's heap,
 * and a push at its tail moves nothing there); what it does not take goes through decode_fast and
 * rec_merge_push. What rec_merge_push_quick does per record, with the source's fields, the
 * recorder's counters and the clock's constants in locals. */
static size_t merge_run(mt_recorder *r, attachment *a, uint64_t source, const uint64_t **recp,
                        const uint64_t *end, size_t count, uint32_t *seqp) {
  rec_merge *m = &r->merge;
  if (!m->last_index || m->pending || !a->calibrated)
    return 0;
  rec_source *s = &m->sources[m->last_index - 1];
  if (s->key != source || !s->queued)
    return 0;
  const uint64_t *rec = *recp;
  uint32_t seq = *seqp;
  uint64_t arrival = r->arrival, records = r->stats.records;
  uint64_t tail = s->tail, room = s->head + s->slot_mask + 1, mask = s->slot_mask;
  rec_slot *slots = s->slots;
  int64_t newest = s->newest_ns;
  const uint64_t *cur = s->last_nframes ? &s->frames[s->last_frames_at & s->frame_mask] : NULL;
  uint32_t cur_n = s->last_nframes, cur_hash = s->last_hash, cur_serial = s->last_serial;
  uint64_t cur_at = s->last_frames_at;
  uint64_t ts0 = a->ts0, q = a->q, frac = a->frac;
  int64_t abs0 = a->abs0;
  size_t k = 0, queued = 0;
  for (; k < count && rec < end && tail < room; k++) {
    uint64_t h = rec[0];
    uint32_t len = mt_ring_header_length(h), type = mt_ring_header_type(h);
    if (len < 2 || len > (size_t)(end - rec) || mt_ring_header_seq(h) != seq)
      break;
    uint64_t t = rec[1];
    if (t < ts0)
      break;
    const uint64_t *p = rec + 2;
    rec_event e; /* decode_usual's fields, kept in registers */
    int usual = decode_usual(type, p, len - 2, &e);
    if (usual < 0)
      break;
    if (usual) { /* not free(NULL) nor a malloc that failed */
      uint32_t n = e.nframes;
      if (n && (n != cur_n || !rec_same_frames(cur, p + 4, n))) {
        if (!rec_merge_new_stack(m, s, p + 4, n))
          break; /* out of memory: rec_merge_push says so */
        cur_at = s->last_frames_at;
        cur = &s->frames[cur_at & s->frame_mask];
        cur_n = n;
        cur_hash = s->last_hash;
        cur_serial = s->last_serial;
      }
      int64_t ns = scaled_ns(abs0, t - ts0, q, frac);
      /* Field by field, from locals: a compound literal was built on the stack and copied, and
       * the source's fields were loaded again after every store into a slot. */
      rec_slot *slot = &slots[tail++ & mask];
      slot->time_ns = ns;
      slot->order = arrival++;
      slot->addr = e.addr;
      slot->addr2 = 0;
      slot->size = e.size;
      slot->nsamples = e.nsamples;
      slot->frames_at = cur_at; /* read only when nframes > 0 */
      slot->kind = e.kind;
      slot->type = (uint16_t)e.type;
      slot->nframes = (uint16_t)n;
      slot->stack_hash = n ? cur_hash : 0;
      slot->stack_serial = n ? cur_serial : 0;
      if (ns > newest)
        newest = ns;
      queued++;
    }
    records++;
    rec += len;
    seq++;
  }
  s->tail = tail;
  s->newest_ns = newest;
  s->queued += queued;
  m->queued += queued;
  if (queued)
    s->seen_at_ns = r->poll_now_ns;
  r->arrival = arrival;
  r->stats.records = records;
  *recp = rec;
  *seqp = seq;
  return k;
}

static inline uint64_t source_key(const attachment *a, uint32_t ring, uint32_t generation) {
  return (uint64_t)a->index << 48 | (uint64_t)(ring & 0xffffff) << 24 | (generation & 0xffffff);
}

/* The ring layer's THREAD_EXIT: a thread released its ring (the last record of its generation),
 * or another thread recovered it from one that vanished. Its source leaves the merge once its
 * queue is empty, with its memory: a program whose threads come and go by the thousand would
 * otherwise leave a source and its frame buffer per thread it ever had. */
static int on_lifecycle(void *user, const mt_ring_event *ev) {
  mt_recorder *r = user;
  if (ev->id == MT_RING_LIFECYCLE_THREAD_EXIT && ev->words >= 1)
    rec_merge_retire(&r->merge, source_key(r->current, ev->ring, (uint32_t)ev->payload[0]));
  return MT_CURSOR_NEXT;
}

/* At a cursor poll's first record: records of more than one ring in this poll mean a second
 * thread wrote, and they are merged by stamp from the first of them on (a chunk of one ring, read
 * whole before the other's, can run past the other's records: a free taken as its own thread's
 * before the other thread's realloc of that block). */
static inline void poll_rings(mt_recorder *r) {
  if (__builtin_expect(r->poll_checked, 1))
    return;
  r->poll_checked = true;
  if (!r->merging && r->direct_ok && mt_cursor_rings_in_poll(r->current->cursor) > 1) {
    r->merging = true;
    direct_flush(r);
  }
}

/* Whether records of `source` go straight to direct_fast. */
static inline bool goes_direct(const mt_recorder *r, uint64_t source) {
  return !r->merging && r->direct_ok && r->direct_seen && source == r->direct_key;
}

/* Not merging yet: the first source seen is the one that may go direct; another means a second
 * thread, and every record is merged by stamp from now on. What the first thread wrote was
 * already written: a record of the new one stamped earlier is repaired by order.c like any
 * record read late. */
static void note_source(mt_recorder *r, uint64_t source) {
  if (!r->direct_seen) {
    r->direct_seen = true;
    r->direct_key = source;
  } else if (source != r->direct_key) {
    r->merging = true;
    direct_flush(r);
  }
}

/* Every record but the usual direct ones; out of line, so that those need no stack frame. */
__attribute__((noinline)) static int on_record_slow(mt_recorder *r, const mt_ring_event *ev) {
  if (!r->merging && r->direct_ok) {
    /* Decoded straight into the batch. */
    rec_event *b = r->batch[r->batched];
    if (!decode(r, ev, b))
      return MT_CURSOR_NEXT;
    if (b->source == r->direct_key || !r->direct_seen) {
      r->direct_seen = true;
      r->direct_key = b->source;
      if (b->nframes)
        direct_stack(r, b);
      if (++r->batched == DIRECT_BATCH)
        direct_flush(r);
      return MT_CURSOR_NEXT;
    }
    /* A second thread: from now on every record is merged by stamp. What the first thread
     * wrote was already written: a record of the new one stamped earlier is repaired by
     * order.c like any record read late. */
    r->merging = true;
    direct_flush(r);
    if (!rec_merge_push(&r->merge, b, r->poll_now_ns)) {
      r->decode_error = MT_E_NOMEM;
      return MT_CURSOR_STOP;
    }
    return MT_CURSOR_NEXT;
  }
  rec_event e;
  if (!decode(r, ev, &e))
    return MT_CURSOR_NEXT;
  if (!r->merging)
    note_source(r, e.source);
  if (!rec_merge_push(&r->merge, &e, r->poll_now_ns)) {
    r->decode_error = MT_E_NOMEM;
    return MT_CURSOR_STOP;
  }
  return MT_CURSOR_NEXT;
}

static int on_record(void *user, const mt_ring_event *ev) {
  mt_recorder *r = user;
  poll_rings(r);
  attachment *a = r->current;
  uint64_t source = source_key(a, ev->ring, ev->generation);
  if (goes_direct(r, source) &&
      direct_fast(r, a, source, ev->type, ev->payload, ev->words, ev->timestamp))
    return MT_CURSOR_NEXT;
  return on_record_slow(r, ev);
}

/* A run of one thread's records (ring/consumer.h): the source key and whether records go direct
 * found once, not per record; anything else goes through on_record_slow as an mt_ring_event. */
static size_t on_run(void *user, uint32_t ring, uint32_t generation, uint64_t first_seq,
                     const uint64_t *recs, size_t words, size_t limit, size_t *used) {
  mt_recorder *r = user;
  poll_rings(r);
  attachment *a = r->current;
  uint64_t source = source_key(a, ring, generation);
  bool direct = goes_direct(r, source);
  /* The first poll (or the finish): every record is queued in the merge, by the same paths as
   * when merging; the run's source noted once, as on_record_slow notes each record's. */
  if (!r->merging && !r->direct_ok)
    note_source(r, source);
  bool queued = !direct && (r->merging || !r->direct_ok);
  const uint64_t *rec = recs, *end = recs + words;
  uint32_t seq = (uint32_t)first_seq;
  size_t k = 0;
  for (; k < limit; k++) {
    if (direct) {
      k += direct_run(r, a, source, &rec, end, limit - k, &seq);
      if (k == limit)
        break;
    } else if (queued) {
      k += merge_run(r, a, source, &rec, end, limit - k, &seq);
      if (k == limit)
        break;
    }
    uint32_t len = mt_cursor_run_record(rec, (size_t)(end - rec), seq);
    if (!len)
      break;
    uint64_t h = rec[0];
    uint32_t type = mt_ring_header_type(h);
    if (queued) {
      /* Merging (a second thread has written), or the first poll: the usual records straight to
       * the merge. */
      rec_event e;
      int got = decode_fast(r, a, source, type, rec + 2, len - 2, rec[1], &e);
      if (got > 0 && !rec_merge_push_quick(&r->merge, &e, r->poll_now_ns) &&
          !rec_merge_push(&r->merge, &e, r->poll_now_ns)) {
        r->decode_error = MT_E_NOMEM;
        break;
      }
      if (got >= 0) {
        rec += len;
        seq++;
        continue;
      }
    }
    if (!direct || !direct_fast(r, a, source, type, rec + 2, len - 2, rec[1])) {
      mt_ring_event ev = {
          ring,   generation, type,    mt_ring_header_id(h),       first_seq + k,
          rec[1], rec + 2,    len - 2, (const uint8_t *)(rec + 2), ((size_t)len - 2) * 8};
      if (on_record_slow(r, &ev) != MT_CURSOR_NEXT)
        break;
      direct = goes_direct(r, source);
      queued = !direct && (r->merging || !r->direct_ok);
    }
    rec += len;
    seq++;
  }
  *used = (size_t)(rec - recs);
  return k;
}

static void on_registry(void *user, unsigned kind, uint64_t id, const void *bytes, size_t length) {
  mt_recorder *r = user;
  if (kind == MT_TRACER_REGISTRY_MODULE) {
    /* The ring file was created when the shim started in the process: a module file changed
     * since then is not the one the process loaded. */
    int64_t pid = r->have_process ? r->process.pid : r->stats.pid;
    if (rec_modules_add(&r->modules, id, bytes, length) != MT_OK)
      return;
    rec_module *m = rec_modules_by_serial(&r->modules, id);
    rec_symboliser_resolve_path(r->symboliser, m, pid);
    if (r->natt)
      rec_symboliser_watch_module(r->symboliser, m, pid, r->att[0].created_realtime_ns);
  } else if (kind == MT_TRACER_REGISTRY_PROCESS && length >= sizeof(mt_tracer_process) &&
             !r->writer_tried) {
    /* A forked child's ring starts with a copy of its parent's registry, so the parent's entry
     * comes first; the child's own (newer, and naming the ring file's pid) replaces it. */
    mt_tracer_process h;
    memcpy(&h, bytes, sizeof h);
    if (h.exe_length > length - sizeof h)
      return;
    if (r->have_process && r->process.pid == r->stats.pid && h.pid != r->stats.pid)
      return;
    free(r->process_exe);
    r->process_exe = strndup((const char *)bytes + sizeof h, h.exe_length);
    /* The command line after the path (NUL-separated arguments), if the shim wrote one. */
    const char *command = (const char *)bytes + sizeof h + h.exe_length;
    size_t command_length = length - sizeof h - h.exe_length;
    while (command_length > 0 && command[command_length - 1] == 0)
      command_length--;
    free(r->process_command);
    r->process_command = command_length ? malloc(command_length + 1) : NULL;
    if (r->process_command) { /* not strndup: the arguments are NUL-separated */
      for (size_t i = 0; i < command_length; i++)
        r->process_command[i] = command[i] ? command[i] : ' ';
      r->process_command[command_length] = 0;
    }
    r->process = h;
    r->have_process = true;
    rec_symboliser_set_process(r->symboliser, h.pid, r->opt.module_gone, r->opt.module_gone_user);
    r->order.main_tid = h.pid;
    if (!r->writer_tried) {
      r->order.rate = trace_rate(r);
      r->order.full = (h.flags & MT_TRACER_PROCESS_FULL) != 0;
    }
  }
}

/* --- the handle ---------------------------------------------------------------------------- */

static void symboliser_stalls(void *user);

int mt_recorder_create(mt_recorder **out, int fd, const mt_recorder_options *options,
                       mt_error *err) {
  *out = NULL;
  mt_recorder_options o = {0};
  if (options)
    o = *options;
  if (!o.version)
    o.version = 3;
  if (o.version != 2 && o.version != 3)
    return mt_fail(err, MT_E_INVALID, -1, "cannot write trace format version %d (only 2 or 3)",
                   o.version);
  if (o.compress_level &&
      (o.compress_level < ZSTD_minCLevel() || o.compress_level > ZSTD_maxCLevel()))
    return mt_fail(err, MT_E_INVALID, -1, "zstd level %d is outside %d..%d", o.compress_level,
                   ZSTD_minCLevel(), ZSTD_maxCLevel());
  if (o.time_resolution_us < 0 || o.time_resolution_us > 1000000)
    return mt_fail(err, MT_E_INVALID, -1, "time resolution %lld us is outside 1 us..1 s",
                   (long long)o.time_resolution_us);
  if (!o.time_resolution_us)
    o.time_resolution_us = 1;
  if (!o.flush_interval_ms)
    o.flush_interval_ms = 1000;
  if (o.merge_lag_ms <= 0)
    o.merge_lag_ms = 20;
  if (o.skew_tolerance_us <= 0)
    o.skew_tolerance_us = 1000;
  if (o.hold_bound_us <= 0)
    o.hold_bound_us = 1000000;
  mt_recorder *r = calloc(1, sizeof *r);
  if (!r)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  r->opt = o;
  r->fd = fd;
  r->out.fd = fd;
  r->out.identity = mt_file_identity_of(fd);
  r->out.memfd = r->out.wfd = -1;
  r->out.level = o.compress_level;
  r->exe = o.executable_name ? strdup(o.executable_name) : NULL;
  r->context = o.context ? strdup(o.context) : NULL;
  r->symboliser = rec_symboliser_new(o.no_symbols, o.debuginfod);
  if (r->symboliser)
    rec_symboliser_set_stall_hook(r->symboliser, symboliser_stalls, r);
  rec_debug_cache_use(o.debug_cache_dir);
  r->direct_frames = malloc(DIRECT_FRAMES * sizeof *r->direct_frames);
  bool batch_ok = true;
  for (size_t i = 0; i < DIRECT_BATCH; i++)
    batch_ok &= (r->batch[i] = rec_event_new(0)) != NULL;
  r->modules.by_serial.seed = r->sites.unknown_pcs.seed = r->sites.wrapper.seed =
      r->merge.by_key.seed = mt_hashmap_random_seed();
  if (!r->symboliser || !r->direct_frames || !batch_ok || (o.executable_name && !r->exe) ||
      (o.context && !r->context) ||
      !rec_order_init(&r->order, o.skew_tolerance_us * 1000, o.hold_bound_us * 1000)) {
    mt_recorder_destroy(r);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  r->sink = (rec_sink){.out = &r->out,
                       .modules = &r->modules,
                       .sites = &r->sites,
                       .symboliser = r->symboliser,
                       .stats = &r->stats,
                       .ensure_writer = ensure_writer,
                       .user = r};
  r->last_flush_ns = mono_ns();
  *out = r;
  return MT_OK;
}

int mt_recorder_attach(mt_recorder *r, const char *path, bool primary, mt_error *err) {
  if (r->finished)
    return mt_fail(err, MT_E_STATE, -1, "the recorder has finished");
  mt_cursor *c;
  int rc = mt_cursor_open_file(&c, path, err);
  if (rc)
    return rc;
  if (primary && (rc = mt_cursor_register_primary(c, err))) {
    mt_cursor_close(c);
    return rc;
  }
  return rec_recorder_attach_cursor(r, c, err);
}

/* The symboliser is about to read files: a tick stored at this poll's start would go stale while
 * the program runs on, so it is withdrawn until the caller offers it again. */
static void symboliser_stalls(void *user) {
  mt_recorder_set_clock_tick(user, false);
}

void mt_recorder_set_clock_tick(mt_recorder *r, bool on) {
  if (r->clock_tick == on)
    return;
  r->clock_tick = on;
  for (size_t i = 0; i < r->natt; i++)
    mt_cursor_set_clock_tick(r->att[i].cursor, on); /* MT_E_STATE for a file read as a secondary */
}

int rec_recorder_attach_cursor(mt_recorder *r, mt_cursor *c, mt_error *err) {
  if (r->finished || !MT_GROW(r->att, r->att_cap, r->natt + 1)) {
    mt_cursor_close(c);
    return r->finished ? mt_fail(err, MT_E_STATE, -1, "the recorder has finished")
                       : mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  attachment *a = &r->att[r->natt];
  *a = (attachment){.cursor = c,
                    .index = (uint32_t)r->natt,
                    .created_ns = info.created_ns,
                    .created_realtime_ns = info.created_realtime_ns,
                    .realtime = info.clock == MT_RING_CLOCK_REALTIME};
  a->to_absolute = a->realtime ? 0 : sub_ns(info.created_realtime_ns, info.created_ns);
  a->tsc = info.clock == MT_RING_CLOCK_TSC;
  /* Other clocks tick in nanoseconds, whatever a damaged header's rate says (as the cursor reads
   * them); a TSC file's rate is never 0 (the cursor refuses such a header). */
  a->q = 1;
  a->frac = 0;
  if (a->tsc && info.clock_hz) {
    a->q = 1000000000u / info.clock_hz;
    a->frac =
        (uint64_t)((((unsigned __int128)(1000000000u % info.clock_hz)) << 64) / info.clock_hz);
  }
  if (!r->natt)
    r->stats.pid = info.pid;
  r->natt++;
  if (r->clock_tick)
    mt_cursor_set_clock_tick(c, true);
  mt_cursor_callbacks cb = {0};
  cb.opaque = on_record;
  cb.lifecycle = on_lifecycle;
  cb.registry = on_registry;
  mt_cursor_set_callbacks(c, &cb, r);
  mt_cursor_set_run_callback(c, on_run);
  mt_cursor_set_time_order(c, true);
  return MT_OK;
}

static void drain_merge(mt_recorder *r, int64_t frontier_ns, bool all) {
  if (r->batched)
    direct_flush(r);
  /* Past MERGE_MAX_QUEUED events the oldest go out whatever the frontier: memory stays bounded
   * and order.c repairs whatever arrives older. In batches, processed as direct records are
   * (their addresses prefetched, no call per event). */
  int64_t limit = all ? INT64_MAX : frontier_ns;
  while ((r->batched =
              rec_merge_pop_many(&r->merge, limit, MERGE_MAX_QUEUED, r->batch, DIRECT_BATCH)) > 0)
    direct_flush(r);
  rec_order_expire(&r->order, &r->sink, frontier_ns, all);
}

/* Between two cursor calls of a poll (one attachment: another's rings are unread yet), what is
 * older than both bounds can be written: the newest record read from each ring read in this poll
 * (the frontier's low-water mark) and the oldest record still unread in any ring. The merge's lag
 * is not waited for: a thread idle in this poll has nothing in its ring older than the
 * frontier's low-water mark but a record stamped and not yet published, which order.c repairs. */
static void drain_within_poll(mt_recorder *r, attachment *a) {
  uint64_t stamp;
  if (a->tsc && !a->calibrated)
    return; /* a stamp only peeked at must not become the calibration's first */
  int64_t frontier = rec_merge_low_water(&r->merge, r->poll_now_ns, INT64_MAX);
  if (mt_cursor_oldest_unread(a->cursor, &stamp)) {
    int64_t unread = absolute_ns(a, stamp);
    if (unread < frontier)
      frontier = unread;
  }
  drain_merge(r, frontier, false);
}

/* Reads every attachment until nothing is left (or the per-call cap). *caught_up: every ring was
 * read to where it stood, so that nothing published before this call is still unread. */
static int read_rings(mt_recorder *r, bool *progress, bool *caught_up, bool to_end, mt_error *err) {
  int status = MT_OK;
  if (caught_up)
    *caught_up = true;
  for (size_t i = 0; i < r->natt; i++) {
    r->current = &r->att[i];
    size_t total = 0, got;
    do {
      mt_error e = {0};
      r->poll_checked = false;
      int rc = mt_cursor_poll(r->att[i].cursor, POLL_BATCH, &got, &e);
      if (rc) {
        if (!status && err)
          *err = e;
        if (!status)
          status = rc;
        if (rc != MT_E_MALFORMED)
          break;
      }
      if (r->decode_error) {
        int code = r->decode_error;
        r->decode_error = 0;
        return mt_fail(err, code, -1, "out of memory while reading the rings");
      }
      total += got;
      if (r->natt == 1 && r->merge.queued >= MERGE_DRAIN_QUEUED)
        drain_within_poll(r, &r->att[i]);
    } while (got && (to_end || total < POLL_MAX_PER_CALL));
    if (got && caught_up)
      *caught_up = false;
    if (total && progress)
      *progress = true;
  }
  r->current = NULL;
  direct_flush(r);
  return status;
}

int mt_recorder_poll(mt_recorder *r, bool *progress, mt_error *err) {
  if (progress)
    *progress = false;
  if (r->finished)
    return mt_fail(err, MT_E_STATE, -1, "the recorder has finished");
  int64_t now = r->poll_now_ns = mono_ns();
  bool caught_up;
  /* Direct processing from the second poll on: the first reads the backlog of every ring in
   * turn (a file read after the fact, a program that ran before we attached), so that a thread
   * whose records wait in another ring is seen, and merged, before one thread's records are
   * taken ahead of the others'. */
  r->direct_ok = r->polls && !r->merging;
  r->polls++;
  if (r->direct_ok && r->merge.queued) {
    /* Queued while behind: one thread's records only, so their order is the queue's. */
    rec_event e = {0};
    while (rec_merge_pop(&r->merge, &e))
      rec_order_process(&r->order, &r->sink, &e);
  }
  int rc = read_rings(r, progress, &caught_up, false, err);
  r->direct_ok = false; /* finish reads through the merge */
  if (rc == MT_E_NOMEM)
    return rc;
  /* The trace's header waits for this process's own entry: a forked child's ring starts with a
   * copy of its parent's, and a header written from it would name the parent's pid. */
  if (r->have_process && r->process.pid == r->stats.pid && !r->writer_tried)
    ensure_writer(r);
  if (caught_up)
    r->order.epoch++;
  if (r->natt) {
    const attachment *a = &r->att[0];
    int64_t abs_now =
        a->realtime ? real_ns() : add_ns(a->created_realtime_ns, sub_ns(now, a->created_ns));
    int64_t frontier = sub_ns(abs_now, (int64_t)((uint64_t)r->opt.merge_lag_ms * 1000000u));
    /* Behind on some ring (the poll hit its cap): what is still unread in a ring read in this
     * poll is stamped at or after the newest record read from it, so those threads bound the
     * frontier, however far behind one is (a busy thread's ring covers less time per record read).
     * Threads idle in this poll do not (an idle thread would stall the trace): their late records,
     * if any, are repaired by order.c. */
    if (!caught_up) {
      int64_t low = rec_merge_low_water(&r->merge, now, INT64_MAX);
      if (low < frontier)
        frontier = low;
      /* Nor past a record some ring still holds unread: one not read at all in this poll (its
       * next record was never the oldest before the cap) is in no low-water mark. */
      for (size_t i = 0; i < r->natt; i++) {
        attachment *b = &r->att[i];
        uint64_t stamp;
        if ((!b->tsc || b->calibrated) && mt_cursor_oldest_unread(b->cursor, &stamp)) {
          int64_t unread = absolute_ns(b, stamp);
          if (unread < frontier)
            frontier = unread;
        }
      }
    }
    drain_merge(r, frontier, false);
  }
  /* A flush writes a packet even when empty: only when events were written since the last. */
  uint64_t written = r->stats.allocations + r->stats.frees;
  if (r->opt.flush_interval_ms > 0 &&
      now - r->last_flush_ns >= r->opt.flush_interval_ms * 1000000 && written != r->flushed_at) {
    r->last_flush_ns = now;
    r->flushed_at = written;
    rec_output_flush(&r->out);
  } else {
    rec_output_pump(&r->out, false, false);
  }
  return rc;
}

bool mt_recorder_done(const mt_recorder *r) {
  for (size_t i = 0; i < r->natt; i++) {
    mt_ring_file_info info;
    mt_cursor_info(r->att[i].cursor, &info);
    if (!info.stopped || !mt_cursor_drained(r->att[i].cursor))
      return false;
  }
  return true;
}

/* Ring claims that failed in the attached files: for want of disk space, for want of a ring, for
 * want of a ring after some were given back under a lowered address-space limit. */
static void failed_claims(const mt_recorder *r, uint64_t *space, uint64_t *full, uint64_t *limit) {
  *space = *full = *limit = 0;
  for (size_t i = 0; i < r->natt; i++) {
    mt_ring_file_info info;
    mt_cursor_info(r->att[i].cursor, &info);
    *space += info.claims_failed_space;
    *full += info.claims_failed_full;
    *limit += info.claims_failed_limit;
  }
}

static bool tracer_stopped(const mt_recorder *r) {
  bool stopped = false;
  for (size_t i = 0; i < r->natt; i++) {
    mt_ring_file_info info;
    mt_cursor_info(r->att[i].cursor, &info);
    stopped |= info.degraded;
  }
  return stopped;
}

static uint64_t lost_now(const mt_recorder *r) {
  uint64_t lost = r->order.lost_nomem;
  for (size_t i = 0; i < r->natt; i++) {
    mt_ring_file_info info;
    mt_cursor_info(r->att[i].cursor, &info);
    lost += mt_cursor_lost_records(r->att[i].cursor) + info.records_nested + info.records_no_ring;
  }
  return lost;
}

/* Makes the trace last until `end_ns` (absolute), its time rounded down as events' are; an end
 * before the last event written changes nothing. */
static void extend_to(mt_recorder *r, int64_t end_ns) {
  if (!r->out.writer || r->out.failed)
    return;
  int64_t us = end_ns / 1000;
  if (us <= r->sink.start_us)
    return;
  if (r->sink.resolution_us > 1)
    us -= (us - r->sink.start_us) % r->sink.resolution_us;
  mt_error err;
  if (mt_writer_extend(r->out.writer, us, &err))
    rec_output_fail(&r->out, &err);
}

void mt_recorder_set_end(mt_recorder *r, int64_t realtime_ns) {
  r->end_ns = realtime_ns > 0 ? realtime_ns : 0;
}

int mt_recorder_finish(mt_recorder *r, mt_error *err) {
  if (r->finished)
    return mt_fail(err, MT_E_STATE, -1, "the recorder has finished");
  mt_error read_err = {0};
  int64_t finish_ns = real_ns(); /* before the reading and symbolising left */
  /* Read everything left, then write it in order: the producers are done or stopped, so what
   * is queued is bounded by what the rings held. */
  r->poll_now_ns = mono_ns();
  int rc = read_rings(r, NULL, NULL, true, &read_err);
  drain_merge(r, INT64_MAX, true);
  ensure_writer(r);
  rec_order_end_threads(&r->order, &r->sink);
  /* The process said when it ended; else it had ended by when the caller saw it gone. Neither
   * is believed past now (a damaged ring's stamp). */
  int64_t end = r->process_end_ns ? r->process_end_ns : r->end_ns;
  if (end)
    extend_to(r, end < finish_ns ? end : finish_ns);
  rec_output_close(&r->out);
  r->finished = true;
  r->lost_final = lost_now(r);
  r->tracer_stopped_final = tracer_stopped(r);
  failed_claims(r, &r->claims_failed_space_final, &r->claims_failed_full_final,
                &r->claims_failed_limit_final);
  if (r->out.failed) {
    if (err)
      *err = r->out.error;
    return r->out.error.code ? r->out.error.code : MT_E_IO;
  }
  if (rc && err)
    *err = read_err;
  return rc;
}

void mt_recorder_stats_get(const mt_recorder *r, mt_recorder_stats *out) {
  *out = r->stats;
  out->lost_records = r->finished ? r->lost_final : lost_now(r);
  if (r->finished) {
    out->claims_failed_space = r->claims_failed_space_final;
    out->claims_failed_full = r->claims_failed_full_final;
    out->claims_failed_limit = r->claims_failed_limit_final;
  } else {
    failed_claims(r, &out->claims_failed_space, &out->claims_failed_full,
                  &out->claims_failed_limit);
  }
  out->allocated_bytes = (double)out->samples * 8.0 / (r->order.rate > 0 ? r->order.rate : 1.0);
  out->bytes = r->out.bytes;
  if (!r->finished && !r->opt.compress && r->out.writer && r->out.start_offset >= 0) {
    off_t end = lseek(r->fd, 0, SEEK_CUR);
    if (end >= 0)
      out->bytes = (uint64_t)(end - r->out.start_offset);
  }
  out->tracer_stopped = r->finished ? r->tracer_stopped_final : tracer_stopped(r);
  out->failed = r->out.failed;
  out->error = r->out.error;
  out->forks = r->natt ? mt_cursor_forks(r->att[0].cursor) : 0;
}

const char *mt_recorder_executable(const mt_recorder *r) {
  return r->have_process ? r->process_exe : NULL;
}

uint64_t mt_recorder_image(const mt_recorder *r) {
  return r->have_process ? r->process.image : 0;
}

uint32_t mt_recorder_signals_handled(const mt_recorder *r, int sig) {
  return r->natt ? mt_cursor_signals_handled(r->att[0].cursor, sig) : 0;
}

void mt_recorder_destroy(mt_recorder *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->natt; i++)
    mt_cursor_close(r->att[i].cursor);
  free(r->att);
  rec_merge_free(&r->merge);
  rec_order_free(&r->order);
  rec_sites_free(&r->sites);
  rec_modules_free(&r->modules);
  rec_symboliser_free(r->symboliser);
  if (!r->finished)
    rec_output_discard(&r->out);
  free(r->exe);
  free(r->context);
  free(r->process_exe);
  free(r->process_command);
  free(r->direct_frames);
  for (size_t i = 0; i < DIRECT_BATCH; i++)
    free(r->batch[i]);
  free(r);
}
