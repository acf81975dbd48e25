/* The reader's backtrace decoding (FORMAT.md §2.7 reader algorithm): an allocation's codewords,
 * spliced after the common prefix with the domain's previous backtrace, into the flat array of
 * codes, or, for a reader that hands out runs only, into runs of equal codes, so that direct
 * recursion (a bucket predicting itself) costs one run rather than one frame per level and an
 * event costs what its encoding costs, not its depth. Also the conversions between the two forms
 * that switching modes and restoring a state need. */
#include <stdlib.h>

#include "common/error.h"
#include "format/backtrace_codec.h"
#include "format/buf.h"
#include "format/reader_internal.h"
#include "memtap/format.h"

/* Room one codeword needs: the frames (or runs) it yields, and the flat fill's slack. */
#define CODEWORD_ROOM (CODEWORD_FRAMES + FILL_SLACK)

/* Up to this many codewords, room for all of them is made at once (32 codewords: 8 Ki runs or
 * frames, 128 KiB of runs), so that the loop checks nothing per codeword. 16 left one allocation in
 * nine of a replayed ocamlopt_v3 (17 to 32 codewords when its stack changes much) to the checked
 * path, at ~1 950 instructions each: 28% of the reading. */
#define ROOMY_CODEWORDS 32

/* A run array keeps a sentinel run before its first element, with a code no backtrace holds
 * (63-bit codes never reach INT64_MIN), start 0 and count 0, so that appending compares with the
 * previous run without checking that there is one, and the walk back to a prefix stops there. */
static bool grow_runs(mt_backtrace_run **runs, size_t *cap, size_t need) {
  if (need <= *cap)
    return true;
  size_t n = *cap ? *cap : 256;
  while (n < need)
    n *= 2;
  mt_backtrace_run *grown = realloc(*runs ? *runs - 1 : NULL, (n + 1) * sizeof *grown);
  if (!grown)
    return false;
  grown[0] = (mt_backtrace_run){.code = INT64_MIN};
  *runs = grown + 1;
  *cap = n;
  return true;
}

void mt_reader_free_runs(mt_backtrace_run *runs) {
  free(runs ? runs - 1 : NULL);
}

static bool grow_frames(int64_t **frames, size_t *cap, size_t need) {
  if (need <= *cap)
    return true;
  size_t n = *cap ? *cap : 1024;
  while (n < need)
    n *= 2;
  int64_t *grown = realloc(*frames, n * sizeof *grown);
  if (!grown)
    return false;
  *frames = grown;
  *cap = n;
  return true;
}

/* out[0 .. count) = code, eight stores per step: it may store up to 7 frames past `count`, which
 * FILL_SLACK leaves room for. */
static inline void fill_frames(int64_t *out, int64_t code, size_t count) {
  for (size_t j = 0; j < count; j += 8) {
    out[j] = code, out[j + 1] = code, out[j + 2] = code, out[j + 3] = code;
    out[j + 4] = code, out[j + 5] = code, out[j + 6] = code, out[j + 7] = code;
  }
}

/* Where decoded frames go: `count` times `code` after the *n frames so far, as frames[*n ..] when
 * `flat`, else appended to the runs[0 .. *m), merged with the last one when it has that code. */
static inline __attribute__((always_inline)) void emit(bool flat, mt_backtrace_run *runs,
                                                       int64_t *frames, size_t *m, size_t *n,
                                                       int64_t code, uint32_t count) {
  if (flat) {
    if (count == 1)
      frames[*n] = code;
    else
      fill_frames(frames + *n, code, count);
  } else if ((runs + *m)[-1].code == code) {
    (runs + *m)[-1].count += count;
  } else {
    runs[*m] = (mt_backtrace_run){.code = code, .start = (uint32_t)*n, .count = count};
    ++*m;
  }
  *n += count;
}

static int ends_inside(mt_reader *r, const uint8_t *at) {
  r->content.p = at;
  return mt_reader_malformed(r, mt_rbuf_offset(&r->content),
                             "allocation ends inside its backtrace");
}

static int too_long(mt_reader *r, const uint8_t *at) {
  r->content.p = at;
  return mt_reader_malformed(r, mt_rbuf_offset(&r->content), "backtrace longer than %u frames",
                             MAX_BACKTRACE_FRAMES);
}

/* For a reader that checks codes (mt_reader_set_check_codes): whether `code`, frame `frame` of
 * the allocation at `event_offset` (stored by a cache miss, or 0 from a bucket none filled), was
 * described; if not, the reader fails. Out of line: misses are the codewords that cost most. */
