/* Golden tests on the traces OCaml memtrace wrote (testdata/memtrace): memtap dump reproduces
 * memtrace's dump_trace byte for byte, copy re-encodes them bit for bit, info and dump --json say
 * what the reference files say. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "testutil.h"

/* The traces every test data set must hold. The tests run on every NAME.ctf that has a NAME.ref,
 * so a trace added to testdata/memtrace is checked without a change here. */
static const char *known[] = {"tiny_v3",     "demo_v3",     "demo_v2",          "ocamlopt_v3",
                              "ocamlopt_v2", "ocamlopt_v1", "lists_and_sets_v1"};
#define NKNOWN (sizeof known / sizeof known[0])
#define MAX_TRACES 256

static char *traces[MAX_TRACES];
static size_t ntraces;

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Fills traces[] with the names of testdata/memtrace's *.ctf files that have a .ref (skipping the
 * test, or failing it under CI=true, when the directory is missing), and fails if one of the known
 * traces is not among them. */
static void find_traces(void) {
  for (size_t i = 0; i < ntraces; i++)
    free(traces[i]);
  ntraces = 0;
  const char *dir = tu_testdata("memtrace");
  DIR *d = opendir(dir);
  if (!d)
    fail_msg("cannot list %s", dir);
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len <= 4 || strcmp(e->d_name + len - 4, ".ctf"))
      continue;
    char ref[4096];
    snprintf(ref, sizeof ref, "%s/%.*s.ref", dir, (int)(len - 4), e->d_name);
    if (access(ref, R_OK) != 0) {
      print_message("note: %s/%s has no .ref file: the golden tests cannot check it\n", dir,
                    e->d_name);
      continue;
    }
    assert_true(ntraces < MAX_TRACES);
    traces[ntraces++] = strndup(e->d_name, len - 4);
  }
  closedir(d);
  qsort(traces, ntraces, sizeof traces[0], by_name);
  for (size_t i = 0; i < NKNOWN; i++) {
    bool found = false;
    for (size_t j = 0; j < ntraces; j++)
      found |= !strcmp(traces[j], known[i]);
    if (!found)
      fail_msg("%s/%s.ctf (with its .ref) is missing from the test data", dir, known[i]);
  }
}

static void every_trace_with_a_reference_is_tested(void **state) {
  (void)state;
  find_traces();
  assert_true(ntraces >= NKNOWN);
  print_message("golden traces: %zu\n", ntraces);
}

static const char *trace_path(const char *name, const char *ext) {
  char rel[256];
  snprintf(rel, sizeof rel, "memtrace/%s.%s", name, ext);
  return tu_testdata(rel);
}

static void assert_dump_hash(const char *trace, const char *option, const char *want) {
  char hex[65], *err = NULL;
  const char *out = tu_temp_path("dump.txt");
  int status = option ? tu_run_cli_to_file(out, &err, "dump", option, trace, NULL)
                      : tu_run_cli_to_file(out, &err, "dump", trace, NULL);
  if (status != 0)
    fail_msg("memtap dump %s failed (%d): %s", trace, status, err);
  free(err);
  tu_sha256_file(out, hex);
  if (strcmp(hex, want))
    fail_msg("dump %s of %s: sha256 %s, reference %s", option ? option : "", trace, hex, want);
}

static void dump_matches_memtraces_dump_trace_for_every_trace(void **state) {
  (void)state;
  find_traces();
  for (size_t i = 0; i < ntraces; i++) {
    const char *ctf = trace_path(traces[i], "ctf"), *ref = trace_path(traces[i], "ref");
    char *with = tu_ref_field(ref, "dump sha256"),
         *without = tu_ref_field(ref, "dump-without-dom sha256");
    assert_non_null(with);
    assert_non_null(without);
    assert_dump_hash(ctf, NULL, with);
    assert_dump_hash(ctf, "--no-domain", without);
    free(with);
    free(without);
  }
}

static void copy_reproduces_memtraces_files_bit_for_bit(void **state) {
  (void)state;
  const char *exact[] = {"ocamlopt_v3", "demo_v3", "tiny_v3", "demo_v2", "ocamlopt_v2"};
  for (size_t i = 0; i < 5; i++) {
    const char *in = trace_path(exact[i], "ctf"), *out = tu_temp_path("copy.ctf");
    char *err = NULL;
    int status = tu_run_cli(NULL, NULL, &err, "copy", in, out, NULL);
    if (status)
      fail_msg("copy %s: %s", in, err);
    free(err);
    char a[65], b[65];
    tu_sha256_file(in, a);
    tu_sha256_file(out, b);
    if (strcmp(a, b))
      fail_msg("copy of %s differs from the original", exact[i]);
  }
}

static void v1_traces_copy_as_v2_with_the_same_events(void **state) {
  (void)state;
  const char *in = trace_path("lists_and_sets_v1", "ctf"), *out = tu_temp_path("v1.ctf");
  assert_int_equal(tu_run_cli(NULL, NULL, NULL, "copy", in, out, NULL), 0);
  char *json = NULL;
  assert_int_equal(tu_run_cli(&json, NULL, NULL, "info", "--json", out, NULL), 0);
  assert_int_equal((int)tu_json_number(json, "version"), 2);
  free(json);
  char *want = tu_ref_field(trace_path("lists_and_sets_v1", "ref"), "dump-without-dom sha256");
  assert_dump_hash(out, "--no-domain", want);
  free(want);
}

