/* The memtap command line as a user meets it: help everywhere, usage errors with exit status 64,
 * errors that name the file and what went wrong, no output lost before an error, and copy's
 * refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "tracegen.h"

static void expect(int status, const char *out_has, const char *err_has, const char *arg0, ...) {
  const char *args[16];
  int n = 0;
  va_list ap;
  va_start(ap, arg0);
  for (const char *a = arg0; a; a = va_arg(ap, const char *))
    args[n++] = a;
  va_end(ap);
  args[n] = NULL;
  char *out = NULL, *err = NULL;
  int got =
      tu_run_cli(&out, NULL, &err, n > 0 ? args[0] : NULL, n > 1 ? args[1] : NULL,
                 n > 2 ? args[2] : NULL, n > 3 ? args[3] : NULL, n > 4 ? args[4] : NULL, NULL);
  if (got != status)
    fail_msg("memtap %s: exit %d, expected %d; stderr: %s", arg0 ? arg0 : "", got, status, err);
  if (out_has && !strstr(out, out_has))
    fail_msg("memtap %s: stdout lacks \"%s\": %.300s", arg0 ? arg0 : "", out_has, out);
  if (err_has && !strstr(err, err_has))
    fail_msg("memtap %s: stderr lacks \"%s\": %.300s", arg0 ? arg0 : "", err_has, err);
  free(out);
  free(err);
}

static const char *write_trace(const char *name, bool two_domains) {
  int fd;
  mt_writer *w = tg_writer(3, 0.5, &fd);
  uint64_t stack[] = {3, 2, 1};
  for (int i = 0; i < 10; i++)
    assert_int_equal(mt_writer_put_alloc_in(w, two_domains ? (uint16_t)(i % 2) : 0, TG_START + i, 4,
                                            1, MT_SOURCE_EXTERNAL, stack, 3, tg_resolve, NULL, NULL,
                                            NULL),
                     MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  const char *path = tu_temp_path(name);
  tu_write_file(path, data, size);
  free(data);
  return path;
}

static void every_command_has_help(void **state) {
  (void)state;
  expect(0, "commands:", NULL, "--help", NULL);
  expect(0, "memtap ", NULL, "--version", NULL);
  const char *commands[] = {"info", "dump", "check", "copy"};
  for (int i = 0; i < 4; i++) {
    char usage[64];
    snprintf(usage, sizeof usage, "usage: memtap %s", commands[i]);
    expect(0, usage, NULL, commands[i], "--help", NULL);
  }
}

static void usage_errors_exit_64_and_point_to_help(void **state) {
  (void)state;
  expect(64, NULL, "usage: memtap COMMAND", NULL);
  expect(64, NULL, "unknown command 'frobnicate'", "frobnicate", NULL);
  expect(64, NULL, "expected exactly one TRACE", "dump", NULL);
  expect(64, NULL, "--help", "dump", "--bogus", "x", NULL);
  expect(64, NULL, "--version takes 2 or 3, not '4'", "copy", "--version", "4", "a", "b");
  expect(64, NULL, "expected IN and OUT", "copy", "onlyone", NULL);
  expect(64, NULL, "--folded and --svg are two outputs", "flame", "--svg", "--folded", "t.ctf",
         NULL);
}

static void errors_name_the_file_and_the_problem(void **state) {
  (void)state;
  expect(1, NULL, "memtap: /nonexistent/trace.ctf: cannot open: No such file or directory", "dump",
         "/nonexistent/trace.ctf", NULL);
  const char *text = tu_temp_path("not-a-trace.txt");
  tu_write_file(text, "this is plainly not a trace, just some text of decent length......", 67);
  char want[512];
  snprintf(want, sizeof want, "memtap: %s: malformed trace at byte 0: not a CTF packet", text);
  expect(1, NULL, want, "info", text, NULL);
  expect(1, NULL, "not a CTF packet", "check", text, NULL);
}

static void dump_prints_everything_before_an_error(void **state) {
  (void)state;
  const char *path = write_trace("good.ctf", false);
  size_t size;
  uint8_t *data = tu_read_file(path, &size);
  /* A garbage packet after the ten allocations: all ten must be printed before the error. */
  uint8_t *bad = malloc(size + 68);
  memcpy(bad, data, size);
  memset(bad + size, 0xAB, 68);
  const char *broken = tu_temp_path("broken.ctf");
  tu_write_file(broken, bad, size + 68);
  char *out = NULL, *err = NULL;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "dump", broken, NULL), 1);
  int lines = 0;
  for (const char *p = out; *p; p++)
    lines += *p == '\n';
  assert_int_equal(lines, 10);
  char want[64];
  snprintf(want, sizeof want, "malformed trace at byte %zu: not a CTF packet", size);
  assert_non_null(strstr(err, want));
  free(out);
  free(err);
  free(bad);
  free(data);
}

