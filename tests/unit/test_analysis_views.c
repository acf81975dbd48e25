/* The views of src/analysis/views.h and diff.h and their commands (functions, top --inclusive,
 * callers, diff) on traces of known events, every number checked exactly; and on demo_v3.ctf the
 * figures `go tool pprof` gives for memtap's pprof export of it (the integration test
 * analysis_functions_match_go_tool_pprof compares every row with pprof itself).
 *
 * The recursion trace (rate 1, 8 bytes per word, External allocations, codes 1 main m.ml:1,
 * 2 f r.ml:10, 3 g r.ml:20, 4 h r.ml:30, 5 f r.ml:11), backtraces outermost first:
 *
 *   t(µs)  event                 backtrace                   innermost
 *   10     alloc r1, 10 words    main f:10 g f:10 g h        h        mutual recursion: f, g twice
 *   20     alloc r2,  6 words    main f:10 g f:11            f:11
 *   30     alloc r3,  4 words    main g                      g
 *   40     alloc r4,  2 words    main h f:10 f:10            f:10     direct recursion, folded
 *   50     collect r1
 *
 * Bytes: r1 80, r2 48, r3 32, r4 16, 176 in all; live at the end 96 (r2, r3, r4). Per function,
 * each backtrace once: main cum 176; f cum r1 r2 r4 = 144 (not 224: r1 has f twice), flat r2 r4
 * = 64; g cum r1 r2 r3 = 160, flat 32; h cum r1 r4 = 96, flat 80. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "analysis/diff.h"
#include "analysis/views.h"
#include "analysis_known_trace.h"
#include "memtap/analysis.h"
#include "testutil.h"
#include "tracegen.h"

static int resolve_rec(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  (void)user;
  static const mt_location frames[] = {{"m.ml", "main", 1, 1, 5},
                                       {"r.ml", "f", 10, 1, 5},
                                       {"r.ml", "g", 20, 1, 5},
                                       {"r.ml", "h", 30, 1, 5},
                                       {"r.ml", "f", 11, 1, 5}};
  *count = code >= 1 && code <= 5 ? 1 : 0;
  *entries = *count ? &frames[code - 1] : NULL;
  return MT_OK;
}

/* The recursion trace, from an executable named `exe`, r1 of `r1_words` words (10 above). */
static uint8_t *rec_trace_sized(const char *exe, int64_t r1_words, size_t *size) {
  int fd = memfd_create("trace", 0);
  assert_true(fd >= 0);
  mt_trace_info info = tg_info(1.0);
  info.executable_name = exe;
  mt_writer_options options = {.version = 3};
  mt_writer *w;
  mt_error err;
  if (mt_writer_create(&w, fd, &info, &options, &err))
    fail_msg("mt_writer_create: %s", err.message);
  /* Innermost first, as the writer takes them. */
  static const uint64_t r1[] = {4, 3, 2, 3, 2, 1}, r2[] = {5, 3, 2, 1}, r3[] = {3, 1},
                        r4[] = {2, 2, 4, 1};
  const struct {
    int64_t words;
    const uint64_t *stack;
    size_t depth;
  } allocs[] = {{r1_words, r1, 6}, {6, r2, 4}, {4, r3, 2}, {2, r4, 4}};
  int64_t id[4];
  for (int i = 0; i < 4; i++)
    if (mt_writer_put_alloc(w, TG_START + 10 * (i + 1), allocs[i].words, allocs[i].words,
                            MT_SOURCE_EXTERNAL, allocs[i].stack, allocs[i].depth, resolve_rec, NULL,
                            &id[i], &err))
      fail_msg("writing the recursion trace: %s", err.message);
  if (mt_writer_put_collect(w, TG_START + 50, id[0], &err))
    fail_msg("writing the recursion trace: %s", err.message);
  return tg_finish(w, fd, size);
}

static uint8_t *rec_trace(const char *exe, size_t *size) {
  return rec_trace_sized(exe, 10, size);
}

static const char *rec_path(void) {
  static char path[4096];
  if (!path[0]) {
    size_t size;
    uint8_t *data = rec_trace("/usr/bin/test-program", &size);
    snprintf(path, sizeof path, "%s", known_trace_file("rec.ctf", data, size));
    free(data);
  }
  return path;
}

static mt_analysis *analyse_file(const char *path, const mt_analysis_options *options) {
  size_t size;
  uint8_t *data = tu_read_file(path, &size);
  mt_reader_options ro = {.backtraces = true};
  mt_reader *r;
  mt_error err;
  if (mt_reader_open_memory(&r, data, size, &ro, &err))
    fail_msg("open: %s", err.message);
  mt_analysis *a;
  if (mt_analysis_run(&a, r, options, &err))
    fail_msg("analysis: %s", err.message);
  mt_reader_close(r);
  free(data);
  return a;
}

static double value(const mt_analysis *a, const mt_stats *s, mt_metric metric) {
  return mt_analysis_metric(a, s, metric);
}

/* The cost of `function` (group key) in `costs`; fails if absent. */
static const mt_cost *cost_of(const mt_cost *costs, size_t n, const char *function,
                              const char *file, int line) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(costs[i].key.function, function) && !strcmp(costs[i].key.file, file) &&
        costs[i].key.line == line)
      return &costs[i];
  fail_msg("no cost for %s %s:%d", function, file, line);
  return NULL;
}

/* The cost of a key in `costs` has these flat and cum values of `metric`. */
static void assert_flat_cum(const mt_analysis *a, const mt_cost *costs, size_t n,
                            const char *function, const char *file, int line, mt_metric metric,
                            double flat, double cum) {
  const mt_cost *c = cost_of(costs, n, function, file, line);
  double f = value(a, &c->flat, metric), k = value(a, &c->cum, metric);
  if (f != flat || k != cum)
    fail_msg("%s %s:%d: flat %g cum %g, want %g and %g", function, file, line, f, k, flat, cum);
}

