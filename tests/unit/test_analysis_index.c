/* The checkpoint index (analysis.h, options.index_path): a windowed analysis that resumes from a
 * checkpoint gives exactly what a pass from the trace's start gives — every amount of the summary,
 * every site's stats, the peak and the timeline — whichever pass built the index (a full one or a
 * window) and whatever --hide or folding it used; an index of another trace or a damaged one is
 * ignored, said so, and replaced. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bytes.h"
#include "memtap/analysis.h"
#include "testutil.h"
#include "tracegen.h"

#define EVENTS 200000
#define INTERVAL (64 << 10)

static uint64_t rng;
static uint64_t next_random(void) {
  rng = rng * 6364136223846793005u + 1442695040888963407u;
  return rng >> 17;
}

/* Three domains, recursive backtraces from a pool, objects living from a few events to forever,
 * and temporaries freed right after their domain's packet was cut by another domain's event (so
 * that checkpoints fall between an allocation and its free). */
static int64_t ran_on_us; /* make_trace: how long the trace lasts past its last event */

static uint8_t *make_trace(uint64_t seed, double rate, size_t *size) {
  rng = seed;
  int fd;
  mt_writer *w = tg_writer(3, rate, &fd);
  enum { POOL = 400, DEPTH = 60 };
  static uint64_t stacks[POOL][DEPTH];
  static size_t depths[POOL];
  for (int s = 0; s < POOL; s++) {
    depths[s] = 1 + next_random() % DEPTH;
    uint64_t recursive = 1 + next_random() % 50;
    for (size_t j = 0; j < depths[s]; j++) /* innermost first; a recursive run in the middle */
      stacks[s][j] = j > 3 && j < 20 ? recursive : 1 + (s * 7 + j * 13) % 900;
  }
  static int64_t live[EVENTS];
  static uint16_t live_domain[EVENTS];
  size_t nlive = 0;
  int64_t now = TG_START;
  int64_t pending = -1; /* the previous allocation, a temporary if freed now */
  uint16_t pending_domain = 0;
  for (int i = 0; i < EVENTS; i++) {
    now += (int64_t)(next_random() % 20);
    uint16_t domain = (uint16_t)(next_random() % 3);
    mt_error err;
    if (pending >= 0) {
      if (next_random() % 2 && pending_domain != domain) {
        if (mt_writer_put_collect_in(w, pending_domain, now, pending, &err))
          fail_msg("collect: %s", err.message);
      } else {
        live[nlive] = pending;
        live_domain[nlive++] = pending_domain;
      }
      pending = -1;
    }
    if (nlive && next_random() % 100 < 45) {
      size_t k = next_random() % nlive;
      if (mt_writer_put_collect_in(w, live_domain[k], now, live[k], &err))
        fail_msg("collect: %s", err.message);
      live[k] = live[--nlive];
      live_domain[k] = live_domain[nlive];
      continue;
    }
    int s = (int)(next_random() % POOL);
    int64_t id;
    if (mt_writer_put_alloc_in(w, domain, now, 1 + (int64_t)(next_random() % 500),
                               1 + (int64_t)(next_random() % 3), (mt_source)(next_random() % 3),
                               stacks[s], depths[s], tg_resolve, NULL, &id, &err))
      fail_msg("alloc: %s", err.message);
    pending = id;
    pending_domain = domain;
  }
  if (ran_on_us && mt_writer_extend(w, now + ran_on_us, NULL) != MT_OK)
    fail_msg("extend");
  return tg_finish(w, fd, size);
}

static const char *index_path(void) {
  return tu_temp_path("trace.ctf.idx");
}

static void count_warning(void *user, int64_t offset, const char *message) {
  (void)offset, (void)message;
  ++*(uint64_t *)user;
}

/* An analysis of the trace in memory; with `reported` and `counted` (or NULL), the reader's
 * warnings counted: how many were reported, how many it counted. */
static mt_analysis *run_counting(const uint8_t *data, size_t size, int64_t from, int64_t to,
                                 const char *hide, bool with_index, uint64_t *reported,
                                 uint64_t *counted) {
  mt_reader *r;
  mt_error err;
  mt_reader_options ro = {.backtraces = true};
  if (reported) {
    *reported = 0;
    ro.on_warning = count_warning;
    ro.warning_user = reported;
  }
  assert_int_equal(mt_reader_open_memory(&r, data, size, &ro, &err), MT_OK);
  mt_analysis_options o = mt_analysis_default_options();
  o.from = from;
  o.to = to;
  o.hide = hide;
  o.cells = true;
  if (with_index) {
    o.index_path = index_path();
    o.index_interval = INTERVAL;
  }
  mt_analysis *a;
  if (mt_analysis_run(&a, r, &o, &err))
    fail_msg("analysis: %s", err.message);
  if (counted)
    *counted = mt_reader_warning_count(r);
  mt_reader_close(r);
  return a;
}

