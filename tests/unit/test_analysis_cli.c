/* The analysis subcommands end to end: every number they print on writer-built traces of known
 * events (analysis_known_trace.h) is checked exactly, and `leaks` on demo_v3.ctf reports the
 * acceptance figures of the issue (932 / 1,456 / 11.1 MiB, 28 / 150 / 1.1 MiB, 4 / 4 / 31.2 KiB).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

static const char *stacks_path(void) {
  static char path[4096];
  if (!path[0]) {
    size_t size;
    uint8_t *data = known_stacks_trace(&size);
    snprintf(path, sizeof path, "%s", known_trace_file("stacks.ctf", data, size));
    free(data);
  }
  return path;
}

/* Runs `memtap ARGS...`, asserts exit status 0, and leaves its stdout (malloc'd) in `out`. */
#define RUN_OK(out, ...)                                                                           \
  do {                                                                                             \
    char *err_;                                                                                    \
    assert_int_equal(tu_run_cli(&(out), NULL, &err_, __VA_ARGS__, NULL), 0);                       \
    free(err_);                                                                                    \
  } while (0)

/* An amount as the JSON outputs write it. */
#define AMOUNT(objects, samples, bytes, estimated)                                                 \
  "{\"objects\":" #objects ",\"samples\":" #samples ",\"bytes\":" #bytes                           \
  ",\"objects_estimated\":" #estimated "}"

/* The JSON text starting at the object that holds "function":"NAME" as a group key. */
static const char *group_of(const char *json, const char *function) {
  char needle[256];
  snprintf(needle, sizeof needle, "{\"key\":{\"function\":\"%s\"", function);
  const char *at = strstr(json, needle);
  if (!at)
    fail_msg("no group %s in %s", function, json);
  return at;
}

/* A location whose names carry escape sequences (a crafted trace). */
static int escaping_resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  (void)user;
  (void)code;
  static const mt_location loc = {
      .filename = "f\033]0;owned\007.c", .defname = "evil\033[2Jname", .line = 7};
  *entries = &loc;
  *count = 1;
  return MT_OK;
}

/* Names are whatever the trace's writer put there: on a terminal their control characters print
 * as '?', so that a crafted trace cannot clear the screen or retitle the window; into a pipe every
 * byte is kept, for scripts. */
/* A trace of one allocation whose function and file names carry terminal escape sequences. */
static const char *escaping_trace(void) {
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t code = 0x1000;
  mt_error err = {0};
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 10, 4, 1, MT_SOURCE_EXTERNAL, &code, 1,
                                       escaping_resolve, NULL, NULL, &err),
                   MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  const char *path = known_trace_file("escapes.ctf", data, size);
  free(data);
  return path;
}

static void names_with_control_characters_are_defused_on_a_terminal(void **state) {
  (void)state;
  const char *path = escaping_trace();
  char *shown;
  assert_int_equal(tu_run_cli_on_terminal(&shown, "top", path, NULL), 0);
  assert_non_null(strstr(shown, "evil?[2Jname"));
  assert_non_null(strstr(shown, "f?]0;owned?.c"));
  assert_null(strchr(shown, '\033'));
  assert_null(strchr(shown, '\007'));
  free(shown);
  char *piped;
  RUN_OK(piped, "top", path);
  assert_non_null(strstr(piped, "evil\033[2Jname"));
  free(piped);
}

/* Exports written to standard output: text on a terminal is defused like any text output (the
 * folded stacks and the SVG name functions), binary output (a pprof profile, a trace) is refused
 * there with a usage error; into a pipe every byte is written as it is. */
static void exports_on_a_terminal_are_defused_and_binary_ones_refused(void **state) {
  (void)state;
  const char *path = escaping_trace();
  char *shown;
  assert_int_equal(
      tu_run_cli_on_terminal(&shown, "export", "--format", "folded", "-o", "-", path, NULL), 0);
  assert_non_null(strstr(shown, "evil?[2Jname"));
  assert_null(strchr(shown, '\033'));
  free(shown);
  assert_int_equal(tu_run_cli_on_terminal(&shown, "flame", "--svg", path, NULL), 0);
  assert_non_null(strstr(shown, "</svg>"));
  assert_null(strchr(shown, '\033'));
  free(shown);
  assert_int_equal(
      tu_run_cli_on_terminal(&shown, "export", "--format", "pprof", "-o", "-", path, NULL), 64);
  assert_non_null(strstr(shown, "memtap export: not writing a pprof profile to a terminal"));
  assert_null(strstr(shown, "\x1f\x8b")); /* no gzip stream */
  free(shown);
  assert_int_equal(tu_run_cli_on_terminal(&shown, "copy", path, "-", NULL), 64);
  assert_non_null(strstr(shown, "memtap copy: not writing a trace to a terminal"));
  assert_null(strstr(shown, "\xc1\x1f\xfc\xc1")); /* no packet magic */
  free(shown);
  char *piped;
  RUN_OK(piped, "export", "--format", "folded", "-o", "-", path);
  assert_non_null(strstr(piped, "evil\033[2Jname"));
  free(piped);
}

/* Messages on stderr quote names too (paths, options): on a terminal their control characters
 * become '?' as well; into a pipe every byte is kept. */
static void messages_with_control_characters_are_defused_on_a_terminal(void **state) {
  (void)state;
  const char *missing = "/nonexistent/evil\033[2Jtrace.ctf";
  char *shown;
  assert_int_equal(tu_run_cli_on_terminal(&shown, "info", missing, NULL), 1);
  assert_non_null(strstr(shown, "/nonexistent/evil?[2Jtrace.ctf"));
  assert_null(strchr(shown, '\033'));
  free(shown);
  assert_int_equal(tu_run_cli_on_terminal(&shown, "top", "--x\007y", NULL), 64);
  assert_non_null(strstr(shown, "unknown option '--x?y'"));
  assert_null(strchr(shown, '\007'));
  free(shown);
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "info", missing, NULL), 1);
  assert_non_null(strstr(err, "/nonexistent/evil\033[2Jtrace.ctf"));
  free(out);
  free(err);
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
  assert_non_null(strstr(out, "peak live heap:  960 B at 0.000050 s"));
  assert_non_null(strstr(out, "live at end:     2 objects, 96 B"));
  free(out);
  free(err);
}

/* allocation_rate: the 81 timeline buckets of 1 µs (0..80) in ten segments of 8 buckets (the last
 * 9, ending at the trace's end, 80 µs): id0 80 B in [8, 16): 80 B / 8 µs = 10 MB/s; id1 32 B in
 * [16, 24): 4 MB/s; id2 80 B in [40, 48): 10 MB/s; id3 800 B in [48, 56): 100 MB/s; id4 16 B in
 * [72, 80]: 2 MB/s. sizes by the bytes of one object: 16 B (id4), 32 B (id1), 80 B (id0, id2),
 * 800 B (id3). lifetimes: id1 10 µs, id3 20 µs, id0 50 µs; id2 and id4 not freed. */
static void summary_json_rate_sizes_and_lifetimes_are_exact(void **state) {
  (void)state;
  char *out;
  RUN_OK(out, "summary", "--json", known_path());
  assert_non_null(strstr(
      out, "\"allocation_rate\":[{\"from_s\":0.000000,\"to_s\":0.000008,\"bytes_per_s\":0.0},"
           "{\"from_s\":0.000008,\"to_s\":0.000016,\"bytes_per_s\":10000000.0},"
           "{\"from_s\":0.000016,\"to_s\":0.000024,\"bytes_per_s\":4000000.0},"
           "{\"from_s\":0.000024,\"to_s\":0.000032,\"bytes_per_s\":0.0},"
           "{\"from_s\":0.000032,\"to_s\":0.000040,\"bytes_per_s\":0.0},"
           "{\"from_s\":0.000040,\"to_s\":0.000048,\"bytes_per_s\":10000000.0},"
           "{\"from_s\":0.000048,\"to_s\":0.000056,\"bytes_per_s\":100000000.0},"
           "{\"from_s\":0.000056,\"to_s\":0.000064,\"bytes_per_s\":0.0},"
           "{\"from_s\":0.000064,\"to_s\":0.000072,\"bytes_per_s\":0.0},"
           "{\"from_s\":0.000072,\"to_s\":0.000080,\"bytes_per_s\":2000000.0}],"));
  assert_non_null(strstr(
      out, "\"sizes\":["
           "{\"max_bytes\":16,\"allocated\":" AMOUNT(
               1, 2, 16,
               1) "},"
                  "{\"max_bytes\":64,\"allocated\":" AMOUNT(
                      1, 4, 32,
                      1) "},"
                         "{\"max_bytes\":256,\"allocated\":" AMOUNT(
                             2, 20, 160,
                             2) "},"
                                "{\"max_bytes\":1024,\"allocated\":" AMOUNT(
                                    1, 100, 800,
                                    1) "},"
                                       "{\"max_bytes\":4096,\"allocated\":" AMOUNT(
                                           0, 0, 0,
                                           0) "},"
                                              "{\"max_bytes\":16384,\"allocated\":" AMOUNT(
                                                  0, 0, 0,
                                                  0) "},"
                                                     "{\"max_bytes\":65536,\"allocated\":" AMOUNT(
                                                         0, 0, 0,
                                                         0) "},"
                                                            "{\"max_bytes\":262144,"
                                                            "\"allocated\":" AMOUNT(
                                                                0, 0, 0,
                                                                0) "},"
                                                                   "{\"max_bytes\":1048576,"
                                                                   "\"allocated\":" AMOUNT(
                                                                       0, 0, 0,
                                                                       0) "},"
                                                                          "{\"max_bytes\":null,"
                                                                          "\"allocated\":" AMOUNT(
                                                                              0, 0, 0, 0) "}],"));
  assert_non_null(strstr(
      out,
      "\"lifetimes\":["
      "{\"max_us\":10,\"freed\":true,\"allocated\":" AMOUNT(
          1, 4, 32,
          1) "},"
             "{\"max_us\":100,\"freed\":true,\"allocated\":" AMOUNT(
                 2, 110, 880,
                 2) "},"
                    "{\"max_us\":1000,\"freed\":true,\"allocated\":" AMOUNT(
                        0, 0, 0,
                        0) "},"
                           "{\"max_us\":10000,\"freed\":true,\"allocated\":" AMOUNT(
                               0, 0, 0,
                               0) "},"
                                  "{\"max_us\":100000,\"freed\":true,\"allocated\":" AMOUNT(
                                      0, 0, 0,
                                      0) "},"
                                         "{\"max_us\":1000000,\"freed\":true,\"allocated\":" AMOUNT(
                                             0, 0, 0,
                                             0) "},"
                                                "{\"max_us\":10000000,\"freed\":true,"
                                                "\"allocated\":" AMOUNT(
                                                    0, 0, 0,
                                                    0) "},"
                                                       "{\"max_us\":100000000,\"freed\":true,"
                                                       "\"allocated\":" AMOUNT(
                                                           0, 0, 0,
                                                           0) "},"
                                                              "{\"max_us\":null,\"freed\":true,"
                                                              "\"allocated\":" AMOUNT(
                                                                  0, 0, 0,
                                                                  0) "},"
                                                                     "{\"max_us\":null,\"freed\":"
                                                                     "false,\"allocated\":" AMOUNT(
                                                                         2, 12, 96,
                                                                         2) "}],"
                                                                            "\"backtraces\":2}\n"));
  free(out);
  /* The text gives the segments with enough decimals to tell them apart. */
  RUN_OK(out, "summary", known_path());
  assert_non_null(strstr(out, "allocation rate over time:\n"
                              "       0.000000 s -      0.000008 s  0 B/s\n"
                              "       0.000008 s -      0.000016 s  9.5 MiB/s\n"));
  assert_non_null(strstr(out, "       0.000072 s -      0.000080 s  1.9 MiB/s\n"));
  assert_non_null(strstr(out, "  <= 256 B                   2   160 B\n"));
  assert_non_null(strstr(out, "  not freed                  2   96 B\n"));
  free(out);
}