static void costs_count_each_backtrace_once_however_often_a_function_recurs(void **state) {
  (void)state;
  mt_analysis *a = analyse_file(rec_path(), NULL);
  mt_cost *c;
  size_t n;
  mt_error err;
  assert_int_equal(mt_costs(a, MT_GROUP_FUNCTION, MT_METRIC_BYTES, false, NULL, &c, &n, &err),
                   MT_OK);
  assert_int_equal(n, 4);
  /* Ranked by cum: main 176, g 160, f 144, h 96. */
  static const struct {
    const char *function;
    double flat, cum;
    size_t flat_stacks, cum_stacks;
  } want[] = {
      {"main", 0, 176, 0, 4}, {"g", 32, 160, 1, 3}, {"f", 64, 144, 2, 3}, {"h", 80, 96, 1, 2}};
  for (size_t i = 0; i < 4; i++) {
    assert_string_equal(c[i].key.function, want[i].function);
    assert_string_equal(c[i].key.file, "");
    assert_true(value(a, &c[i].flat, MT_METRIC_BYTES) == want[i].flat);
    assert_true(value(a, &c[i].cum, MT_METRIC_BYTES) == want[i].cum);
    assert_int_equal(c[i].flat_stacks, want[i].flat_stacks);
    assert_int_equal(c[i].cum_stacks, want[i].cum_stacks);
  }
  free(c);
  /* Live at the end (r1 freed): f cum r2 r4 = 64, g cum r2 r3 = 80, h cum r4 = 16; by flat. */
  assert_int_equal(mt_costs(a, MT_GROUP_FUNCTION, MT_METRIC_LIVE, true, NULL, &c, &n, &err), MT_OK);
  assert_int_equal(n, 4);
  assert_string_equal(c[0].key.function, "f"); /* flat 64 */
  assert_true(value(a, &c[0].cum, MT_METRIC_LIVE) == 64);
  assert_string_equal(c[1].key.function, "g"); /* flat 32 */
  assert_true(value(a, &c[1].cum, MT_METRIC_LIVE) == 80);
  assert_string_equal(c[2].key.function, "main"); /* flat 0, cum 96 */
  assert_true(value(a, &c[2].cum, MT_METRIC_LIVE) == 96);
  assert_string_equal(c[3].key.function, "h"); /* flat 0, cum 16 */
  assert_true(value(a, &c[3].cum, MT_METRIC_LIVE) == 16);
  free(c);
  /* Counts: every object estimated as one at rate 1. */
  assert_int_equal(mt_costs(a, MT_GROUP_FUNCTION, MT_METRIC_COUNT, false, NULL, &c, &n, &err),
                   MT_OK);
  assert_flat_cum(a, c, n, "f", "", 0, MT_METRIC_COUNT, 2, 3);
  free(c);
  /* Sites: f:10 is on r1, r2, r4 (r4's two calls folded into one frame); f:11 only on r2. */
  assert_int_equal(mt_costs(a, MT_GROUP_SITE, MT_METRIC_BYTES, false, NULL, &c, &n, &err), MT_OK);
  assert_int_equal(n, 5);
  assert_flat_cum(a, c, n, "f", "r.ml", 10, MT_METRIC_BYTES, 16, 144);
  assert_flat_cum(a, c, n, "f", "r.ml", 11, MT_METRIC_BYTES, 48, 48);
  free(c);
  /* Files: every backtrace ends in r.ml and starts in m.ml. */
  assert_int_equal(mt_costs(a, MT_GROUP_FILE, MT_METRIC_BYTES, false, NULL, &c, &n, &err), MT_OK);
  assert_int_equal(n, 2);
  assert_flat_cum(a, c, n, "", "r.ml", 0, MT_METRIC_BYTES, 176, 176);
  assert_flat_cum(a, c, n, "", "m.ml", 0, MT_METRIC_BYTES, 0, 176);
  free(c);
  /* Temporary needs rate 1: this trace has it (r1 is not temporary: r2 came after it). */
  assert_int_equal(mt_costs(a, MT_GROUP_FUNCTION, MT_METRIC_TEMPORARY, false, NULL, &c, &n, &err),
                   MT_OK);
  assert_int_equal(n, 0);
  free(c);
  mt_analysis_free(a);

  /* Without folding r4 has f twice in a row: still counted once. */
  mt_analysis_options o = mt_analysis_default_options();
  o.no_fold = true;
  a = analyse_file(rec_path(), &o);
  assert_int_equal(mt_costs(a, MT_GROUP_FUNCTION, MT_METRIC_BYTES, false, NULL, &c, &n, &err),
                   MT_OK);
  assert_true(value(a, &cost_of(c, n, "f", "", 0)->cum, MT_METRIC_BYTES) == 144);
  assert_int_equal(cost_of(c, n, "f", "", 0)->cum_stacks, 3);
  free(c);
  mt_analysis_free(a);
}

static void costs_on_the_stacks_trace_skip_nothing_for_flat(void **state) {
  (void)state;
  /* analysis_known_trace.h's stacks trace: flat is the innermost frame, $8 included (the site
   * skips it for walk); walk's three folded calls count once. */
  size_t size;
  uint8_t *data = known_stacks_trace(&size);
  const char *path = known_trace_file("stacks.ctf", data, size);
  free(data);
  mt_analysis *a = analyse_file(path, NULL);
  mt_cost *c;
  size_t n;
  mt_error err;
  assert_int_equal(mt_costs(a, MT_GROUP_FUNCTION, MT_METRIC_BYTES, false, NULL, &c, &n, &err),
                   MT_OK);
  static const struct {
    const char *function;
    double flat, cum;
  } want[] = {{"main", 0, 376}, {"parse", 280, 304}, {"run", 0, 208}, {"walk", 0, 168},
              {"lex", 24, 88},  {"xmalloc", 64, 64}, {"$8", 8, 8}};
  assert_int_equal(n, 7);
  for (size_t i = 0; i < 7; i++) {
    assert_string_equal(c[i].key.function, want[i].function);
    assert_true(value(a, &c[i].flat, MT_METRIC_BYTES) == want[i].flat);
    assert_true(value(a, &c[i].cum, MT_METRIC_BYTES) == want[i].cum);
  }
  free(c);
  mt_analysis_free(a);
}

/* An allocation without a backtrace is its own key, "<no backtrace>", flat and cum; it has no
 * frame for a focus or a peek to match. */
static void an_empty_backtrace_is_the_key_no_backtrace(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  mt_error err;
  static const uint64_t stack[] = {3, 1};
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 5, 5, MT_SOURCE_EXTERNAL, NULL, 0,
                                       resolve_rec, NULL, NULL, &err),
                   MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 2, 2, 2, MT_SOURCE_EXTERNAL, stack, 2,
                                       resolve_rec, NULL, NULL, &err),
                   MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  const char *path = known_trace_file("empty-backtrace.ctf", data, size);
  free(data);
  mt_analysis *a = analyse_file(path, NULL);
  mt_cost *c;
  size_t n;
  assert_int_equal(mt_costs(a, MT_GROUP_FUNCTION, MT_METRIC_BYTES, false, NULL, &c, &n, &err),
                   MT_OK);
  assert_int_equal(n, 3);
  assert_string_equal(c[0].key.function, "<no backtrace>"); /* 40 B */
  assert_true(value(a, &c[0].flat, MT_METRIC_BYTES) == 40);
  assert_true(value(a, &c[0].cum, MT_METRIC_BYTES) == 40);
  assert_true(value(a, &cost_of(c, n, "main", "", 0)->cum, MT_METRIC_BYTES) == 16);
  assert_true(value(a, &cost_of(c, n, "g", "", 0)->flat, MT_METRIC_BYTES) == 16);
  free(c);
  bool *keep;
  size_t matched;
  assert_int_equal(mt_stacks_through(a, "backtrace", &keep, &matched, &err), MT_OK);
  assert_int_equal(matched, 0);
  free(keep);
  mt_peek *p;
  assert_int_equal(mt_peek_functions(a, ".", MT_METRIC_BYTES, &p, &n, &err), MT_OK);
  assert_int_equal(n, 2); /* main and g */
  assert_string_equal(p[0].key.function, "g");
  assert_string_equal(p[1].key.function, "main");
  mt_peeks_free(p, n);
  mt_analysis_free(a);
}

