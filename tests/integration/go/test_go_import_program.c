/* The Go trace import against a real Go program (allocprog/main.go) traced at test time with
 * GODEBUG=traceallocfree=1 by a Go >= 1.23 toolchain ($MEMTAP_GO, else /usr/lib/go-1.23/bin/go,
 * which scripts/install-deps.sh installs from bookworm-backports). The import must agree with
 *   - what the program says it allocated while traced: its nodes (type main.node, 64-byte slots),
 *     its 40 KiB slices (element type uint8, each sized by its own 5-page span), and the 1000
 *     nodes it made before tracing (in the start snapshot, still live at the end);
 *   - `go tool trace -d=1` on the same file, whose lines "... Experimental Time=T Name=NAME ..."
 *     are counted per NAME (HeapObjectAlloc, HeapObject, HeapObjectFree, SpanAlloc, Span,
 *     SpanFree, GoroutineStackAlloc, GoroutineStack, GoroutineStackFree) and compared with the
 *     import's allocated, snapshot and free counts of objects, spans and stacks.
 * Without a Go toolchain the test skips, unless CI=true. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/hashmap.h"
#include "memtap/import.h"
#include "testutil.h"
#include "tracegen.h"

static char go[4096], work[4096];

static int setup(void **state) {
  (void)state;
  const char *env = getenv("MEMTAP_GO");
  snprintf(go, sizeof go, "%s", env && *env ? env : "/usr/lib/go-1.23/bin/go");
  snprintf(work, sizeof work, "%s", MEMTAP_GO_WORK);
  return 0;
}

static void need_go(void) {
  if (access(go, X_OK) == 0)
    return;
  const char *ci = getenv("CI");
  if (ci && !strcmp(ci, "true"))
    fail_msg("no Go toolchain at %s (scripts/install-deps.sh installs golang-1.23-go)", go);
  fprintf(stderr, "skipping: no Go 1.23+ toolchain at %s (set MEMTAP_GO)\n", go);
  skip();
}

/* Runs a shell command in the work directory with the Go environment confined to it. */
static void run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void run(const char *fmt, ...) {
  char cmd[32768], inner[12288];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(inner, sizeof inner, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd,
           "cd '%s' && env GOCACHE='%s/cache' GOPATH='%s/gopath' GOTOOLCHAIN=local GOPROXY=off "
           "GOFLAGS= GO111MODULE=off %s",
           work, work, work, inner);
  int rc = system(cmd);
  if (rc != 0)
    fail_msg("command failed (%d): %s", rc, inner);
}

static long value_of(const char *text, const char *key) {
  char k[64];
  snprintf(k, sizeof k, "%s ", key);
  const char *p = strstr(text, k);
  if (!p)
    fail_msg("the program did not print '%s'", key);
  return strtol(p + strlen(k), NULL, 10);
}

/* Lines of `go tool trace -d=1` (`size` bytes) naming experimental event `name` whose arguments
 * end with `args_end` (e.g. " 0]": a last argument of 0; "" for any). Bounded searches only:
 * ASan's strchr measures the whole rest of the string on every call, which made this quadratic in
 * the dump's size (minutes under ASan). */
static uint64_t d1_count_args(const char *d1, size_t size, const char *name, const char *args_end) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, " Name=%s ", name);
  size_t tail = strlen(args_end);
  uint64_t n = 0;
  for (const char *line = d1, *stop = d1 + size; line < stop;) {
    const char *end = memchr(line, '\n', (size_t)(stop - line));
    size_t len = end ? (size_t)(end - line) : (size_t)(stop - line);
    const char *exp = memmem(line, len, "Experimental Time=", 18);
    if (exp && memmem(exp, len - (size_t)(exp - line), pattern, strlen(pattern)) && len >= tail &&
        !memcmp(line + len - tail, args_end, tail))
      n++;
    line += len + 1;
  }
  return n;
}

static uint64_t d1_count(const char *d1, size_t size, const char *name) {
  return d1_count_args(d1, size, name, "");
}

/* Builds allocprog, runs it traced with `args` into NAME.trace (its output in NAME.out), dumps
 * the trace with `go tool trace -d=1` into *d1 (*d1_size bytes, malloc'd) and imports it: the
 * import's stats, the memtrace bytes in the memfd returned. */