/* In the window [35, 75] µs the last event read is id3's collect at 70 µs (id4 at 80 µs is after
 * the window and is not read): the text says so instead of calling it the duration, and gives the
 * window's length, 40 µs. Without --to the whole trace is read: its duration is 80 µs. */
static void summary_in_a_window_says_what_it_read(void **state) {
  (void)state;
  char *out;
  RUN_OK(out, "summary", "--from", "0.000035", "--to", "0.000075", known_path());
  assert_null(strstr(out, "duration:"));
  assert_non_null(strstr(out, "last event read: 0.000070 s (the trace after the window is not "
                              "read)\n"
                              "window:          0.000035 s to 0.000075 s (0.000040 s)\n"));
  free(out);
  RUN_OK(out, "summary", "--json", "--from", "0.000035", "--to", "0.000075", known_path());
  assert_non_null(strstr(out, "\"duration_s\":0.000070,\"window\":{\"from_s\":0.000035,"
                              "\"to_s\":0.000075,\"length_s\":0.000040}"));
  free(out);
  RUN_OK(out, "summary", "--from", "0.000035", known_path());
  assert_non_null(strstr(out, "duration:        0.000080 s\n"
                              "window:          0.000035 s to 0.000080 s (0.000045 s)\n"));
  free(out);
  RUN_OK(out, "summary", known_path());
  assert_non_null(strstr(out, "duration:        0.000080 s\nsampling rate:"));
  free(out);
}

/* The sources trace (analysis_known_trace.h), rate 0.5: 16 bytes per sample, and an OCaml block's
 * estimate counts its header word: minor 3 x 4/3 = 4 (6 without the header), major 8/7 ~ 1,
 * external 2 + 4/3 = 10/3 ~ 3; in all 178/21 ~ 8.48 -> 8. Freed m2 and j0: 4/3 + 8/7 = 52/21 ~ 2;
 * live at the end m0, m1 (8/3 ~ 3), e0, e1 (10/3 ~ 3): 6. */
static void sources_are_estimated_with_the_header_word_and_named_by_trace_kind(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = known_sources_trace("v=0x400", &size);
  const char *ocaml = known_trace_file("ocaml_sources.ctf", data, size);
  free(data);
  data = known_sources_trace("memtap-test", &size);
  const char *memtap = known_trace_file("memtap_sources.ctf", data, size);
  free(data);
  char *out;
  RUN_OK(out, "summary", "--json", ocaml);
  assert_true(tu_json_valid(out, NULL));
  assert_non_null(
      strstr(out,
             "\"allocated\":" AMOUNT(
                 6, 7, 112, 8) ",\"allocated_by_source\":{"
                               "\"minor\":" AMOUNT(3, 3, 48, 4) ",\"major\":" AMOUNT(1, 1, 16, 1) ",\"external\":" AMOUNT(
                                   2, 3, 48,
                                   3) "},"
                                      "\"source_names\":{\"minor\":\"minor\",\"major\":\"major\","
                                      "\"external\":\"external\"},"
                                      "\"freed\":" AMOUNT(2, 2, 32, 2) ",\"live_start\":" AMOUNT(0, 0, 0, 0) ",\"live_end\":" AMOUNT(
                                          4, 5, 80,
                                          6) ",\"live_end_by_source\":{"
                                             "\"minor\":" AMOUNT(2, 2, 32, 3) ",\"major\":" AMOUNT(
                                                 0, 0, 0,
                                                 0) ",\"external\":" AMOUNT(2, 3, 48,
                                                                            3) "},"
                                                                               "\"peak\":{\"time_"
                                                                               "s\":0.000060,"
                                                                               "\"live\":" AMOUNT(
                                                                                   6, 7, 112,
                                                                                   8) "},"
                                                                                      "\"temporary"
                                                                                      "\":null,"
                                                                                      "\"promotes\""
                                                                                      ":2,"
                                                                                      "\"collects\""
                                                                                      ":2,"
                                                                                      "\"unknown_"
                                                                                      "collects\":"
                                                                                      "2,"));
  free(out);
  RUN_OK(out, "summary", "--json", memtap);
  assert_non_null(strstr(out, "\"source_names\":{\"minor\":\"minor\",\"major\":\"mapped\","
                              "\"external\":\"malloc\"}"));
  free(out);
  RUN_OK(out, "summary", memtap);
  assert_non_null(strstr(out,
                         "allocated:       6 sampled objects, 7 samples, ~112 B, ~8 objects\n"
                         "  minor:         3 sampled objects, 3 samples, ~48 B, ~4 objects\n"
                         "  mapped:        1 sampled object, 1 sample, ~16 B, ~1 object\n"
                         "  malloc:        2 sampled objects, 3 samples, ~48 B, ~3 objects\n"));
  assert_non_null(strstr(out,
                         "promotions:      2\ncollections:     2\n"
                         "unknown ids:     2 collects/promotes of objects not live (ignored)\n"));
  free(out);
  RUN_OK(out, "summary", ocaml);
  assert_non_null(strstr(out,
                         "  major:         1 sampled object, 1 sample, ~16 B, ~1 object\n"
                         "  external:      2 sampled objects, 3 samples, ~48 B, ~3 objects\n"));
  free(out);
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

/* Whether every number after `key` in `json` is written as a whole number (no point, no
 * exponent); the count of them in *n. */
static bool whole_numbers_after(const char *json, const char *key, size_t *n) {
  *n = 0;
  for (const char *p = json; (p = strstr(p, key)); p += strlen(key)) {
    const char *v = p + strlen(key);
    if (*v == '{' || *v == 'n') /* an object or null, not a figure */
      continue;
    size_t len = strspn(v, "-0123456789.eE+");
    if (len == 0 || memchr(v, '.', len) || memchr(v, 'e', len) || memchr(v, 'E', len))
      return false;
    ++*n;
  }
  return true;
}

/* On a sampled trace every figure is an estimate: JSON gives whole numbers (the ones the text
 * output shows), not sums of doubles (ocamlopt_v2's total read 670399999.99999988 and, by count,
 * 19652678.860344794 where the text says ~19,652,679). */
static void json_figures_of_a_sampled_trace_are_whole_numbers(void **state) {
  (void)state;
  const char *ocaml = tu_testdata("memtrace/ocamlopt_v2.ctf");
  const char *runs[][6] = {{"top", "--json", "-n", "3", ocaml, NULL},
                           {"top", "--json", "--by", "count", ocaml, NULL},
                           {"functions", "--json", "-n", "3", ocaml, NULL},
                           {"callers", "--json", "Stdlib__set.Make.bal", ocaml, NULL, NULL}};
  const char *keys[] = {"\"total\":", "\"value\":", "\"cum\":", "\"flat\":"};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    char *out, *err;
    int rc = tu_run_cli(&out, NULL, &err, runs[i][0], runs[i][1], runs[i][2], runs[i][3],
                        runs[i][4], runs[i][5], NULL);
    if (rc != 0 || !tu_json_valid(out, NULL))
      fail_msg("%s: exit %d: %s", runs[i][0], rc, err);
    size_t figures = 0;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
      size_t n;
      if (!whole_numbers_after(out, keys[k], &n))
        fail_msg("%s %s: %s is not a whole number: %.300s", runs[i][0], runs[i][1], keys[k], out);
      figures += n;
    }
    assert_true(figures >= 2);
    if (i == 1)
      assert_non_null(strstr(out, "\"total\":19652679,"));
    free(out);
    free(err);
  }
}