static void focus_keeps_only_the_backtraces_through_matching_functions(void **state) {
  (void)state;
  mt_analysis *a = analyse_file(rec_path(), NULL);
  bool *keep;
  size_t matched;
  mt_error err;
  assert_int_equal(mt_stacks_through(a, "^h$", &keep, &matched, &err), MT_OK);
  assert_int_equal(matched, 2); /* r1, r4 */
  mt_cost *c;
  size_t n;
  assert_int_equal(mt_costs(a, MT_GROUP_FUNCTION, MT_METRIC_BYTES, false, keep, &c, &n, &err),
                   MT_OK);
  assert_int_equal(n, 4);
  assert_flat_cum(a, c, n, "h", "", 0, MT_METRIC_BYTES, 80, 96);
  assert_flat_cum(a, c, n, "f", "", 0, MT_METRIC_BYTES, 16, 96);
  assert_flat_cum(a, c, n, "g", "", 0, MT_METRIC_BYTES, 0, 80);
  assert_flat_cum(a, c, n, "main", "", 0, MT_METRIC_BYTES, 0, 96);
  free(c);
  free(keep);
  assert_int_equal(mt_stacks_through(a, "nothing-matches", &keep, &matched, &err), MT_OK);
  assert_int_equal(matched, 0);
  free(keep);
  assert_int_equal(mt_stacks_through(a, "([", &keep, &matched, &err), MT_E_INVALID);
  assert_null(keep);
  assert_non_null(strstr(err.message, "bad regular expression '(['"));
  mt_analysis_free(a);
}

static const mt_peek_edge *edge(const mt_peek_edge *e, size_t n, size_t i, const char *function) {
  assert_true(i < n);
  assert_string_equal(e[i].key.function, function);
  return &e[i];
}

static void peek_gives_callers_of_the_outermost_call_and_callees_of_the_innermost(void **state) {
  (void)state;
  mt_analysis *a = analyse_file(rec_path(), NULL);
  mt_peek *p;
  size_t n;
  mt_error err;
  assert_int_equal(mt_peek_functions(a, "^[fg]$", MT_METRIC_BYTES, &p, &n, &err), MT_OK);
  assert_int_equal(n, 2);
  /* g (cum 160) first. Callers: f 128 (r1, r2), main 32 (r3); callees: h 80 (r1), f 48 (r2),
   * and itself 32 (r3). */
  assert_string_equal(p[0].key.function, "g");
  assert_true(value(a, &p[0].cum, MT_METRIC_BYTES) == 160);
  assert_true(value(a, &p[0].flat, MT_METRIC_BYTES) == 32);
  assert_int_equal(p[0].cum_stacks, 3);
  assert_int_equal(p[0].ncallers, 2);
  assert_true(value(a, &edge(p[0].callers, 2, 0, "f")->stats, MT_METRIC_BYTES) == 128);
  assert_int_equal(p[0].callers[0].stacks, 2);
  assert_true(value(a, &edge(p[0].callers, 2, 1, "main")->stats, MT_METRIC_BYTES) == 32);
  assert_int_equal(p[0].ncallees, 2);
  assert_true(value(a, &edge(p[0].callees, 2, 0, "h")->stats, MT_METRIC_BYTES) == 80);
  assert_true(value(a, &edge(p[0].callees, 2, 1, "f")->stats, MT_METRIC_BYTES) == 48);
  /* f (cum 144): callers main 128 (r1, r2: the outermost call's caller, not g), h 16 (r4);
   * callees g 80 (r1's innermost f calls g), itself 64 (r2, r4). */
  assert_string_equal(p[1].key.function, "f");
  assert_true(value(a, &p[1].cum, MT_METRIC_BYTES) == 144);
  assert_true(value(a, &p[1].flat, MT_METRIC_BYTES) == 64);
  assert_int_equal(p[1].ncallers, 2);
  assert_true(value(a, &edge(p[1].callers, 2, 0, "main")->stats, MT_METRIC_BYTES) == 128);
  assert_true(value(a, &edge(p[1].callers, 2, 1, "h")->stats, MT_METRIC_BYTES) == 16);
  assert_int_equal(p[1].ncallees, 1);
  assert_true(value(a, &edge(p[1].callees, 1, 0, "g")->stats, MT_METRIC_BYTES) == 80);
  mt_peeks_free(p, n);

  /* main is the outermost frame: its one caller is none (function ""). */
  assert_int_equal(mt_peek_functions(a, "^main$", MT_METRIC_BYTES, &p, &n, &err), MT_OK);
  assert_int_equal(n, 1);
  assert_int_equal(p[0].ncallers, 1);
  assert_true(value(a, &edge(p[0].callers, 1, 0, "")->stats, MT_METRIC_BYTES) == 176);
  assert_int_equal(p[0].ncallees, 3);
  assert_true(value(a, &edge(p[0].callees, 3, 0, "f")->stats, MT_METRIC_BYTES) == 128);
  assert_true(value(a, &edge(p[0].callees, 3, 1, "g")->stats, MT_METRIC_BYTES) == 32);
  assert_true(value(a, &edge(p[0].callees, 3, 2, "h")->stats, MT_METRIC_BYTES) == 16);
  mt_peeks_free(p, n);

  /* Live at the end (r1 freed): f's callers main 48, h 16; no callee is left. */
  assert_int_equal(mt_peek_functions(a, "^f$", MT_METRIC_LIVE, &p, &n, &err), MT_OK);
  assert_int_equal(n, 1);
  assert_true(value(a, &p[0].cum, MT_METRIC_LIVE) == 64);
  assert_int_equal(p[0].ncallers, 2);
  assert_true(value(a, &edge(p[0].callers, 2, 0, "main")->stats, MT_METRIC_LIVE) == 48);
  assert_int_equal(p[0].ncallees, 0);
  mt_peeks_free(p, n);

  assert_int_equal(mt_peek_functions(a, "^zzz$", MT_METRIC_BYTES, &p, &n, &err), MT_OK);
  assert_int_equal(n, 0);
  mt_peeks_free(p, n);
  assert_int_equal(mt_peek_functions(a, "*", MT_METRIC_BYTES, &p, &n, &err), MT_E_INVALID);
  mt_analysis_free(a);
}

