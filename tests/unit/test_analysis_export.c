/* The exports' guarantees that need traces built for them: the HTML report's size cap holds on a
 * trace with more backtraces, sites and cells than it keeps, and loses nothing by merging; folded
 * stacks have one line per distinct stack of function names; the Chrome trace's live-heap counter
 * is stamped where each value holds. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_known_trace.h"
#include "memtap/export.h"
#include "testutil.h"
#include "tracegen.h"

/* docs/analysis.md, "Size cap". */
#define CAP_ROWS 100000
#define CAP_SITES 20000
#define CAP_BYTES 16000000

/* Words of one object per size class (8, 32, ... bytes up to 2 MB: one in each of the 10 classes).
 */
static const int64_t class_words[10] = {1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144};

/* A trace at rate 1 of `nstacks` backtraces (leaf, caller, root) whose leaf is one of `nsites`
 * codes, so the backtraces of a site differ by their caller. Each backtrace allocates `per_stack`
 * objects, every 100 µs, one size class after the other; of each ten, some are freed 5 µs later,
 * some 50 µs later, some never. */
static const char *many_backtraces(const char *name, int nstacks, int nsites, int per_stack) {
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  mt_error err;
  int64_t t = TG_START;
  for (int j = 0; j < per_stack; j++)
    for (int s = 0; s < nstacks; s++) {
      uint64_t stack[3] = {100000 + (uint64_t)(s % nsites), 200000 + (uint64_t)(s / nsites), 300};
      int64_t words = class_words[j % 10], id;
      if (mt_writer_put_alloc(w, t, words, words, MT_SOURCE_EXTERNAL, stack, 3, tg_resolve, NULL,
                              &id, &err))
        fail_msg("writing %s: %s", name, err.message);
      int kind = (j / 10 + s) % 3;
      if (kind < 2 && mt_writer_put_collect(w, t + (kind ? 50 : 5), id, &err))
        fail_msg("writing %s: %s", name, err.message);
      t += 100;
    }
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  const char *path = known_trace_file(name, data, size);
  free(data);
  return path;
}

/* The text of the report's embedded data (NUL-terminated in place). */
static char *report_data(char *html) {
  const char *open = "<script id=\"memtap-data\" type=\"application/json\">";
  char *start = strstr(html, open);
  assert_non_null(start);
  start += strlen(open);
  char *end = strstr(start, "</script>");
  assert_non_null(end);
  *end = 0;
  assert_true(tu_json_valid(start, NULL));
  return start;
}

/* The number of elements of the JSON array after "key":[ (strings skipped whole). */
static size_t array_length(const char *json, const char *key) {
  char needle[64];
  snprintf(needle, sizeof needle, "\"%s\":[", key);
  const char *p = strstr(json, needle);
  assert_non_null(p);
  p += strlen(needle);
  size_t count = 0;
  int depth = 0;
  bool any = false;
  for (; *p && (depth > 0 || *p != ']'); p++) {
    if (*p == '"') {
      for (p++; *p != '"'; p++)
        if (*p == '\\')
          p++;
    } else if (*p == '[' || *p == '{') {
      depth++;
    } else if (*p == ']' || *p == '}') {
      depth--;
    } else if (*p == ',' && depth == 0) {
      count++;
    }
    any = true;
  }
  return any ? count + 1 : 0;
}

typedef struct totals {
  size_t rows;
  int64_t max_stack;
  uint64_t objects, samples;
  double estimated;
} totals;

/* Adds up the rows: a flat array, 8 numbers a row (stack, allocation step, free step, size class,
 * lifetime class, sampled objects, samples, estimated objects). */
static totals row_totals(const char *json) {
  const char *p = strstr(json, "\"rows\":[");
  assert_non_null(p);
  p += strlen("\"rows\":[");
  totals t = {0};
  t.max_stack = -1;
  while (*p != ']') {
    int64_t stack;
    unsigned ab, fb, sc, lc;
    uint64_t objects, samples;
    double est;
    int used;
    assert_int_equal(sscanf(p, "%" SCNd64 ",%u,%u,%u,%u,%" SCNu64 ",%" SCNu64 ",%lf%n", &stack, &ab,
                            &fb, &sc, &lc, &objects, &samples, &est, &used),
                     8);
    t.rows++;
    if (stack > t.max_stack)
      t.max_stack = stack;
    t.objects += objects;
    t.samples += samples;
    t.estimated += est;
    p += used;
    while (*p == ',' || *p == '\n')
      p++;
  }
  return t;
}

/* Writes the report of `trace`, checks every cap and that the rows add up to the summary's
 * allocations; returns the report's data (in *html, to free). */