/* The backtraces of the known trace's sites, outermost first (tg_resolve: 300 -> fn_300_0; 200 ->
 * fn_200_0..2; 101 -> fn_101_0..2, inlined; 102 -> fn_102_0). */
#define KNOWN_ROOT                                                                                 \
  "       fn_300_0 file_20.c:300\n"                                                                \
  "       fn_200_0 file_0.c:200\n"                                                                 \
  "       fn_200_1 file_0.c:200\n"                                                                 \
  "       fn_200_2 file_0.c:200\n"
#define KNOWN_SITE_A                                                                               \
  KNOWN_ROOT "       fn_101_0 file_21.c:101\n"                                                     \
             "       fn_101_1 file_21.c:101\n"                                                     \
             "       fn_101_2 file_21.c:101\n"
#define KNOWN_SITE_B KNOWN_ROOT "       fn_102_0 file_22.c:102\n"

/* Every line of top, leaks and diff on the known trace. top: B 104 samples x 8 = 832 B of
 * 1008 = 82.5%, A 22 x 8 = 176 B = 17.5%. */
static void top_leaks_and_diff_text_is_exact(void **state) {
  (void)state;
  char *out;
  RUN_OK(out, "top", known_path());
  assert_string_equal(out, "top 2 of 2 sites by bytes (total 1008 B)\n\n"
                           "  1. 832 B         82.5%  fn_102_0 file_22.c:102\n"
                           "     allocated 2 objects (832 B), live at end 0, "
                           "1 backtrace\n"
                           "     heaviest backtrace:\n" KNOWN_SITE_B "\n"
                           "  2. 176 B         17.5%  fn_101_2 file_21.c:101\n"
                           "     allocated 3 objects (176 B), live at end 2, "
                           "1 backtrace\n"
                           "     heaviest backtrace:\n" KNOWN_SITE_A "\n");
  free(out);
  RUN_OK(out, "leaks", known_path());
  assert_string_equal(out, "not freed by the end of the trace (0.000080 s): 2 objects, 96 B, in 1 "
                           "group\n\n"
                           "  1. 2 objects, 96 B\n"
                           "     fn_101_2 file_21.c:101\n" KNOWN_SITE_A "\n");
  free(out);
  /* diff against the variant whose id4 is 20 words: A 176 -> 176 - 16 + 160 = 320 B. */
  size_t size;
  uint8_t *data = known_trace_variant(20, &size);
  const char *variant = known_trace_file("variant.ctf", data, size);
  free(data);
  char expected[16384];
  snprintf(expected, sizeof expected,
           "bytes allocated per site: A = %s, B = %s\n"
           "sampling: A at rate 1 (8 B per sample), B at rate 1 (8 B per sample)\n\n"
           "      change  change%%            A            B   site\n"
           "      +144 B   +81.8%%        176 B        320 B   fn_101_2 file_21.c:101\n"
           "        +0 B    +0.0%%        832 B        832 B   fn_102_0 file_22.c:102\n"
           "      +144 B   +14.3%%       1008 B      1.1 KiB   total\n",
           known_path(), variant);
  RUN_OK(out, "diff", known_path(), variant);
  assert_string_equal(out, expected);
  free(out);
  snprintf(expected, sizeof expected,
           "objects allocated (estimated) per file: A = %s, B = %s\n"
           "sampling: A at rate 1 (8 B per sample), B at rate 1 (8 B per sample)\n\n"
           "no differences: every file has the same objects allocated (estimated) in A and B "
           "(total 5)\n",
           known_path(), variant);
  RUN_OK(out, "diff", "--by", "count", "--group", "file", known_path(), variant);
  assert_string_equal(out, expected);
  free(out);
}

/* The window [35, 75] µs: id0 (A, 80 B) is live at its start; id2 (A, 80 B) and id3 (B, 800 B) are
 * allocated in it; id0 and id3 are freed in it; id4 (at 80 µs) is not read. */
static void windows_apply_to_top_leaks_timeline_and_diff(void **state) {
  (void)state;
  char *out;
  RUN_OK(out, "top", "--from", "0.000035", "--to", "0.000075", known_path());
  /* 800 of 880 B = 90.9%, 80 B = 9.1% */
  assert_string_equal(out, "top 2 of 2 sites by bytes (total 880 B)\n"
                           "window: 0.000035 s to 0.000075 s (0.000040 s)\n\n"
                           "  1. 800 B         90.9%  fn_102_0 file_22.c:102\n"
                           "     allocated 1 object (800 B), live at end 0, "
                           "1 backtrace\n"
                           "     heaviest backtrace:\n" KNOWN_SITE_B "\n"
                           "  2. 80 B           9.1%  fn_101_2 file_21.c:101\n"
                           "     allocated 1 object (80 B), live at end 1, "
                           "1 backtrace\n"
                           "     heaviest backtrace:\n" KNOWN_SITE_A "\n");
  free(out);
  RUN_OK(out, "top", "--json", "--from", "0.000035", "--to", "0.000075", known_path());
  /* A: freeing id0, allocated before the window, counts as a free; at the peak (50 µs) id0 and id2
   * are live; B's id3 is temporary (freed at 70 µs, nothing allocated since). */
  const char *a = group_of(out, "fn_101_2");
  assert_non_null(strstr(
      a,
      "\"value\":80,\"stacks\":1,\"allocated\":" AMOUNT(1, 10, 80, 1) ",\"freed\":" AMOUNT(
          1, 10, 80,
          1) ",\"live\":" AMOUNT(1, 10, 80,
                                 1) ",\"peak\":" AMOUNT(2, 20, 160,
                                                        2) ",\"temporary\":" AMOUNT(0, 0, 0, 0)));
  const char *b = group_of(out, "fn_102_0");
  assert_non_null(strstr(
      b, "\"value\":800,\"stacks\":1,\"allocated\":" AMOUNT(1, 100, 800, 1) ",\"freed\":" AMOUNT(
             1, 100, 800,
             1) ",\"live\":" AMOUNT(0, 0, 0,
                                    0) ",\"peak\":" AMOUNT(1, 100, 800,
                                                           1) ",\"temporary\":" AMOUNT(1, 100, 800,
                                                                                       1)));
  free(out);
  RUN_OK(out, "leaks", "--from", "0.000035", "--to", "0.000075", known_path());
  assert_string_equal(out, "not freed by the end of the window (0.000075 s): 1 object, 80 B, in 1 "
                           "group\n"
                           "window: 0.000035 s to 0.000075 s (0.000040 s)\n\n"
                           "  1. 1 object, 80 B\n"
                           "     fn_101_2 file_21.c:101\n" KNOWN_SITE_A "\n");
  free(out);
  /* [45, 65] µs: 20 steps of 1 µs; id0 and id2 (A, 160 B) live at the start, id3 (B, 800 B) at
   * 50 µs, id0 freed at 60 µs. */
  RUN_OK(out, "timeline", "--csv", "--from", "0.000045", "--to", "0.000065", known_path());
  assert_string_equal(out, "time_s,live_bytes,max_bytes,\"fn_102_0 file_22.c:102\","
                           "\"fn_101_2 file_21.c:101\",other_bytes\n"
                           "0.000046,160,160,0,160,0\n"
                           "0.000047,160,160,0,160,0\n"
                           "0.000048,160,160,0,160,0\n"
                           "0.000049,160,160,0,160,0\n"
                           "0.000050,160,160,0,160,0\n"
                           "0.000051,960,960,800,160,0\n"
                           "0.000052,960,960,800,160,0\n"
                           "0.000053,960,960,800,160,0\n"
                           "0.000054,960,960,800,160,0\n"
                           "0.000055,960,960,800,160,0\n"
                           "0.000056,960,960,800,160,0\n"
                           "0.000057,960,960,800,160,0\n"
                           "0.000058,960,960,800,160,0\n"
                           "0.000059,960,960,800,160,0\n"
                           "0.000060,960,960,800,160,0\n"
                           "0.000061,880,960,800,80,0\n"
                           "0.000062,880,880,800,80,0\n"
                           "0.000063,880,880,800,80,0\n"
                           "0.000064,880,880,800,80,0\n"
                           "0.000065,880,880,800,80,0\n");
  free(out);
  /* diff from 45 µs: only id4 differs (A 2 words = 16 B against 20 words = 160 B); up to 75 µs it
   * is not read, and nothing differs. */
  size_t size;
  uint8_t *data = known_trace_variant(20, &size);
  const char *variant = known_trace_file("variant.ctf", data, size);
  free(data);
  RUN_OK(out, "diff", "--json", "--from", "0.000045", known_path(), variant);
  assert_non_null(strstr(out, "\"rows_total\":2,\"rows\":["
                              "{\"key\":{\"function\":\"fn_101_2\",\"file\":\"file_21.c\","
                              "\"line\":101},\"a\":16,\"b\":160,\"change\":144,"
                              "\"change_percent\":900.00,\"noise\":0,\"within_noise\":false},"
                              "{\"key\":{\"function\":\"fn_102_0\",\"file\":\"file_22.c\","
                              "\"line\":102},\"a\":800,\"b\":800,\"change\":0,"
                              "\"change_percent\":0.00,\"noise\":0,\"within_noise\":false}]}"));
  free(out);
  RUN_OK(out, "diff", "--json", "--from", "0.000035", "--to", "0.000075", known_path(), variant);
  assert_non_null(strstr(out, "\"rows_total\":2,\"rows\":["
                              "{\"key\":{\"function\":\"fn_101_2\",\"file\":\"file_21.c\","
                              "\"line\":101},\"a\":80,\"b\":80,\"change\":0,"
                              "\"change_percent\":0.00,\"noise\":0,\"within_noise\":false},"
                              "{\"key\":{\"function\":\"fn_102_0\",\"file\":\"file_22.c\","
                              "\"line\":102},\"a\":800,\"b\":800,\"change\":0,"
                              "\"change_percent\":0.00,\"noise\":0,\"within_noise\":false}]}"));
  free(out);
}

