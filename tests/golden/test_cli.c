/* The memtap command line as a user meets it: help everywhere, usage errors with exit status 64,
 * errors that name the file and what went wrong, no output lost before an error, copy's
 * refusals, and output files that never destroy an input or an existing file. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "format/backtrace_codec.h"
#include "format/buf.h"
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
  expect(64, NULL, "memtap: --version takes no argument ('extra' given)", "--version", "extra",
         NULL);
  expect(0, "usage: memtap top", NULL, "--help", "top", NULL);
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
  expect(64, NULL, "unknown command 'frobnicate'; 'memtap --help' lists the commands", "frobnicate",
         NULL);
  /* A command mistyped, or another profiler's name for a view, gets the command to use. */
  expect(64, NULL, "unknown command 'sumary'; did you mean memtap summary?", "sumary", NULL);
  expect(64, NULL, "unknown command 'leak'; did you mean memtap leaks?", "leak", NULL);
  expect(64, NULL, "did you mean memtap record?", "recor", NULL); /* not report, 2 edits away */
  expect(64, NULL, "did you mean memtap export?", "exort", NULL);
  expect(64, NULL, "did you mean memtap top --by peak", "peak", "T.ctf", NULL);
  expect(64, NULL, "did you mean memtap flame?", "help", "flamegraph", NULL);
  expect(64, NULL, "expected exactly one TRACE", "dump", NULL);
  expect(64, NULL, "--help", "dump", "--bogus", "x", NULL);
  expect(64, NULL, "--version takes 2 or 3, not '4'", "copy", "--version", "4", "a", "b");
  expect(64, NULL, "expected IN and OUT", "copy", "onlyone", NULL);
  expect(64, NULL, "--time-resolution 5 is not a duration from 1us to 1s (like 1ms)", "copy",
         "--time-resolution", "5", "a", "b");
  expect(64, NULL, "--folded and --svg are two outputs", "flame", "--svg", "--folded", "t.ctf",
         NULL);
  /* The trace taken as an option's value: said, not only that TRACE is missing. */
  expect(64, NULL, "expected exactly one TRACE ('t.ctf' was taken as the value of --from)",
         "summary", "--from", "t.ctf", NULL);
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

/* Two allocations, the second's backtrace 1 -> 2 -> 3 sharing 1 -> 2 with the first's, whose code 3
 * no location event describes (its event describes code 33 instead). */
static const char *undescribed_trace(void) {
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
  return path;
}

/* check looks at each backtrace's frames after the common prefix only (the others were checked
 * with the previous backtrace): a code nobody described must still be found there. */
static void check_finds_an_undescribed_code_after_a_common_prefix(void **state) {
  (void)state;
  expect(1, NULL, "invalid location code 0x3 (frame 2", "check", undescribed_trace(), NULL);
}

/* Buckets the codewords of the long-form allocation at `event` fill: all misses. */
static void filled_buckets(const uint8_t *data, size_t size, size_t event, bool *filled) {
  mt_rbuf b;
  mt_rbuf_init(&b, data + event + 4, size - event - 4, 0);
  int64_t v;
  uint8_t source;
  uint16_t count = 0, word = 0;
  uint64_t code;
  assert_true(mt_rbuf_vint(&b, &v) && mt_rbuf_vint(&b, &v) && mt_rbuf_u8(&b, &source) &&
              mt_rbuf_vint(&b, &v) && mt_rbuf_u16(&b, &count));
  for (unsigned i = 0; i < count; i++) {
    assert_true(mt_rbuf_u16(&b, &word) && (word & 3) == 3 && mt_rbuf_u64(&b, &code));
    filled[word >> 2] = true;
  }
}

/* A hit on a bucket no miss has filled hands out code 0, which no location event describes here:
 * check must still find it, though it looks codes up only where they enter the cache. The trace:
 * one allocation 10,000 distinct frames deep (so that the reader's runs are large enough for its
 * fast path), then frames 1, 2 and 1 again, whose codeword is a hit (a 2-byte word, no code), then
 * enough allocations that the hit is read far from the packet's end. The hit is pointed at an
 * empty bucket. */
static void check_finds_a_hit_on_a_bucket_no_miss_filled(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  enum { DEEP = 10000 };
  uint64_t *deep = malloc(DEEP * sizeof *deep), frames[] = {1, 2, 1};
  for (size_t i = 0; i < DEEP; i++)
    deep[i] = 1000 + i;
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 4, 1, MT_SOURCE_MINOR, deep, DEEP,
                                       tg_resolve, NULL, NULL, NULL),
                   MT_OK);
  free(deep);
  for (int i = 0; i < 3 + 100; i++)
    assert_int_equal(mt_writer_put_alloc(w, TG_START + 2 + i, 4, 1, MT_SOURCE_MINOR,
                                         &frames[i < 3 ? i : 1], 1, tg_resolve, NULL, NULL, NULL),
                     MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  /* Allocations 2 to 4 are short: header, length (one byte), codeword count, codewords. */
  size_t at[4], n = 0;
  mt_reader *r;
  mt_reader_options opt = {.backtraces = true};
  assert_int_equal(mt_reader_open_memory(&r, data, size, &opt, NULL), MT_OK);
  mt_event ev;
  while (mt_reader_next(r, &ev, NULL) > 0)
    if (ev.kind == MT_EVENT_ALLOC && n < 4) {
      if (n > 0) {
        assert_true(ev.short_form);
        assert_int_equal(data[ev.offset + 5], 1); /* one codeword */
      }
      at[n] = (size_t)ev.offset + (n > 0 ? 6 : 0);
      n++;
    }
  mt_reader_close(r);
  assert_int_equal(n, 4);
  bool *filled = calloc(MT_CACHE_BUCKETS, sizeof *filled);
  filled_buckets(data, size, at[0], filled);
  uint16_t miss1 = mt_load_u16(data + at[1]), miss2 = mt_load_u16(data + at[2]);
  uint16_t hit = mt_load_u16(data + at[3]);
  assert_int_equal(miss1 & 3, 3);
  assert_int_equal(hit & 3, 0);
  assert_int_equal(hit >> 2, miss1 >> 2);
  filled[miss1 >> 2] = filled[miss2 >> 2] = true;
  unsigned empty = 0;
  while (filled[empty])
    empty++;
  free(filled);
  mt_store_u16(data + at[3], (uint16_t)(empty << 2));
  const char *path = tu_temp_path("zero_hit.ctf");
  tu_write_file(path, data, size);
  free(data);
  char where[80];
  snprintf(where, sizeof where, "malformed trace at byte %zu: invalid location code 0x0 (frame 0",
           at[3] - 6);
  expect(1, NULL, where, "check", path, NULL);
  expect(1, NULL, where, "copy", path, tu_temp_path("zero_hit_copy.ctf"), NULL);
}