/* Runs `memtap ARGS...`, asserts its exit status, and returns its stdout (malloc'd); its stderr
 * goes to *err when err is not NULL (caller frees), else is checked empty. */
#define RUN(status, err, ...) run_cli(status, err, __VA_ARGS__, NULL)
static char *run_cli(int status, char **err, const char *arg0, ...) {
  const char *args[16] = {arg0};
  va_list ap;
  va_start(ap, arg0);
  size_t n = 1;
  while (n < 15 && (args[n] = va_arg(ap, const char *)))
    n++;
  va_end(ap);
  char *out, *e;
  int rc = tu_run_cli(&out, NULL, &e, args[0], args[1], args[2], args[3], args[4], args[5], args[6],
                      args[7], args[8], args[9], NULL);
  if (rc != status)
    fail_msg("memtap %s ... exited %d, not %d; stderr: %s", arg0, rc, status, e);
  if (err)
    *err = e;
  else {
    if (e && *e)
      fail_msg("memtap %s ...: unexpected stderr: %s", arg0, e);
    free(e);
  }
  return out;
}

static const char rec_functions[] = "functions by bytes, ranked by cum: 4 of 4 (total 176 B)\n"
                                    "\n"
                                    "        flat   flat%    sum%          cum    cum%  function\n"
                                    "         0 B   0.00%   0.00%        176 B 100.00%  main\n"
                                    "        32 B  18.18%  18.18%        160 B  90.91%  g\n"
                                    "        64 B  36.36%  54.55%        144 B  81.82%  f\n"
                                    "        80 B  45.45% 100.00%         96 B  54.55%  h\n";

static void functions_and_top_inclusive_print_flat_and_cum_exactly(void **state) {
  (void)state;
  char *out = RUN(0, NULL, "functions", rec_path());
  assert_string_equal(out, rec_functions);
  free(out);
  out = RUN(0, NULL, "top", "--group", "function", "--inclusive", rec_path());
  assert_string_equal(out, rec_functions);
  free(out);
  /* Live at the end (r1 freed): 96 B; sites keep f's two lines apart. */
  out = RUN(0, NULL, "functions", "--group", "site", "--by", "live", rec_path());
  assert_string_equal(out, "sites by live, ranked by cum: 5 of 5 (total 96 B)\n"
                           "\n"
                           "        flat   flat%    sum%          cum    cum%  site\n"
                           "         0 B   0.00%   0.00%         96 B 100.00%  main m.ml:1\n"
                           "        32 B  33.33%  33.33%         80 B  83.33%  g r.ml:20\n"
                           "        16 B  16.67%  50.00%         64 B  66.67%  f r.ml:10\n"
                           "        48 B  50.00% 100.00%         48 B  50.00%  f r.ml:11\n"
                           "         0 B   0.00% 100.00%         16 B  16.67%  h r.ml:30\n");
  free(out);
  /* By flat, counts (one object each at rate 1), two rows. */
  out = RUN(0, NULL, "functions", "--sort", "flat", "--by", "count", "-n", "2", rec_path());
  assert_string_equal(out,
                      "functions by count (objects), ranked by flat: 2 of 4 (total 4 objects)\n"
                      "\n"
                      "        flat   flat%    sum%          cum    cum%  function\n"
                      "           2  50.00%  50.00%            3  75.00%  f\n"
                      "           1  25.00%  75.00%            3  75.00%  g\n");
  free(out);
}

/* The window [15, 50] µs holds r2, r3, r4 (96 B); through h: r1 (before the window: 0 B) and r4. */
static void functions_focus_and_window_are_in_the_header(void **state) {
  (void)state;
  char *out = RUN(0, NULL, "functions", "--focus", "^h$", "--from", "0.000015", rec_path());
  assert_string_equal(out, "functions by bytes, ranked by cum: 3 of 3 (total 96 B)\n"
                           "window: 0.000015 s to 0.000050 s (0.000035 s)\n"
                           "focus: the 2 of 4 backtraces through a function matching '^h$' (16 B, "
                           "16.67%)\n"
                           "\n"
                           "        flat   flat%    sum%          cum    cum%  function\n"
                           "        16 B  16.67%  16.67%         16 B  16.67%  f\n"
                           "         0 B   0.00%  16.67%         16 B  16.67%  h\n"
                           "         0 B   0.00%  16.67%         16 B  16.67%  main\n");
  free(out);
  out = RUN(0, NULL, "functions", "--json", "--focus", "^h$", "--to", "0.000045", rec_path());
  assert_true(tu_json_valid(out, NULL));
  assert_non_null(strstr(out, "\"total\":176,\"window\":{\"from_s\":0.000000,\"to_s\":0.000045},"
                              "\"focus\":{\"regex\":\"^h$\",\"backtraces\":2,\"value\":96},"
                              "\"rows_total\":4,\"rows\":[{\"key\":{\"function\":\"h\""));
  free(out);
  out = RUN(0, NULL, "top", "--from", "0.000015", "-n", "1", rec_path());
  assert_non_null(strstr(out,
                         "top 1 of 3 sites by bytes (total 96 B)\nwindow: 0.000015 s to 0.000050 s "
                         "(0.000035 s)\n\n  1."));
  free(out);
}

/* Every command with a text header states the window: the same line in each. */
static void every_text_header_states_the_window(void **state) {
  (void)state;
  static const char *commands[][4] = {{"summary"},           {"top"},   {"functions"},
                                      {"callers", "main"},   {"leaks"}, {"timeline"},
                                      {"top", "--inclusive"}};
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    const char *args[4] = {0};
    size_t n = 0;
    while (n < 3 && commands[i][n])
      args[n] = commands[i][n], n++;
    args[n] = rec_path();
    char *out =
        RUN(0, NULL, args[0], "--from", "0.000015", "--to", "0.000045", args[1], args[2], args[3]);
    if (!strstr(out, "0.000015 s to 0.000045 s (0.000030 s)\n"))
      fail_msg("memtap %s: no window line in\n%s", args[0], out);
    free(out);
  }
  size_t size;
  uint8_t *data = rec_trace("/usr/bin/test-program", &size);
  const char *copy = known_trace_file("rec-copy.ctf", data, size);
  free(data);
  char *out = RUN(0, NULL, "diff", "--from", "0.000015", "--to", "0.000045", rec_path(), copy);
  assert_non_null(strstr(out, "\nwindow: 0.000015 s to 0.000045 s (0.000030 s)\n"));
  free(out);
}