/* The stacks trace (analysis_known_trace.h), rate 1, 8 B per word: parse:10 80 + 160 = 240 B,
 * xmalloc 64 B, parse:20 40 B, lex 24 B, walk 8 B; 376 B in all. */
static void top_groups_by_function_and_file_and_shows_n(void **state) {
  (void)state;
  char *out;
  /* Functions: parse 80 + 160 + 40 = 280 B (74.5%), xmalloc 64 B (17.0%), lex 24, walk 8. */
  RUN_OK(out, "top", "--group", "function", "-n", "2", stacks_path());
  assert_string_equal(out, "top 2 of 4 functions by bytes (total 376 B)\n\n"
                           "  1. 280 B         74.5%  parse\n"
                           "     allocated 3 objects (280 B), live at end 2, "
                           "3 backtraces\n"
                           "     heaviest backtrace:\n"
                           "       main main.ml:1\n"
                           "       walk tree.ml:7\n"
                           "       parse parser.ml:10\n\n"
                           "  2. 64 B          17.0%  xmalloc\n"
                           "     allocated 1 object (64 B), live at end 0, "
                           "1 backtrace\n"
                           "     heaviest backtrace:\n"
                           "       main main.ml:1\n"
                           "       run main.ml:5\n"
                           "       lex parser.ml:30\n"
                           "       xmalloc alloc.c:3\n\n");
  free(out);
  /* Files: parser.ml 240 + 40 + 24 = 304 B over 4 backtraces, alloc.c 64 B, tree.ml 8 B. */
  RUN_OK(out, "top", "--json", "--group", "file", stacks_path());
  assert_true(tu_json_valid(out, NULL));
  assert_non_null(strstr(out,
                         "\"group\":\"file\",\"total\":376,\"groups\":[{\"key\":{\"function\":"
                         "\"\",\"file\":\"parser.ml\",\"line\":0},\"value\":304,\"stacks\":4,"));
  assert_non_null(strstr(out, "},{\"key\":{\"function\":\"\",\"file\":\"alloc.c\",\"line\":0},"
                              "\"value\":64,\"stacks\":1,"));
  assert_non_null(strstr(out, "},{\"key\":{\"function\":\"\",\"file\":\"tree.ml\",\"line\":0},"
                              "\"value\":8,\"stacks\":1,"));
  free(out);
  RUN_OK(out, "top", "--group", "file", stacks_path());
  assert_non_null(strstr(out, "top 3 of 3 files by bytes (total 376 B)\n\n"
                              "  1. 304 B         80.9%  parser.ml\n"));
  free(out);
  /* -n 1 of the 5 sites; -n 0 shows them all. */
  RUN_OK(out, "top", "-n", "1", stacks_path());
  const char *first = "top 1 of 5 sites by bytes (total 376 B)\n\n"
                      "  1. 240 B         63.8%  parse parser.ml:10\n";
  assert_true(!strncmp(out, first, strlen(first)));
  assert_null(strstr(out, "  2. "));
  free(out);
  RUN_OK(out, "top", "-n", "0", stacks_path());
  assert_non_null(strstr(out, "top 5 of 5 sites by bytes"));
  assert_non_null(strstr(out, "  5. 8 B            2.1%  walk tree.ml:7\n"));
  free(out);
}

/* --hide drops xmalloc: s5 is then allocated at lex parser.ml:30 (64 + 24 = 88 B, 2 backtraces);
 * --no-fold keeps s2's three walk frames. */
static void hide_and_no_fold_change_top_and_flame_exactly(void **state) {
  (void)state;
  char *out;
  /* Folded frames are function names: parse:10 and parse:20 under run are one line, 80 + 40. */
  RUN_OK(out, "flame", stacks_path());
  assert_string_equal(out, "main;run;parse 120\n"
                           "main;walk;parse 160\n"
                           "main;run;parse;lex 24\n"
                           "main;run;lex;xmalloc 64\n"
                           "main;walk;$8 8\n");
  free(out);
  RUN_OK(out, "flame", "--hide", "^xmalloc$", stacks_path());
  assert_string_equal(out, "main;run;parse 120\n"
                           "main;walk;parse 160\n"
                           "main;run;parse;lex 24\n"
                           "main;run;lex 64\n"
                           "main;walk;$8 8\n");
  free(out);
  RUN_OK(out, "flame", "--no-fold", stacks_path());
  assert_non_null(strstr(out, "\nmain;walk;walk;walk;parse 160\n"));
  free(out);
  RUN_OK(out, "top", "--json", "--hide", "^xmalloc$", stacks_path());
  assert_null(strstr(out, "xmalloc"));
  const char *lex = group_of(out, "lex");
  assert_true(tu_json_number(lex, "value") == 88);
  assert_true(tu_json_number(lex, "stacks") == 2);
  assert_true(lex == strstr(strstr(out, "{\"key\":") + 1, "{\"key\":")); /* second, after parse */
  free(out);
  RUN_OK(out, "top", "--no-fold", "-n", "1", stacks_path());
  assert_non_null(strstr(out, "     heaviest backtrace:\n"
                              "       main main.ml:1\n"
                              "       walk tree.ml:7\n"
                              "       walk tree.ml:7\n"
                              "       walk tree.ml:7\n"
                              "       parse parser.ml:10\n"));
  free(out);
}

/* top --inverted: parse parser.ml:10's two backtraces merged from the allocation point out:
 * through walk 160 of 240 B = 66.7%, through run 80 B = 33.3%. */
static void top_inverted_shows_the_callers_of_the_allocation_point(void **state) {
  (void)state;
  char *out;
  RUN_OK(out, "top", "--inverted", "-n", "1", stacks_path());
  assert_string_equal(out, "top 1 of 5 sites by bytes (total 376 B)\n\n"
                           "  1. 240 B         63.8%  parse parser.ml:10\n"
                           "     allocated 2 objects (240 B), live at end 1, "
                           "2 backtraces\n"
                           "     callers, from the allocation point out (% of this site):\n"
                           "       100.0%  parse parser.ml:10\n"
                           "        66.7%    walk tree.ml:7\n"
                           "        66.7%      main main.ml:1\n"
                           "        33.3%    run main.ml:5\n"
                           "        33.3%      main main.ml:1\n\n");
  free(out);
  /* Unfolded, the walk branch has its three frames; --depth 2 stops after the first callers. */
  RUN_OK(out, "top", "--inverted", "--no-fold", "-n", "1", stacks_path());
  assert_non_null(strstr(out, "       100.0%  parse parser.ml:10\n"
                              "        66.7%    walk tree.ml:7\n"
                              "        66.7%      walk tree.ml:7\n"
                              "        66.7%        walk tree.ml:7\n"
                              "        66.7%          main main.ml:1\n"
                              "        33.3%    run main.ml:5\n"));
  free(out);
  RUN_OK(out, "top", "--inverted", "--depth", "2", "-n", "1", stacks_path());
  assert_non_null(strstr(out, "(% of this site):\n"
                              "       100.0%  parse parser.ml:10\n"
                              "        66.7%    walk tree.ml:7\n"
                              "        33.3%    run main.ml:5\n\n"));
  free(out);
  /* With xmalloc hidden, lex has two callers: run (s5, 64 of 88 B = 72.7%) and parse (s4, 27.3%).
   * The walk site's backtrace ends in $8, which has no location: it comes first. */
  RUN_OK(out, "top", "--inverted", "--hide", "^xmalloc$", stacks_path());
  assert_non_null(strstr(out, "       100.0%  lex parser.ml:30\n"
                              "        72.7%    run main.ml:5\n"
                              "        72.7%      main main.ml:1\n"
                              "        27.3%    parse parser.ml:10\n"
                              "        27.3%      run main.ml:5\n"
                              "        27.3%        main main.ml:1\n"));
  assert_non_null(strstr(out, "walk tree.ml:7\n"
                              "     allocated 1 object (8 B), live at end 1, "
                              "1 backtrace\n"
                              "     callers, from the allocation point out (% of this site):\n"
                              "       100.0%  $8\n"
                              "       100.0%    walk tree.ml:7\n"
                              "       100.0%      main main.ml:1\n"));
  free(out);
  /* --group function: parse's three backtraces (280 B) start at two frames, parse:10 (240 B) and
   * parse:20 (40 B). */
  RUN_OK(out, "top", "--inverted", "--group", "function", "-n", "1", stacks_path());
  assert_non_null(strstr(out, "(% of this function):\n"
                              "        85.7%  parse parser.ml:10\n"
                              "        57.1%    walk tree.ml:7\n"
                              "        57.1%      main main.ml:1\n"
                              "        28.6%    run main.ml:5\n"
                              "        28.6%      main main.ml:1\n"
                              "        14.3%  parse parser.ml:20\n"
                              "        14.3%    run main.ml:5\n"
                              "        14.3%      main main.ml:1\n\n"));
  free(out);
  /* JSON: the backtrace from the allocation point, and the whole caller tree with values. */
  RUN_OK(out, "top", "--json", "--inverted", "-n", "1", stacks_path());
  assert_true(tu_json_valid(out, NULL));
  assert_non_null(strstr(
      out, "\"callers\":[{\"frame\":{\"function\":\"parse\",\"file\":\"parser.ml\",\"line\":10},"
           "\"value\":240,\"callers\":["
           "{\"frame\":{\"function\":\"walk\",\"file\":\"tree.ml\",\"line\":7},\"value\":160,"
           "\"callers\":[{\"frame\":{\"function\":\"main\",\"file\":\"main.ml\",\"line\":1},"
           "\"value\":160,\"callers\":[]}]},"
           "{\"frame\":{\"function\":\"run\",\"file\":\"main.ml\",\"line\":5},\"value\":80,"
           "\"callers\":[{\"frame\":{\"function\":\"main\",\"file\":\"main.ml\",\"line\":1},"
           "\"value\":80,\"callers\":[]}]}]}]}]}\n"));
  free(out);
}