/* An undescribed code is damage like any broken rule (docs/cli.md, "Damaged traces"): the analyses
 * warn and exit 2 with what came before it, copy keeps those events and exits 1; neither shows or
 * writes the code as a frame without location. */
static void analyses_and_copy_stop_at_an_undescribed_code(void **state) {
  (void)state;
  const char *path = undescribed_trace();
  expect(2, "allocated:       1 object", "damaged at byte", "summary", path, NULL);
  expect(2, NULL, "(invalid location code 0x3)", "top", path, NULL);
  expect(2, NULL, "(invalid location code 0x3)", "flame", path, NULL);
  const char *copied = tu_temp_path("undescribed_copy.ctf");
  expect(1, NULL, "invalid location code 0x3 (frame 2", "copy", path, copied, NULL);
  expect(0, "ok: 1 event", NULL, "check", copied, NULL);
}

/* A zstd frame of `size` bytes without content size: its first block header is at byte 6. */
static size_t compress_frame(const uint8_t *data, size_t size, uint8_t *out, size_t cap) {
  ZSTD_CCtx *c = ZSTD_createCCtx();
  assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0)));
  size_t n = ZSTD_compress2(c, out, cap, data, size);
  ZSTD_freeCCtx(c);
  assert_false(ZSTD_isError(n));
  assert_int_equal(out[4], 0); /* no content size, checksum or dictionary: a 6-byte header */
  return n;
}

/* demo_v3.ctf compressed in two frames, the second's first block of the reserved type: check says
 * where in the .zst file and what is wrong there in the file's words (zstd's own were "Data
 * corruption detected"), and the analyses warn the same way, having read the first frame. */
static void a_damaged_compressed_trace_is_placed_in_the_compressed_file(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata("memtrace/demo_v3.ctf"), &size);
  size_t cap = 2 * ZSTD_compressBound(size);
  uint8_t *z = malloc(cap);
  size_t first = compress_frame(data, size / 2, z, cap);
  size_t zsize = first + compress_frame(data + size / 2, size - size / 2, z + first, cap - first);
  z[first + 6] |= 0x06;
  const char *path = tu_temp_path("demo_v3_damaged.ctf.zst");
  tu_write_file(path, z, zsize);
  free(z);
  free(data);
  char where[160], end[80];
  snprintf(where, sizeof where,
           "malformed compressed trace at byte %zu: the compressed data is corrupt (in bytes %zu "
           "to ",
           first, first);
  snprintf(end, sizeof end, "; the decompressed trace ends at byte %zu)", size / 2);
  expect(1, NULL, where, "check", path, NULL);
  expect(1, NULL, end, "check", path, NULL);
  char warning[200];
  snprintf(warning, sizeof warning, "warning: the compressed trace is damaged %s",
           strstr(where, "at byte"));
  expect(2, "allocated:", warning, "summary", path, NULL);
  expect(2, "events:", warning, "info", path, NULL);
  expect(2, NULL, end, "summary", path, NULL);
}

/* demo_v2.ctf with one bit of a packet's pid flipped: the reader skips that packet as another
 * process's, as memtrace's does, and objects it allocated are promoted and collected later, which
 * check accepts (FORMAT.md §2.11). copy refused the first such collect (exit 1, a copy cut
 * there); it agrees with check: it copies the trace, leaving out the promotes and collects whose
 * objects its copy cannot name, and says so once. */
static void copy_leaves_out_promotes_and_collects_of_a_skipped_packets_objects(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata("memtrace/demo_v2.ctf"), &size);
  assert_true(size > 29278);
  data[29278] ^= 1; /* the packet at byte 29244: its pid */
  const char *path = tu_temp_path("demo_v2_foreign_packet.ctf");
  tu_write_file(path, data, size);
  free(data);
  expect(0, "1 packet of other processes skipped", NULL, "check", path, NULL);
  const char *copied = tu_temp_path("demo_v2_foreign_packet_copy.ctf");
  expect(0, NULL,
         "demo_v2_foreign_packet.ctf: warning: at byte 58940: collect of object 1530 left out: no "
         "allocation read made it (its packet was skipped?); and 669 more",
         "copy", path, copied, NULL);
  expect(0, "ok: 8,135 events", NULL, "check", copied, NULL);
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

/* How many times `words` occur in what memtap ARGS... prints on stderr. */
static int stderr_count(const char *words, const char *arg0, const char *arg1, const char *arg2,
                        const char *arg3) {
  char *out = NULL, *err = NULL;
  tu_run_cli(&out, NULL, &err, arg0, arg1, arg2, arg3, NULL);
  int n = 0;
  for (const char *p = err; (p = strstr(p, words)); p += strlen(words))
    n++;
  free(out);
  free(err);
  return n;
}

/* A window in percent is found by a pass over the whole trace before the analysis's own: its
 * warnings (a packet of another process skipped, a cut last packet, a damaged Go trace) were
 * printed by both passes. */