static mt_analysis *run(const uint8_t *data, size_t size, int64_t from, int64_t to,
                        const char *hide, bool with_index) {
  return run_counting(data, size, from, to, hide, with_index, NULL, NULL);
}

static void assert_same_amount(const mt_amount *x, const mt_amount *y, const char *what) {
  if (x->objects != y->objects || x->samples != y->samples ||
      fabs(x->objects_estimated - y->objects_estimated) >
          1e-9 * fmax(1, fabs(y->objects_estimated)))
    fail_msg("%s: %llu/%llu/%.6f, expected %llu/%llu/%.6f", what, (unsigned long long)x->objects,
             (unsigned long long)x->samples, x->objects_estimated, (unsigned long long)y->objects,
             (unsigned long long)y->samples, y->objects_estimated);
}

static void assert_same_stats(const mt_stats *x, const mt_stats *y, const char *what) {
  assert_same_amount(&x->allocated, &y->allocated, what);
  assert_same_amount(&x->freed, &y->freed, what);
  assert_same_amount(&x->live_start, &y->live_start, what);
  assert_same_amount(&x->live, &y->live, what);
  assert_same_amount(&x->peak, &y->peak, what);
  assert_same_amount(&x->temporary, &y->temporary, what);
}

/* Everything a user sees: the summary, every site, the timeline. */
static void assert_same_analysis(const mt_analysis *got, const mt_analysis *want) {
  const mt_summary *g = mt_analysis_summary(got), *w = mt_analysis_summary(want);
  assert_int_equal(g->from, w->from);
  assert_int_equal(g->to, w->to);
  assert_int_equal(g->end_time, w->end_time);
  assert_int_equal(g->peak_time, w->peak_time);
  assert_int_equal(g->collects, w->collects);
  assert_int_equal(g->promotes, w->promotes);
  assert_int_equal(g->unknown_collects, w->unknown_collects);
  assert_int_equal(g->distinct_backtraces, w->distinct_backtraces);
  assert_int_equal(g->sites, w->sites);
  assert_same_amount(&g->allocated, &w->allocated, "allocated");
  assert_same_amount(&g->freed, &w->freed, "freed");
  assert_same_amount(&g->live_start, &w->live_start, "live_start");
  assert_same_amount(&g->live_end, &w->live_end, "live_end");
  assert_same_amount(&g->at_peak, &w->at_peak, "at_peak");
  assert_int_equal(g->temporary_defined, w->temporary_defined);
  assert_same_amount(&g->temporary, &w->temporary, "temporary");
  for (int i = 0; i < 3; i++) {
    assert_same_amount(&g->allocated_by_source[i], &w->allocated_by_source[i], "by source");
    assert_same_amount(&g->live_end_by_source[i], &w->live_end_by_source[i], "live by source");
  }
  for (int i = 0; i < MT_SIZE_CLASSES; i++)
    assert_same_amount(&g->sizes[i], &w->sizes[i], "sizes");
  for (int i = 0; i < MT_LIFETIME_CLASSES; i++)
    assert_same_amount(&g->lifetimes[i], &w->lifetimes[i], "lifetimes");

  mt_group *gg, *wg;
  size_t gn, wn;
  mt_error err;
  assert_int_equal(mt_analysis_group(got, MT_GROUP_SITE, MT_METRIC_BYTES, &gg, &gn, &err), MT_OK);
  assert_int_equal(mt_analysis_group(want, MT_GROUP_SITE, MT_METRIC_BYTES, &wg, &wn, &err), MT_OK);
  assert_int_equal(gn, wn);
  for (size_t i = 0; i < gn; i++) {
    assert_string_equal(gg[i].key.function, wg[i].key.function);
    assert_int_equal(gg[i].key.line, wg[i].key.line);
    assert_same_stats(&gg[i].stats, &wg[i].stats, gg[i].key.function);
  }
  free(gg);
  free(wg);

  size_t gt, wt;
  int64_t gw, ww;
  const mt_timeline_bucket *gb = mt_analysis_timeline(got, &gt, &gw);
  const mt_timeline_bucket *wb = mt_analysis_timeline(want, &wt, &ww);
  assert_int_equal(gt, wt);
  assert_int_equal(gw, ww);
  for (size_t i = 0; i < gt; i++)
    if (fabs(gb[i].live_end - wb[i].live_end) > 1e-6 * fmax(1, wb[i].live_end) ||
        fabs(gb[i].live_max - wb[i].live_max) > 1e-6 * fmax(1, wb[i].live_max))
      fail_msg("timeline bucket %zu differs", i);
}

