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

/* The recursion trace, from an executable named `exe`. */
static uint8_t *rec_trace(const char *exe, size_t *size) {
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
  static const struct {
    int64_t words;
    const uint64_t *stack;
    size_t depth;
  } allocs[] = {{10, r1, 6}, {6, r2, 4}, {4, r3, 2}, {2, r4, 4}};
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
  assert_true(value(a, &cost_of(c, n, "f", "", 0)->cum, MT_METRIC_COUNT) == 3);
  assert_true(value(a, &cost_of(c, n, "f", "", 0)->flat, MT_METRIC_COUNT) == 2);
  free(c);
  /* Sites: f:10 is on r1, r2, r4 (r4's two calls folded into one frame); f:11 only on r2. */
  assert_int_equal(mt_costs(a, MT_GROUP_SITE, MT_METRIC_BYTES, false, NULL, &c, &n, &err), MT_OK);
  assert_int_equal(n, 5);
  assert_true(value(a, &cost_of(c, n, "f", "r.ml", 10)->cum, MT_METRIC_BYTES) == 144);
  assert_true(value(a, &cost_of(c, n, "f", "r.ml", 10)->flat, MT_METRIC_BYTES) == 16);
  assert_true(value(a, &cost_of(c, n, "f", "r.ml", 11)->cum, MT_METRIC_BYTES) == 48);
  assert_true(value(a, &cost_of(c, n, "f", "r.ml", 11)->flat, MT_METRIC_BYTES) == 48);
  free(c);
  /* Files: every backtrace ends in r.ml and starts in m.ml. */
  assert_int_equal(mt_costs(a, MT_GROUP_FILE, MT_METRIC_BYTES, false, NULL, &c, &n, &err), MT_OK);
  assert_int_equal(n, 2);
  assert_true(value(a, &cost_of(c, n, "", "r.ml", 0)->flat, MT_METRIC_BYTES) == 176);
  assert_true(value(a, &cost_of(c, n, "", "r.ml", 0)->cum, MT_METRIC_BYTES) == 176);
  assert_true(value(a, &cost_of(c, n, "", "m.ml", 0)->flat, MT_METRIC_BYTES) == 0);
  assert_true(value(a, &cost_of(c, n, "", "m.ml", 0)->cum, MT_METRIC_BYTES) == 176);
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
  assert_true(value(a, &cost_of(c, n, "h", "", 0)->cum, MT_METRIC_BYTES) == 96);
  assert_true(value(a, &cost_of(c, n, "h", "", 0)->flat, MT_METRIC_BYTES) == 80);
  assert_true(value(a, &cost_of(c, n, "f", "", 0)->cum, MT_METRIC_BYTES) == 96);
  assert_true(value(a, &cost_of(c, n, "f", "", 0)->flat, MT_METRIC_BYTES) == 16);
  assert_true(value(a, &cost_of(c, n, "g", "", 0)->cum, MT_METRIC_BYTES) == 80);
  assert_true(value(a, &cost_of(c, n, "main", "", 0)->cum, MT_METRIC_BYTES) == 96);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(costs_count_each_backtrace_once_however_often_a_function_recurs),
      cmocka_unit_test(costs_on_the_stacks_trace_skip_nothing_for_flat),
      cmocka_unit_test(focus_keeps_only_the_backtraces_through_matching_functions),
      cmocka_unit_test(peek_gives_callers_of_the_outermost_call_and_callees_of_the_innermost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