static void a_window_in_percent_says_each_warning_once(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata("memtrace/demo_v2.ctf"), &size);
  assert_true(size > 100000);
  data[29278] ^= 1; /* the packet at byte 29244: its pid */
  const char *foreign = tu_temp_path("demo_v2_foreign_window.ctf");
  tu_write_file(foreign, data, size);
  data[29278] ^= 1;
  const char *cut = tu_temp_path("demo_v2_cut_window.ctf");
  tu_write_file(cut, data, 100000);
  free(data);
  data = tu_read_file(tu_testdata("go/allocfree.trace"), &size);
  const char *go_cut = tu_temp_path("allocfree_cut_window.trace");
  tu_write_file(go_cut, data, 150000);
  free(data);
  const char *skipped = "warning: skipping packet at byte 29244";
  assert_int_equal(stderr_count(skipped, "summary", "--from", "10%", foreign), 1);
  assert_int_equal(stderr_count(skipped, "leaks", "--to", "90%", foreign), 1);
  assert_int_equal(stderr_count(skipped, "timeline", "--from", "5%", foreign), 1);
  assert_int_equal(stderr_count(skipped, "top", "--from", "0.001", foreign), 1);
  assert_int_equal(
      stderr_count("warning: skipping truncated packet", "summary", "--from", "10%", cut), 1);
  assert_int_equal(stderr_count("warning: malformed Go trace", "summary", "--from", "10%", go_cut),
                   1);
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

/* info and summary print one field per line: a line break inside a field (a program named with a
 * newline, a command line with one) is written as \\n or \\r, so that `memtap info T | grep
 * context:` still finds the whole context, on a pipe as on a terminal. */
static void line_breaks_in_fields_stay_on_their_line(void **state) {
  (void)state;
  int fd = memfd_create("breaks", 0);
  assert_true(fd >= 0);
  mt_trace_info info = tg_info(1.0);
  info.executable_name = "/bin/two\nlines";
  info.host_name = "host\r";
  info.context = "prog 'a\nb' c\\d";
  mt_writer *w;
  assert_int_equal(mt_writer_create(&w, fd, &info, NULL, NULL), MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  const char *path = tu_temp_path("breaks.ctf");
  tu_write_file(path, data, size);
  free(data);
  char *out = NULL, *err = NULL;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "info", path, NULL), 0);
  expect_in(out, "info", "\nexecutable:     /bin/two\\nlines\n");
  expect_in(out, "info", "\nhost:           host\\r\n");
  expect_in(out, "info", "\ncontext:        prog 'a\\nb' c\\\\d\n");
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "summary", path, NULL), 0);
  expect_in(out, "summary", "\nexecutable:      /bin/two\\nlines\n");
  free(out);
  free(err);
}

/* A packet whose end lies far in the future (2^62 µs: check accepts it, an OCaml trace may end a
 * packet long after its events): info and summary give the trace one duration, as long as an
 * analysis counts (info once read 4.6e12 s where summary read 9.0e9). */
static void info_and_summary_agree_on_a_far_packet_end(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata("memtrace/demo_v3.ctf"), &size);
  size_t last = 0;
  for (size_t at = 0; at + 64 <= size;) {
    uint32_t bits;
    memcpy(&bits, data + at + 4, 4);
    assert_true(bits >= 64 * 8);
    last = at;
    at += bits / 8;
  }
  uint64_t far = (uint64_t)1 << 62;
  memcpy(data + last + 16, &far, 8);
  const char *path = tu_temp_path("far_end.ctf");
  tu_write_file(path, data, size);
  free(data);
  char *out = NULL, *err = NULL;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "info", "--json", path, NULL), 0);
  double info_s = tu_json_number(out, "duration_s");
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "summary", "--json", path, NULL), 0);
  double summary_s = tu_json_number(out, "duration_s");
  free(out);
  free(err);
  assert_true(summary_s > 9e9 && summary_s < 9.1e9);
  assert_true(info_s == summary_s);
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
    static const char *const said[] = {"folded stacks", "flame graph", "pprof profile"};
    char want[128];
    snprintf(want, sizeof want, "memtap: <stdout>: writing the %s: No space left on device\n",
             said[i]);
    assert_string_equal(msg, want);
    free(msg);
  }
  /* The report names itself (it said "the export"). */
  expect(1, NULL, "memtap: /dev/full: writing the report: No space left on device", "report", path,
         "-o", "/dev/full", NULL);
  /* check -q prints nothing on success: nothing to fail. */
  char *err = NULL;
  assert_int_equal(tu_run_cli_to_file("/dev/full", &err, "check", "-q", path, NULL), 0);
  assert_string_equal(err, "");
  free(err);
  /* copy writes OUT, not standard output. */
  expect(1, NULL, "memtap: /dev/full: writing the trace: No space left on device", "copy", path,
         "/dev/full", NULL);
}

/* --- output files: never the input, never half-written over an existing file ---------------- */

/* How to start memtap: its working directory, standard input and output (a pipe when NULL),
 * a file size limit (RLIMIT_FSIZE, 0: none) and whether SIGXFSZ is ignored. */
typedef struct spawn_options {
  const char *cwd;
  const char *stdin_path;
  const char *stdout_append; /* standard output appended to this file */
  rlim_t file_size_limit;
  bool ignore_sigxfsz;
} spawn_options;

typedef struct child {
  pid_t pid;
  int out, err; /* pipes; -1 when not a pipe */
} child;

static child spawn(const spawn_options *o, const char *const *args) {
  const char *cli = getenv("MEMTAP_CLI");
  if (!cli || !*cli)
    fail_msg("MEMTAP_CLI is not set (run the tests through ctest)");
  const char *argv[32];
  int argc = 0;
  argv[argc++] = cli;
  for (; *args; args++)
    argv[argc++] = *args;
  argv[argc] = NULL;
  int out[2], err[2];
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  assert_int_equal(pipe2(err, O_CLOEXEC), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGXFSZ, o->ignore_sigxfsz ? SIG_IGN : SIG_DFL);
    if (o->file_size_limit) {
      /* SIGXFSZ's default action dumps core: no core file (cut at the limit) in the cwd */
      struct rlimit limit = {o->file_size_limit, o->file_size_limit}, no_core = {0, 0};
      if (setrlimit(RLIMIT_FSIZE, &limit) != 0 || setrlimit(RLIMIT_CORE, &no_core) != 0)
        _exit(125);
    }
    if (o->cwd && chdir(o->cwd) != 0)
      _exit(125);
    int in = open(o->stdin_path ? o->stdin_path : "/dev/null", O_RDONLY);
    int to = o->stdout_append ? open(o->stdout_append, O_WRONLY | O_APPEND) : out[1];
    if (in < 0 || to < 0 || dup2(in, 0) < 0 || dup2(to, 1) < 0 || dup2(err[1], 2) < 0)
      _exit(125);
    execv(cli, (char *const *)argv);
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  return (child){pid, out[0], err[0]};
}