/* What the index says of the trace's duration (-1: it does not know). */
static int64_t index_duration(const uint8_t *data, size_t size) {
  mt_reader *r;
  mt_error err;
  assert_int_equal(mt_reader_open_memory(&r, data, size, NULL, &err), MT_OK);
  int64_t d = mt_index_trace_duration(index_path(), r);
  mt_reader_close(r);
  return d;
}

static int64_t duration_of(const uint8_t *data, size_t size) {
  mt_analysis *a = run(data, size, MT_TIME_UNBOUNDED, MT_TIME_UNBOUNDED, NULL, false);
  const mt_summary *s = mt_analysis_summary(a);
  int64_t d = s->end_time - s->info.start_time;
  mt_analysis_free(a);
  return d;
}

/* Runs the window with the index and without, and compares; returns what the index did. */
static mt_index_use check_window(const uint8_t *data, size_t size, int64_t from, int64_t to,
                                 const char *hide) {
  mt_analysis *want = run(data, size, from, to, hide, false);
  mt_analysis *got = run(data, size, from, to, hide, true);
  assert_same_analysis(got, want);
  mt_index_use use = *mt_analysis_index_use(got);
  mt_analysis_free(want);
  mt_analysis_free(got);
  return use;
}

static void windows_resumed_from_a_full_pass_index_match_full_passes(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = make_trace(1, 0.01, &size);
  int64_t d = duration_of(data, size);
  unlink(index_path());
  mt_index_use use = check_window(data, size, MT_TIME_UNBOUNDED, MT_TIME_UNBOUNDED, NULL);
  assert_false(use.resumed);
  assert_true(use.written);
  assert_true(use.added >= 10);
  assert_int_equal(use.checkpoints, use.added);
  assert_string_equal(use.problem, "");
  assert_int_equal(index_duration(data, size), d); /* the pass read it all */
  size_t checkpoints = use.checkpoints;

  static const double starts[] = {0.1, 0.37, 0.5, 0.83, 0.99};
  for (size_t i = 0; i < sizeof starts / sizeof *starts; i++) {
    int64_t from = (int64_t)(starts[i] * (double)d);
    use = check_window(data, size, from, MT_TIME_UNBOUNDED, NULL);
    if (!use.resumed || use.resumed_time >= from || use.resumed_offset <= 0)
      fail_msg("window from %lld: not resumed before it", (long long)from);
    assert_false(use.written); /* nothing new past the last checkpoint */
    assert_int_equal(use.checkpoints, checkpoints);
    use = check_window(data, size, from, from + d / 10, NULL);
    assert_true(use.resumed);
  }
  free(data);
}

static void index_built_by_windows_grows_and_serves_later_windows(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = make_trace(2, 0.01, &size);
  int64_t d = duration_of(data, size);
  unlink(index_path());
  /* A first window builds checkpoints up to where it stops... */
  mt_index_use use = check_window(data, size, d / 2, d * 6 / 10, NULL);
  assert_false(use.resumed);
  assert_true(use.written);
  size_t first = use.checkpoints;
  assert_true(first >= 4);
  assert_int_equal(index_duration(data, size), -1); /* it stopped at --to */
  /* ...a later one resumes from the last of them and adds its own... */
  use = check_window(data, size, d * 8 / 10, MT_TIME_UNBOUNDED, NULL);
  assert_true(use.resumed);
  assert_true(use.resumed_time <= d * 6 / 10);
  assert_true(use.written);
  assert_true(use.checkpoints > first);
  assert_int_equal(index_duration(data, size), d);
  /* ...and an earlier one resumes before its start, adding nothing. */
  use = check_window(data, size, d * 3 / 10, d * 4 / 10, NULL);
  assert_true(use.resumed);
  assert_false(use.written);
  free(data);
}

/* A trace that lasts past its last event (a program that ran on without allocating): a window
 * that ends between the two has still read every event, and the index it writes keeps the
 * trace's end, which later windows in percent are taken from. */
static void index_keeps_the_end_of_a_trace_that_ran_on(void **state) {
  (void)state;
  size_t size;
  ran_on_us = 10000000;
  uint8_t *data = make_trace(4, 0.01, &size);
  ran_on_us = 0;
  int64_t d = duration_of(data, size);
  unlink(index_path());
  /* Its last event is 10 s before its end: a window to 5 s before the end reads every event. */
  mt_index_use use = check_window(data, size, MT_TIME_UNBOUNDED, d - 5000000, NULL);
  assert_true(use.written);
  assert_int_equal(index_duration(data, size), d);
  free(data);
}