static int traced_import(const char *args, const char *name, mt_go_import_stats *st, char **d1,
                         size_t *d1_size) {
  need_go();
  mkdir(work, 0755);
  run("'%s' build -o allocprog '%s/main.go'", go, MEMTAP_GO_PROG_DIR);
  run("GODEBUG=traceallocfree=1 ./allocprog %s -o %s.trace > %s.out", args, name, name);
  run("'%s' tool trace -d=1 %s.trace > %s.d1 2>&1", go, name, name);
  char path[8192];
  snprintf(path, sizeof path, "%s/%s.trace", work, name);
  int in = open(path, O_RDONLY);
  assert_true(in >= 0);
  int out = memfd_create("ctf", 0);
  mt_error err;
  if (mt_go_import_fd(in, out, NULL, st, &err))
    fail_msg("import: %s", err.message);
  close(in);
  snprintf(path, sizeof path, "%s/%s.d1", work, name);
  *d1 = (char *)tu_read_file(path, d1_size);
  return out;
}

typedef struct kind_count {
  uint64_t objects, bytes, collects;
} kind_count;

static void traced_program_import_agrees_with_program_and_go_tool_trace(void **state) {
  (void)state;
  mt_go_import_stats st;
  size_t size;
  char *d1;
  int out = traced_import("-n 20000", "allocprog", &st, &d1, &size);
  char path[8192];
  snprintf(path, sizeof path, "%s/allocprog.out", work);
  size_t said_size;
  char *said = (char *)tu_read_file(path, &said_size);
  long nodes = value_of(said, "nodes"), slices = value_of(said, "slices"),
       early = value_of(said, "early");
  free(said);
  assert_int_equal(nodes, 40000);
  assert_true(slices >= 2);

  /* The import and go tool trace -d=1 see the same experimental events. */
  assert_int_equal(st.objects.allocated, d1_count(d1, size, "HeapObjectAlloc"));
  assert_int_equal(st.objects.snapshot, d1_count(d1, size, "HeapObject"));
  assert_int_equal(st.objects.frees, d1_count(d1, size, "HeapObjectFree"));
  assert_int_equal(st.spans.allocated, d1_count(d1, size, "SpanAlloc"));
  assert_int_equal(st.spans.snapshot, d1_count(d1, size, "Span"));
  assert_int_equal(st.spans.frees, d1_count(d1, size, "SpanFree"));
  assert_int_equal(st.stacks.allocated, d1_count(d1, size, "GoroutineStackAlloc"));
  assert_int_equal(st.stacks.snapshot, d1_count(d1, size, "GoroutineStack"));
  assert_int_equal(st.stacks.frees, d1_count(d1, size, "GoroutineStackFree"));
  assert_int_equal(st.stacks.allocated + st.stacks.snapshot - st.stacks.duplicates -
                       st.stacks.empty - st.stacks.freed,
                   st.stacks.live_end);
  assert_true(st.objects.allocated > (uint64_t)nodes);
  free(d1);
  assert_int_equal(st.objects.unknown_frees, 0); /* the snapshot shows every earlier object */
  assert_true(st.objects.snapshot >= (uint64_t)early);

  /* The program's own objects, by type and slot. */
  size_t ctf_size;
  uint8_t *ctf = tg_fd_bytes(out, &ctf_size);
  close(out);
  mt_reader_options ro = {.backtraces = true};
  mt_reader *r;
  mt_error err;
  if (mt_reader_open_memory(&r, ctf, ctf_size, &ro, &err))
    fail_msg("%s", err.message);
  kind_count node = {0}, slice = {0}, untyped64 = {0};
  mt_hashmap live = {0}; /* obj -> 1 node, 2 slice, 3 other */
  mt_event ev;
  int rc;
  uint64_t bad_collects = 0;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
    if (ev.kind == MT_EVENT_COLLECT) {
      uint64_t what;
      if (!mt_hashmap_get(&live, ev.obj_id, &what))
        bad_collects++;
      mt_hashmap_remove(&live, ev.obj_id);
      if (what == 1)
        node.collects++;
      continue;
    }
    const mt_location *locs;
    size_t n;
    assert_true(mt_reader_lookup_location(r, ev.backtrace[0], &locs, &n));
    uint64_t what = 3;
    if (!strcmp(locs[0].defname, "main.node")) {
      what = 1;
      node.objects++;
      node.bytes += (uint64_t)ev.length * 8;
    } else if (!strcmp(locs[0].defname, "uint8") && ev.length * 8 == 40960) {
      what = 2;
      slice.objects++;
      slice.bytes += (uint64_t)ev.length * 8;
    } else if (!strcmp(locs[0].defname, "[no type]") && ev.length == 8) {
      untyped64.objects++;
    }
    assert_true(mt_hashmap_put(&live, ev.obj_id, what));
  }
  if (rc < 0)
    fail_msg("%s", err.message);
  mt_hashmap_free(&live);
  mt_reader_close(r);
  free(ctf);
  assert_int_equal(bad_collects, 0);
  assert_int_equal(node.objects, (uint64_t)nodes);
  assert_int_equal(node.bytes, (uint64_t)nodes * 64);
  /* Lists are dropped every 64 nodes and the GC runs at the end: all but the last list of each
   * goroutine (and whatever the last cycle left unswept) are freed. */
  assert_true(node.collects >= (uint64_t)nodes / 2);
  assert_int_equal(slice.objects, (uint64_t)slices);
  assert_int_equal(slice.bytes, (uint64_t)slices * 40960);
  /* The snapshot has no types for small objects: the early nodes are 64-byte [no type] ones. */
  assert_true(untyped64.objects >= (uint64_t)early);
}