static void append_from(int fd, char **data, size_t *len) {
  char chunk[4096];
  ssize_t n = read(fd, chunk, sizeof chunk);
  assert_true(n >= 0);
  *data = realloc(*data, *len + (size_t)n + 1);
  assert_non_null(*data);
  memcpy(*data + *len, chunk, (size_t)n);
  *len += (size_t)n;
  (*data)[*len] = 0;
}

/* Reads the child's output and error until it ends; returns its exit status (128+signal if
 * killed). *out and *err (if non-NULL) get the malloc'd, NUL-terminated texts. */
static int finish(child c, char **out, size_t *out_size, char **err) {
  char *text[2] = {calloc(1, 1), calloc(1, 1)};
  size_t len[2] = {0, 0};
  struct pollfd fds[2] = {{.fd = c.out, .events = POLLIN}, {.fd = c.err, .events = POLLIN}};
  int open_pipes = 2;
  while (open_pipes > 0) {
    if (poll(fds, 2, -1) < 0) {
      assert_int_equal(errno, EINTR);
      continue;
    }
    for (int i = 0; i < 2; i++)
      if (fds[i].fd >= 0 && fds[i].revents) {
        size_t before = len[i];
        append_from(fds[i].fd, &text[i], &len[i]);
        if (len[i] == before) { /* end of file */
          close(fds[i].fd);
          fds[i].fd = -1;
          open_pipes--;
        }
      }
  }
  int status;
  while (waitpid(c.pid, &status, 0) < 0)
    assert_int_equal(errno, EINTR);
  if (out)
    *out = text[0];
  else
    free(text[0]);
  if (out_size)
    *out_size = len[0];
  if (err)
    *err = text[1];
  else
    free(text[1]);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

static int run(const spawn_options *o, char **out, size_t *out_size, char **err,
               const char *const *args) {
  return finish(spawn(o, args), out, out_size, err);
}

/* A fresh directory for one test's files (`name` under the test's temporary directory). */
static const char *fresh_dir(const char *name, char dir[4096]) {
  snprintf(dir, 4096, "%s", tu_temp_path(name));
  assert_int_equal(mkdir(dir, 0755), 0);
  return dir;
}

static void file_in(char path[4096], const char *dir, const char *name) {
  int n = snprintf(path, 4096, "%s/%s", dir, name);
  assert_true(n > 0 && n < 4096);
}

/* Fails if `dir` holds a file memtap's temporary files are named like (".NAME.memtap-XXXXXX"). */
static void assert_no_temporary_file(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));)
    if (strstr(e->d_name, ".memtap-"))
      fail_msg("temporary file left in %s: %s", dir, e->d_name);
  closedir(d);
}

static void assert_file_is(const char *path, const void *data, size_t size) {
  size_t got_size;
  uint8_t *got = tu_read_file(path, &got_size);
  if (got_size != size || memcmp(got, data, size))
    fail_msg("%s changed: %zu bytes, expected %zu", path, got_size, size);
  free(got);
}

/* Each command that writes a file, writing OUT from trace IN ("IN" and "OUT" stand for them). */
static const char *const writers[][8] = {
    {"copy", "IN", "OUT"},
    {"report", "IN", "-o", "OUT"},
    {"export", "--format", "pprof", "-o", "OUT", "IN"},
    {"export", "--format", "speedscope", "-o", "OUT", "IN"},
    {"flame", "--svg", "-o", "OUT", "IN"},
    {"flame", "--folded", "-o", "OUT", "IN"},
};
#define NWRITERS (sizeof writers / sizeof writers[0])

static void command_line(const char *args[8], size_t w, const char *in, const char *out) {
  int i = 0;
  for (; writers[w][i]; i++)
    args[i] = !strcmp(writers[w][i], "IN")    ? in
              : !strcmp(writers[w][i], "OUT") ? out
                                              : writers[w][i];
  args[i] = NULL;
}

static void every_output_that_is_an_input_is_refused(void **state) {
  (void)state;
  char dir[4096], trace[4096], hard[4096], soft[4096];
  fresh_dir("same", dir);
  file_in(trace, dir, "t.ctf");
  file_in(hard, dir, "hard.ctf");
  file_in(soft, dir, "soft.ctf");
  const char *made = write_trace("same-source.ctf", false);
  size_t size;
  uint8_t *data = tu_read_file(made, &size);
  tu_write_file(trace, data, size);
  assert_int_equal(link(trace, hard), 0);
  assert_int_equal(symlink("t.ctf", soft), 0);
  /* The same file by the same path, by another path, a hard link and a symbolic link. */
  const char *outs[] = {trace, "./t.ctf", hard, soft};
  spawn_options in_dir = {.cwd = dir};
  for (size_t w = 0; w < NWRITERS; w++)
    for (size_t k = 0; k < 4; k++) {
      const char *args[8];
      command_line(args, w, trace, outs[k]);
      char *err;
      int status = run(&in_dir, NULL, NULL, &err, args);
      if (status != 1 || !strstr(err, "is the input trace itself"))
        fail_msg("memtap %s ... -> %s: exit %d, stderr: %s", args[0], outs[k], status, err);
      free(err);
      assert_file_is(trace, data, size);
    }
  /* An empty name, as output or as the trace: said at once, not as "memtap: : ..." after the
   * whole analysis. */
  for (size_t w = 0; w < NWRITERS; w++) {
    const char *args[8];
    command_line(args, w, trace, "");
    char *err;
    int status = run(&in_dir, NULL, NULL, &err, args);
    if (status != 1 || !strstr(err, "memtap: the output file name is empty"))
      fail_msg("memtap %s ... -> '': exit %d, stderr: %s", args[0], status, err);
    free(err);
  }
  expect(1, NULL, "memtap: the trace's file name is empty", "summary", "", NULL);
  /* Standard input that is OUT, and standard output appended to IN. */
  char *err;
  const char *from_stdin[] = {"copy", "-", trace, NULL};
  spawn_options stdin_is_out = {.stdin_path = trace};
  assert_int_equal(run(&stdin_is_out, NULL, NULL, &err, from_stdin), 1);
  assert_non_null(strstr(err, "is the input trace itself (standard input)"));
  free(err);
  const char *to_stdout[] = {"copy", trace, "-", NULL};
  spawn_options stdout_is_in = {.stdout_append = trace};
  assert_int_equal(run(&stdout_is_in, NULL, NULL, &err, to_stdout), 1);
  assert_non_null(strstr(err, "memtap: <stdout>: is the input trace itself"));
  free(err);
  /* The text commands too: `memtap dump T >> T` would read what it appends. */
  static const char *const readers[] = {"dump", "summary", "top", "check", "leaks", "info"};
  for (size_t r = 0; r < sizeof readers / sizeof readers[0]; r++) {
    const char *text[] = {readers[r], trace, NULL};
    if (run(&stdout_is_in, NULL, NULL, &err, text) != 1 ||
        !strstr(err, "memtap: <stdout>: is the input trace itself"))
      fail_msg("memtap %s T >> T: stderr: %s", readers[r], err);
    free(err);
  }
  assert_file_is(trace, data, size);
  assert_no_temporary_file(dir);
  free(data);
}