static const char *check_report_caps(const char *trace, char **html) {
  char *out, *err;
  const char *path = tu_temp_path("report.html");
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "report", trace, "-o", path, NULL), 0);
  free(err);
  size_t size;
  *html = (char *)tu_read_file(path, &size);
  assert_true(size <= CAP_BYTES);
  *html = realloc(*html, size + 1);
  (*html)[size] = 0;
  const char *data = report_data(*html);
  size_t stacks = array_length(data, "stacks"); /* flat: node, site */
  assert_true(stacks > 0 && stacks % 2 == 0);
  stacks /= 2;
  assert_int_equal(array_length(data, "nodes") % 2, 0);
  totals t = row_totals(data);
  assert_true(t.rows > 0 && t.rows <= CAP_ROWS);
  assert_true(stacks <= t.rows); /* every stack has a row */
  assert_true(t.max_stack < (int64_t)stacks);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "summary", "--json", trace, NULL), 0);
  assert_int_equal(t.objects, (uint64_t)tu_json_number(out, "objects"));
  assert_int_equal(t.samples, (uint64_t)tu_json_number(out, "samples"));
  double want = tu_json_number(out, "objects_estimated");
  assert_true(t.estimated > want - 1 && t.estimated < want + 1);
  free(out);
  free(err);
  return data;
}

static void report_caps_rows_and_backtraces_without_losing_anything(void **state) {
  (void)state;
  /* 8 000 backtraces at 4 000 sites, 30 cells each: 240 000 cells in the analysis, more rows than
   * the cap until the time steps and classes are coarser. */
  const char *trace = many_backtraces("many.ctf", 8000, 4000, 30);
  char *out, *err;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "summary", "--json", trace, NULL), 0);
  assert_int_equal((int)tu_json_number(out, "backtraces"), 8000);
  free(out);
  free(err);
  char *html;
  const char *data = check_report_caps(trace, &html);
  assert_int_equal(array_length(data, "stacks"), 2 * 8000); /* the trie fits whole */
  assert_non_null(strstr(data, "\"pruned_share\":0.000000"));
  assert_true(row_totals(data).rows < 240000);
  free(html);
}

static void report_merges_the_lightest_sites_when_sites_exceed_the_cap(void **state) {
  (void)state;
  char *html;
  const char *data = check_report_caps(many_backtraces("sites.ctf", 25000, 25000, 1), &html);
  assert_non_null(strstr(data, "\"(other sites)\""));
  /* The sites kept by name, and "(other sites)": the stacks' distinct site frames. */
  const char *p = strstr(data, "\"stacks\":[") + strlen("\"stacks\":[");
  char *seen = calloc(1u << 20, 1);
  assert_non_null(seen);
  size_t sites = 0;
  for (int64_t node, site; sscanf(p, "%" SCNd64 ",%" SCNd64, &node, &site) == 2;) {
    assert_true(site >= 0 && site < (1 << 20));
    sites += !seen[site];
    seen[site] = 1;
    p = strchr(strchr(p, ',') + 1, ',');
    if (!p)
      break;
    p++;
    while (*p == '\n')
      p++;
  }
  free(seen);
  assert_int_equal(sites, CAP_SITES + 1);
  free(html);
}

static void report_prunes_the_lightest_branches_into_smaller_callees(void **state) {
  (void)state;
  /* 150 000 backtraces with a leaf each: more nodes and frames than the trie's budget. What is
   * cut stays in the rows, under a "(smaller callees)" node of the kept caller. */
  char *html;
  const char *data = check_report_caps(many_backtraces("wide.ctf", 150000, 1000, 1), &html);
  assert_non_null(strstr(data, "\"(smaller callees)\""));
  assert_null(strstr(data, "\"pruned_share\":0.000000"));
  free(html);
}

static void report_cuts_long_names(void **state) {
  (void)state;
  /* The known trace's report keeps names whole; a long title is cut. */
  size_t size;
  uint8_t *bytes = known_trace(&size);
  const char *trace = known_trace_file("known.ctf", bytes, size);
  free(bytes);
  char title[2001];
  memset(title, 'x', 2000);
  title[2000] = 0;
  char *err;
  const char *path = tu_temp_path("titled.html");
  assert_int_equal(
      tu_run_cli(NULL, NULL, &err, "report", trace, "--title", title, "-o", path, NULL), 0);
  free(err);
  char *html = (char *)tu_read_file(path, &size);
  html = realloc(html, size + 1);
  html[size] = 0;
  title[257] = 0;
  assert_null(strstr(html, title));
  title[256] = 0;
  assert_non_null(strstr(html, title));
  assert_non_null(strstr(report_data(html), "\"fn_101_2\""));
  free(html);
}