static void copy_refuses_to_lose_data(void **state) {
  (void)state;
  const char *two = write_trace("two-domains.ctf", true);
  const char *out = tu_temp_path("out.ctf");
  expect(1, NULL, "has events of domain 1; a v2 trace has no domains", "copy", "--version", "2",
         two, out);
  expect(0, NULL, NULL, "copy", two, out, NULL); /* as v3 it is fine */
  expect(0, "ok: 10 events", NULL, "check", out, NULL);
  expect(1, NULL, "is the input trace itself", "copy", out, out, NULL);
  expect(0, "ok: 10 events", NULL, "check", out, NULL); /* and it is intact */
}

/* Runs `cat IN | memtap copy --version 2 - OUT` through the shell; returns the exit status and the
 * captured stderr (caller frees). */
static int copy_piped_as_v2(const char *in, const char *out, char **err) {
  const char *err_path = tu_temp_path("pipe-stderr.txt");
  char command[4096];
  snprintf(command, sizeof command, "cat '%s' | '%s' copy --version 2 - '%s' 2>'%s'", in,
           getenv("MEMTAP_CLI"), out, err_path);
  int status = system(command);
  size_t size;
  uint8_t *text = tu_read_file(err_path, &size);
  *err = realloc(text, size + 1);
  (*err)[size] = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* A pipe can be read only once: converting a piped v3 trace to v2 must not need a second pass. */
static void copy_converts_a_piped_trace_to_v2(void **state) {
  (void)state;
  const char *one = write_trace("piped-one.ctf", false), *two = write_trace("piped-two.ctf", true);
  const char *out = tu_temp_path("piped-out.ctf");
  char *err;
  int status = copy_piped_as_v2(one, out, &err);
  if (status != 0)
    fail_msg("copy from a pipe: exit %d: %s", status, err);
  free(err);
  size_t size, n;
  uint8_t *data = tu_read_file(out, &size);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 10);
  tg_packets p;
  tg_walk_packets(data, size, &p);
  assert_int_equal(p.h[0].version, 2);
  tg_free_events(ev, n);
  free(data);
  /* Several domains still cannot become v2: the writer refuses the first event of domain 1. */
  assert_int_equal(copy_piped_as_v2(two, out, &err), 1);
  assert_non_null(strstr(err, "a v2 trace has only domain 0, not domain 1"));
  free(err);
}

static void check_reports_writer_built_traces_as_well_formed(void **state) {
  (void)state;
  const char *path = write_trace("one.ctf", false);
  expect(0, "ok: 10 events", NULL, "check", path, NULL);
  expect(0, NULL, NULL, "check", "-q", path, NULL);
  expect(0, "external", NULL, "info", path, NULL);
}

/* check looks at each backtrace's frames after the common prefix only (the others were checked
 * with the previous backtrace): a code nobody described must still be found there. */