static void a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(void **state) {
  (void)state;
  char dir[4096], out[4096], fresh[4096];
  fresh_dir("fail", dir);
  file_in(out, dir, "out");
  file_in(fresh, dir, "fresh");
  const char *trace = write_trace("fail-source.ctf", false);
  static const char old[] = "the previous output\n";
  for (size_t w = 0; w < NWRITERS; w++) {
    /* What a whole output weighs; the limit then stops the write half-way. */
    const char *args[8];
    command_line(args, w, trace, fresh);
    spawn_options plain = {0};
    assert_int_equal(run(&plain, NULL, NULL, NULL, args), 0);
    struct stat st;
    assert_int_equal(stat(fresh, &st), 0);
    assert_true(st.st_size >= 2);
    tu_write_file(out, old, sizeof old - 1);
    assert_int_equal(chmod(out, 0640), 0);
    command_line(args, w, trace, out);
    spawn_options limited = {.file_size_limit = (rlim_t)st.st_size / 2, .ignore_sigxfsz = true};
    /* The trace writer (copy) stops short of the limit and says so (it may run inside a traced
     * program, which SIGXFSZ would kill); the other writers' write fails with EFBIG. */
    bool trace_writer = !strcmp(args[0], "copy");
    const char *said = trace_writer ? "past the file size limit" : "File too large";
    char *err;
    int status = run(&limited, NULL, NULL, &err, args);
    if (status != 1 || !strstr(err, said))
      fail_msg("memtap %s with RLIMIT_FSIZE: exit %d, stderr: %s", args[0], status, err);
    free(err);
    assert_file_is(out, old, sizeof old - 1);
    assert_int_equal(stat(out, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_no_temporary_file(dir);
    /* SIGXFSZ left at its default action: the writers ignore it while their output is open, so
     * that they say why they failed rather than die without a word (exit 153), and remove their
     * temporary file; the trace writer never reaches it. */
    limited.ignore_sigxfsz = false;
    status = run(&limited, NULL, NULL, &err, args);
    if (status != 1 || !strstr(err, said))
      fail_msg("memtap %s with RLIMIT_FSIZE, SIGXFSZ by default: exit %d, stderr: %s", args[0],
               status, err);
    free(err);
    assert_file_is(out, old, sizeof old - 1);
    assert_no_temporary_file(dir);
    unlink(fresh);
  }
}

static void a_successful_write_replaces_the_file_and_keeps_its_mode(void **state) {
  (void)state;
  char dir[4096], out[4096], target[4096], link_path[4096], made[4096];
  fresh_dir("replace", dir);
  file_in(out, dir, "out.html");
  file_in(target, dir, "target.html");
  file_in(link_path, dir, "link.html");
  file_in(made, dir, "new.html");
  const char *trace = write_trace("replace-source.ctf", false);
  tu_write_file(out, "old", 3);
  assert_int_equal(chmod(out, 0604), 0);
  tu_write_file(target, "old", 3);
  assert_int_equal(chmod(target, 0600), 0);
  assert_int_equal(symlink("target.html", link_path), 0);
  const char *const outs[] = {out, link_path, made};
  mode_t mask = umask(022);
  for (int i = 0; i < 3; i++) {
    const char *args[] = {"report", trace, "-o", outs[i], NULL};
    spawn_options plain = {0};
    assert_int_equal(run(&plain, NULL, NULL, NULL, args), 0);
  }
  umask(mask);
  struct stat st;
  const char *const files[] = {out, target, made};
  const mode_t modes[] = {0604, 0600, 0644}; /* kept, kept through the link, 0666 & ~umask */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(stat(files[i], &st), 0);
    assert_int_equal(st.st_mode & 07777, modes[i]);
    assert_true(st.st_size > 3); /* the report, not "old" */
  }
  assert_int_equal(lstat(link_path, &st), 0);
  assert_true(S_ISLNK(st.st_mode)); /* the link stays a link */
  assert_no_temporary_file(dir);
}

static void devices_and_pipes_are_written_directly(void **state) {
  (void)state;
  const char *trace = write_trace("direct-source.ctf", false);
  const char *to_null[] = {"report", trace, "-o", "/dev/null", NULL};
  spawn_options plain = {0};
  assert_int_equal(run(&plain, NULL, NULL, NULL, to_null), 0);
  struct stat st;
  assert_int_equal(stat("/dev/null", &st), 0);
  assert_true(S_ISCHR(st.st_mode));
  /* A FIFO opened for reading and writing here, so that memtap's open does not wait. */
  char fifo[4096];
  snprintf(fifo, sizeof fifo, "%s", tu_temp_path("out.fifo"));
  assert_int_equal(mkfifo(fifo, 0600), 0);
  int fd = open(fifo, O_RDWR | O_NONBLOCK);
  assert_true(fd >= 0);
  const char *to_fifo[] = {"flame", "--folded", "-o", fifo, trace, NULL};
  assert_int_equal(run(&plain, NULL, NULL, NULL, to_fifo), 0);
  char got[4096];
  ssize_t n = read(fd, got, sizeof got - 1);
  assert_true(n > 0);
  got[n] = 0;
  assert_non_null(strstr(got, "fn_")); /* folded stacks of tg_resolve's functions */
  close(fd);
  assert_int_equal(lstat(fifo, &st), 0);
  assert_true(S_ISFIFO(st.st_mode));
}

/* memtap blocks opening a FIFO with no writer, as its input: the output's temporary file exists by
 * then (outputs are opened first), and the signal must remove it. */
static void a_signal_removes_the_temporary_file(void **state) {
  (void)state;
  char dir[4096], out[4096], fifo[4096];
  fresh_dir("signal", dir);
  file_in(out, dir, "out");
  file_in(fifo, dir, "in.fifo");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  const int signals[] = {SIGINT, SIGTERM};
  const char *const commands[][6] = {{"copy", fifo, out}, {"report", fifo, "-o", out}};
  for (int i = 0; i < 2; i++) {
    tu_write_file(out, "old", 3);
    spawn_options plain = {0};
    child c = spawn(&plain, commands[i]);
    /* Wait (at most a minute) for the temporary file. */
    bool seen = false;
    for (int tries = 0; tries < 6000 && !seen; tries++) {
      DIR *d = opendir(dir);
      assert_non_null(d);
      for (struct dirent *e; (e = readdir(d));)
        seen = seen || strstr(e->d_name, ".memtap-");
      closedir(d);
      if (!seen)
        usleep(10000);
    }
    if (!seen) {
      kill(c.pid, SIGKILL);
      finish(c, NULL, NULL, NULL);
      fail_msg("memtap %s made no temporary file in %s", commands[i][0], dir);
    }
    kill(c.pid, signals[i]);
    assert_int_equal(finish(c, NULL, NULL, NULL), 128 + signals[i]);
    assert_file_is(out, "old", 3);
    assert_no_temporary_file(dir);
  }
}

static void copy_to_dash_writes_standard_output(void **state) {
  (void)state;
  char dir[4096], dash[4096], copied[4096];
  fresh_dir("dash", dir);
  file_in(dash, dir, "-");
  file_in(copied, dir, "copied.ctf");
  const char *trace = write_trace("dash-source.ctf", false);
  spawn_options in_dir = {.cwd = dir};
  const char *to_file[] = {"copy", trace, copied, NULL};
  assert_int_equal(run(&in_dir, NULL, NULL, NULL, to_file), 0);
  const char *to_stdout[] = {"copy", trace, "-", NULL};
  char *out;
  size_t size;
  assert_int_equal(run(&in_dir, &out, &size, NULL, to_stdout), 0);
  assert_file_is(copied, out, size);
  free(out);
  struct stat st;
  assert_int_equal(lstat(dash, &st), -1); /* no file named '-' */
}

/* --- option edges: one line for a bad option, in every command -------------------------------- */

static void an_unknown_option_is_one_line_naming_it_in_every_command(void **state) {
  (void)state;
  const char *path = write_trace("options.ctf", false);
  const char *commands[] = {"info",   "dump",   "check",    "copy",      "summary",
                            "top",    "leaks",  "timeline", "flame",     "diff",
                            "report", "export", "record",   "ring-dump", "tap"};
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    char want[256], *out = NULL, *err = NULL;
    snprintf(want, sizeof want, "memtap %s: unknown option '--bogus' (see memtap %s --help)\n",
             commands[i], commands[i]);
    int status = tu_run_cli(&out, NULL, &err, commands[i], "--bogus", path, NULL);
    if (status != 64 || strcmp(err, want))
      fail_msg("memtap %s --bogus: exit %d, stderr: %s", commands[i], status, err);
    free(out);
    free(err);
  }
  /* An option of other commands is named as well (flame has no --json), and so are the other
   * ways an option can be wrong. */
  const char *cases[][4] = {
      {"flame", "--json", "memtap flame: unknown option '--json' (see memtap flame --help)\n"},
      {"summary", "--hide",
       "memtap summary: unknown option '--hide' (see memtap summary --help)\n"},
      {"top", "-x", "memtap top: unknown option '-x' (see memtap top --help)\n"},
      {"top", "--bogus=1", "memtap top: unknown option '--bogus' (see memtap top --help)\n"},
      {"top", "--json=1",
       "memtap top: option '--json' takes no argument (see memtap top --help)\n"},
      {"top", "--in", "memtap top: ambiguous option '--in' (see memtap top --help)\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *err = NULL;
    int status = tu_run_cli(NULL, NULL, &err, cases[i][0], cases[i][1], path, NULL);
    if (status != 64 || strcmp(err, cases[i][2]))
      fail_msg("memtap %s %s: exit %d, stderr: %s", cases[i][0], cases[i][1], status, err);
    free(err);
  }
  char *err = NULL;
  /* An unknown option in a group after a long option that went well. */
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "check", "--quiet", "-qX", path, NULL), 64);
  assert_string_equal(err, "memtap check: unknown option '-X' (see memtap check --help)\n");
  free(err);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "top", path, "--from", NULL), 64);
  assert_string_equal(err,
                      "memtap top: option '--from' needs an argument (see memtap top --help)\n");
  free(err);
}