static __attribute__((noinline)) bool code_described(mt_reader *r, int64_t event_offset,
                                                     int64_t code, size_t frame) {
  const mt_location *entries;
  size_t count;
  if (mt_location_table_lookup(r->locations, code, &entries, &count))
    return true;
  mt_reader_malformed(r, event_offset,
                      "invalid location code 0x%llx (frame %zu of the allocation's backtrace was "
                      "never described)",
                      (unsigned long long)code, frame);
  return false;
}

/* The first of frames[from, to) (flat) or of the runs [from, to) holding code 0, as a frame index;
 * SIZE_MAX when none does. */
static size_t first_zero(bool flat, const int64_t *frames, const mt_backtrace_run *runs,
                         size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    if (flat ? frames[i] == 0 : runs[i].code == 0)
      return flat ? i : runs[i].start;
  return SIZE_MAX;
}

/* For a reader that checks codes, after decoding into frames[from, to) or runs[from, to): fails
 * if one holds code 0 while the trace has not described it. */
static int check_zero(mt_reader *r, const mt_event *ev, bool flat, const int64_t *frames,
                      const mt_backtrace_run *runs, size_t from, size_t to) {
  size_t frame = first_zero(flat, frames, runs, from, to);
  if (frame == SIZE_MAX || code_described(r, ev->offset, 0, frame))
    return MT_OK;
  return r->failed;
}

/* An output buffer: flat frames or runs, with its capacity; `*used` frames or runs hold already. */
typedef struct sink {
  mt_backtrace_run **runs;
  int64_t **frames;
  size_t *cap;
} sink;

static bool grow_sink(const sink *s, bool flat, size_t need) {
  return flat ? grow_frames(s->frames, s->cap, need) : grow_runs(s->runs, s->cap, need);
}

/* Decodes `count` codewords (FORMAT.md §2.7 reader algorithm) after the *n frames (and *m runs)
 * in `s`. `checked`: whether to check room and input per codeword. Callers pass constants for
 * `flat` and `checked`, so that each use compiles to its own loop. */
static inline __attribute__((always_inline)) int codewords(mt_reader *r, const mt_event *ev,
                                                           const sink *s, size_t *pm, size_t *pn,
                                                           unsigned count, bool flat,
                                                           bool checked) {
  mt_backtrace_decoder *c = r->domain->cache;
  const uint8_t *p = r->content.p, *end = r->content.end;
  size_t m = *pm, n = *pn;
  mt_backtrace_run *runs = flat ? NULL : *s->runs;
  int64_t *frames = flat ? *s->frames : NULL;
  unsigned pred = 0;
  for (unsigned i = 0; i < count; i++) {
    if (checked) {
      size_t used = flat ? n : m;
      if (*s->cap - used < CODEWORD_ROOM) {
        if (!grow_sink(s, flat, used + CODEWORD_ROOM)) {
          if (n + CODEWORD_FRAMES > MAX_BACKTRACE_FRAMES)
            return too_long(r, p);
          r->content.p = p;
          return mt_reader_out_of_memory(r, mt_rbuf_offset(&r->content), "a backtrace");
        }
        runs = flat ? NULL : *s->runs;
        frames = flat ? *s->frames : NULL;
      }
      if (n + CODEWORD_FRAMES > MAX_BACKTRACE_FRAMES)
        return too_long(r, p);
      if (end - p < 2)
        return ends_inside(r, p);
    }
    unsigned word = mt_load_u16(p), bucket = word >> 2;
    c->next[pred] = (uint16_t)bucket;
    switch (word & 3) {
    case 0:
      p += 2;
      emit(flat, runs, frames, &m, &n, c->loc[bucket], 1);
      pred = bucket;
      break;
    case 1:
      p += 2;
      emit(flat, runs, frames, &m, &n, c->loc[bucket], 1);
      pred = c->next[bucket];
      emit(flat, runs, frames, &m, &n, c->loc[pred], 1);
      break;
    case 2: {
      if (checked && end - p < 3)
        return ends_inside(r, p);
      unsigned predictions = p[2];
      p += 3;
      emit(flat, runs, frames, &m, &n, c->loc[bucket], 1);
      pred = bucket;
      for (unsigned k = 0; k < predictions; k++) {
        unsigned following = c->next[pred];
        if (following == pred) {
          /* A bucket that predicts itself is direct recursion (f -> f -> f): the rest of the run
           * repeats one code. */
          emit(flat, runs, frames, &m, &n, c->loc[pred], predictions - k);
          break;
        }
        pred = following;
        emit(flat, runs, frames, &m, &n, c->loc[pred], 1);
      }
      break;
    }
    default:
      if (checked && end - p < 10)
        return ends_inside(r, p);
      c->loc[bucket] = mt_code63(mt_load_u64(p + 2));
      if (__builtin_expect(r->check_codes, 0) && !code_described(r, ev->offset, c->loc[bucket], n))
        return r->failed;
      p += 10;
      emit(flat, runs, frames, &m, &n, c->loc[bucket], 1);
      pred = bucket;
      break;
    }
  }
  r->content.p = p;
  *pm = m;
  *pn = n;
  return MT_OK;
}