/* A trace started after goroutines ended and a GC ran (any trace taken late in a program's life):
 * the runtime's start snapshot lists each ended goroutine with a stack of size 0 (order 0). The
 * import leaves them out, counted, instead of refusing the trace. (A separate run: the GC just
 * before tracing may leave a free the snapshot did not show, which the first test's strict count
 * of unknown frees would not allow.) */
static void goroutines_ended_before_tracing_are_read_not_refused(void **state) {
  (void)state;
  mt_go_import_stats st;
  size_t size;
  char *d1;
  close(traced_import("-n 2000 -finished 400", "late", &st, &d1, &size));
  uint64_t stackless = d1_count_args(d1, size, "GoroutineStack", " 0]");
  assert_true(stackless >= 1);
  assert_int_equal(st.stacks.snapshot, d1_count(d1, size, "GoroutineStack"));
  assert_int_equal(st.stacks.empty, stackless);
  assert_int_equal(st.stacks.allocated + st.stacks.snapshot - st.stacks.duplicates -
                       st.stacks.empty - st.stacks.freed,
                   st.stacks.live_end);
  free(d1);
}

/* memtap record of a Go program: its Go heap never calls malloc, so a trace of it alone would
 * read as empty without a word. Statically linked (Go's default) it is refused with that reason,
 * dynamically linked (external linking) it runs unchanged with a note; both point to GODEBUG=
 * traceallocfree=1. */
static void recording_a_go_program_points_to_go_execution_traces(void **state) {
  (void)state;
  need_go();
  mkdir(work, 0755);
  run("'%s' build -o allocprog '%s/main.go'", go, MEMTAP_GO_PROG_DIR);
  run("CGO_ENABLED=1 '%s' build -ldflags=-linkmode=external -o allocprog_dyn '%s/main.go'", go,
      MEMTAP_GO_PROG_DIR);
  char prog[8192], trace[8192], ctf[8192];
  snprintf(prog, sizeof prog, "%s/allocprog", work);
  snprintf(trace, sizeof trace, "%s/record.trace", work);
  snprintf(ctf, sizeof ctf, "%s/static.ctf", work);
  char *out, *err;
  int rc =
      tu_run_cli(&out, NULL, &err, "record", "-o", ctf, "--", prog, "-n", "10", "-o", trace, NULL);
  assert_int_equal(rc, 1);
  if (!strstr(err, "a statically linked Go program") || !strstr(err, "GODEBUG=traceallocfree=1"))
    fail_msg("static Go program: %s", err);
  assert_int_equal(access(ctf, F_OK), -1);
  free(out);
  free(err);

  snprintf(prog, sizeof prog, "%s/allocprog_dyn", work);
  snprintf(ctf, sizeof ctf, "%s/dynamic.ctf", work);
  rc = tu_run_cli(&out, NULL, &err, "record", "-o", ctf, "--", prog, "-n", "10", "-o", trace, NULL);
  assert_int_equal(rc, 0);
  if (!strstr(err, "note: a Go program") || !strstr(err, "GODEBUG=traceallocfree=1"))
    fail_msg("dynamic Go program: %s", err);
  assert_non_null(strstr(out, "nodes "));
  assert_int_equal(access(ctf, F_OK), 0);
  free(out);
  free(err);

  /* Any other program is not told so. */
  snprintf(ctf, sizeof ctf, "%s/true.ctf", work);
  rc = tu_run_cli(&out, NULL, &err, "record", "-o", ctf, "--", "/bin/true", NULL);
  assert_int_equal(rc, 0);
  assert_null(strstr(err, "Go program"));
  free(out);
  free(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(traced_program_import_agrees_with_program_and_go_tool_trace),
      cmocka_unit_test(goroutines_ended_before_tracing_are_read_not_refused),
      cmocka_unit_test(recording_a_go_program_points_to_go_execution_traces),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