/* Runs memtap with `args` (NULL-terminated, at most 7), the one marked by a leading "#" (a valid
 * value, "#3ms") given as `before`, the value, `after` (" 3ms"); returns the exit status. */
static int run_spaced(const char *before, const char *after, const char *const *args) {
  const char *a[8] = {0};
  char spaced[64] = "";
  for (int i = 0; args[i]; i++) {
    a[i] = args[i];
    if (args[i][0] == '#') {
      snprintf(spaced, sizeof spaced, "%s%s%s", before, args[i] + 1, after);
      a[i] = spaced;
    }
  }
  char *err = NULL;
  int status = tu_run_cli(NULL, NULL, &err, a[0], a[1], a[2], a[3], a[4], a[5], a[6], NULL);
  if ((status == 64) != (before[0] || after[0]))
    fail_msg("memtap %s %s '%s': exit %d; stderr: %s", a[0], a[1], spaced, status, err);
  free(err);
  return status;
}

/* A number with a space before it was taken (strtoll skips leading white space: top -n ' 5'),
 * one with a space after it refused: both are refused, by every numeric option and by the
 * numeric variables memtap record reads, as any other text that is not a number. */
static void numbers_with_a_space_before_or_after_are_refused(void **state) {
  (void)state;
  const char *trace = tu_testdata("memtrace/tiny_v3.ctf");
  const char *go = tu_testdata("go/allocfree.trace");
  const char *out = tu_temp_path("spaced_number.ctf");
  const char *const options[][8] = {
      {"top", "-n", "#3", trace},
      {"top", "--depth", "#3", trace},
      {"functions", "-n", "#3", trace},
      {"callers", "-n", "#3", ".", trace},
      {"callers", "--lines", "#3", ".", trace},
      {"leaks", "-n", "#3", trace},
      {"leaks", "--depth", "#3", trace},
      {"leaks", "--fail-above", "#3", trace},
      {"diff", "-n", "#3", trace, trace},
      {"timeline", "-n", "#3", trace},
      {"summary", "--from", "#0", trace},
      {"summary", "--to", "#50%", trace},
      {"export", "--format=folded", "--at", "#1s", "-o", "-", trace},
      {"copy", "--version", "#3", trace, out},
      {"copy", "--time-resolution", "#1ms", trace, out},
      {"import-go", "--version", "#3", go, "-o", out},
      {"import-go", "--start-time", "#1700000000", go, "-o", out},
      {"record", "--rate", "#0.5", "--", "/bin/true"},
      {"record", "--sample-interval", "#4K", "--", "/bin/true"},
      {"record", "--time-resolution", "#1ms", "--", "/bin/true"},
  };
  for (size_t i = 0; i < sizeof options / sizeof *options; i++) {
    if (strcmp(options[i][0], "record")) /* the value alone is taken (record would run) */
      run_spaced("", "", options[i]);
    run_spaced(" ", "", options[i]);
    run_spaced("", " ", options[i]);
    run_spaced("\t", "", options[i]);
  }
  const char *const variables[][2] = {
      {"MEMTAP_RATE", "0.5"},
      {"MEMTAP_SAMPLE_INTERVAL", "4096"},
      {"MEMTAP_TIME_RESOLUTION", "1ms"},
      {"MEMTAP_RING_SIZE", "1M"},
      {"MEMTAP_RING_THREADS", "4"},
  };
  for (size_t i = 0; i < sizeof variables / sizeof *variables; i++) {
    char spaced[32];
    for (int after = 0; after < 2; after++) {
      snprintf(spaced, sizeof spaced, after ? "%s " : " %s", variables[i][1]);
      setenv(variables[i][0], spaced, 1);
      char *err = NULL;
      int status = tu_run_cli(NULL, NULL, &err, "record", "--", "/bin/true", NULL);
      if (status != 64)
        fail_msg("%s='%s' memtap record: exit %d; stderr: %s", variables[i][0], spaced, status,
                 err);
      free(err);
    }
    unsetenv(variables[i][0]);
  }
}