/* The codewords into `s`, without checks per codeword when the packet holds their largest
 * possible size and room is made for what they may yield. */
static inline __attribute__((always_inline)) int decode(mt_reader *r, const mt_event *ev,
                                                        const sink *s, size_t *m, size_t *n,
                                                        unsigned count, bool flat) {
  /* Bounds for any count up to ROOMY_CODEWORDS, constants all: codewords are at most 10 bytes. */
  size_t used = flat ? *n : *m, room = ROOMY_CODEWORDS * CODEWORD_FRAMES + FILL_SLACK;
  if (count <= ROOMY_CODEWORDS && r->content.end - r->content.p >= ROOMY_CODEWORDS * 10 &&
      *n <= MAX_BACKTRACE_FRAMES - ROOMY_CODEWORDS * CODEWORD_FRAMES &&
      (*s->cap - used >= room || grow_sink(s, flat, used + room)))
    return codewords(r, ev, s, m, n, count, flat, false);
  return codewords(r, ev, s, m, n, count, flat, true);
}

/* The previous backtrace was cut shorter than `prefix` (FORMAT.md §2.7 step 3): only the cache
 * side effects happen (the codewords go to scratch runs), and the event shows the previous
 * backtrace again. */
static __attribute__((noinline)) int decode_after_cut(mt_reader *r, mt_event *ev, unsigned count) {
  domain_state *d = r->domain;
  size_t m = 0, n = 0;
  sink s = {.runs = &d->scratch, .cap = &d->scratch_cap};
  if (!grow_runs(&d->scratch, &d->scratch_cap, 1))
    return mt_reader_out_of_memory(r, ev->offset, "a backtrace");
  int rc = decode(r, ev, &s, &m, &n, count, false);
  if (rc)
    return rc;
  bool runs_only = r->options.runs_only;
  ev->backtrace = runs_only ? NULL : d->backtrace;
  ev->backtrace_length = d->depth;
  ev->backtrace_runs = runs_only ? d->runs : NULL;
  ev->backtrace_run_count = ev->common_runs = runs_only ? d->nruns : 0;
  return MT_OK;
}

static __attribute__((noinline)) int first_backtrace(mt_reader *r, mt_event *ev) {
  domain_state *d = r->domain;
  if (!d->cache && !(d->cache = calloc(1, sizeof *d->cache)))
    return mt_reader_out_of_memory(r, ev->offset, "a backtrace cache");
  if (!d->runs && !grow_runs(&d->runs, &d->runs_cap, 1))
    return mt_reader_out_of_memory(r, ev->offset, "a backtrace");
  return MT_OK;
}

/* The flat form: frames written from `prefix` on. */
static int decode_flat(mt_reader *r, mt_event *ev, size_t prefix, unsigned count) {
  domain_state *d = r->domain;
  size_t m = 0, n = prefix;
  sink s = {.frames = &d->backtrace, .cap = &d->backtrace_cap};
  int rc = decode(r, ev, &s, &m, &n, count, true);
  if (!rc && r->check_codes)
    rc = check_zero(r, ev, true, d->backtrace, NULL, prefix, n);
  if (rc)
    return rc;
  d->depth = n;
  ev->backtrace = d->backtrace;
  ev->backtrace_length = n;
  ev->backtrace_runs = NULL;
  ev->backtrace_run_count = ev->common_runs = 0;
  return MT_OK;
}

/* Room for the runs any ROOMY_CODEWORDS codewords yield. */
#define RUNS_ROOM (ROOMY_CODEWORDS * CODEWORD_FRAMES)

