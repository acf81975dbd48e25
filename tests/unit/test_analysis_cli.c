/* The analysis subcommands end to end: every number they print on writer-built traces of known
 * events (analysis_known_trace.h) is checked exactly, and `leaks` on demo_v3.ctf reports the
 * acceptance figures of the issue (932 / 1456 / 11.6 MB, 28 / 150 / 1.2 MB, 4 / 4 / 32 KB). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_known_trace.h"
#include "testutil.h"
#include "tracegen.h"

static const char *known_path(void) {
  static char path[4096];
  if (!path[0]) {
    size_t size;
    uint8_t *data = known_trace(&size);
    snprintf(path, sizeof path, "%s", known_trace_file("known.ctf", data, size));
    free(data);
  }
  return path;
}

/* The JSON text starting at the object that holds "function":"NAME" as a group key. */
static const char *group_of(const char *json, const char *function) {
  char needle[256];
  snprintf(needle, sizeof needle, "{\"key\":{\"function\":\"%s\"", function);
  const char *at = strstr(json, needle);
  if (!at)
    fail_msg("no group %s in %s", function, json);
  return at;
}

static void summary_json_gives_exact_numbers(void **state) {
  (void)state;
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "summary", "--json", known_path(), NULL), 0);
  assert_true(tu_json_valid(out, NULL));
  const char *alloc = strstr(out, "\"allocated\":");
  assert_true(tu_json_number(alloc, "objects") == 5);
  assert_true(tu_json_number(alloc, "samples") == 126);
  assert_true(tu_json_number(alloc, "bytes") == 1008);
  const char *freed = strstr(out, "\"freed\":");
  assert_true(tu_json_number(freed, "objects") == 3);
  assert_true(tu_json_number(freed, "bytes") == 912);
  const char *live = strstr(out, "\"live_end\":");
  assert_true(tu_json_number(live, "objects") == 2);
  assert_true(tu_json_number(live, "bytes") == 96);
  const char *peak = strstr(out, "\"peak\":");
  assert_true(tu_json_number(peak, "time_s") == 0.00005);
  assert_true(tu_json_number(peak, "bytes") == 960);
  const char *temp = strstr(out, "\"temporary\":");
  assert_true(tu_json_number(temp, "objects") == 2);
  assert_true(tu_json_number(temp, "bytes") == 832);
  assert_true(tu_json_number(out, "collects") == 3);
  free(out);
  free(err);
  /* The text form says the same. */
  assert_int_equal(tu_run_cli(&out, NULL, &err, "summary", known_path(), NULL), 0);
  assert_non_null(strstr(out, "peak live heap:  ~960 B at 0.000050 s"));
  assert_non_null(strstr(out, "live at end:     2 sampled objects, 12 samples, ~96 B"));
  free(out);
  free(err);
}

static void window_in_seconds_and_percent(void **state) {
  (void)state;
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "summary", "--json", "--from", "0.000035", "--to",
                              "0.000075", known_path(), NULL),
                   0);
  assert_true(tu_json_number(strstr(out, "\"allocated\":"), "objects") == 2);
  assert_true(tu_json_number(strstr(out, "\"live_start\":"), "bytes") == 80);
  assert_true(tu_json_number(strstr(out, "\"live_end\":"), "bytes") == 80);
  assert_true(tu_json_number(strstr(out, "\"temporary\":"), "bytes") == 800);
  free(out);
  free(err);
  /* 50% of the 80 us trace is 40 us: id2, id3 and id4 are allocated from there on. */
  assert_int_equal(
      tu_run_cli(&out, NULL, &err, "summary", "--json", "--from", "50%", known_path(), NULL), 0);
  assert_true(tu_json_number(strstr(out, "\"allocated\":"), "objects") == 3);
  assert_true(tu_json_number(strstr(out, "\"live_start\":"), "objects") == 1);
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "summary", "--from", "soon", known_path(), NULL),
                   64);
  free(err);
}

static void top_ranks_sites_and_refuses_temporary_on_sampled_traces(void **state) {
  (void)state;
  char *out, *err;
  assert_int_equal(
      tu_run_cli(&out, NULL, &err, "top", "--json", "--by", "temporary", known_path(), NULL), 0);
  assert_true(tu_json_valid(out, NULL));
  const char *b = group_of(out, "fn_102_0");
  assert_true(b == strstr(out, "{\"key\":")); /* first */
  assert_true(tu_json_number(b, "value") == 832);
  free(out);
  free(err);
  assert_int_equal(
      tu_run_cli(&out, NULL, &err, "top", "--json", "--by", "count", known_path(), NULL), 0);
  const char *a = group_of(out, "fn_101_2");
  assert_true(a == strstr(out, "{\"key\":"));
  assert_true(tu_json_number(a, "value") == 3);
  free(out);
  free(err);
  /* --inverted: the backtrace starts at the allocation point. */
  assert_int_equal(tu_run_cli(&out, NULL, &err, "top", "--json", "--inverted", known_path(), NULL),
                   0);
  assert_non_null(strstr(out, "\"backtrace\":[{\"function\":\"fn_102_0\""));
  free(out);
  free(err);
  const char *demo = tu_testdata("memtrace/demo_v3.ctf");
  assert_int_equal(tu_run_cli(&out, NULL, &err, "top", "--by", "temporary", demo, NULL), 1);
  assert_non_null(strstr(err, "every allocation is recorded"));
  free(out);
  free(err);
}