/* At rate 1 temporaries are counted too. */
static void index_does_not_depend_on_hide_or_folding(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = make_trace(3, 1.0, &size);
  int64_t d = duration_of(data, size);
  unlink(index_path());
  check_window(data, size, MT_TIME_UNBOUNDED, MT_TIME_UNBOUNDED, "fn_1[0-9]_");
  for (int tenth = 1; tenth < 10; tenth += 2) {
    mt_index_use use = check_window(data, size, d * tenth / 10, MT_TIME_UNBOUNDED, NULL);
    assert_true(use.resumed);
  }
  mt_index_use use = check_window(data, size, d * 7 / 10, MT_TIME_UNBOUNDED, "fn_2");
  assert_true(use.resumed);
  free(data);
}

static void index_of_another_trace_or_damaged_is_ignored_and_replaced(void **state) {
  (void)state;
  size_t size_a, size_b;
  uint8_t *a = make_trace(4, 0.01, &size_a);
  uint8_t *b = make_trace(5, 0.01, &size_b);
  int64_t d = duration_of(b, size_b);
  unlink(index_path());
  check_window(a, size_a, MT_TIME_UNBOUNDED, MT_TIME_UNBOUNDED, NULL);
  mt_index_use use = check_window(b, size_b, d / 2, MT_TIME_UNBOUNDED, NULL);
  assert_false(use.resumed);
  assert_non_null(strstr(use.problem, "another trace"));
  assert_true(use.written); /* replaced by one of b */
  use = check_window(b, size_b, d / 2, MT_TIME_UNBOUNDED, NULL);
  assert_true(use.resumed);

  size_t n;
  uint8_t *idx = tu_read_file(index_path(), &n);
  for (size_t at = 0; at < n; at += n / 7 + 1) {
    idx[at] ^= 0x40;
    tu_write_file(index_path(), idx, n);
    use = check_window(b, size_b, d / 2, MT_TIME_UNBOUNDED, NULL);
    assert_false(use.resumed);
    assert_true(strstr(use.problem, "damaged") || strstr(use.problem, "not a memtap"));
    idx[at] ^= 0x40;
  }
  tu_write_file(index_path(), idx, n / 2); /* cut */
  use = check_window(b, size_b, d / 2, MT_TIME_UNBOUNDED, NULL);
  assert_false(use.resumed);
  assert_non_null(strstr(use.problem, "damaged"));
  free(idx);
  free(a);
  free(b);
}

/* A window of the trace file `path` with the index `idx`, damage read up to (options.partial). */
static mt_analysis *run_file(const char *path, const char *idx, int64_t from) {
  mt_reader *r;
  mt_error err;
  mt_reader_options ro = {.backtraces = true};
  assert_int_equal(mt_reader_open(&r, path, &ro, &err), MT_OK);
  mt_analysis_options o = mt_analysis_default_options();
  o.from = from;
  o.partial = true;
  o.index_path = idx;
  o.index_interval = INTERVAL;
  mt_analysis *a;
  if (mt_analysis_run(&a, r, &o, &err))
    fail_msg("analysis: %s", err.message);
  mt_reader_close(r);
  return a;
}