static void functions_json_gives_both_columns_with_their_amounts(void **state) {
  (void)state;
  char *out = RUN(0, NULL, "functions", "--json", "-n", "0", rec_path());
  assert_true(tu_json_valid(out, NULL));
  assert_non_null(strstr(out, "{\"schema\":\"memtap.functions/1\",\"by\":\"bytes\",\"group\":"
                              "\"function\",\"sort\":\"cum\",\"total\":176,\"window\":null,"
                              "\"focus\":null,\"rows_total\":4,\"rows\":["));
  /* f: flat r2 r4 (2 objects, 8 samples, 64 B; live both), cum r1 r2 r4 (3, 18, 144; live 2). */
  assert_non_null(strstr(
      out, "{\"key\":{\"function\":\"f\",\"file\":\"\",\"line\":0},"
           "\"flat\":{\"value\":64,\"backtraces\":2,"
           "\"allocated\":{\"objects\":2,\"samples\":8,\"bytes\":64,\"objects_estimated\":2},"
           "\"live\":{\"objects\":2,\"samples\":8,\"bytes\":64,\"objects_estimated\":2},"
           "\"peak\":{\"objects\":2,\"samples\":8,\"bytes\":64,\"objects_estimated\":2}},"
           "\"cum\":{\"value\":144,\"backtraces\":3,"
           "\"allocated\":{\"objects\":3,\"samples\":18,\"bytes\":144,\"objects_estimated\":3},"
           "\"live\":{\"objects\":2,\"samples\":8,\"bytes\":64,\"objects_estimated\":2},"
           "\"peak\":{\"objects\":3,\"samples\":18,\"bytes\":144,\"objects_estimated\":3}}}"));
  free(out);
}

static void callers_text_and_json_give_shares_exactly(void **state) {
  (void)state;
  char *out = RUN(0, NULL, "callers", "^[fg]$", rec_path());
  assert_string_equal(out,
                      "callers and callees of 2 of 2 functions matching '^[fg]$', by bytes (total "
                      "176 B)\n"
                      "\n"
                      "g\n"
                      "  cum 160 B (90.91% of the total) in 3 backtraces, flat 32 B (18.18%)\n"
                      "  callers (outside its outermost call):\n"
                      "     80.00%        128 B  f\n"
                      "     20.00%         32 B  main\n"
                      "  callees (inside its innermost call):\n"
                      "     50.00%         80 B  h\n"
                      "     30.00%         48 B  f\n"
                      "     20.00%         32 B  (itself: allocated in g)\n"
                      "\n"
                      "f\n"
                      "  cum 144 B (81.82% of the total) in 3 backtraces, flat 64 B (36.36%)\n"
                      "  callers (outside its outermost call):\n"
                      "     88.89%        128 B  main\n"
                      "     11.11%         16 B  h\n"
                      "  callees (inside its innermost call):\n"
                      "     55.56%         80 B  g\n"
                      "     44.44%         64 B  (itself: allocated in f)\n");
  free(out);
  /* --lines 1: the rest summed; -n 1: only g. */
  out = RUN(0, NULL, "callers", "-n", "1", "--lines", "1", "^[fg]$", rec_path());
  assert_string_equal(out,
                      "callers and callees of 1 of 2 functions matching '^[fg]$', by bytes (total "
                      "176 B)\n"
                      "\n"
                      "g\n"
                      "  cum 160 B (90.91% of the total) in 3 backtraces, flat 32 B (18.18%)\n"
                      "  callers (outside its outermost call):\n"
                      "     80.00%        128 B  f\n"
                      "     20.00%         32 B  (1 other caller)\n"
                      "  callees (inside its innermost call):\n"
                      "     50.00%         80 B  h\n"
                      "     30.00%         48 B  (1 other callee)\n"
                      "     20.00%         32 B  (itself: allocated in g)\n");
  free(out);
  out = RUN(0, NULL, "callers", "main", "--json", rec_path());
  assert_true(tu_json_valid(out, NULL));
  assert_string_equal(
      out,
      "{\"schema\":\"memtap.callers/1\",\"by\":\"bytes\",\"regex\":\"main\",\"total\":176,"
      "\"window\":null,\"functions_total\":1,\"functions\":[{\"function\":\"main\",\"cum\":176,"
      "\"flat\":0,\"cum_backtraces\":4,\"flat_backtraces\":0,\"callers\":[{\"function\":null,"
      "\"value\":176,\"backtraces\":4}],\"callees\":[{\"function\":\"f\",\"value\":128,"
      "\"backtraces\":2},{\"function\":\"g\",\"value\":32,\"backtraces\":1},{\"function\":"
      "\"h\",\"value\":16,\"backtraces\":1}]}]}\n");
  free(out);
}

/* top --focus '^h$': only r1 (site h, 80 B) and r4 (site f:10, 16 B); shares of the whole 176 B.
 * Without the focus, function f would also have r2 (48 B). */
static void top_focus_ranks_only_the_backtraces_through_the_match(void **state) {
  (void)state;
  char *out = RUN(0, NULL, "top", "--focus", "^h$", rec_path());
  assert_string_equal(out, "top 2 of 2 sites by bytes (total 176 B)\n"
                           "focus: the 2 of 4 backtraces through a function matching '^h$'\n"
                           "\n"
                           "  1. 80 B          45.5%  h r.ml:30\n"
                           "     allocated 1 object (80 B), live at end 0, 1 "
                           "backtrace\n"
                           "     heaviest backtrace:\n"
                           "       main m.ml:1\n"
                           "       f r.ml:10\n"
                           "       g r.ml:20\n"
                           "       f r.ml:10\n"
                           "       g r.ml:20\n"
                           "       h r.ml:30\n"
                           "\n"
                           "  2. 16 B           9.1%  f r.ml:10\n"
                           "     allocated 1 object (16 B), live at end 1, 1 "
                           "backtrace\n"
                           "     heaviest backtrace:\n"
                           "       main m.ml:1\n"
                           "       h r.ml:30\n"
                           "       f r.ml:10\n"
                           "\n");
  free(out);
  out = RUN(0, NULL, "top", "--focus", "^h$", "--group", "function", "--inverted", "--json",
            rec_path());
  assert_true(tu_json_valid(out, NULL));
  assert_non_null(strstr(out, "\"total\":176,\"focus\":{\"regex\":\"^h$\",\"backtraces\":2},"
                              "\"groups\":[{\"key\":{\"function\":\"h\""));
  const char *f = strstr(out, "{\"key\":{\"function\":\"f\"");
  assert_non_null(f);
  assert_true(tu_json_number(f, "value") == 16);
  assert_null(strstr(f, "\"line\":11")); /* r2's f:11 is not through h */
  free(out);
  out = RUN(0, NULL, "top", "--focus", "zzz", rec_path());
  assert_string_equal(out, "top 0 of 0 sites by bytes (total 176 B)\n"
                           "focus: the 0 of 4 backtraces through a function matching 'zzz'\n\n");
  free(out);
}