static void leaks_on_demo_v3_match_the_known_sites(void **state) {
  (void)state;
  const char *demo = tu_testdata("memtrace/demo_v3.ctf");
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "leaks", "--json", "-n", "0", demo, NULL), 0);
  assert_true(tu_json_valid(out, NULL));
  const char *g = group_of(out, "Dune__exe__Demo.phase3");
  assert_true(tu_json_number(g, "objects") == 932);
  assert_true(tu_json_number(g, "samples") == 1456);
  assert_true(tu_json_number(g, "bytes") == 11648000);
  g = group_of(out, "Dune__exe__Demo.big_floats");
  assert_true(tu_json_number(g, "objects") == 28);
  assert_true(tu_json_number(g, "samples") == 150);
  assert_true(tu_json_number(g, "bytes") == 1200000);
  /* make_string's strings are allocated by Bytes.make, inlined into it: the site is the
   * innermost frame, and make_string is on its backtrace. */
  g = group_of(out, "Stdlib__Bytes.make");
  const char *next = strstr(g + 1, "{\"key\":");
  const char *caller = strstr(g, "\"function\":\"Dune__exe__Demo.make_string\"");
  assert_non_null(caller);
  assert_true(!next || caller < next);
  assert_true(tu_json_number(g, "objects") == 4);
  assert_true(tu_json_number(g, "samples") == 4);
  assert_true(tu_json_number(g, "bytes") == 32000);
  /* The rest are list cells and tree nodes: 5 groups in all, 1588 objects. */
  assert_true(tu_json_number(out, "groups_total") == 5);
  assert_true(tu_json_number(strstr(out, "\"total\":"), "objects") == 1588);
  free(out);
  free(err);
  /* The text form labels what leaks mean and shows the same figures. */
  assert_int_equal(tu_run_cli(&out, NULL, &err, "leaks", demo, NULL), 0);
  assert_non_null(strstr(out, "not freed by the end of the trace"));
  assert_non_null(strstr(out, "932 objects, 1456 samples, ~11.6 MB"));
  assert_non_null(strstr(out, "28 objects, 150 samples, ~1.2 MB"));
  assert_non_null(strstr(out, "4 objects, 4 samples, ~32.0 KB"));
  free(out);
  free(err);
}

static void leaks_fail_above_sets_exit_status_3(void **state) {
  (void)state;
  char *err;
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "leaks", "--fail-above", "95", known_path(), NULL),
                   3);
  assert_non_null(strstr(err, "above --fail-above 95"));
  free(err);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "leaks", "--fail-above", "96", known_path(), NULL),
                   0);
  free(err);
}

static void diff_normalises_and_orders_by_change(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = known_trace_variant(20, &size);
  const char *b = known_trace_file("variant.ctf", data, size);
  free(data);
  data = known_trace_at_rate(0.25, &size);
  const char *c = known_trace_file("quarter.ctf", data, size);
  free(data);
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "diff", "--json", known_path(), b, NULL), 0);
  assert_true(tu_json_valid(out, NULL));
  const char *a = group_of(out, "fn_101_2"); /* 176 -> 320 bytes: the only change, first */
  assert_true(a == strstr(out, "{\"key\":"));
  assert_true(tu_json_number(a, "a") == 176);
  assert_true(tu_json_number(a, "b") == 320);
  assert_true(tu_json_number(a, "change") == 144);
  assert_true(tu_json_number(group_of(out, "fn_102_0"), "change") == 0);
  free(out);
  free(err);
  /* At rate 0.25 site B has 1 + 25 samples = 26 / 0.25 * 8 = 832 bytes: the same estimate. */
  assert_int_equal(tu_run_cli(&out, NULL, &err, "diff", "--json", known_path(), c, NULL), 0);
  assert_true(tu_json_number(group_of(out, "fn_102_0"), "b") == 832);
  assert_true(tu_json_number(group_of(out, "fn_101_2"), "b") == 224); /* 3+3+1 samples */
  free(out);
  free(err);
}

static void timeline_csv_ends_with_what_leaks(void **state) {
  (void)state;
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "timeline", "--csv", known_path(), NULL), 0);
  assert_true(!strncmp(out,
                       "time_s,live_bytes,max_bytes,\"fn_102_0 file_22.c:102\","
                       "\"fn_101_2 file_21.c:101\",other_bytes\n",
                       90));
  /* The last row: time 0.000080, 96 bytes live, all of site A. */
  const char *last = out + strlen(out) - 1;
  while (last > out && last[-1] != '\n')
    last--;
  assert_string_equal(last, "0.000080,96,96,0,96,0\n");
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "timeline", "--json", known_path(), NULL), 0);
  assert_true(tu_json_valid(out, NULL));
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "timeline", known_path(), NULL), 0);
  assert_non_null(strstr(out, "A  fn_102_0 file_22.c:102 (~800 B at the peak)"));
  free(out);
  free(err);
}