/* Sets d->runs_fast_limit from the reader's mode and the domain's decoder and runs. */
static void update_fast_limit(const mt_reader *r, domain_state *d) {
  d->runs_fast_limit = r->options.runs_only && d->cache && d->runs && d->runs_cap >= RUNS_ROOM
                           ? d->runs_cap - RUNS_ROOM + 1
                           : 0;
}

/* The domain's backtrace is now its first `m` runs, `n` frames, of which the first `common` runs
 * are the previous backtrace's: kept, and handed out in `ev` as runs. */
static inline void hand_out_runs(domain_state *d, mt_event *ev, size_t m, size_t n, size_t common) {
  d->nruns = m;
  d->depth = n;
  ev->backtrace = NULL;
  ev->backtrace_length = n;
  ev->backtrace_runs = d->runs;
  ev->backtrace_run_count = m;
  ev->common_runs = common;
}

static int decode_any(mt_reader *r, mt_event *ev, int64_t prefix, unsigned count);

/* Every case: the first backtrace, a cut previous one, the flat form, many codewords, the end of
 * the packet near, room to make (the usual case of a runs reader is mt_reader_next_alloc's). */
int mt_reader_decode_backtrace(mt_reader *r, mt_event *ev, int64_t prefix, unsigned count) {
  int rc = decode_any(r, ev, prefix, count);
  if (rc == MT_OK)
    update_fast_limit(r, r->domain);
  return rc;
}

static int decode_any(mt_reader *r, mt_event *ev, int64_t prefix, unsigned count) {
  domain_state *d = r->domain;
  int rc;
  if (__builtin_expect(!d->cache || !d->runs, 0) && (rc = first_backtrace(r, ev)))
    return rc;
  if (__builtin_expect((uint64_t)prefix > d->depth, 0))
    return decode_after_cut(r, ev, count);
  if (!r->options.runs_only)
    return decode_flat(r, ev, (size_t)prefix, count);
  /* Keep the runs of the first `prefix` frames, the last one possibly shortened. Dropping a run
   * costs once per run ever appended, so this is linear in the runs decoded, not in the depth. */
  size_t n = (size_t)prefix, m = d->nruns;
  mt_backtrace_run *runs = d->runs;
  if (n == 0)
    m = 0;
  else
    while ((runs + m)[-1].start >= n) /* the sentinel's start, 0, stops it */
      m--;
  size_t kept = m, common = m;
  uint32_t kept_count = (runs + m)[-1].count; /* the sentinel's when none is kept */
  if (m > 0 && (size_t)(runs + m)[-1].start + kept_count > n) {
    kept_count = (runs + m)[-1].count = (uint32_t)(n - (runs + m)[-1].start);
    common = m - 1;
  }
  sink s = {.runs = &d->runs, .cap = &d->runs_cap};
  if ((rc = decode(r, ev, &s, &m, &n, count, false)))
    return rc;
  if (r->check_codes && (rc = check_zero(r, ev, false, NULL, d->runs, kept, m)))
    return rc;
  if ((d->runs + kept)[-1].count != kept_count)
    common = kept - 1; /* the new frames went on in the last kept run */
  hand_out_runs(d, ev, m, n, common);
  return MT_OK;
}

/* mt_reader_decode_backtrace with mt_reader_next_alloc's return. */
static __attribute__((noinline)) int decode_other(mt_reader *r, mt_event *ev, int64_t prefix,
                                                  unsigned count, mt_error *err) {
  int rc = mt_reader_decode_backtrace(r, ev, prefix, count);
  if (rc < 0) {
    if (err)
      *err = r->failure;
    return rc;
  }
  return 1;
}

/* Appends `count` times `code` to the runs ending at *last (merged with it when it has that code,
 * *last_code), the backtrace being *n frames deep. (Storing start and count as one 8-byte word
 * saves an instruction per run but stalls every later 4-byte load of the count, such as merging
 * recursion into the run: store forwarding fails. demo_v3 went 0.105 -> 0.187 s.) */
static inline __attribute__((always_inline)) void
add_run(mt_backtrace_run **last, int64_t *last_code, uint32_t *n, int64_t code, uint32_t count) {
  if (code == *last_code) {
    (*last)->count += count;
  } else {
    mt_backtrace_run *run = ++*last;
    *run = (mt_backtrace_run){.code = code, .start = *n, .count = count};
    *last_code = code;
  }
  *n += count;
}

/* Below this many frames dropped, the last run kept is looked for forward (see kept_runs). */
#define FORWARD_DROP 32

