/* In-process mode (docs/tracer.md, "In-process mode"): MEMTAP=path and memtrace's MEMTRACE=path
 * make a program run with the preload shim trace itself, through a consumer thread, into a trace
 * that reads back whole; children do not inherit the variable; a trace file another process holds
 * locked is left alone and the program runs untraced. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "memtap/format.h"
#include "testutil.h"

typedef struct run_result {
  int status; /* exit status, 128+n for a signal */
  char *out, *err;
} run_result;

/* A file's bytes as a NUL-terminated string. */
static char *read_text(const char *path) {
  size_t size;
  uint8_t *data = tu_read_file(path, &size);
  char *text = malloc(size + 1);
  assert_non_null(text);
  memcpy(text, data, size);
  text[size] = 0;
  free(data);
  return text;
}

/* Runs the test program with LD_PRELOAD=the shim, the variables `env` (NULL-terminated
 * "NAME=value" list) added to a minimal environment, and `arg` as its argument (or none). */
static run_result run_prog(const char *const env[], const char *arg) {
  const char *out_path = tu_temp_path("stdout"), *err_path = tu_temp_path("stderr");
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char *envp[16];
    size_t n = 0;
    static char preload[4096];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", MEMTAP_PRELOAD_PATH);
    envp[n++] = preload;
    envp[n++] = "PATH=/usr/bin:/bin";
    for (size_t i = 0; env[i] && n < 15; i++)
      envp[n++] = (char *)env[i];
    envp[n] = NULL;
    int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
      _exit(126);
    char *argv[] = {(char *)INPROCESS_PROG_PATH, (char *)arg, NULL};
    execve(argv[0], argv, envp);
    _exit(127);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  run_result r = {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), NULL, NULL};
  r.out = read_text(out_path);
  r.err = read_text(err_path);
  return r;
}

static void run_free(run_result *r) {
  free(r->out);
  free(r->err);
}

typedef struct trace_counts {
  long blocks;       /* allocations of 4000 bytes (500 words) */
  long blocks_freed; /* collects of those */
  long allocations, collects;
  double rate;
} trace_counts;

/* Reads the whole trace (it must read without error) and counts the test program's blocks. */
static trace_counts read_trace(const char *path) {
  trace_counts c = {0};
  mt_reader *r;
  mt_error err = {0};
  mt_reader_options o = {.backtraces = true};
  if (mt_reader_open(&r, path, &o, &err) != MT_OK)
    fail_msg("%s: %s", path, err.message);
  c.rate = mt_reader_info(r)->sample_rate;
  char *is_block = calloc(1 << 20, 1);
  mt_event ev;
  int rc;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
    if (ev.kind == MT_EVENT_ALLOC) {
      c.allocations++;
      if (ev.length == 500 && ev.obj_id < (1 << 20)) {
        c.blocks++;
        is_block[ev.obj_id] = 1;
      }
    } else if (ev.kind == MT_EVENT_COLLECT) {
      c.collects++;
      if (ev.obj_id < (1 << 20) && is_block[ev.obj_id])
        c.blocks_freed++;
    }
  }
  if (rc < 0)
    fail_msg("%s: %s", path, err.message);
  assert_false(mt_reader_truncated(r, NULL));
  free(is_block);
  mt_reader_close(r);
  return c;
}

static int skip_if_sanitized(void) {
#ifdef MEMTAP_LIB_SANITIZED
  print_message("skipped: libmemtap.so is instrumented in this build and cannot be loaded into "
                "an uninstrumented program\n");
  return 1;
#else
  return 0;
#endif
}

static void memtap_variable_makes_the_program_trace_itself(void **state) {
  (void)state;
  if (skip_if_sanitized())
    return;
  static char var[4096];
  const char *trace = tu_temp_path("self.ctf");
  snprintf(var, sizeof var, "MEMTAP=%s", trace);
  const char *env[] = {var, "MEMTAP_FULL=1", NULL};
  run_result r = run_prog(env, NULL);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.out, "done\n");
  assert_string_equal(r.err, "");
  trace_counts c = read_trace(trace);
  assert_int_equal(c.blocks, 1000);
  assert_int_equal(c.blocks_freed, 500);
  assert_true(c.rate == 1.0);
  run_free(&r);
}

static void memtrace_variable_samples_and_children_see_it_emptied(void **state) {
  (void)state;
  if (skip_if_sanitized())
    return;
  static char var[4096];
  const char *trace = tu_temp_path("memtrace.ctf");
  snprintf(var, sizeof var, "MEMTRACE=%s", trace);
  const char *env[] = {var, "MEMTRACE_RATE=0.01", NULL};
  run_result r = run_prog(env, "child");
  assert_int_equal(r.status, 0);
  /* sh, a child, sees the variable empty (as memtrace leaves it), so it traced nothing */
  assert_string_equal(r.out, "[]\ndone\n");
  trace_counts c = read_trace(trace);
  assert_true(c.rate == 0.01);
  /* 1000 blocks of 500 words at 0.01 samples a word: about 993 of them hold a sample */
  assert_in_range(c.blocks, 950, 1000);
  assert_true(c.blocks_freed > 0 && c.blocks_freed <= c.blocks);
  run_free(&r);
}

static void a_trace_file_locked_by_another_process_is_left_alone(void **state) {
  (void)state;
  const char *trace = tu_temp_path("locked.ctf");
  tu_write_file(trace, "precious", 8);
  int fd = open(trace, O_RDWR);
  assert_true(fd >= 0);
  assert_int_equal(lockf(fd, F_TLOCK, 0), 0);
  static char var[4096];
  snprintf(var, sizeof var, "MEMTAP=%s", trace);
  const char *env[] = {var, NULL};
  run_result r = run_prog(env, NULL);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.out, "done\n");
  assert_non_null(strstr(r.err, "cannot lock the trace file"));
  size_t size;
  char *kept = (char *)tu_read_file(trace, &size);
  assert_int_equal(size, 8);
  assert_memory_equal(kept, "precious", 8);
  free(kept);
  close(fd);
  run_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(memtap_variable_makes_the_program_trace_itself),
      cmocka_unit_test(memtrace_variable_samples_and_children_see_it_emptied),
      cmocka_unit_test(a_trace_file_locked_by_another_process_is_left_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