static void v3_copied_as_v2_dumps_like_memtrace_0_2(void **state) {
  (void)state;
  const char *in = trace_path("demo_v3", "ctf"), *out = tu_temp_path("demo_as_v2.ctf");
  assert_int_equal(tu_run_cli(NULL, NULL, NULL, "copy", "--version", "2", in, out, NULL), 0);
  char *want = tu_ref_field(trace_path("demo_v3", "ref"), "dump-without-dom sha256");
  assert_dump_hash(out, "--no-domain", want);
  free(want);
}

static long long ref_count(const char *ref, const char *kind) {
  size_t size;
  char *text = (char *)tu_read_file(ref, &size);
  text = realloc(text, size + 1);
  text[size] = 0;
  long long count = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    long long n;
    char word[64];
    if (sscanf(line, " %lld %63s", &n, word) == 2 && !strcmp(word, kind))
      count = n;
  }
  free(text);
  return count;
}

static void info_json_reports_what_the_trace_says(void **state) {
  (void)state;
  const char *ctf = trace_path("demo_v3", "ctf"), *ref = trace_path("demo_v3", "ref");
  char *json = NULL, *err = NULL;
  assert_int_equal(tu_run_cli(&json, NULL, &err, "info", "--json", ctf, NULL), 0);
  assert_true(tu_json_valid(json, NULL));
  assert_int_equal((long long)tu_json_number(json, "pid"), 11160);
  assert_true(tu_json_number(json, "sample_rate") == 0.001);
  assert_int_equal((int)tu_json_number(json, "word_size"), 64);
  const char *kinds[] = {"alloc", "alloc_major", "alloc_ext", "promote", "collect"};
  for (int i = 0; i < 5; i++)
    assert_int_equal((long long)tu_json_number(json, kinds[i]), ref_count(ref, kinds[i]));
  char *samples = tu_ref_field(ref, "sum of nsamples");
  assert_int_equal((long long)tu_json_number(json, "samples"), atoll(samples));
  free(samples);
  free(json);
  free(err);
  char *text = NULL;
  assert_int_equal(tu_run_cli(&text, NULL, NULL, "info", ctf, NULL), 0);
  assert_non_null(strstr(text, "pid:            11160"));
  assert_non_null(strstr(text, "1,878 external"));
  free(text);
}

static void dump_json_is_valid_json_lines_for_every_trace(void **state) {
  (void)state;
  find_traces();
  for (size_t i = 0; i < ntraces; i++) {
    const char *ctf = trace_path(traces[i], "ctf"), *out = tu_temp_path("dump.json");
    assert_int_equal(tu_run_cli_to_file(out, NULL, "dump", "--json", ctf, NULL), 0);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0, lines = 0, events = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
      line[len - 1] = 0;
      size_t bad = 0;
      if (!tu_json_valid(line, &bad))
        fail_msg("%s: dump --json line %zu is not JSON (at column %zu): %.120s", traces[i],
                 lines + 1, bad, line);
      if (strstr(line, "{\"type\":\"alloc\"") == line ||
          strstr(line, "{\"type\":\"promote\"") == line ||
          strstr(line, "{\"type\":\"collect\"") == line)
        events++;
      lines++;
    }
    free(line);
    fclose(f);
    char *want = tu_ref_field(trace_path(traces[i], "ref"), "dump lines");
    assert_int_equal(events, (size_t)atoll(want));
    free(want);
  }
}

static void zstd_compressed_traces_dump_identically(void **state) {
  (void)state;
  const char *ctf = trace_path("demo_v3", "ctf");
  size_t size;
  uint8_t *data = tu_read_file(ctf, &size);
  size_t bound = ZSTD_compressBound(size);
  uint8_t *z = malloc(bound);
  size_t zsize = ZSTD_compress(z, bound, data, size, 19);
  assert_false(ZSTD_isError(zsize));
  const char *zpath = tu_temp_path("demo_v3.ctf.zst");
  tu_write_file(zpath, z, zsize);
  char *want = tu_ref_field(trace_path("demo_v3", "ref"), "dump sha256");
  assert_dump_hash(zpath, NULL, want);
  free(want);
  free(z);
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_trace_with_a_reference_is_tested),
      cmocka_unit_test(dump_matches_memtraces_dump_trace_for_every_trace),
      cmocka_unit_test(copy_reproduces_memtraces_files_bit_for_bit),
      cmocka_unit_test(v1_traces_copy_as_v2_with_the_same_events),
      cmocka_unit_test(v3_copied_as_v2_dumps_like_memtrace_0_2),
      cmocka_unit_test(info_json_reports_what_the_trace_says),
      cmocka_unit_test(dump_json_is_valid_json_lines_for_every_trace),
      cmocka_unit_test(zstd_compressed_traces_dump_identically),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