/* The last run of the `nruns` runs of a `depth`-frame backtrace that starts before frame `prefix`
 * (1 <= prefix <= depth): the last one itself when no whole run is dropped (a third of
 * demo_v3's allocations, whose recursion runs are cut). Else the runs after it hold the depth -
 * prefix frames dropped, one at least each, so it is no further back than that many runs from the
 * end. When few frames are dropped it is looked for forward from there: steps for the dropped
 * frames that are not a run's first, none in a chain of distinct frames (one run each), where
 * walking back from the end took a step per frame. Else it is looked for backward from the end: a
 * step per run dropped, so once per run appended. runs[nruns] must be writable: it is made a
 * sentinel that stops the forward walk. */
static inline __attribute__((always_inline)) mt_backtrace_run *
kept_runs(mt_backtrace_run *runs, size_t nruns, size_t depth, size_t prefix) {
  mt_backtrace_run *last = runs + nruns - 1;
  if (last->start < prefix) /* only frames of the last run dropped, if any */
    return last;
  size_t drop = depth - prefix;
  if (drop < FORWARD_DROP && drop < nruns) {
    last = runs + (nruns - 1 - drop);
    runs[nruns].start = UINT32_MAX;
    while (last[1].start < prefix)
      last++;
  } else {
    do
      last--;
    while (last->start >= prefix);
  }
  return last;
}

/* The code in cache bucket `b`. `check` (a constant): a reader that checks codes notes in *zero a
 * 0, which comes from a bucket no miss has filled. */
static inline __attribute__((always_inline)) int64_t hit(const mt_backtrace_decoder *c, unsigned b,
                                                         bool check, bool *zero) {
  int64_t code = c->loc[b];
  if (check)
    *zero |= code == 0;
  return code;
}

/* Runs only, the usual case (mt_reader_next_alloc's conditions): the kept runs and the codewords'
 * without a check per codeword, the last run and its code in registers. `check` (a constant):
 * mt_reader_set_check_codes's checks, at each miss and on a 0 handed out. */
static inline __attribute__((always_inline)) int decode_runs(mt_reader *r, mt_event *ev,
                                                             mt_error *err, domain_state *d,
                                                             size_t prefix, unsigned count,
                                                             bool check) {
  mt_backtrace_decoder *c = d->cache;
  mt_backtrace_run *runs = d->runs;
  /* The runs of the first `prefix` frames, the last one possibly shortened. A sentinel (start 0,
   * count 0) stands before the first run. */
  mt_backtrace_run *last = prefix == 0 ? runs - 1 : kept_runs(runs, d->nruns, d->depth, prefix);
  size_t common = (size_t)(last + 1 - runs);
  uint32_t kept_count = last->count;
  if (last->start + kept_count > prefix) { /* never the sentinel's */
    kept_count = last->count = (uint32_t)(prefix - last->start);
    common--;
  }
  mt_backtrace_run *kept = last;
  int64_t last_code = last->code;
  uint32_t n = (uint32_t)prefix;
  const uint8_t *p = r->content.p;
  unsigned pred = 0;
  bool zero = false;
  for (; count > 0; count--) {
    unsigned word = mt_load_u16(p), bucket = word >> 2;
    c->next[pred] = (uint16_t)bucket;
    switch (word & 3) {
    case 0:
      p += 2;
      add_run(&last, &last_code, &n, hit(c, bucket, check, &zero), 1);
      pred = bucket;
      break;
    case 1:
      p += 2;
      add_run(&last, &last_code, &n, hit(c, bucket, check, &zero), 1);
      pred = c->next[bucket];
      add_run(&last, &last_code, &n, hit(c, pred, check, &zero), 1);
      break;
    case 2: {
      unsigned predictions = p[2];
      p += 3;
      pred = bucket;
      if (c->next[bucket] == bucket) {
        /* Direct recursion (a bucket predicting itself): the codeword is one run. */
        add_run(&last, &last_code, &n, hit(c, bucket, check, &zero), 1 + predictions);
        break;
      }
      add_run(&last, &last_code, &n, hit(c, bucket, check, &zero), 1);
      for (unsigned k = 0; k < predictions; k++) {
        unsigned following = c->next[pred];
        if (following == pred) {
          add_run(&last, &last_code, &n, hit(c, pred, check, &zero), predictions - k);
          break;
        }
        pred = following;
        add_run(&last, &last_code, &n, hit(c, pred, check, &zero), 1);
      }
      break;
    }
    default:
      c->loc[bucket] = mt_code63(mt_load_u64(p + 2));
      if (check && !code_described(r, ev->offset, c->loc[bucket], n))
        goto failed;
      p += 10;
      add_run(&last, &last_code, &n, hit(c, bucket, check, &zero), 1);
      pred = bucket;
      break;
    }
  }
  r->content.p = p;
  if (check && zero &&
      check_zero(r, ev, false, NULL, runs, (size_t)(kept + 1 - runs), (size_t)(last + 1 - runs)))
    goto failed;
  if (kept->count != kept_count)
    common = (size_t)(kept - runs); /* the new frames went on in the last kept run */
  hand_out_runs(d, ev, (size_t)(last + 1 - runs), n, common);
  return 1;
failed:
  if (err)
    *err = r->failure;
  return r->failed;
}