/* flame --focus '^h$' and export --focus: r1 (80 B) and r4 (16 B, f -> f folded), their values
 * adding up to their own 96 B; in use at the end only r4. */
static void flame_and_export_focus_keep_only_the_backtraces_through_the_match(void **state) {
  (void)state;
  char *out = RUN(0, NULL, "flame", "--focus", "^h$", rec_path());
  assert_string_equal(out, "main;f;g;f;g;h 80\nmain;h;f 16\n");
  free(out);
  out = RUN(0, NULL, "export", "--format", "folded", "--focus", "^h$", "--by", "live", "-o", "-",
            rec_path());
  assert_string_equal(out, "main;h;f 16\n");
  free(out);
  out = RUN(0, NULL, "flame", "--focus", "^g$", "--inverted", rec_path());
  assert_string_equal(out, "h;g;f;g;f;main 80\nf;g;f;main 48\ng;main 32\n");
  free(out);
  out = RUN(0, NULL, "flame", "--svg", "--focus", "^h$", rec_path());
  assert_non_null(strstr(out, "flame graph by bytes through functions matching '^h$'</text>"));
  assert_non_null(strstr(out, "<title>all (96 bytes, 100.00%)</title>"));
  free(out);
  out = RUN(0, NULL, "export", "--format", "speedscope", "--focus", "^h$", "-o", "-", rec_path());
  assert_true(tu_json_valid(out, NULL));
  assert_non_null(strstr(out, "\"endValue\":96,\"samples\":[[0,1,2,1,2,3],[0,3,1]],"
                              "\"weights\":[80,16]}"));
  assert_non_null(strstr(out, "\"endValue\":16,\"samples\":[[0,3,1]],\"weights\":[16]}"));
  free(out);
  char *err;
  out = RUN(0, &err, "flame", "--focus", "zzz", rec_path());
  assert_string_equal(out, "");
  assert_non_null(strstr(err, "no backtrace goes through a function matching 'zzz'"));
  free(out);
  free(err);
}

static const char *known_file(void) {
  static char path[4096];
  if (!path[0]) {
    size_t size;
    uint8_t *data = known_trace(&size);
    snprintf(path, sizeof path, "%s", known_trace_file("known.ctf", data, size));
    free(data);
  }
  return path;
}

/* known_trace against its variant whose id4 has 20 words: site A 176 -> 320 B (+81.8%), B the
 * same, total 1008 -> 1152 B (+14.3%). At rate 1 there is no sampling noise. */
static void diff_has_totals_percentages_and_says_when_nothing_differs(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = known_trace_variant(20, &size);
  const char *variant = known_trace_file("variant.ctf", data, size);
  free(data);
  char *out = RUN(0, NULL, "diff", known_file(), variant);
  char expected[16384];
  snprintf(expected, sizeof expected,
           "bytes allocated per site: A = %s, B = %s\n"
           "sampling: A at rate 1 (8 B per sample), B at rate 1 (8 B per sample)\n"
           "\n"
           "      change  change%%            A            B   site\n"
           "      +144 B   +81.8%%        176 B        320 B   fn_101_2 file_21.c:101\n"
           "        +0 B    +0.0%%        832 B        832 B   fn_102_0 file_22.c:102\n"
           "      +144 B   +14.3%%       1008 B      1.1 KiB   total\n",
           known_file(), variant);
  assert_string_equal(out, expected);
  free(out);
  out = RUN(0, NULL, "diff", "--json", known_file(), variant);
  assert_true(tu_json_valid(out, NULL));
  assert_non_null(strstr(
      out, "\"same_executable\":true,\"window\":null,\"noise_z\":2,\"changed\":1,"
           "\"beyond_noise\":1,\"total\":{\"key\":null,\"a\":1008,\"b\":1152,\"change\":144,"
           "\"change_percent\":14.29,\"noise\":0,\"within_noise\":false},\"rows_total\":2,"
           "\"rows\":[{\"key\":{\"function\":\"fn_101_2\",\"file\":\"file_21.c\",\"line\":101},"
           "\"a\":176,\"b\":320,\"change\":144,\"change_percent\":81.82,\"noise\":0,"
           "\"within_noise\":false},{\"key\":{\"function\":\"fn_102_0\",\"file\":\"file_22.c\","
           "\"line\":102},\"a\":832,\"b\":832,\"change\":0,\"change_percent\":0.00,\"noise\":0,"
           "\"within_noise\":false}]}\n"));
  free(out);
  out = RUN(0, NULL, "diff", "--group", "file", known_file(), known_file());
  snprintf(expected, sizeof expected,
           "bytes allocated per file: A = %s, B = %s\n"
           "sampling: A at rate 1 (8 B per sample), B at rate 1 (8 B per sample)\n"
           "\n"
           "no differences: every file has the same bytes allocated in A and B (total 1008 B)\n",
           known_file(), known_file());
  assert_string_equal(out, expected);
  free(out);
  /* The window is in the header: from 45 µs only id4 differs (16 B against 160 B). */
  out = RUN(0, NULL, "diff", "--from", "0.000045", known_file(), variant);
  assert_non_null(strstr(out, "window: 0.000045 s to 0.000080 s (0.000035 s)\n\n"));
  assert_non_null(strstr(out, "      +144 B   +17.6%        816 B        960 B   total\n"));
  free(out);
}

/* known_trace (rate 1) against the same stream at rate 0.25 (32 B per sample): site A 22 samples
 * at rate 1 (176 B, no noise) against 7 (224 B): sd 32 sqrt(7 x 0.75) = 73.3 B, and +48 B < 2 sd;
 * site B 104 samples (832 B) against 26 (832 B): no change, sd 32 sqrt(26 x 0.75) = 141.3 B; total
 * +48 B, sd 32 sqrt(33 x 0.75) = 159.2 B. */