/* A trace of backtraces into one site (fn_101_2, inlined in fn_101_1 and fn_101_0) from callers
 * fn_201_0, fn_204_0, fn_207_0, ... (one frame each), the k-th allocating words[k] words. */
static const char *callers_trace(const char *name, const int64_t *words, int n) {
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  mt_error err;
  for (int k = 0; k < n; k++) {
    uint64_t stack[] = {101, 201 + 3 * (uint64_t)k};
    assert_int_equal(mt_writer_put_alloc(w, TG_START + 10 * (k + 1), words[k], words[k],
                                         MT_SOURCE_EXTERNAL, stack, 2, tg_resolve, NULL, NULL,
                                         &err),
                     MT_OK);
  }
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  const char *path = known_trace_file(name, data, size);
  free(data);
  return path;
}

/* The text tree shows under a frame its 5 largest callers with 5% of the site or more. */
static void top_inverted_sums_the_small_callers(void **state) {
  (void)state;
  /* Seven callers of 1 .. 7 words, 8 x 28 = 224 B: the five largest (56, 48, 40, 32, 24 B) are
   * shown, the other two (16 + 8 = 24 B = 10.7%) summed although 16 B is 7.1%. */
  static const int64_t seven[] = {1, 2, 3, 4, 5, 6, 7};
  char *out;
  const char *path = callers_trace("seven_callers.ctf", seven, 7);
  RUN_OK(out, "top", "--inverted", path);
  assert_non_null(strstr(out, "(% of this site):\n"
                              "       100.0%  fn_101_2 file_21.c:101\n"
                              "       100.0%    fn_101_1 file_21.c:101\n"
                              "       100.0%      fn_101_0 file_21.c:101\n"
                              "        25.0%        fn_219_0 file_19.c:219\n"
                              "        21.4%        fn_216_0 file_16.c:216\n"
                              "        17.9%        fn_213_0 file_13.c:213\n"
                              "        14.3%        fn_210_0 file_10.c:210\n"
                              "        10.7%        fn_207_0 file_7.c:207\n"
                              "        10.7%        (2 other callers)\n\n"));
  free(out);
  /* JSON has them all. */
  RUN_OK(out, "top", "--json", "--inverted", path);
  assert_non_null(strstr(out, "{\"frame\":{\"function\":\"fn_201_0\",\"file\":\"file_1.c\","
                              "\"line\":201},\"value\":8,\"callers\":[]}]"));
  free(out);
  /* 60, 30, 6, 3 and 1 words: the callers of 3% and 1% are summed although there are only five. */
  static const int64_t five[] = {60, 30, 6, 3, 1};
  path = callers_trace("five_callers.ctf", five, 5);
  RUN_OK(out, "top", "--inverted", path);
  assert_non_null(strstr(out, "       100.0%      fn_101_0 file_21.c:101\n"
                              "        60.0%        fn_201_0 file_1.c:201\n"
                              "        30.0%        fn_204_0 file_4.c:204\n"
                              "         6.0%        fn_207_0 file_7.c:207\n"
                              "         4.0%        (2 other callers)\n\n"));
  free(out);
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
  assert_non_null(strstr(out, "932 objects, 1,456 samples, ~11.1 MiB"));
  assert_non_null(strstr(out, "28 objects, 150 samples, ~1.1 MiB"));
  assert_non_null(strstr(out, "4 objects, 4 samples, ~31.2 KiB"));
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
  assert_true(a == strstr(strstr(out, "\"rows\":["), "{\"key\":"));
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

/* Every row of the CSV. The steps are 2 µs wide (80 µs in at most 64 steps of a power of two), 40
 * of them; a step covers [start, end), the last one [78, 80] with the end itself. Sites ranked by
 * their share of the peak: B (800 B), then A (160 B). live = what is live at the step's end; max =
 * the largest live heap inside it, which includes the heap just before an event at its start. */
static void timeline_csv_gives_every_step_exactly(void **state) {
  (void)state;
  char *out;
  RUN_OK(out, "timeline", "--csv", known_path());
  assert_string_equal(out, "time_s,live_bytes,max_bytes,\"fn_102_0 file_22.c:102\","
                           "\"fn_101_2 file_21.c:101\",other_bytes\n"
                           /* nothing live before id0 at 10 µs (in the step [10, 12)) */
                           "0.000002,0,0,0,0,0\n"
                           "0.000004,0,0,0,0,0\n"
                           "0.000006,0,0,0,0,0\n"
                           "0.000008,0,0,0,0,0\n"
                           "0.000010,0,0,0,0,0\n"
                           /* id0: A 10 words = 80 B */
                           "0.000012,80,80,0,80,0\n"
                           "0.000014,80,80,0,80,0\n"
                           "0.000016,80,80,0,80,0\n"
                           "0.000018,80,80,0,80,0\n"
                           "0.000020,80,80,0,80,0\n"
                           /* + id1: B 4 words = 32 B */
                           "0.000022,112,112,32,80,0\n"
                           "0.000024,112,112,32,80,0\n"
                           "0.000026,112,112,32,80,0\n"
                           "0.000028,112,112,32,80,0\n"
                           "0.000030,112,112,32,80,0\n"
                           /* id1 freed at 30: 112 just before, 80 after */
                           "0.000032,80,112,0,80,0\n"
                           "0.000034,80,80,0,80,0\n"
                           "0.000036,80,80,0,80,0\n"
                           "0.000038,80,80,0,80,0\n"
                           "0.000040,80,80,0,80,0\n"
                           /* + id2: A 80 B */
                           "0.000042,160,160,0,160,0\n"
                           "0.000044,160,160,0,160,0\n"
                           "0.000046,160,160,0,160,0\n"
                           "0.000048,160,160,0,160,0\n"
                           "0.000050,160,160,0,160,0\n"
                           /* + id3: B 100 words = 800 B: the peak, 960 B */
                           "0.000052,960,960,800,160,0\n"
                           "0.000054,960,960,800,160,0\n"
                           "0.000056,960,960,800,160,0\n"
                           "0.000058,960,960,800,160,0\n"
                           "0.000060,960,960,800,160,0\n"
                           /* id0 freed at 60: 960 - 80 = 880 */
                           "0.000062,880,960,800,80,0\n"
                           "0.000064,880,880,800,80,0\n"
                           "0.000066,880,880,800,80,0\n"
                           "0.000068,880,880,800,80,0\n"
                           "0.000070,880,880,800,80,0\n"
                           /* id3 freed at 70: 80 */
                           "0.000072,80,880,0,80,0\n"
                           "0.000074,80,80,0,80,0\n"
                           "0.000076,80,80,0,80,0\n"
                           "0.000078,80,80,0,80,0\n"
                           /* the last step ends at 80 µs and has id4 (A 2 words = 16 B): 96 B */
                           "0.000080,96,96,0,96,0\n");
  free(out);
  RUN_OK(out, "timeline", "--json", known_path());
  assert_true(tu_json_valid(out, NULL));
  assert_true(tu_json_number(out, "step_s") == 0.000002);
  assert_non_null(strstr(out, "{\"time_s\":0.000080,\"live_bytes\":96,\"max_bytes\":96,"
                              "\"sites\":[0,96],\"other_bytes\":0}]}"));
  free(out);
  RUN_OK(out, "timeline", known_path());
  assert_non_null(strstr(out, "A  fn_102_0 file_22.c:102 (800 B at the peak)"));
  /* 960 B fills the 60 columns of the chart: 800 B of A is 50 of them, 160 B of B 10. */
  assert_non_null(strstr(out, "   0.000052 s        960 B        960 B |"
                              "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABBBBBBBBBB\n"));
  free(out);
}

static void timeline_csv_and_json_together_are_a_usage_error(void **state) {
  (void)state;
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "timeline", "--csv", "--json", known_path(), NULL),
                   64);
  assert_string_equal(out, "");
  assert_non_null(strstr(err, "--csv and --json are alternatives"));
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
  assert_non_null(strstr(html, "<svg id=\"heap\""));
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

/* --- damaged traces ------------------------------------------------------------------------- */

/* A copy of testdata trace `name` with one bit flipped in its middle, at the first place from
 * there on where the reader finds the damage (not every flip breaks a rule it checks). */