static void check_finds_an_undescribed_code_after_a_common_prefix(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t first[] = {2, 1}, second[] = {3, 2, 1}; /* innermost first: 3 is new, after 1 -> 2 */
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 4, 1, MT_SOURCE_EXTERNAL, first, 2,
                                       tg_resolve, NULL, NULL, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_flush(w, NULL), MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 2, 4, 1, MT_SOURCE_EXTERNAL, second, 3,
                                       tg_resolve, NULL, NULL, NULL),
                   MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  /* The location event of code 3 describes code 33 instead. */
  size_t found = 0;
  for (size_t i = 4; i + 8 <= size; i++)
    if (data[i - 1] == 2 && data[i] == 3 && !memcmp(data + i + 1, "\0\0\0\0\0\0\0", 7)) {
      data[i] = 33;
      found++;
    }
  assert_int_equal(found, 1);
  const char *path = tu_temp_path("undescribed.ctf");
  tu_write_file(path, data, size);
  free(data);
  expect(1, NULL, "invalid location code 0x3 (frame 2", "check", path, NULL);
}

/* --- JSON strings: bytes that are not UTF-8 come out as \udcXX (docs/cli.md) --------------- */

/* Invalid UTF-8 of every kind, then valid multibyte UTF-8 and JSON's mandatory escapes:
 * \xff (never valid), \x80 (a lone continuation byte), C0 AF (overlong '/'), ED A0 80 (the
 * surrogate U+D800), F4 90 80 80 (U+110000, past U+10FFFF), é € 😀, and E2 82 cut by the end. */
#define ODD_BYTES                                                                                  \
  "a\xff"                                                                                          \
  "b\x80"                                                                                          \
  "c\xc0\xaf"                                                                                      \
  "d\xed\xa0\x80"                                                                                  \
  "e\xf4\x90\x80\x80"                                                                              \
  "f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"\\\x01g\xe2\x82"
#define ODD_JSON                                                                                   \
  "a\\udcffb\\udc80c\\udcc0\\udcafd\\udced\\udca0\\udc80e\\udcf4\\udc90\\udc80\\udc80"             \
  "f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\\\"\\\\\\u0001g\\udce2\\udc82"

static int resolve_odd(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  (void)user, (void)code;
  static const mt_location odd = {"odd_" ODD_BYTES ".ml", "Odd." ODD_BYTES, 5, 1, 9};
  *entries = &odd;
  *count = 1;
  return MT_OK;
}

static const char *write_odd_trace(void) {
  int fd = memfd_create("odd", 0);
  assert_true(fd >= 0);
  mt_trace_info info = tg_info(1.0);
  info.executable_name = "/bin/" ODD_BYTES;
  info.host_name = "\xfe"
                   "host";
  info.context = "ctx\xc1\xbf";
  mt_writer *w;
  assert_int_equal(mt_writer_create(&w, fd, &info, NULL, NULL), MT_OK);
  uint64_t stack[] = {77};
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 2, 1, MT_SOURCE_MINOR, stack, 1,
                                       resolve_odd, NULL, NULL, NULL),
                   MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  const char *path = tu_temp_path("odd.ctf");
  tu_write_file(path, data, size);
  free(data);
  return path;
}

static void expect_in(const char *text, const char *what, const char *want) {
  if (!strstr(text, want))
    fail_msg("%s lacks %s; it is: %s", what, want, text);
}

static void json_output_escapes_invalid_utf8_reversibly(void **state) {
  (void)state;
  const char *path = write_odd_trace();
  char *out = NULL, *err = NULL;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "dump", "--json", path, NULL), 0);
  /* Line by line valid JSON, with exactly the expected escapes. */
  for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
    if (!tu_json_valid(line, NULL))
      fail_msg("dump --json: not JSON: %s", line);
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "dump", "--json", path, NULL), 0);
  expect_in(out, "dump --json", "\"executable\":\"/bin/" ODD_JSON "\"");
  expect_in(out, "dump --json", "\"host\":\"\\udcfehost\"");
  expect_in(out, "dump --json", "\"context\":\"ctx\\udcc1\\udcbf\"");
  expect_in(out, "dump --json", "\"function\":\"Odd." ODD_JSON "\"");
  expect_in(out, "dump --json", "\"file\":\"odd_" ODD_JSON ".ml\"");
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "info", "--json", path, NULL), 0);
  assert_true(tu_json_valid(out, NULL));
  expect_in(out, "info --json", "\"executable\":\"/bin/" ODD_JSON "\"");
  expect_in(out, "info --json", "\"host\":\"\\udcfehost\"");
  expect_in(out, "info --json", "\"context\":\"ctx\\udcc1\\udcbf\"");
  free(out);
  free(err);
  /* The text dump prints the raw bytes, as memtrace's dump_trace does (FORMAT.md §6). */
  assert_int_equal(tu_run_cli(&out, NULL, &err, "dump", path, NULL), 0);
  expect_in(out, "dump", " Odd." ODD_BYTES "@odd_" ODD_BYTES ".ml:5:1-9\n");
  free(out);
  free(err);
}

