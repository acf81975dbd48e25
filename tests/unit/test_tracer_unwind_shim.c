/* The shim's unwinder against libunwind inside traced programs: `memtap record --full` runs each
 * program with MEMTAP_TEST_UNWIND_CHECK=1, under which the shim walks every recorded stack with
 * libunwind as well and compares the two frame by frame (the cached walk as the shim uses it:
 * from the interposed function's frame, through its memo, with the shim's frames removed). The
 * program of this test (test_tracer_unwind_workload.cpp) allocates from recursion without frame
 * pointers, destructors and catch blocks of C++ exceptions thrown through the allocating frames,
 * frames a longjmp leaves and the stack it then reuses, a timer signal's handler at arbitrary
 * instructions, raise(), qsort's comparator, and 4 threads; the integration tests' programs, when
 * built, are checked too. Every stack must be identical to libunwind's, or the cached walk must
 * have handed it to libunwind (a fallback). */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

extern char **environ;

typedef struct check_counts {
  long stacks, identical, fell_back, differ;
} check_counts;

/* Runs `memtap record --full -- argv...` with the check on; 0 and the counts of the shim's
 * report line, or -1 (said on stderr) if the program failed or no report came. */
static int record_checked(const char *const *argv, check_counts *out) {
  char dir[] = "/tmp/memtap-unwind-shim.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char trace[256], err_path[256];
  snprintf(trace, sizeof trace, "%s/t.ctf", dir);
  snprintf(err_path, sizeof err_path, "%s/stderr", dir);
  const char *args[32];
  size_t n = 0;
  args[n++] = MEMTAP_EXE;
  args[n++] = "record";
  args[n++] = "--full";
  args[n++] = "-o";
  args[n++] = trace;
  args[n++] = "--";
  for (size_t i = 0; argv[i] && n < 31; i++)
    args[n++] = argv[i];
  args[n] = NULL;
  setenv("MEMTAP_TEST_UNWIND_CHECK", "1", 1);
  setenv("MEMTAP_PRELOAD", MEMTAP_PRELOAD_PATH, 1);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  int rc = posix_spawn(&pid, MEMTAP_EXE, &fa, NULL, (char *const *)args, environ);
  posix_spawn_file_actions_destroy(&fa);
  unsetenv("MEMTAP_TEST_UNWIND_CHECK");
  assert_int_equal(rc, 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  int result = -1;
  FILE *f = fopen(err_path, "r");
  char line[1024];
  while (f && fgets(line, sizeof line, f)) {
    if (strncmp(line, "memtap: unwind check:", 21) != 0 || strstr(line, "differs")) {
      fputs(line, stderr); /* memtap's summary, and any stack that differed */
      continue;
    }
    check_counts c;
    if (sscanf(line,
               "memtap: unwind check: %ld stacks, %ld identical to libunwind's, %ld fell back, "
               "%ld differ",
               &c.stacks, &c.identical, &c.fell_back, &c.differ) == 4) {
      *out = c;
      result = 0;
    }
  }
  if (f)
    fclose(f);
  unlink(err_path);
  unlink(trace);
  rmdir(dir);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "%s: exit status %#x\n", argv[0], status);
    return -1;
  }
  if (result != 0)
    fprintf(stderr, "%s: no unwind check report from the shim\n", argv[0]);
  else
    fprintf(stderr, "%s: %ld stacks, %ld identical, %ld fell back, %ld differ\n", argv[0],
            out->stacks, out->identical, out->fell_back, out->differ);
  return result;
}

static void expect_identical(const char *const *argv, long min_stacks) {
  check_counts c;
  assert_int_equal(record_checked(argv, &c), 0);
  assert_true(c.stacks >= min_stacks);
  assert_int_equal(c.differ, 0);
  assert_int_equal(c.identical + c.fell_back, c.stacks);
  /* The cache expresses nearly every frame; a few stacks fall back (a library's constructor
   * running inside dlopen, before its module is registered). */
  assert_true(c.fell_back <= 5 || c.fell_back * 100 <= c.stacks);
}

static void shim_stacks_match_libunwind_in_the_unwinder_workload(void **state) {
  (void)state;
  const char *argv[] = {WORKLOAD_PATH, "200", NULL};
  expect_identical(argv, 20000);
}

/* The tracer's integration programs (tests/integration/programs), when they were built. */
static void shim_stacks_match_libunwind_in_the_tracer_test_programs(void **state) {
  (void)state;
  static const char *const programs[][3] = {
      {"alloc_patterns", NULL, NULL},
      {"cxx_new", NULL, NULL},
      {"lifecycle", NULL, NULL},
      {"threads", "cross", NULL},
      {"threads", "short", NULL},
      {"threads", "queue", NULL},
      {"signal_malloc", "raise", NULL},
      {"backtrace_sites_gcc", NULL, NULL},
      {"backtrace_sites_clang", NULL, NULL},
      {"dlopen_main", "libdl_alloc_lib.so", NULL},
  };
  int ran = 0;
  for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
    char path[512], arg[512];
    snprintf(path, sizeof path, "%s/%s", TRACER_PROGRAMS_DIR, programs[i][0]);
    struct stat st;
    if (stat(path, &st) != 0)
      continue;
    const char *argv[3] = {path, programs[i][1], NULL};
    if (programs[i][1] && strstr(programs[i][1], ".so")) {
      snprintf(arg, sizeof arg, "%s/%s", TRACER_PROGRAMS_DIR, programs[i][1]);
      argv[1] = arg;
    }
    expect_identical(argv, 1);
    ran++;
  }
  if (!ran)
    skip(); /* the integration programs are not built in this configuration */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shim_stacks_match_libunwind_in_the_unwinder_workload),
      cmocka_unit_test(shim_stacks_match_libunwind_in_the_tracer_test_programs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