static const char *damaged_copy(const char *name, const char *out_name, size_t *where) {
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata(name), &size);
  const char *path = tu_temp_path(out_name);
  for (size_t at = size / 2; at < size; at += 101) {
    data[at] ^= 0x10;
    tu_write_file(path, data, size);
    char *err;
    int status = tu_run_cli(NULL, NULL, &err, "check", "-q", path, NULL);
    /* Damage the analyses find too; an undescribed code is tested in golden/test_cli.c. */
    bool found = status == 1 && strstr(err, "malformed trace at byte") &&
                 !strstr(err, "invalid location code");
    free(err);
    if (found) {
      *where = at;
      free(data);
      return path;
    }
    data[at] ^= 0x10;
  }
  fail_msg("no detected bit flip in %s", name);
  return NULL;
}

static void analyses_of_a_damaged_trace_print_what_was_read_warn_and_exit_2(void **state) {
  (void)state;
  const char *names[][2] = {{"memtrace/demo_v3.ctf", "damaged_demo.ctf"},
                            {"memtrace/ocamlopt_v2.ctf", "damaged_ocamlopt.ctf"}};
  for (int t = 0; t < 2; t++) {
    size_t flipped;
    const char *path = damaged_copy(names[t][0], names[t][1], &flipped);
    const char *original = tu_testdata(names[t][0]);
    /* The warning names the byte check names, in plain digits as every byte offset (not
     * "58,940", as counts are printed). */
    char *check_err, where[96];
    assert_int_equal(tu_run_cli(NULL, NULL, &check_err, "check", path, NULL), 1);
    long long at = 0;
    const char *found = strstr(check_err, "malformed trace at byte ");
    assert_true(found && sscanf(found, "malformed trace at byte %lld:", &at) == 1 && at >= 1000);
    free(check_err);
    snprintf(where, sizeof where, "warning: the trace is damaged at byte %lld (", at);
    const char *commands[][6] = {
        {"summary", path},
        {"top", path},
        {"top", "--group", "function", "--inclusive", path},
        {"functions", path},
        {"callers", ".", path},
        {"leaks", path},
        {"timeline", path},
        {"flame", path},
        {"flame", "--svg", path},
        {"info", path},
        {"diff", original, path},
        {"export", "--format", "pprof", "-o", "-", path},
        {"report", path, "-o", "-"},
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
      const char *const *c = commands[i];
      char *out, *err;
      int status = tu_run_cli(&out, NULL, &err, c[0], c[1], c[2], c[3], c[4], c[5], NULL);
      if (status != 2 || !out[0] || !strstr(err, where) || !strstr(err, "no checksums"))
        fail_msg("memtap %s on %s: exit %d, %zu bytes out, stderr: %s", c[0], path, status,
                 strlen(out), err);
      free(out);
      free(err);
    }
    /* What was read is a part of the trace: fewer allocations than the whole, more than none. */
    char *out;
    RUN_OK(out, "summary", "--json", original);
    double whole = tu_json_number(strstr(out, "\"allocated\":"), "objects");
    free(out);
    char *err;
    assert_int_equal(tu_run_cli(&out, NULL, &err, "summary", "--json", path, NULL), 2);
    assert_true(tu_json_valid(out, NULL));
    double part = tu_json_number(strstr(out, "\"allocated\":"), "objects");
    assert_true(part > 0 && part < whole);
    free(out);
    free(err);
    /* check and copy still refuse the trace. */
    assert_int_equal(tu_run_cli(NULL, NULL, &err, "check", path, NULL), 1);
    free(err);
    assert_int_equal(tu_run_cli(NULL, NULL, &err, "copy", path, tu_temp_path("copied.ctf"), NULL),
                     1);
    free(err);
  }
}

/* A window on a damaged trace is of the trace's whole timeline, whatever part of it could be read:
 * one starting past the last event read before the damage is the trace's fault, not the command
 * line's (it was a usage error, exit 64), and one ending past it says it was cut short (an
 * export `--at 80%` silently gave the heap at the damage). */
static void a_window_past_the_damage_blames_the_trace(void **state) {
  (void)state;
  size_t flipped;
  const char *path = damaged_copy("memtrace/ocamlopt_v2.ctf", "damaged_window.ctf", &flipped);
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "summary", "--json", path, NULL), 2);
  double read_to = tu_json_number(strstr(out, "\"window\":"), "to_s");
  free(out);
  free(err);
  char past[32];
  snprintf(past, sizeof past, "%.6f", read_to + 0.001);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "top", "--from", past, path, NULL), 2);
  if (out[0] || !strstr(err, "nothing to analyse: the window starts at") ||
      !strstr(err, "after the last event read before the damage") || strstr(err, "--help"))
    fail_msg("top --from %s on a damaged trace: %zu bytes out, stderr: %s", past, strlen(out), err);
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "summary", "--json", "--to", "1000", path, NULL),
                   2);
  assert_non_null(strstr(err, "warning: the window was to end at "));
  assert_non_null(strstr(err, "past the damage: it ends at the last event read"));
  assert_true(tu_json_number(strstr(out, "\"window\":"), "to_s") <= read_to);
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "export", "--format", "folded", "--at", "1000",
                              "-o", "-", path, NULL),
                   2);
  assert_true(out[0] != 0);
  assert_non_null(strstr(err, "past the damage: it ends at the last event read"));
  free(out);
  free(err);
}

/* A trace cut mid-packet (a recording killed before its last flush) is read up to its last whole
 * packet with a warning: what the analyses print is whole but covers only that part, so they
 * exit 2, as check does (they exited 0). */
static void analyses_of_a_truncated_trace_warn_and_exit_2(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata("memtrace/demo_v3.ctf"), &size);
  const char *path = tu_temp_path("cut_demo.ctf");
  tu_write_file(path, data, size * 2 / 3);
  free(data);
  const char *commands[][6] = {
      {"summary", path},
      {"top", path},
      {"leaks", path},
      {"timeline", path},
      {"flame", path},
      {"info", path},
      {"export", "--format", "pprof", "-o", "-", path},
  };
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    const char *const *c = commands[i];
    char *out, *err;
    int status = tu_run_cli(&out, NULL, &err, c[0], c[1], c[2], c[3], c[4], c[5], NULL);
    if (status != 2 || !out[0] || !strstr(err, "warning:"))
      fail_msg("memtap %s on a truncated trace: exit %d, %zu bytes out, stderr: %s", c[0], status,
               strlen(out), err);
    free(out);
    free(err);
  }
  /* info says where the trace is cut as check does, in plain digits. */
  char *out, *err;
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "check", path, NULL), 2);
  long long cut = 0;
  const char *found = strstr(err, "truncated at byte ");
  assert_true(found && sscanf(found, "truncated at byte %lld ", &cut) == 1 && cut >= 1000);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "info", path, NULL), 2);
  char where[64];
  snprintf(where, sizeof where, "truncated:      at byte %lld (", cut);
  if (!strstr(out, where))
    fail_msg("info lacks \"%s\": %s", where, out);
  free(out);
  free(err);
}

/* --- options that were silently wrong -------------------------------------------------------- */

static void a_window_past_the_end_is_refused_and_an_end_past_it_clamped(void **state) {
  (void)state;
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "summary", "--from", "5", known_path(), NULL), 64);
  assert_non_null(strstr(err, "the window starts at 5.000000 s, after the trace's end "
                              "(0.000080 s)"));
  assert_string_equal(out, "");
  free(out);
  free(err);
  /* Ending there too (it once passed as a window the trace goes on past, exit 0). */
  assert_int_equal(
      tu_run_cli(&out, NULL, &err, "top", "--from", "5", "--to", "5", known_path(), NULL), 64);
  assert_non_null(strstr(err, "the window starts at 5.000000 s, after the trace's end"));
  free(out);
  free(err);
  RUN_OK(out, "summary", "--json", "--to", "5", known_path());
  assert_non_null(strstr(out, "\"window\":{\"from_s\":0.000000,\"to_s\":0.000080,"));
  free(out);
  const char *not_times[] = {"0x10", "1e3", "inf", " 1", "", ".", "-1"};
  for (size_t i = 0; i < sizeof not_times / sizeof not_times[0]; i++) {
    assert_int_equal(
        tu_run_cli(NULL, NULL, &err, "top", "--from", not_times[i], known_path(), NULL), 64);
    assert_non_null(strstr(err, "--from takes seconds or a percentage"));
    free(err);
  }
  RUN_OK(out, "summary", "--json", "--from", ".000035", known_path());
  assert_true(tu_json_number(strstr(out, "\"window\":"), "from_s") == 0.000035);
  free(out);
  /* A well-formed time out of range is told its range, not that it is no time. */
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "top", "--to", "150%", known_path(), NULL), 64);
  assert_non_null(strstr(err, "--to 150%: a percentage of the trace is 0% to 100%"));
  free(err);
  assert_int_equal(
      tu_run_cli(NULL, NULL, &err, "summary", "--from", "10000000000000", known_path(), NULL), 64);
  assert_non_null(strstr(err, "--from 10000000000000: at most 9000000000000 seconds"));
  free(err);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "export", "--format", "folded", "-o",
                              tu_temp_path("at.folded"), "--at", "101%", known_path(), NULL),
                   64);
  assert_non_null(strstr(err, "--at 101%: a percentage of the trace is 0% to 100%"));
  free(err);
}

/* A window inside a gap between two events: the pass stops at the first event past --to, so the
 * last event it read is before the window's start, yet the trace goes on (it once refused
 * `--from 20% --to 60%` of a 1 ms trace as "after the trace's end (0.000010 s)"). */