static void folded_has_one_line_per_stack_of_names(void **state) {
  (void)state;
  const char *trace = tu_testdata("memtrace/demo_v3.ctf");
  char *summary, *err;
  assert_int_equal(tu_run_cli(&summary, NULL, &err, "summary", "--json", trace, NULL), 0);
  free(err);
  int64_t want = (int64_t)tu_json_number(summary, "bytes");
  free(summary);
  for (int variant = 0; variant < 2; variant++) {
    char *out;
    int rc = variant ? tu_run_cli(&out, NULL, &err, "export", "--format", "folded", "-o", "-",
                                  trace, NULL)
                     : tu_run_cli(&out, NULL, &err, "flame", "--folded", trace, NULL);
    assert_int_equal(rc, 0);
    free(err);
    /* demo_v3 has three backtraces phase1 -> init_aux from three lines of phase1: one line. */
    const char *merged = "Dune__exe__Demo.phase1;Stdlib__List.init_aux ";
    const char *first = strstr(out, merged);
    assert_non_null(first);
    assert_null(strstr(first + 1, merged));
    int64_t sum = 0;
    size_t nlines = 0;
    char *lines[64];
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
      char *space = strrchr(line, ' ');
      assert_non_null(space);
      *space = 0;
      sum += strtoll(space + 1, NULL, 10);
      for (size_t i = 0; i < nlines; i++)
        if (!strcmp(lines[i], line))
          fail_msg("folded line repeated: %s", line);
      assert_true(nlines < 64);
      lines[nlines++] = line;
    }
    assert_int_equal(nlines, 7);
    assert_int_equal(sum, want);
    free(out);
  }
}

/* A trace of one allocation whose backtrace is far deeper than the call stack holds: two functions
 * calling each other (not folded), a few bytes of trace per 256 frames. */
enum { DEEP = 60000, DEEPER = 300000 };
static const char *deep_trace(size_t depth) {
  uint64_t *stack = malloc(depth * sizeof *stack);
  assert_non_null(stack);
  for (size_t i = 0; i < depth; i++) /* innermost first; codes 3 and 6 have one frame each */
    stack[i] = i == depth - 1 ? 9 : i % 2 ? 3 : 6;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  mt_error err;
  int64_t id;
  if (mt_writer_put_alloc(w, TG_START + 10, 4, 4, MT_SOURCE_EXTERNAL, stack, depth, tg_resolve,
                          NULL, &id, &err))
    fail_msg("writing: %s", err.message);
  free(stack);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  const char *path = known_trace_file("deep.ctf", data, size);
  free(data);
  return path;
}

/* Counts `needle` in `text` in one pass. Not with strstr: a sanitizer's strstr checks the whole
 * rest of the text at every call, which made counting in a 40 MB output take hours. */
static size_t occurrences(const char *text, const char *needle) {
  size_t n = 0, k = strlen(needle);
  for (const char *p = text; *p; p++)
    if (*p == needle[0] && !strncmp(p, needle, k))
      n++;
  return n;
}

/* The SVG flame graph draws every frame of the deep trace, one row each. */
static void flame_svg_draws_a_backtrace_deeper_than_the_call_stack(void **state) {
  (void)state;
  char *out, *errs;
  assert_int_equal(tu_run_cli(&out, NULL, &errs, "flame", "--svg", deep_trace(DEEP), NULL), 0);
  free(errs);
  assert_int_equal(occurrences(out, "<g>"), DEEP + 1); /* and the root */
  const char *end = "</svg>\n";
  assert_string_equal(out + strlen(out) - strlen(end), end);
  free(out);
}

/* top --inverted --depth 0 lists every level of callers of the deep trace's allocation point (as
 * JSON: the text indents each level further, its size grows with the depth squared), down to
 * MT_ANALYSIS_SHOWN_DEPTH_MAX levels: the backtrace is cut there (and said to be). */
static void top_lists_callers_deeper_than_the_call_stack(void **state) {
  (void)state;
  char *out, *errs;
  assert_int_equal(tu_run_cli(&out, NULL, &errs, "top", "--json", "--inverted", "--depth", "0",
                              deep_trace(DEEPER), NULL),
                   0);
  assert_non_null(strstr(errs, "deeper than 65,536 shown frames"));
  free(errs);
  /* The group's list, then one per frame: the allocation point first (the whole group). */
  assert_true(DEEPER > MT_ANALYSIS_SHOWN_DEPTH_MAX);
  assert_int_equal(occurrences(out, "\"callers\":["), MT_ANALYSIS_SHOWN_DEPTH_MAX + 1);
  /* Nested that deep, the JSON is checked for balance, not with the recursive validator. */
  assert_int_equal(occurrences(out, "["), occurrences(out, "]"));
  assert_int_equal(occurrences(out, "{"), occurrences(out, "}"));
  assert_string_equal(out + strlen(out) - 5, "]}]}\n");
  free(out);
}