static int64_t mtime_of(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* The index keeps the trace file's modification time: a trace changed in place, its size, start
 * and pid the same, has its index ignored and replaced (not its old figures); a copy that keeps
 * the time (cp -p) keeps its index. */
static void index_of_a_trace_changed_in_place_is_ignored_and_replaced(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = make_trace(8, 0.01, &size);
  int64_t d = duration_of(data, size);
  char trace[4096], idx[4200], copy[4096], copy_idx[4200];
  snprintf(trace, sizeof trace, "%s", tu_temp_path("inplace.ctf"));
  snprintf(idx, sizeof idx, "%s.idx", trace);
  snprintf(copy, sizeof copy, "%s", tu_temp_path("inplace-copy.ctf"));
  snprintf(copy_idx, sizeof copy_idx, "%s.idx", copy);
  tu_write_file(trace, data, size);
  unlink(idx);
  mt_analysis_free(run_file(trace, idx, MT_TIME_UNBOUNDED));
  mt_analysis *a = run_file(trace, idx, d / 2);
  assert_true(mt_analysis_index_use(a)->resumed);
  mt_analysis_free(a);

  /* cp -p: the same bytes and time under another name (another inode). */
  tu_write_file(copy, data, size);
  size_t n;
  uint8_t *bytes = tu_read_file(idx, &n);
  tu_write_file(copy_idx, bytes, n);
  free(bytes);
  struct stat st;
  assert_int_equal(stat(trace, &st), 0);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  assert_int_equal(utimensat(AT_FDCWD, copy, times, 0), 0);
  a = run_file(copy, copy_idx, d / 2);
  assert_true(mt_analysis_index_use(a)->resumed);
  assert_string_equal(mt_analysis_index_use(a)->problem, "");
  mt_analysis_free(a);

  /* In place, after the index: one byte past the window's start, the size unchanged. */
  int64_t before = mtime_of(trace);
  usleep(20000); /* past the file system's clock tick */
  int fd = open(trace, O_WRONLY);
  assert_true(fd >= 0);
  uint8_t b = data[size * 7 / 10] ^ 0x5A;
  assert_int_equal(pwrite(fd, &b, 1, (off_t)(size * 7 / 10)), 1);
  close(fd);
  assert_true(mtime_of(trace) != before);
  mt_analysis *want = run_file(trace, NULL, d / 2);
  a = run_file(trace, idx, d / 2);
  assert_false(mt_analysis_index_use(a)->resumed);
  assert_non_null(strstr(mt_analysis_index_use(a)->problem, "an earlier state of this one"));
  assert_int_equal(mt_analysis_damage(a) != NULL, mt_analysis_damage(want) != NULL);
  assert_same_analysis(a, want);
  bool replaced = mt_analysis_index_use(a)->written; /* not when the change is damage */
  mt_analysis_free(a);
  mt_analysis_free(want);
  a = run_file(trace, idx, d / 2);
  assert_int_equal(mt_analysis_index_use(a)->problem[0] == 0, replaced);
  mt_analysis_free(a);
  unlink(trace);
  unlink(idx);
  unlink(copy);
  unlink(copy_idx);
  free(data);
}

/* `data` with a copy of each packet after packet 0 following it as another process's (its pid
 * changed): the reader skips every copy with a warning, and the events are those of `data`. */
static uint8_t *with_foreign_copies(const uint8_t *data, size_t size, size_t *out_size) {
  uint8_t *out = malloc(2 * size);
  assert_non_null(out);
  size_t n = 0;
  for (size_t at = 0; at < size;) {
    mt_packet_header h;
    assert_true(mt_packet_header_decode(data + at, size - at, &h) > 0);
    size_t packet = h.packet_size_bits / 8;
    memcpy(out + n, data + at, packet);
    n += packet;
    if (at > 0) {
      memcpy(out + n, data + at, packet);
      h.pid = TG_PID + 1;
      mt_packet_header_encode(&h, out + n);
      n += packet;
    }
    at += packet;
  }
  *out_size = n;
  return out;
}

/* run() with the reader's warnings counted: how many were reported, how many it counted. */
static mt_analysis *run_warned(const uint8_t *data, size_t size, int64_t from, bool with_index,
                               uint64_t *reported, uint64_t *counted) {
  return run_counting(data, size, from, MT_TIME_UNBOUNDED, NULL, with_index, reported, counted);
}

static int by_string(const void *p, const void *q) {
  return strcmp(*(char *const *)p, *(char *const *)q);
}

/* Sorts the lines of `text` in place; returns how many there are. One walk over the text: a
 * strchr per line is quadratic under ASan's strict_string_checks (scripts/test.sh), which measure
 * the whole rest of the string at each call (tens of thousands of warning lines here). */
static size_t lines_sorted(char *text) {
  size_t n = 0, len = strlen(text);
  for (size_t i = 0; i < len; i++)
    n += text[i] == '\n';
  char **line = malloc((n + 1) * sizeof *line), *copy = strdup(text);
  assert_true(line && copy);
  n = 0;
  for (size_t i = 0, start = 0; i < len; i++)
    if (copy[i] == '\n') {
      copy[i] = 0;
      line[n++] = copy + start;
      start = i + 1;
    }
  qsort(line, n, sizeof *line, by_string);
  size_t at = 0;
  for (size_t i = 0; i < n; i++)
    at += (size_t)sprintf(text + at, "%s\n", line[i]);
  free(line);
  free(copy);
  return n;
}

static uint64_t get_le(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void put_le(uint8_t *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

/* The index's layout (index.c): a 56-byte header ending with the checkpoint count, then per
 * checkpoint its offset, latest time, location count, body offset and size (8 bytes each). */
#define IDX_COUNT 52
#define IDX_TABLE 56
#define IDX_ENTRY(i, field) (IDX_TABLE + 40 * (i) + 8 * (field))

/* Makes the backtrace cache of checkpoint k's saved reader state (reader_state.c) hold codes the
 * trace never described: reading on from it fails at the first cache hit or verifier. */
static void spoil_cache(uint8_t *idx, size_t k) {
  uint8_t *p = idx + get_le(idx + IDX_ENTRY(k, 3), 8) + 8; /* the state, past its size */
  p += 4 + 4 + 8;                                          /* magic, version, position */
  p += 1 + *p;                                             /* the next packet's header */
  uint32_t domains = (uint32_t)get_le(p, 4);
  p += 4;
  for (uint32_t d = 0; d < domains; d++) {
    p += 2 + 8; /* id, last time */
    unsigned files = *p++;
    for (unsigned f = 0; f < files; f++) {
      p += 4 + get_le(p, 4);
      unsigned names = *p++;
      for (unsigned i = 0; i < names; i++)
        p += 4 + get_le(p, 4);
    }
    uint32_t used = (uint32_t)get_le(p, 4);
    p += 4;
    for (uint32_t i = 0; i < used; i++, p += 2 + 8 + 2)
      put_le(p + 2, get_le(p + 2, 8) ^ ((uint64_t)1 << 60), 8);
    p += 8 + 8 * get_le(p, 8); /* the previous backtrace */
  }
}

static void write_with_checksum(const char *path, uint8_t *idx, size_t n) {
  put_le(idx + n - 8, mt_bytes_checksum(idx, n - 8), 8);
  tu_write_file(path, idx, n);
}

/* An index whose checksum holds but whose checkpoint does not fit the trace — a saved reader state
 * that decodes the trace wrong once the pass reads on from it, an offset that is not the state's,
 * a location code described as another — is not used: the pass starts over from the trace's start
 * and gives exactly what it gives without an index, warns once, counts and reports each of the
 * reader's warnings once, and replaces the index. */
static void a_checkpoint_that_does_not_fit_the_trace_is_ignored_and_replaced(void **state) {
  (void)state;
  size_t plain_size, size;
  uint8_t *plain = make_trace(9, 0.01, &plain_size);
  uint8_t *data = with_foreign_copies(plain, plain_size, &size);
  free(plain);
  int64_t d = duration_of(data, size);
  int64_t from = d * 6 / 10;
  unlink(index_path());
  mt_index_use use = check_window(data, size, MT_TIME_UNBOUNDED, MT_TIME_UNBOUNDED, NULL);
  assert_true(use.written);
  size_t n;
  uint8_t *good = tu_read_file(index_path(), &n);
  size_t k = 0; /* the checkpoint the window resumes from */
  while (k + 1 < get_le(good + IDX_COUNT, 4) &&
         (int64_t)get_le(good + IDX_ENTRY(k + 1, 1), 8) < from)
    k++;
  assert_true(k > 0);
  uint64_t want_reported, want_counted, reported, counted;
  mt_analysis *want = run_warned(data, size, from, false, &want_reported, &want_counted);
  assert_true(want_counted > 10);
  assert_int_equal(want_reported, MT_READER_FOREIGN_SAID); /* the rest counted, not named */

  static const char *const why[] = {"not used (the trace was read from its start instead)",
                                    "does not match the trace: checkpoint", "location code"};
  uint8_t *bad = malloc(n);
  for (int v = 0; v < 3; v++) {
    memcpy(bad, good, n);
    if (v == 0)
      spoil_cache(bad, k);
    else if (v == 1)
      put_le(bad + IDX_ENTRY(k, 0), get_le(bad + IDX_ENTRY(k, 0), 8) + 1, 8);
    else /* checkpoint 0's first location code: past the state, its size and the codes' header */
      bad[get_le(bad + IDX_ENTRY(0, 3), 8) + 8 + get_le(bad + get_le(bad + IDX_ENTRY(0, 3), 8), 8) +
          8 + 16 + 5] ^= 0x40;
    write_with_checksum(index_path(), bad, n);
    mt_analysis *got = run_warned(data, size, from, true, &reported, &counted);
    assert_same_analysis(got, want);
    use = *mt_analysis_index_use(got);
    if (!strstr(use.problem, why[v]))
      fail_msg("variant %d: '%s'", v, use.problem);
    assert_false(use.resumed);
    assert_true(use.written); /* replaced */
    assert_int_equal(reported, want_reported);
    assert_int_equal(counted, want_counted);
    mt_analysis_free(got);
    got = run_warned(data, size, from, true, &reported, &counted);
    assert_same_analysis(got, want);
    assert_true(mt_analysis_index_use(got)->resumed);
    assert_string_equal(mt_analysis_index_use(got)->problem, "");
    mt_analysis_free(got);
  }

  /* The command line: the figures of --no-index, one line saying why the index was not used. */
  char trace[4096], idx[4200];
  snprintf(trace, sizeof trace, "%s", tu_temp_path("unfit.ctf"));
  snprintf(idx, sizeof idx, "%s.idx", trace);
  tu_write_file(trace, data, size);
  unlink(idx);
  char *want_out, *want_err, *got_out, *err, seconds[32];
  snprintf(seconds, sizeof seconds, "%.6f", (double)from / 1e6);
  assert_int_equal(
      tu_run_cli(&want_out, &n, &want_err, "summary", "--from", seconds, "--no-index", trace, NULL),
      0);
  mt_analysis_free(run_file(trace, idx, MT_TIME_UNBOUNDED)); /* the file's index */
  uint8_t *made = tu_read_file(idx, &n);
  for (size_t i = 0; i < get_le(made + IDX_COUNT, 4); i++)
    spoil_cache(made, i);
  write_with_checksum(idx, made, n);
  free(made);
  assert_int_equal(tu_run_cli(&got_out, &n, &err, "summary", "--from", seconds, trace, NULL), 0);
  assert_string_equal(got_out, want_out);
  /* The reader's warnings as many as without the index, the last saying that the rest go
   * unsaid, and one line for the index. Which packets they name may differ: the pass that starts
   * over names those it read before (MT_READER_FOREIGN_SAID's note in format.h). */
  char *index_line = strstr(err, "unfit.ctf.idx: not used");
  assert_non_null(index_line);
  assert_null(strstr(index_line + 1, "unfit.ctf.idx"));
  while (index_line > err && index_line[-1] != '\n')
    index_line--;
  memmove(index_line, strchr(index_line, '\n') + 1, strlen(strchr(index_line, '\n') + 1) + 1);
  assert_int_equal(lines_sorted(err), lines_sorted(want_err));
  assert_int_equal(lines_sorted(err), MT_READER_FOREIGN_SAID);
  const char *unsaid = "(further packets of other processes are skipped without a warning)";
  assert_non_null(strstr(err, unsaid));
  assert_non_null(strstr(want_err, unsaid));
  free(got_out);
  free(err);
  free(want_out);
  free(want_err);
  unlink(idx);
  unlink(trace);
  mt_analysis_free(want);
  free(bad);
  free(good);
  free(data);
}

static void compressed_or_piped_traces_do_not_use_an_index(void **state) {
  (void)state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata("memtrace/tiny_v3.ctf"), &size);
  assert_int_equal(write(fds[1], data, size), (ssize_t)size);
  close(fds[1]);
  mt_reader *r;
  mt_error err;
  mt_reader_options ro = {.backtraces = true};
  assert_int_equal(mt_reader_open_fd(&r, fds[0], &ro, &err), MT_OK);
  mt_analysis_options o = mt_analysis_default_options();
  o.index_path = index_path();
  mt_analysis *a;
  assert_int_equal(mt_analysis_run(&a, r, &o, &err), MT_OK);
  assert_non_null(strstr(mt_analysis_index_use(a)->problem, "compressed or not a file"));
  assert_false(mt_analysis_index_use(a)->written);
  mt_analysis_free(a);
  mt_reader_close(r);
  close(fds[0]);
  free(data);
}

/* memtap with --index gives what --no-index gives, makes TRACE.idx once and says so; a damaged
 * index is reported and replaced; bad windows and regexes are usage errors. */
/* What `memtap COMMAND [OPTION] --from 50% TRACE` says on stderr (malloc'd); it must exit 0. */
static char *window_stderr(const char *command, const char *option, const char *trace) {
  char *out, *err;
  size_t n;
  int rc = option ? tu_run_cli(&out, &n, &err, command, option, "--from", "50%", trace, NULL)
                  : tu_run_cli(&out, &n, &err, command, "--from", "50%", trace, NULL);
  assert_int_equal(rc, 0);
  free(out);
  return err;
}

/* A trace too short for a checkpoint (under 8 MiB) gets no index, but a damaged one beside it is
 * replaced all the same (its message came back at every command), and a file there that is no
 * index at all is never written over (it was, by a pass that added checkpoints). */
static void a_short_traces_bad_index_is_replaced_and_a_foreign_file_kept(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata("memtrace/demo_v3.ctf"), &size);
  char trace[4096], idx[4200];
  snprintf(trace, sizeof trace, "%s", tu_temp_path("short.ctf"));
  snprintf(idx, sizeof idx, "%s.idx", trace);
  tu_write_file(trace, data, size);
  free(data);
  unlink(idx);
  char *err = window_stderr("summary", "--index", trace);
  assert_string_equal(err, "");
  free(err);
  assert_int_equal(access(idx, F_OK), -1); /* no checkpoint, no file */
  /* Ours and unfit (a wrong checksum; empty, a crash right after its creation): said, replaced,
   * and the next command is quiet. */
  static const char damaged[] = "MTAPIDX1 and then anything at all, its checksum wrong......";
  static const struct {
    const char *bytes, *said;
    size_t size;
  } unfit[] = {{damaged, "is damaged", sizeof damaged}, {"", "is damaged (cut short)", 0}};
  for (int i = 0; i < 2; i++) {
    tu_write_file(idx, unfit[i].bytes, unfit[i].size);
    err = window_stderr("summary", NULL, trace);
    assert_non_null(strstr(err, unfit[i].said));
    free(err);
    err = window_stderr("summary", NULL, trace);
    assert_string_equal(err, "");
    free(err);
  }
  static const char notes[] = "my own notes, named like an index\n";
  tu_write_file(idx, notes, sizeof notes - 1);
  for (int i = 0; i < 2; i++) {
    err = window_stderr("top", "--index", trace);
    assert_non_null(strstr(err, "is not a memtap checkpoint index: left as it is"));
    free(err);
  }
  size_t n;
  uint8_t *kept = tu_read_file(idx, &n);
  assert_int_equal(n, sizeof notes - 1);
  assert_memory_equal(kept, notes, n);
  free(kept);
  unlink(idx);
  unlink(trace);
}

static void cli_index_gives_the_same_output_and_reports_what_it_did(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = make_trace(6, 0.01, &size);
  char trace[4096], idx[4200];
  snprintf(trace, sizeof trace, "%s", tu_temp_path("cli.ctf"));
  snprintf(idx, sizeof idx, "%s.idx", trace);
  tu_write_file(trace, data, size);
  unlink(idx);
  static const char *const commands[][2] = {
      {"summary", "--json"}, {"top", "--json"}, {"leaks", "--json"}, {"timeline", "--csv"}};
  for (size_t c = 0; c < 4; c++) {
    char *want, *got, *err;
    size_t n;
    int rc = tu_run_cli(&want, &n, &err, commands[c][0], commands[c][1], "--from", "40%",
                        "--no-index", trace, NULL);
    assert_int_equal(rc, 0);
    assert_string_equal(err, "");
    free(err);
    for (int pass = 0; pass < 2; pass++) {
      rc = tu_run_cli(&got, &n, &err, commands[c][0], commands[c][1], "--from", "40%", "--index",
                      trace, NULL);
      assert_int_equal(rc, 0);
      assert_string_equal(got, want);
      /* The first command with --index makes the index; later ones add nothing, say nothing. */
      if (c == 0 && pass == 0)
        assert_non_null(strstr(err, "checkpoint index updated"));
      else
        assert_string_equal(err, "");
      free(got);
      free(err);
    }
    free(want);
  }
  assert_int_equal(access(idx, F_OK), 0);

  /* Damaged: said, not used, replaced (the next run is quiet again). */
  size_t n;
  uint8_t *bytes = tu_read_file(idx, &n);
  bytes[n / 2] ^= 1;
  tu_write_file(idx, bytes, n);
  free(bytes);
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, &n, &err, "summary", "--from", "40%", trace, NULL), 0);
  assert_non_null(strstr(err, "is damaged"));
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, &n, &err, "summary", "--from", "40%", trace, NULL), 0);
  assert_string_equal(err, "");
  free(out);
  free(err);

  /* Usage errors, whatever the index. */
  assert_int_equal(tu_run_cli(&out, &n, &err, "summary", "--from", "2", "--to", "1", trace, NULL),
                   64);
  assert_non_null(strstr(err, "before it starts"));
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, &n, &err, "top", "--hide", "([", trace, NULL), 64);
  assert_non_null(strstr(err, "bad --hide regular expression"));
  free(out);
  free(err);
  unlink(idx);
  unlink(trace);
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(windows_resumed_from_a_full_pass_index_match_full_passes),
      cmocka_unit_test(a_short_traces_bad_index_is_replaced_and_a_foreign_file_kept),
      cmocka_unit_test(index_built_by_windows_grows_and_serves_later_windows),
      cmocka_unit_test(index_keeps_the_end_of_a_trace_that_ran_on),
      cmocka_unit_test(index_does_not_depend_on_hide_or_folding),
      cmocka_unit_test(index_of_another_trace_or_damaged_is_ignored_and_replaced),
      cmocka_unit_test(index_of_a_trace_changed_in_place_is_ignored_and_replaced),
      cmocka_unit_test(a_checkpoint_that_does_not_fit_the_trace_is_ignored_and_replaced),
      cmocka_unit_test(compressed_or_piped_traces_do_not_use_an_index),
      cmocka_unit_test(cli_index_gives_the_same_output_and_reports_what_it_did),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