static void a_window_inside_a_gap_between_events_is_accepted(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  mt_error err;
  uint64_t stack[] = {101};
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 10, 4, 4, MT_SOURCE_EXTERNAL, stack, 1,
                                       tg_resolve, NULL, NULL, &err),
                   MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1000, 8, 8, MT_SOURCE_EXTERNAL, stack, 1,
                                       tg_resolve, NULL, NULL, &err),
                   MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  const char *path = known_trace_file("gap.ctf", data, size);
  free(data);
  char *out;
  RUN_OK(out, "summary", "--json", "--from", "20%", "--to", "60%", path);
  assert_true(tu_json_number(strstr(out, "\"window\":"), "from_s") == 0.0002);
  assert_true(tu_json_number(strstr(out, "\"window\":"), "to_s") == 0.0006);
  free(out);
  RUN_OK(out, "top", "--from", "0.0003", "--to", "0.0005", path);
  free(out);
}

/* A crafted rate (1e-300) makes estimates of 10^300 bytes: they print with their unit in three
 * digits (the digits once filled the field and cut the unit off, "~6938893903907227710147"). */
static void estimates_of_a_tiny_rate_keep_their_unit(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1e-300, &fd);
  mt_error err;
  uint64_t stack[] = {101};
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 10, 4, 1, MT_SOURCE_EXTERNAL, stack, 1,
                                       tg_resolve, NULL, NULL, &err),
                   MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  const char *path = known_trace_file("tiny-rate.ctf", data, size);
  free(data);
  char *out;
  RUN_OK(out, "summary", path);
  assert_non_null(strstr(out, "(one sample stands for ~6.94e+282 EiB)"));
  if (!strstr(out, "1 sampled object, 1 sample, ~6.94e+282 EiB, ~2.5e+299 objects"))
    fail_msg("%s", out);
  free(out);
}

static void hide_patterns_add_up(void **state) {
  (void)state;
  char *both, *joined, *one;
  RUN_OK(both, "flame", "--hide", "fn_300_0", "--hide", "fn_200_1", known_path());
  RUN_OK(joined, "flame", "--hide", "fn_300_0|fn_200_1", known_path());
  RUN_OK(one, "flame", "--hide", "fn_200_1", known_path());
  assert_string_equal(both, joined);
  assert_null(strstr(both, "fn_300_0"));
  assert_null(strstr(both, "fn_200_1"));
  assert_non_null(strstr(one, "fn_300_0"));
  free(both);
  free(joined);
  free(one);
  char *err;
  assert_int_equal(
      tu_run_cli(NULL, NULL, &err, "top", "--hide", "ok", "--hide", "(", known_path(), NULL), 64);
  assert_non_null(strstr(err, "bad --hide regular expression '('"));
  free(err);
  /* An empty pattern hid nothing, silently. */
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "top", "--hide", "", known_path(), NULL), 64);
  assert_non_null(strstr(err, "--hide needs a pattern"));
  free(err);
}

static void export_options_are_honoured_or_refused(void **state) {
  (void)state;
  const char *refused[][4] = {{"pprof", "--by", "count"},
                              {"speedscope", "--by", "count"},
                              {"chrome", "--by", "live"},
                              {"chrome", "--at", "peak"},
                              {"folded", "--at", "peak"}};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    char *out, *err;
    int status = tu_run_cli(&out, NULL, &err, "export", "--format", refused[i][0], refused[i][1],
                            refused[i][2], "-o", "-", known_path(), NULL);
    if (status != 64 || out[0])
      fail_msg("export --format %s %s %s: exit %d, stderr: %s", refused[i][0], refused[i][1],
               refused[i][2], status, err);
    free(out);
    free(err);
  }
  /* speedscope --at peak: the second profile is what is live at the peak, 960 B (B 800, A 160). */
  char *out;
  RUN_OK(out, "export", "--format", "speedscope", "--at", "peak", "-o", "-", known_path());
  assert_non_null(strstr(out, "\"name\":\"bytes live at the peak\""));
  assert_non_null(strstr(out, "\"endValue\":960"));
  free(out);
  RUN_OK(out, "export", "--format", "folded", "--by", "count", "-o", "-", known_path());
  assert_non_null(strstr(out, "fn_102_0 2\n"));
  free(out);
  /* --at T is the window ending at T: with --to as well, one of them would be dropped. The peak
   * inside a window is fine. speedscope names the time its live profile is taken at. */
  char *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "export", "--format", "pprof", "--at", "0.00005",
                              "--to", "0.00004", "-o", "-", known_path(), NULL),
                   64);
  assert_non_null(strstr(err, "--at 0.00005 and --to exclude each other"));
  assert_string_equal(out, "");
  free(out);
  free(err);
  RUN_OK(out, "export", "--format", "speedscope", "--at", "peak", "--to", "0.00004", "-o", "-",
         known_path());
  free(out);
  RUN_OK(out, "export", "--format", "speedscope", "--at", "0.00005", "-o", "-", known_path());
  assert_non_null(strstr(out, "\"name\":\"bytes live at the end (0.000050 s)\""));
  free(out);
}

/* A --focus no backtrace goes through gives an empty output (valid, exit 0) with a warning; one
 * that matches gives none. */
static void a_focus_that_matches_nothing_is_said(void **state) {
  (void)state;
  const char *runs[][6] = {{"flame", "--focus", "nomatch", NULL},
                           {"export", "--format", "folded", "--focus", "nomatch", "-o"}};
  for (size_t i = 0; i < 2; i++) {
    char *out, *err;
    int rc = i == 0 ? tu_run_cli(&out, NULL, &err, runs[i][0], runs[i][1], runs[i][2], known_path(),
                                 NULL)
                    : tu_run_cli(&out, NULL, &err, runs[i][0], runs[i][1], runs[i][2], runs[i][3],
                                 runs[i][4], runs[i][5], "-", known_path(), NULL);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "");
    if (!strstr(err, "warning: no backtrace goes through a function matching 'nomatch'"))
      fail_msg("%s --focus nomatch: %s", runs[i][0], err);
    free(out);
    free(err);
  }
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "flame", "--focus", "fn_102_0", known_path(), NULL),
                   0);
  assert_non_null(strstr(out, "fn_102_0"));
  assert_null(strstr(err, "warning"));
  free(out);
  free(err);
}

/* A pattern whose repetitions expand past what regcomp can hold ("o++++..." made regcomp take
 * gigabytes: a fuzzing find) is refused as a bad command line; ordinary repetition is not. */
static void patterns_that_expand_beyond_bounds_are_refused(void **state) {
  (void)state;
  char stacked[128] = "o";
  memset(stacked + 1, '+', 100);
  const char *bad[][3] = {{"top", "--hide", stacked},
                          {"top", "--hide", "((a{99}){99}){99}"},
                          {"flame", "--focus", "(x{1000}){1000}"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *err;
    assert_int_equal(
        tu_run_cli(NULL, NULL, &err, bad[i][0], bad[i][1], bad[i][2], known_path(), NULL), 64);
    if (!strstr(err, "its repetitions expand to more than 100000 atoms"))
      fail_msg("%s %s %s: %s", bad[i][0], bad[i][1], bad[i][2], err);
    free(err);
  }
  char *out;
  RUN_OK(out, "top", "--hide", "fn_10[12]_[0-9]+|x{1,3}", known_path());
  free(out);
}

/* Options that contradict each other are refused, whatever their order, not settled by the last
 * one given. */
static void contradictory_index_options_are_refused(void **state) {
  (void)state;
  const char *orders[][2] = {{"--index", "--no-index"}, {"--no-index", "--index"}};
  for (size_t i = 0; i < 2; i++) {
    char *err;
    assert_int_equal(
        tu_run_cli(NULL, NULL, &err, "summary", orders[i][0], orders[i][1], known_path(), NULL),
        64);
    assert_non_null(strstr(err, "--index and --no-index exclude each other"));
    free(err);
  }
}

static void counts_take_any_size_and_say_what_is_wrong(void **state) {
  (void)state;
  char *out, *err;
  RUN_OK(out, "top", "-n", "2147483647", known_path());
  assert_non_null(strstr(out, "top 2 of 2 sites"));
  free(out);
  RUN_OK(out, "leaks", "-n", "9223372036854775807", "--depth", "2147483648", known_path());
  free(out);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "top", "-n", "-1", known_path(), NULL), 64);
  assert_non_null(strstr(err, "-n takes a count (0 or more), not '-1'"));
  free(err);
  assert_int_equal(
      tu_run_cli(NULL, NULL, &err, "top", "-n", "9223372036854775808", known_path(), NULL), 64);
  assert_non_null(strstr(err, "-n 9223372036854775808: at most 9223372036854775807"));
  free(err);
}