static void an_option_given_twice_is_refused_unless_its_values_add_up(void **state) {
  (void)state;
  const char *path = write_trace("twice.ctf", false);
  /* (command, option, first value, second value): refused, naming the option as given. */
  const char *cases[][4] = {
      {"top", "-n", "1", "3"},
      {"top", "--by", "count", "bytes"},
      {"export", "--format", "pprof", "folded"},
      {"summary", "--from", "0", "0.5"},
      {"report", "-o", "/dev/null", "-"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *err = NULL, want[128];
    snprintf(want, sizeof want, "memtap %s: option '%s' given twice, with different values",
             cases[i][0], cases[i][1]);
    int status = tu_run_cli(NULL, NULL, &err, cases[i][0], cases[i][1], cases[i][2], cases[i][1],
                            cases[i][3], path, NULL);
    if (status != 64 || !strstr(err, want))
      fail_msg("memtap %s %s twice: exit %d, stderr: %s", cases[i][0], cases[i][1], status, err);
    free(err);
  }
  char *out = NULL, *err = NULL;
  assert_int_equal(
      tu_run_cli(&out, NULL, &err, "top", "--hide", "^nothing$", "--hide", "^none$", path, NULL),
      0);
  free(out);
  free(err);
  assert_int_equal(
      tu_run_cli(&out, NULL, &err, "top", "--by", "count", "--by", "count", path, NULL), 0);
  free(out);
  free(err);
}

static void help_command_prints_that_commands_help(void **state) {
  (void)state;
  const char *commands[] = {"top", "info", "export", "record"};
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    char *via_help, *via_option, *err;
    assert_int_equal(tu_run_cli(&via_help, NULL, &err, "help", commands[i], NULL), 0);
    free(err);
    assert_int_equal(tu_run_cli(&via_option, NULL, &err, commands[i], "--help", NULL), 0);
    free(err);
    assert_string_equal(via_help, via_option);
    free(via_help);
    free(via_option);
  }
  expect(64, NULL, "unknown command 'frobnicate'", "help", "frobnicate", NULL);
  expect(0, "commands:", NULL, "help", NULL);
}

/* %g printed a rate of 1e-5 as "1e-05": no scientific notation in text output. */
static void sampling_rates_print_in_plain_decimal(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 0.00001, &fd);
  uint64_t stack[] = {3, 2, 1};
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 4, 1, MT_SOURCE_EXTERNAL, stack, 3,
                                       tg_resolve, NULL, NULL, NULL),
                   MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  const char *path = tu_temp_path("rare.ctf");
  tu_write_file(path, data, size);
  free(data);
  expect(0, "sample rate:    0.00001\n", NULL, "info", path, NULL);
  expect(0, "sampling rate:   0.00001 (one sample stands for ~781 KiB)\n", NULL, "summary", path,
         NULL);
}