static void diff_marks_changes_within_the_sampling_noise(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = known_trace_at_rate(0.25, &size);
  const char *quarter = known_trace_file("quarter.ctf", data, size);
  free(data);
  char *out = RUN(0, NULL, "diff", known_file(), quarter);
  char expected[16384];
  snprintf(expected, sizeof expected,
           "bytes allocated per site: A = %s, B = %s\n"
           "sampling: A at rate 1 (8 B per sample), B at rate 0.25 (32 B per sample)\n"
           "\n"
           "      change  change%%            A            B   site\n"
           "       +48 B   +27.3%%        176 B        224 B ~ fn_101_2 file_21.c:101\n"
           "        +0 B    +0.0%%        832 B        832 B   fn_102_0 file_22.c:102\n"
           "       +48 B    +4.8%%       1008 B      1.0 KiB ~ total\n"
           "\n"
           "no change is larger than the sampling noise\n"
           "\n"
           "~ within the sampling noise: |B - A| < 2 standard deviations (sample counts are "
           "Poisson; docs/analysis.md)\n",
           known_file(), quarter);
  assert_string_equal(out, expected);
  free(out);
  out = RUN(0, NULL, "diff", "--json", known_file(), quarter);
  assert_non_null(strstr(out, "\"changed\":1,\"beyond_noise\":0,\"total\":{\"key\":null,\"a\":1008,"
                              "\"b\":1056,\"change\":48,\"change_percent\":4.76,\"noise\":159,"
                              "\"within_noise\":true}"));
  assert_non_null(strstr(out, "\"a\":176,\"b\":224,\"change\":48,\"change_percent\":27.27,"
                              "\"noise\":73,\"within_noise\":true}"));
  assert_non_null(strstr(out, "\"a\":832,\"b\":832,\"change\":0,\"change_percent\":0.00,"
                              "\"noise\":141,\"within_noise\":false}"));
  free(out);

  /* Counts: at rate 0.25 each stack's estimate is rounded to whole objects (A 4, B 3);
   * at rate 1 there is no noise, at 0.25 one object more is well within it. */
  out = RUN(0, NULL, "diff", "--by", "count", known_file(), quarter);
  assert_non_null(strstr(out, "      change  change%            A            B   site\n"
                              "          +1   +33.3%            3            4 ~ fn_101_2 "
                              "file_21.c:101\n"
                              "          +1   +50.0%            2            3 ~ fn_102_0 "
                              "file_22.c:102\n"
                              "          +2 "));
  /* The total is the summary's estimate, kept exact (6.87 objects, shown 7). */
  assert_non_null(strstr(out, "%            5            7 ~ total\n"));
  free(out);
  /* The library's noise: exactly the formula, and 0 at rate 1. */
  mt_analysis *a = analyse_file(known_file(), NULL), *b = analyse_file(quarter, NULL);
  mt_diff d;
  mt_error err;
  assert_int_equal(mt_diff_compute(a, b, MT_GROUP_SITE, MT_METRIC_BYTES, false, &d, &err), MT_OK);
  assert_int_equal(d.count, 2);
  assert_true(fabs(d.rows[0].noise - 32 * sqrt(7 * 0.75)) < 1e-9);
  assert_true(fabs(d.total.noise - 32 * sqrt(33 * 0.75)) < 1e-9);
  mt_diff_free(&d);
  /* Counts: E = sum of 1/p over the sampled objects, k of them: sd sqrt(E^2/k - E); 0 at rate 1. */
  const mt_summary *sb = mt_analysis_summary(b);
  double e = sb->allocated.objects_estimated, k = (double)sb->allocated.objects;
  mt_stats whole = {0};
  whole.allocated = sb->allocated;
  assert_true(fabs(mt_diff_noise(b, &whole, MT_METRIC_COUNT) - sqrt(e * e / k - e)) < 1e-9);
  whole.allocated = mt_analysis_summary(a)->allocated;
  assert_true(mt_diff_noise(a, &whole, MT_METRIC_COUNT) == 0);
  assert_int_equal(mt_diff_compute(a, b, MT_GROUP_SITE, MT_METRIC_TEMPORARY, false, &d, &err),
                   MT_E_INVALID);
  mt_analysis_free(a);
  mt_analysis_free(b);
}

/* r1 of 20 words instead of 10 (+80 B) is on main, f, g and h's backtraces: each one's inclusive
 * cost grows by 80 B, while only h allocated it itself. */
static void diff_inclusive_compares_cum_per_function(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = rec_trace_sized("/usr/bin/test-program", 20, &size);
  const char *bigger = known_trace_file("rec20.ctf", data, size);
  free(data);
  char *out = RUN(0, NULL, "diff", "--inclusive", "--group", "function", rec_path(), bigger);
  char expected[16384];
  snprintf(expected, sizeof expected,
           "bytes allocated per function, inclusive (by it or anything it called): A = %s, B = "
           "%s\n"
           "sampling: A at rate 1 (8 B per sample), B at rate 1 (8 B per sample)\n"
           "\n"
           "      change  change%%            A            B   function\n"
           "       +80 B   +55.6%%        144 B        224 B   f\n"
           "       +80 B   +50.0%%        160 B        240 B   g\n"
           "       +80 B   +83.3%%         96 B        176 B   h\n"
           "       +80 B   +45.5%%        176 B        256 B   main\n"
           "       +80 B   +45.5%%        176 B        256 B   total\n",
           rec_path(), bigger);
  assert_string_equal(out, expected);
  free(out);
  out = RUN(0, NULL, "diff", "--group", "function", rec_path(), bigger);
  assert_non_null(strstr(out, "   function\n"
                              "       +80 B  +100.0%         80 B        160 B   h\n"
                              "        +0 B    +0.0%         64 B         64 B   f\n"
                              "        +0 B    +0.0%         32 B         32 B   g\n"
                              "       +80 B   +45.5%        176 B        256 B   total\n"));
  free(out);
  out = RUN(0, NULL, "diff", "--json", "--inclusive", rec_path(), bigger);
  assert_non_null(strstr(out, "\"group\":\"site\",\"inclusive\":true,"));
  free(out);
}

static void diff_warns_when_the_executables_differ(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = rec_trace("/opt/other/prog", &size);
  const char *other = known_trace_file("other.ctf", data, size);
  free(data);
  data = rec_trace("/home/me/build/test-program", &size); /* another build of the same program */
  const char *rebuilt = known_trace_file("rebuilt.ctf", data, size);
  free(data);
  char *err;
  char *out = RUN(0, &err, "diff", rec_path(), other);
  assert_string_equal(err, "memtap: warning: A and B come from different executables (A: "
                           "/usr/bin/test-program, B: /opt/other/prog): their sites may not "
                           "correspond\n");
  assert_non_null(strstr(out, "no differences"));
  free(out);
  free(err);
  out = RUN(0, &err, "diff", "--json", rec_path(), other);
  assert_non_null(strstr(out, "\"same_executable\":false"));
  free(out);
  free(err);
  out = RUN(0, NULL, "diff", rec_path(), rebuilt); /* stderr checked empty */
  free(out);
}