int mt_reader_next_alloc(mt_reader *r, mt_event *ev, mt_error *err, const uint8_t *p, unsigned code,
                         int64_t time) {
  int64_t prefix;
  unsigned count;
  const uint8_t *q = mt_alloc_header(p, code, ev, &prefix, &count);
  if (!q)
    return mt_reader_next_careful(r, ev, err);
  domain_state *d = r->domain;
  r->content.p = q;
  d->last_time = time;
  ev->time = time;
  ev->offset = r->content.origin + (p - r->content.base);
  ev->domain = r->header.domain;
  ev->obj_id = (int64_t)((uint64_t)r->header.alloc_id_begin + (uint64_t)r->allocs_in_packet++);
  /* The usual case, with bounds that hold for any count up to ROOMY_CODEWORDS (codewords are at
   * most 10 bytes): runs_fast_limit's, and a previous backtrace at least `prefix` deep. */
  if (__builtin_expect(d->nruns < d->runs_fast_limit && (uint64_t)prefix <= d->depth &&
                           count <= ROOMY_CODEWORDS && r->content.end - q >= ROOMY_CODEWORDS * 10 &&
                           d->depth <= MAX_BACKTRACE_FRAMES - ROOMY_CODEWORDS * CODEWORD_FRAMES,
                       1))
    return __builtin_expect(r->check_codes, 0)
               ? decode_runs(r, ev, err, d, (size_t)prefix, count, true)
               : decode_runs(r, ev, err, d, (size_t)prefix, count, false);
  return decode_other(r, ev, prefix, count, err);
}

bool mt_reader_flatten(domain_state *d) {
  if (!grow_frames(&d->backtrace, &d->backtrace_cap, d->depth + FILL_SLACK))
    return false;
  for (size_t i = 0; i < d->nruns; i++) {
    const mt_backtrace_run *run = &d->runs[i];
    if (run->start > d->depth || run->count > d->depth - run->start)
      return false; /* never with a reader that has not failed */
    fill_frames(d->backtrace + run->start, run->code, run->count);
  }
  return true;
}

bool mt_reader_runs_of_flat(domain_state *d) {
  size_t m = 0, n = 0;
  if (!grow_runs(&d->runs, &d->runs_cap, 1))
    return false;
  for (size_t i = 0; i < d->depth; i++) {
    if (!grow_runs(&d->runs, &d->runs_cap, m + 1))
      return false;
    emit(false, d->runs, NULL, &m, &n, d->backtrace[i], 1);
  }
  d->nruns = m;
  return true;
}

int mt_reader_set_runs_only(mt_reader *r, bool runs_only, mt_error *err) {
  /* A failed reader hands out no more events, and the backtrace it failed in may have left the
   * kept runs longer than the kept depth: nothing to convert, nothing to trust. */
  if (runs_only != r->options.runs_only && !r->failed)
    for (size_t i = 0; i < r->ndomains; i++)
      if (!(runs_only ? mt_reader_runs_of_flat(r->domains[i]) : mt_reader_flatten(r->domains[i])))
        return mt_fail(err, MT_E_NOMEM, -1, "out of memory for a backtrace");
  r->options.runs_only = runs_only;
  for (size_t i = 0; i < r->ndomains; i++)
    update_fast_limit(r, r->domains[i]);
  return MT_OK;
}

bool mt_reader_runs_only(const mt_reader *r) {
  return r->options.runs_only;
}

void mt_reader_set_check_codes(mt_reader *r, bool check) {
  r->check_codes = check;
}

bool mt_reader_check_codes(const mt_reader *r) {
  return r->check_codes;
}