/* Runs a shell command line, with $MEMTAP the CLI; its exit status, stdout and stderr. */
static int shell(const char *line, char **out, char **err) {
  char command[16384];
  const char *o = tu_temp_path("shell.out"), *e = tu_temp_path("shell.err");
  snprintf(command, sizeof command, "MEMTAP='%s'; %s >'%s' 2>'%s'", getenv("MEMTAP_CLI"), line, o,
           e);
  int status = system(command);
  size_t n;
  *out = (char *)tu_read_file(o, &n);
  *out = realloc(*out, n + 1);
  (*out)[n] = 0;
  *err = (char *)tu_read_file(e, &n);
  *err = realloc(*err, n + 1);
  (*err)[n] = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void standard_input_size_and_diff_of_stdin_twice(void **state) {
  (void)state;
  char line[8192], *out, *err;
  snprintf(line, sizeof line, "cat '%s' | \"$MEMTAP\" info -", tu_testdata("memtrace/demo_v3.ctf"));
  assert_int_equal(shell(line, &out, &err), 0);
  assert_non_null(strstr(out, "file:           - (112 KiB, 114,901 bytes read)\n"));
  free(out);
  free(err);
  snprintf(line, sizeof line, "cat '%s' | \"$MEMTAP\" info --json -",
           tu_testdata("memtrace/demo_v3.ctf"));
  assert_int_equal(shell(line, &out, &err), 0);
  assert_true(tu_json_number(out, "file_size") == 114901);
  free(out);
  free(err);
  snprintf(line, sizeof line, "cat '%s' | \"$MEMTAP\" diff - -", known_path());
  assert_int_equal(shell(line, &out, &err), 64);
  assert_non_null(strstr(err, "A and B are both standard input"));
  free(out);
  free(err);
}

/* demo_v3's List.init_aux: top rounded its own sum (981314), flame and pprof apportioned the total
 * (981315). */
static void one_rounding_rule_for_object_counts(void **state) {
  (void)state;
  const char *demo = tu_testdata("memtrace/demo_v3.ctf");
  char *top, *flame;
  RUN_OK(top, "top", "--by", "count", "-n", "0", demo);
  RUN_OK(flame, "flame", "--by", "count", demo);
  assert_non_null(strstr(top, "981,315 objects"));
  assert_non_null(strstr(flame, "Stdlib__List.init_aux 981315\n"));
  free(top);
  free(flame);
  char *json;
  RUN_OK(json, "top", "--json", "--by", "count", "-n", "0", demo);
  assert_true(tu_json_number(group_of(json, "Stdlib__List.init_aux"), "value") == 981315);
  free(json);
}

static void text_output_uses_iec_units_and_grouped_counts(void **state) {
  (void)state;
  const char *demo = tu_testdata("memtrace/demo_v3.ctf");
  char *out;
  RUN_OK(out, "summary", demo);
  assert_non_null(strstr(out, "allocated:       5,951 sampled objects, 7,164 samples, ~54.7 MiB, "
                              "~1,351,456 objects\n"));
  assert_non_null(strstr(out, "  <= 1 MiB                   0   0 B\n  > 1 MiB "));
  assert_non_null(strstr(out, "  <= 16 KiB              1,878   22.6 MiB\n"));
  assert_null(strstr(out, " MB"));
  assert_null(strstr(out, " KB"));
  free(out);
  RUN_OK(out, "info", demo);
  assert_null(strstr(out, "e+"));
  assert_non_null(strstr(out, "(112 KiB, 114,901 bytes)"));
  assert_non_null(strstr(out, "  external:     26,146,789 words/s (199 MiB/s)\n"));
  free(out);
  RUN_OK(out, "check", tu_testdata("memtrace/ocamlopt_v1.ctf"));
  assert_non_null(strstr(out, ": ok: 175,035 events, 2,040,414 bytes (1.9 MiB)\n"));
  free(out);
}

static void timeline_rows_all_have_distinct_times(void **state) {
  (void)state;
  char *out;
  RUN_OK(out, "timeline", tu_testdata("memtrace/demo_v3.ctf"));
  const char *rows = strstr(out, "time (end)");
  assert_non_null(rows);
  char prev[32] = "";
  int n = 0;
  for (const char *l = strchr(rows, '\n') + 1; *l; l = strchr(l, '\n') + 1, n++) {
    char t[32];
    assert_int_equal(sscanf(l, "%31s", t), 1);
    if (!strcmp(t, prev))
      fail_msg("two rows end at %s s", t);
    snprintf(prev, sizeof prev, "%s", t);
  }
  assert_true(n > 2);
  free(out);
}

/* Every option line of every help starts its description at the same column as the others, and
 * continuation lines start there too. */
static void help_option_columns_are_aligned(void **state) {
  (void)state;
  const char *commands[] = {"info",     "dump",  "check", "copy",   "summary", "top",      "leaks",
                            "timeline", "flame", "diff",  "report", "export",  "ring-dump"};
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    char *out;
    RUN_OK(out, commands[i], "--help");
    int column = -1;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
      int at;
      if (!strncmp(line, "  -", 3)) {
        char *gap = strstr(line + 2, "  ");
        assert_non_null(gap);
        at = (int)(gap - line) + (int)strspn(gap, " ");
      } else if (!strncmp(line, "    ", 4) && column >= 0) {
        at = (int)strspn(line, " ");
      } else {
        continue;
      }
      if (column < 0)
        column = at;
      if (at != column)
        fail_msg("memtap %s --help: '%s' starts at column %d, not %d", commands[i], line, at,
                 column);
    }
    free(out);
  }
}

/* ocamlopt_v1's backtraces are up to 409 frames deep, most too narrow to draw: the SVG was 6959 px
 * tall with its top quarter blank. The deepest frame drawn is now the top row, y = 36 (the title
 * above it). */
static void flame_svg_is_as_tall_as_the_frames_drawn(void **state) {
  (void)state;
  char *out;
  RUN_OK(out, "flame", "--svg", tu_testdata("memtrace/ocamlopt_v1.ctf"));
  double top = 1e9, height = 0;
  assert_int_equal(sscanf(strstr(out, "<svg "),
                          "<svg xmlns=\"http://www.w3.org/2000/svg\" "
                          "width=\"%*f\" height=\"%lf\"",
                          &height),
                   1);
  for (const char *p = strstr(out, "<rect x="); p; p = strstr(p + 1, "<rect x=")) {
    double y;
    assert_int_equal(sscanf(p, "<rect x=\"%*f\" y=\"%lf\"", &y), 1);
    if (y < top)
      top = y;
  }
  assert_true(top == 36.0);
  assert_true(height < 6959);
  free(out);
}

/* Singular and plural: "1 object", "1 site", "1 outer frame". */
static void one_is_singular(void **state) {
  (void)state;
  char *out;
  RUN_OK(out, "top", "--depth", "6", "--by", "live", known_path());
  assert_non_null(strstr(out, "       ... 1 outer frame\n"));
  free(out);
  RUN_OK(out, "leaks", known_path());
  assert_non_null(strstr(out, "in 1 group\n"));
  free(out);
  RUN_OK(out, "top", "--from", "0.000075", known_path());
  assert_non_null(strstr(out, "top 1 of 1 site by bytes"));
  assert_non_null(strstr(out, "allocated 1 object (16 B)"));
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(summary_json_gives_exact_numbers),
      cmocka_unit_test(names_with_control_characters_are_defused_on_a_terminal),
      cmocka_unit_test(messages_with_control_characters_are_defused_on_a_terminal),
      cmocka_unit_test(exports_on_a_terminal_are_defused_and_binary_ones_refused),
      cmocka_unit_test(window_in_seconds_and_percent),
      cmocka_unit_test(top_ranks_sites_and_refuses_temporary_on_sampled_traces),
      cmocka_unit_test(json_figures_of_a_sampled_trace_are_whole_numbers),
      cmocka_unit_test(leaks_on_demo_v3_match_the_known_sites),
      cmocka_unit_test(leaks_fail_above_sets_exit_status_3),
      cmocka_unit_test(diff_normalises_and_orders_by_change),
      cmocka_unit_test(timeline_csv_gives_every_step_exactly),
      cmocka_unit_test(timeline_csv_and_json_together_are_a_usage_error),
      cmocka_unit_test(summary_json_rate_sizes_and_lifetimes_are_exact),
      cmocka_unit_test(summary_in_a_window_says_what_it_read),
      cmocka_unit_test(sources_are_estimated_with_the_header_word_and_named_by_trace_kind),
      cmocka_unit_test(top_leaks_and_diff_text_is_exact),
      cmocka_unit_test(windows_apply_to_top_leaks_timeline_and_diff),
      cmocka_unit_test(top_groups_by_function_and_file_and_shows_n),
      cmocka_unit_test(hide_and_no_fold_change_top_and_flame_exactly),
      cmocka_unit_test(top_inverted_shows_the_callers_of_the_allocation_point),
      cmocka_unit_test(top_inverted_sums_the_small_callers),
      cmocka_unit_test(flame_folded_values_add_up_to_the_summary),
      cmocka_unit_test(exports_are_valid_and_complete),
      cmocka_unit_test(report_is_one_self_contained_file),
      cmocka_unit_test(every_command_has_help_and_rejects_bad_options),
      cmocka_unit_test(analyses_of_a_damaged_trace_print_what_was_read_warn_and_exit_2),
      cmocka_unit_test(a_window_past_the_damage_blames_the_trace),
      cmocka_unit_test(analyses_of_a_truncated_trace_warn_and_exit_2),
      cmocka_unit_test(a_window_past_the_end_is_refused_and_an_end_past_it_clamped),
      cmocka_unit_test(a_window_inside_a_gap_between_events_is_accepted),
      cmocka_unit_test(estimates_of_a_tiny_rate_keep_their_unit),
      cmocka_unit_test(hide_patterns_add_up),
      cmocka_unit_test(export_options_are_honoured_or_refused),
      cmocka_unit_test(contradictory_index_options_are_refused),
      cmocka_unit_test(patterns_that_expand_beyond_bounds_are_refused),
      cmocka_unit_test(a_focus_that_matches_nothing_is_said),
      cmocka_unit_test(counts_take_any_size_and_say_what_is_wrong),
      cmocka_unit_test(standard_input_size_and_diff_of_stdin_twice),
      cmocka_unit_test(one_rounding_rule_for_object_counts),
      cmocka_unit_test(text_output_uses_iec_units_and_grouped_counts),
      cmocka_unit_test(timeline_rows_all_have_distinct_times),
      cmocka_unit_test(help_option_columns_are_aligned),
      cmocka_unit_test(flame_svg_is_as_tall_as_the_frames_drawn),
      cmocka_unit_test(one_is_singular),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