static void views_commands_have_help_and_clear_errors(void **state) {
  (void)state;
  const char *commands[] = {"functions", "callers"};
  for (size_t i = 0; i < 2; i++) {
    char *out = RUN(0, NULL, commands[i], "--help");
    assert_non_null(strstr(out, "usage: memtap "));
    free(out);
    char *err;
    free(RUN(64, &err, commands[i], "--no-such-option", rec_path()));
    assert_non_null(strstr(err, "unknown option '--no-such-option'"));
    free(err);
  }
  static const struct {
    int status;
    const char *args[8];
    const char *message;
  } cases[] = {
      {64, {"callers", NULL}, "memtap callers: expected a REGEX and a TRACE"},
      {64, {"callers", "(", "T"}, "memtap callers: bad regular expression '(': "},
      {1, {"callers", "zzz", "T"}, ": no function matching 'zzz' has any bytes\n"},
      {1, {"callers", "--by", "temporary", "f", "/nonexistent.ctf"}, "/nonexistent.ctf"},
      {64, {"functions", "--sort", "size", "T"}, "memtap functions: --sort takes cum or flat"},
      {64, {"functions", "--focus", "(", "T"}, "memtap functions: bad --focus regular expression"},
      {64, {"functions", "--group", "line", "T"}, "--group takes site, function or file"},
      {64, {"functions", "T", "T"}, "memtap functions: expected exactly one TRACE"},
      {64, {"top", "--focus", "(", "T"}, "memtap top: bad --focus regular expression '(': "},
      {64, {"top", "--inclusive", "--inverted", "T"}, "--inclusive and --inverted are different"},
      {64, {"flame", "--focus", "(", "T"}, "memtap flame: bad --focus regular expression '(': "},
      {64,
       {"export", "--format", "pprof", "-o", "/dev/null", "--focus", "(", "T"},
       "memtap export: bad --focus regular expression '(': "},
      {64,
       {"export", "--format", "chrome", "-o", "/dev/null", "--focus", "f", "T"},
       "memtap export: --focus is for pprof, speedscope and folded"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *args[8];
    for (size_t j = 0; j < 8; j++)
      args[j] = cases[i].args[j] && !strcmp(cases[i].args[j], "T") ? rec_path() : cases[i].args[j];
    char *err;
    free(RUN(cases[i].status, &err, args[0], args[1], args[2], args[3], args[4], args[5], args[6],
             args[7]));
    if (!strstr(err, cases[i].message))
      fail_msg("case %zu: stderr %s lacks %s", i, err, cases[i].message);
    free(err);
  }
}

/* demo_v3.ctf at 8 000 B per sample: `go tool pprof -top` on memtap's pprof export of it gives
 * these flat and cum columns (57 312 000 B in all; the integration test compares every row). */
static void demo_v3_functions_match_pprof_flat_and_cum(void **state) {
  (void)state;
  const char *demo = tu_testdata("memtrace/demo_v3.ctf");
  char *out = RUN(0, NULL, "functions", "--json", "-n", "0", demo);
  assert_true(tu_json_valid(out, NULL));
  assert_true(tu_json_number(out, "total") == 57312000);
  static const struct {
    const char *function;
    double flat, cum;
  } want[] = {{"Dune__exe__Demo.phase1", 0, 29600000},
              {"Dune__exe__Demo.phase3", 23712000, 23712000},
              {"Stdlib__List.init_aux", 23560000, 23560000},
              {"Stdlib__List.map", 2304000, 4808000},
              {"Dune__exe__Demo.phase2", 0, 4000000},
              {"Dune__exe__Demo.tree", 4000000, 4000000},
              {"Dune__exe__Demo.pairs.(fun)", 2504000, 2504000},
              {"Stdlib__Bytes.make", 32000, 32000},
              {"Dune__exe__Demo.make_string", 0, 32000}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char needle[128];
    snprintf(needle, sizeof needle, "{\"key\":{\"function\":\"%s\"", want[i].function);
    const char *row = strstr(out, needle);
    if (!row)
      fail_msg("no row %s", want[i].function);
    assert_true(tu_json_number(strstr(row, "\"flat\":"), "value") == want[i].flat);
    assert_true(tu_json_number(strstr(row, "\"cum\":"), "value") == want[i].cum);
  }
  free(out);
  /* A sampled trace: temporary is refused with or without a focus. */
  char *err;
  free(RUN(1, &err, "top", "--focus", "phase1", "--by", "temporary", demo));
  assert_non_null(strstr(err, "temporary allocations are only known when every allocation is "
                              "recorded"));
  free(err);
  out = RUN(0, NULL, "top", "--group", "function", "--inclusive", "-n", "3", demo);
  assert_non_null(strstr(out, "  51.65%  Dune__exe__Demo.phase1\n"));
  free(out);
  /* pprof -peek 'List.map$': called by phase1 (100%), calls pairs.(fun) 2 504 000 B (52.08%). */
  out = RUN(0, NULL, "callers", "List\\.map$", demo);
  assert_non_null(strstr(out, "    100.00%      4.6 MiB  Dune__exe__Demo.phase1\n"));
  assert_non_null(strstr(out, "     52.08%      2.4 MiB  Dune__exe__Demo.pairs.(fun)\n"));
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(costs_count_each_backtrace_once_however_often_a_function_recurs),
      cmocka_unit_test(costs_on_the_stacks_trace_skip_nothing_for_flat),
      cmocka_unit_test(an_empty_backtrace_is_the_key_no_backtrace),
      cmocka_unit_test(focus_keeps_only_the_backtraces_through_matching_functions),
      cmocka_unit_test(peek_gives_callers_of_the_outermost_call_and_callees_of_the_innermost),
      cmocka_unit_test(functions_and_top_inclusive_print_flat_and_cum_exactly),
      cmocka_unit_test(functions_focus_and_window_are_in_the_header),
      cmocka_unit_test(functions_json_gives_both_columns_with_their_amounts),
      cmocka_unit_test(every_text_header_states_the_window),
      cmocka_unit_test(callers_text_and_json_give_shares_exactly),
      cmocka_unit_test(top_focus_ranks_only_the_backtraces_through_the_match),
      cmocka_unit_test(flame_and_export_focus_keep_only_the_backtraces_through_the_match),
      cmocka_unit_test(diff_has_totals_percentages_and_says_when_nothing_differs),
      cmocka_unit_test(diff_marks_changes_within_the_sampling_noise),
      cmocka_unit_test(diff_inclusive_compares_cum_per_function),
      cmocka_unit_test(diff_warns_when_the_executables_differ),
      cmocka_unit_test(views_commands_have_help_and_clear_errors),
      cmocka_unit_test(demo_v3_functions_match_pprof_flat_and_cum),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