/* A trace read through a pipe given by its path (a FIFO, `<(...)`, /dev/stdin) is read whole:
 * looking at its first bytes for a Go trace's header once consumed them, and every command said
 * "not a CTF packet" at byte 0. */
static void a_trace_through_a_pipe_given_by_path_is_read_whole(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata("memtrace/demo_v3.ctf"), &size);
  const char *commands[] = {"check", "summary"};
  for (size_t i = 0; i < 2; i++) {
    char name[32];
    snprintf(name, sizeof name, "pipe%zu.ctf", i);
    const char *fifo = tu_temp_path(name);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    fflush(NULL);
    pid_t writer = fork();
    assert_true(writer >= 0);
    if (writer == 0) {
      int fd = open(fifo, O_WRONLY);
      size_t done = 0;
      while (fd >= 0 && done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0)
          break;
        done += (size_t)n;
      }
      _exit(done == size ? 0 : 1);
    }
    const char *args[] = {commands[i], fifo, NULL};
    spawn_options o = {0};
    char *out, *err;
    alarm(120); /* a reader left waiting for a writer that is gone: fail, not hang */
    int status = run(&o, &out, NULL, &err, args);
    alarm(0);
    int written;
    assert_int_equal(waitpid(writer, &written, 0), writer);
    if (status != 0)
      fail_msg("memtap %s FIFO: exit %d, stderr: %s", commands[i], status, err);
    assert_non_null(strstr(out, i == 0 ? "ok: 12,102 events" : "executable:"));
    free(out);
    free(err);
  }
  free(data);
  /* A Go trace through standard input is read as memtrace: said so, with where it is read. */
  const char *go = tu_testdata("go/allocfree.trace");
  spawn_options from_go = {.stdin_path = go};
  const char *args[] = {"summary", "-", NULL};
  char *err;
  assert_int_equal(run(&from_go, NULL, NULL, &err, args), 1);
  if (!strstr(err, "a Go execution trace, which memtap reads from a regular file"))
    fail_msg("memtap summary - < a Go trace: %s", err);
  free(err);
  /* info and check given a Go trace describe the file, then what it was read as. */
  char *out;
  const char *info[] = {"info", go, NULL}, *check[] = {"check", go, NULL};
  assert_int_equal(run(&(spawn_options){0}, &out, NULL, &err, info), 0);
  if (!strstr(out, "224,645 bytes") ||
      !strstr(out, "format:         Go execution trace (go1.23), read as memtrace v3"))
    fail_msg("memtap info on a Go trace: %s", out);
  free(out);
  free(err);
  assert_int_equal(run(&(spawn_options){0}, &out, NULL, &err, check), 0);
  if (!strstr(out, "ok: 18,359 events, a Go execution trace of 224,645 bytes (219 KiB) read as"))
    fail_msg("memtap check on a Go trace: %s", out);
  free(out);
  free(err);
  /* Cut before its first generation ends (its header alone, or inside the first batch): nothing
   * was converted, so an analysis has nothing to cover and fails (exit 1, as a memtrace trace cut
   * inside its trace-info packet); cut after it, the analysis covers what was converted (exit 2).
   * The header alone once read as an empty analysis, exit 2. */
  data = tu_read_file(go, &size);
  static const size_t cuts[] = {16, 100000, 150000};
  for (int i = 0; i < 3; i++) {
    const char *cut = tu_temp_path("allocfree_cut.trace");
    tu_write_file(cut, data, cuts[i]);
    const char *summary[] = {"summary", cut, NULL};
    assert_int_equal(run(&(spawn_options){0}, &out, NULL, &err, summary), i < 2 ? 1 : 2);
    if (i < 2 && (*out || strstr(err, "warning")))
      fail_msg("summary of a Go trace cut at %zu: %s%s", cuts[i], out, err);
    if (i == 2 && !strstr(out, "executable:"))
      fail_msg("summary of a Go trace cut at %zu printed: %s", cuts[i], out);
    free(out);
    free(err);
  }
  free(data);
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
      cmocka_unit_test(check_finds_a_hit_on_a_bucket_no_miss_filled),
      cmocka_unit_test(analyses_and_copy_stop_at_an_undescribed_code),
      cmocka_unit_test(a_damaged_compressed_trace_is_placed_in_the_compressed_file),
      cmocka_unit_test(copy_leaves_out_promotes_and_collects_of_a_skipped_packets_objects),
      cmocka_unit_test(a_window_in_percent_says_each_warning_once),
      cmocka_unit_test(json_output_escapes_invalid_utf8_reversibly),
      cmocka_unit_test(line_breaks_in_fields_stay_on_their_line),
      cmocka_unit_test(info_and_summary_agree_on_a_far_packet_end),
      cmocka_unit_test(every_command_fails_when_its_output_cannot_be_written),
      cmocka_unit_test(every_output_that_is_an_input_is_refused),
      cmocka_unit_test(a_write_that_fails_midway_leaves_the_old_file_and_no_temporary),
      cmocka_unit_test(a_successful_write_replaces_the_file_and_keeps_its_mode),
      cmocka_unit_test(devices_and_pipes_are_written_directly),
      cmocka_unit_test(a_signal_removes_the_temporary_file),
      cmocka_unit_test(copy_to_dash_writes_standard_output),
      cmocka_unit_test(an_unknown_option_is_one_line_naming_it_in_every_command),
      cmocka_unit_test(an_option_given_twice_is_refused_unless_its_values_add_up),
      cmocka_unit_test(numbers_with_a_space_before_or_after_are_refused),
      cmocka_unit_test(help_command_prints_that_commands_help),
      cmocka_unit_test(sampling_rates_print_in_plain_decimal),
      cmocka_unit_test(a_trace_through_a_pipe_given_by_path_is_read_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