static void flame_folded_values_add_up_to_the_summary(void **state) {
  (void)state;
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "flame", known_path(), NULL), 0);
  /* tg_resolve: 300 -> fn_300_0; 200 -> fn_200_0..2; 101 -> fn_101_0..2; 102 -> fn_102_0 */
  assert_non_null(strstr(out, "fn_300_0;fn_200_0;fn_200_1;fn_200_2;fn_101_0;fn_101_1;fn_101_2 "
                              "176\n"));
  assert_non_null(strstr(out, "fn_300_0;fn_200_0;fn_200_1;fn_200_2;fn_102_0 832\n"));
  free(out);
  free(err);
  assert_int_equal(
      tu_run_cli(&out, NULL, &err, "flame", "--inverted", "--by", "live", known_path(), NULL), 0);
  assert_string_equal(out, "fn_101_2;fn_101_1;fn_101_0;fn_200_2;fn_200_1;fn_200_0;fn_300_0 96\n");
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "flame", "--svg", known_path(), NULL), 0);
  assert_non_null(strstr(out, "<svg"));
  assert_non_null(strstr(out, "fn_102_0 (832 bytes, 82.54%)"));
  free(out);
  free(err);
}

static void exports_are_valid_and_complete(void **state) {
  (void)state;
  char *out, *err;
  const char *path = tu_temp_path("speedscope.json");
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "export", "--format", "speedscope", "-o", path,
                              known_path(), NULL),
                   0);
  free(err);
  size_t size;
  char *text = (char *)tu_read_file(path, &size);
  text = realloc(text, size + 1);
  text[size] = 0;
  assert_true(tu_json_valid(text, NULL));
  assert_non_null(strstr(text, "\"weights\":[176,832]"));
  assert_non_null(strstr(text, "\"weights\":[96]"));
  free(text);
  assert_int_equal(
      tu_run_cli(&out, NULL, &err, "export", "--format", "chrome", "-o", "-", known_path(), NULL),
      0);
  assert_true(tu_json_valid(out, NULL));
  assert_non_null(strstr(out, "\"ph\":\"C\""));
  assert_non_null(strstr(out, "\"name\":\"fn_102_0\",\"cat\":\"allocation\""));
  free(out);
  free(err);
  path = tu_temp_path("profile.pb.gz");
  assert_int_equal(
      tu_run_cli(NULL, NULL, &err, "export", "--format", "pprof", "-o", path, known_path(), NULL),
      0);
  free(err);
  uint8_t *gz = tu_read_file(path, &size);
  assert_true(size > 20 && gz[0] == 0x1f && gz[1] == 0x8b);
  free(gz);
  assert_int_equal(
      tu_run_cli(NULL, NULL, &err, "export", "--format", "png", "-o", path, known_path(), NULL),
      64);
  free(err);
}

static void report_is_one_self_contained_file(void **state) {
  (void)state;
  char *err;
  const char *path = tu_temp_path("report.html");
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "report", known_path(), "-o", path, NULL), 0);
  free(err);
  size_t size;
  char *html = (char *)tu_read_file(path, &size);
  html = realloc(html, size + 1);
  html[size] = 0;
  assert_non_null(strstr(html, "<svg id=\"chart\""));
  assert_non_null(strstr(html, "fn_101_2"));
  /* Nothing is fetched: no external script, style, image or font. */
  assert_null(strstr(html, "src=\"http"));
  assert_null(strstr(html, "href=\"http"));
  assert_null(strstr(html, "@import"));
  assert_null(strstr(html, "fetch("));
  assert_null(strstr(html, "XMLHttpRequest"));
  free(html);
}

static void every_command_has_help_and_rejects_bad_options(void **state) {
  (void)state;
  const char *commands[] = {"summary", "top",  "leaks",  "timeline",
                            "flame",   "diff", "report", "export"};
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    char *out, *err;
    assert_int_equal(tu_run_cli(&out, NULL, &err, commands[i], "--help", NULL), 0);
    assert_non_null(strstr(out, "usage: memtap"));
    free(out);
    free(err);
    assert_int_equal(tu_run_cli(NULL, NULL, &err, commands[i], "--no-such-option", NULL), 64);
    free(err);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(summary_json_gives_exact_numbers),
      cmocka_unit_test(window_in_seconds_and_percent),
      cmocka_unit_test(top_ranks_sites_and_refuses_temporary_on_sampled_traces),
      cmocka_unit_test(leaks_on_demo_v3_match_the_known_sites),
      cmocka_unit_test(leaks_fail_above_sets_exit_status_3),
      cmocka_unit_test(diff_normalises_and_orders_by_change),
      cmocka_unit_test(timeline_csv_ends_with_what_leaks),
      cmocka_unit_test(flame_folded_values_add_up_to_the_summary),
      cmocka_unit_test(exports_are_valid_and_complete),
      cmocka_unit_test(report_is_one_self_contained_file),
      cmocka_unit_test(every_command_has_help_and_rejects_bad_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