/* The known trace's live heap in bytes after its events at times < t (µs since the start):
 * analysis_known_trace.h. */
static double known_live_before(int64_t t) {
  static const struct {
    int64_t t;
    double change;
  } events[] = {{10, 80},  {20, 32},  {30, -32},  {40, 80},
                {50, 800}, {60, -80}, {70, -800}, {80, 16}};
  double live = 0;
  for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
    if (events[i].t < t)
      live += events[i].change;
  return live;
}

/* Rounding values to integers with an exact total: the usual case, and a crafted trace's estimates
 * (fuzz_cli_args found 1e157 at one stack, which overflowed the conversion to an integer). */
static void apportioned_values_add_up_and_absurd_ones_are_clamped(void **state) {
  (void)state;
  const double usual[] = {1.5, 2.25, 0.25, 3.0};
  int64_t out[4];
  mt_apportion(usual, 4, 7, out);
  assert_int_equal(out[0] + out[1] + out[2] + out[3], 7);
  assert_int_equal(out[3], 3);
  for (int i = 0; i < 3; i++)
    assert_true(out[i] == (int64_t)usual[i] || out[i] == (int64_t)usual[i] + 1);
  const double absurd[] = {1.07262e157, 2.0, -5.0, 1e300, 0.5};
  int64_t got[5];
  mt_apportion(absurd, 5, INT64_MAX, got); /* a total far from the clamped values: floors kept */
  assert_int_equal(got[0], (int64_t)1 << 50);
  assert_int_equal(got[1], 2);
  assert_int_equal(got[2], 0);
  assert_int_equal(got[3], (int64_t)1 << 50);
  assert_int_equal(got[4], 0);
}

static void chrome_counter_is_stamped_where_its_value_holds(void **state) {
  (void)state;
  size_t size;
  uint8_t *bytes = known_trace(&size);
  const char *trace = known_trace_file("known.ctf", bytes, size);
  free(bytes);
  char *out, *err;
  assert_int_equal(
      tu_run_cli(&out, NULL, &err, "export", "--format", "chrome", "-o", "-", trace, NULL), 0);
  free(err);
  assert_true(tu_json_valid(out, NULL));
  /* A counter holds its value from its timestamp to the next: each point must be the live heap
   * at its time, that is after the events before it; the last, at the end (80 µs), what is live
   * at the end. */
  const char *needle = "\"name\":\"live heap\",\"ph\":\"C\",\"ts\":";
  int64_t last_ts = -1;
  double last_value = -1;
  size_t points = 0;
  for (const char *p = strstr(out, needle); p; p = strstr(p + 1, needle)) {
    int64_t ts;
    double value;
    assert_int_equal(sscanf(p + strlen(needle),
                            "%" SCNd64 ",\"pid\":1,\"tid\":1,\"args\":{\"bytes\":%lf", &ts, &value),
                     2);
    assert_true(ts > last_ts);
    if (last_ts >= 0 && known_live_before(last_ts) != last_value)
      fail_msg("the counter says %.0f bytes at %" PRId64 " us, the live heap is %.0f", last_value,
               last_ts, known_live_before(last_ts));
    last_ts = ts;
    last_value = value;
    points++;
  }
  assert_true(points >= 9);
  assert_int_equal(last_ts, 80);
  assert_true(last_value == 96);
  /* The counter's steps at the allocations and frees: 0 until 10 µs, 80 after. */
  assert_non_null(strstr(out, "\"ts\":10,\"pid\":1,\"tid\":1,\"args\":{\"bytes\":0,"));
  assert_non_null(strstr(out, "\"ts\":11,\"pid\":1,\"tid\":1,\"args\":{\"bytes\":80,"));
  assert_non_null(strstr(out, "\"ts\":51,\"pid\":1,\"tid\":1,\"args\":{\"bytes\":960,"));
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(apportioned_values_add_up_and_absurd_ones_are_clamped),
      cmocka_unit_test(report_caps_rows_and_backtraces_without_losing_anything),
      cmocka_unit_test(report_merges_the_lightest_sites_when_sites_exceed_the_cap),
      cmocka_unit_test(report_prunes_the_lightest_branches_into_smaller_callees),
      cmocka_unit_test(report_cuts_long_names),
      cmocka_unit_test(folded_has_one_line_per_stack_of_names),
      cmocka_unit_test(chrome_counter_is_stamped_where_its_value_holds),
      cmocka_unit_test(flame_svg_draws_a_backtrace_deeper_than_the_call_stack),
      cmocka_unit_test(top_lists_callers_deeper_than_the_call_stack),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