/* --- output that cannot be written --------------------------------------------------------- */

static void expect_write_failure(const char *arg0, const char *arg1, const char *arg2) {
  char *err = NULL;
  int status = tu_run_cli_to_file("/dev/full", &err, arg0, arg1, arg2, NULL);
  if (status != 1 || strcmp(err, "memtap: <stdout>: writing failed: No space left on device\n"))
    fail_msg("memtap %s %s %s > /dev/full: exit %d, stderr: %s", arg0, arg1 ? arg1 : "",
             arg2 ? arg2 : "", status, err);
  free(err);
}

static void every_command_fails_when_its_output_cannot_be_written(void **state) {
  (void)state;
  if (access("/dev/full", W_OK) != 0)
    skip();
  const char *path = write_trace("full.ctf", false);
  expect_write_failure("info", path, NULL);
  expect_write_failure("info", "--json", path);
  expect_write_failure("dump", path, NULL);
  expect_write_failure("dump", "--json", path);
  expect_write_failure("dump", "--no-domain", path);
  expect_write_failure("check", path, NULL);
  const char *commands[] = {"info", "dump", "check", "copy"};
  for (int i = 0; i < 4; i++)
    expect_write_failure(commands[i], "--help", NULL);
  expect_write_failure("--help", NULL, NULL);
  expect_write_failure("--version", NULL, NULL);
  /* The analysis commands, tables and exports alike. */
  const char *tables[] = {"summary", "top", "leaks", "timeline"};
  for (int i = 0; i < 4; i++)
    expect_write_failure(tables[i], path, NULL);
  expect_write_failure("diff", path, path);
  const char *exports[][5] = {
      {"flame", path}, {"flame", "--svg", path}, {"export", "--format", "pprof", "-o", "-"}};
  for (int i = 0; i < 3; i++) {
    char *msg = NULL;
    int status = i < 2 ? tu_run_cli_to_file("/dev/full", &msg, exports[i][0], exports[i][1],
                                            exports[i][2], NULL)
                       : tu_run_cli_to_file("/dev/full", &msg, "export", "--format", "pprof", "-o",
                                            "-", path, NULL);
    assert_int_equal(status, 1);
    assert_string_equal(msg, "memtap: <stdout>: writing the export: No space left on device\n");
    free(msg);
  }
  /* check -q prints nothing on success: nothing to fail. */
  char *err = NULL;
  assert_int_equal(tu_run_cli_to_file("/dev/full", &err, "check", "-q", path, NULL), 0);
  assert_string_equal(err, "");
  free(err);
  /* copy writes OUT, not standard output. */
  expect(1, NULL, "memtap: /dev/full: writing the trace: No space left on device", "copy", path,
         "/dev/full", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_command_has_help),
      cmocka_unit_test(usage_errors_exit_64_and_point_to_help),
      cmocka_unit_test(errors_name_the_file_and_the_problem),
      cmocka_unit_test(dump_prints_everything_before_an_error),
      cmocka_unit_test(copy_refuses_to_lose_data),
      cmocka_unit_test(copy_converts_a_piped_trace_to_v2),
      cmocka_unit_test(check_reports_writer_built_traces_as_well_formed),
      cmocka_unit_test(check_finds_an_undescribed_code_after_a_common_prefix),
      cmocka_unit_test(json_output_escapes_invalid_utf8_reversibly),
      cmocka_unit_test(every_command_fails_when_its_output_cannot_be_written),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
