/* In-process mode (docs/tracer.md, "In-process mode"): MEMTAP=path and memtrace's MEMTRACE=path
 * make a program run with the preload shim trace itself, through a consumer thread, into a trace
 * that reads back whole; children do not inherit the variable; a trace file another process holds
 * locked is left alone and the program runs untraced. A program linked with libmemtap traces
 * itself between mt_tracer_start and mt_tracer_stop, with the shim preloaded or linked. */
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

/* Runs `prog` (with LD_PRELOAD=the shim when `preload`), the variables `env` (NULL-terminated
 * "NAME=value" list) added to a minimal environment, and the arguments `args` (NULL-terminated). */
static run_result run_program(const char *prog, bool preload, const char *const env[],
                              const char *const args[]) {
  const char *out_path = tu_temp_path("stdout"), *err_path = tu_temp_path("stderr");
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char *envp[16], *argv[8];
    size_t n = 0, a = 0;
    static char preload_var[4096];
    snprintf(preload_var, sizeof preload_var, "LD_PRELOAD=%s", MEMTAP_PRELOAD_PATH);
    if (preload)
      envp[n++] = preload_var;
    envp[n++] = "PATH=/usr/bin:/bin";
    for (size_t i = 0; env[i] && n < 15; i++)
      envp[n++] = (char *)env[i];
    envp[n] = NULL;
    argv[a++] = (char *)prog;
    for (size_t i = 0; args[i] && a < 7; i++)
      argv[a++] = (char *)args[i];
    argv[a] = NULL;
    int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
      _exit(126);
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

/* The MEMTAP=/MEMTRACE= test program under the shim, with `arg` as its argument (or none). */
static run_result run_prog(const char *const env[], const char *arg) {
  const char *args[] = {arg, NULL};
  return run_program(INPROCESS_PROG_PATH, true, env, args);
}

static void run_free(run_result *r) {
  free(r->out);
  free(r->err);
}

/* What a trace holds, by block length in words (below MAX_WORDS). */
#define MAX_WORDS 4096
typedef struct trace_counts {
  long allocations, collects;
  long allocated[MAX_WORDS], freed[MAX_WORDS]; /* by length */
  double rate;
} trace_counts;

/* Reads the whole trace (it must read without error, every collect of an allocated object) and
 * counts its blocks by length. */
static trace_counts *read_trace(const char *path) {
  trace_counts *c = calloc(1, sizeof *c);
  mt_reader *r;
  mt_error err = {0};
  mt_reader_options o = {.backtraces = true};
  if (mt_reader_open(&r, path, &o, &err) != MT_OK)
    fail_msg("%s: %s", path, err.message);
  c->rate = mt_reader_info(r)->sample_rate;
  int16_t *length_of = calloc(1 << 20, sizeof *length_of); /* by object id; -1: freed */
  mt_event ev;
  int rc;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
    assert_true(ev.obj_id >= 0 && ev.obj_id < (1 << 20));
    if (ev.kind == MT_EVENT_ALLOC) {
      c->allocations++;
      int64_t words = ev.length < MAX_WORDS ? ev.length : 0;
      c->allocated[words]++;
      length_of[ev.obj_id] = (int16_t)words;
    } else if (ev.kind == MT_EVENT_COLLECT) {
      c->collects++;
      assert_true(length_of[ev.obj_id] >= 0);
      c->freed[length_of[ev.obj_id]]++;
      length_of[ev.obj_id] = -1;
    }
  }
  if (rc < 0)
    fail_msg("%s: %s", path, err.message);
  assert_false(mt_reader_truncated(r, NULL));
  free(length_of);
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
  trace_counts *c = read_trace(trace);
  assert_int_equal(c->allocated[500], 1000);
  assert_int_equal(c->freed[500], 500);
  assert_true(c->rate == 1.0);
  free(c);
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
  trace_counts *c = read_trace(trace);
  assert_true(c->rate == 0.01);
  /* 1000 blocks of 500 words at 0.01 samples a word: about 993 of them hold a sample */
  assert_in_range(c->allocated[500], 950, 1000);
  assert_true(c->freed[500] > 0 && c->freed[500] <= c->allocated[500]);
  free(c);
  run_free(&r);
}

/* The trace is finished inside the program's exit, among the libraries' destructors: nothing may
 * be loaded there. The recorder loads what it may need (libdeflate, for compressed debug files)
 * when it starts; the loader's own log (LD_DEBUG=files) says when each library came in. */
static void no_library_is_loaded_while_the_program_exits(void **state) {
  (void)state;
  if (skip_if_sanitized())
    return;
  static char var[4096];
  const char *trace = tu_temp_path("exit.ctf");
  snprintf(var, sizeof var, "MEMTAP=%s", trace);
  const char *env[] = {var, "MEMTAP_FULL=1", "LD_DEBUG=files", NULL};
  run_result r = run_prog(env, NULL);
  assert_int_equal(r.status, 0);
  const char *fini = strstr(r.err, "calling fini:");
  assert_non_null(fini); /* the log is there */
  for (const char *p = fini; (p = strstr(p, "file=")) != NULL; p++) {
    const char *end = strchr(p, '\n');
    fail_msg("loaded after the first destructor ran: %.*s", (int)(end ? end - p : 80), p);
  }
  trace_counts *c = read_trace(trace);
  assert_int_equal(c->allocated[500], 1000);
  free(c);
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

/* ---------------------------------------------------------------------------------------------
 * mt_tracer_start / mt_tracer_stop (tracer_control_prog.c)
 * ------------------------------------------------------------------------------------------- */

static run_result run_control(bool preload, const char *const env[], const char *const args[]) {
  return run_program(preload ? CONTROL_PROG_PATH : CONTROL_LINKED_PROG_PATH, preload, env, args);
}

/* The window scenario's traces, whichever way the shim came into the process. */
static void check_window(bool preload) {
  const char *trace1 = tu_temp_path("window1.ctf"), *trace2 = tu_temp_path("window2.ctf");
  const char *env[] = {NULL}, *args[] = {"window", trace1, trace2, NULL};
  run_result r = run_control(preload, env, args);
  assert_string_equal(r.err, "");
  assert_string_equal(r.out, "running 0\nstart 0\nstop 0\nstart 0\nstop 0\n");
  assert_int_equal(r.status, 0);
  trace_counts *c = read_trace(trace1);
  assert_true(c->rate == 1.0);
  /* nothing from before the start or after the stop */
  assert_int_equal(c->allocated[125], 0);
  assert_int_equal(c->allocated[375], 0);
  assert_int_equal(c->allocated[625], 0);
  /* the calling thread: exactly its calls in the window */
  assert_int_equal(c->allocated[250], 300);
  assert_int_equal(c->freed[250], 150);
  /* a thread that ran before the start joins within 16 KiB of its allocations (two blocks of
   * 8000 bytes at most); every free of its traced blocks is there */
  assert_in_range(c->allocated[1000], 98, 100);
  assert_in_range(c->freed[1000], 48, 50);
  free(c);
  c = read_trace(trace2);
  assert_int_equal(c->allocated[625], 40);
  assert_int_equal(c->allocated[250] + c->allocated[375] + c->allocated[1000], 0);
  free(c);
  run_free(&r);
}

static void start_and_stop_trace_exactly_the_window_under_preload(void **state) {
  (void)state;
  if (skip_if_sanitized())
    return;
  check_window(true);
}

static void start_and_stop_work_in_a_program_linked_with_the_shim(void **state) {
  (void)state;
  if (skip_if_sanitized())
    return;
  check_window(false);
}

static void start_without_the_shim_says_how_to_load_it(void **state) {
  (void)state;
  if (skip_if_sanitized())
    return;
  const char *trace = tu_temp_path("noshim.ctf");
  const char *env[] = {NULL}, *args[] = {"start", trace, NULL};
  run_result r = run_program(CONTROL_PROG_PATH, false, env, args);
  assert_int_equal(r.status, 3);
  assert_non_null(strstr(r.out, "start -7: the tracer is not in this process"));
  assert_non_null(strstr(r.out, "LD_PRELOAD=libmemtap-preload.so"));
  assert_int_equal(access(trace, F_OK), -1); /* no file made */
  run_free(&r);
}

static void the_environment_rate_comes_before_the_argument(void **state) {
  (void)state;
  if (skip_if_sanitized())
    return;
  const char *trace = tu_temp_path("rate.ctf");
  const char *args[] = {"rate", trace, "0.01", NULL};
  const char *no_env[] = {NULL};
  run_result r = run_control(true, no_env, args);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.out, "running 0\nstart 0\nrunning 1\nstop 0\n");
  trace_counts *c = read_trace(trace);
  assert_true(c->rate == 0.01);
  assert_in_range(c->allocated[500], 950, 1000); /* 1 - e^-5 of 1000 blocks of 500 words */
  free(c);
  run_free(&r);

  const char *env[] = {"MEMTAP_RATE=0.0001", NULL};
  r = run_control(true, env, args);
  assert_int_equal(r.status, 0);
  c = read_trace(trace);
  assert_true(c->rate == 0.0001);
  assert_in_range(c->allocated[500], 20, 110); /* 1 - e^-0.05 of 1000: about 49 */
  free(c);
  run_free(&r);

  /* Rate 1 is full tracing: every 4-byte block too (the byte sampler missed 4 of 10). */
  const char *one[] = {"rate", trace, "1", NULL};
  r = run_control(true, no_env, one);
  assert_int_equal(r.status, 0);
  c = read_trace(trace);
  assert_true(c->rate == 1.0);
  assert_int_equal(c->allocated[500], 1000);
  assert_int_equal(c->allocated[1], 1000);
  free(c);
  run_free(&r);
}

static void a_second_start_and_a_second_stop_are_refused(void **state) {
  (void)state;
  if (skip_if_sanitized())
    return;
  const char *trace = tu_temp_path("twice.ctf");
  const char *env[] = {NULL}, *args[] = {"twice", trace, NULL};
  run_result r = run_control(true, env, args);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.out, "running 0\nstart 0\n"
                             "start -7: this process is tracing itself already\n"
                             "stop 0\n"
                             "stop -7: this process is not writing a trace\n");
  free(read_trace(trace));
  run_free(&r);
}

static void start_is_refused_while_the_memtap_variable_traces(void **state) {
  (void)state;
  if (skip_if_sanitized())
    return;
  static char var[4096];
  const char *by_variable = tu_temp_path("variable.ctf"), *by_call = tu_temp_path("call.ctf");
  snprintf(var, sizeof var, "MEMTAP=%s", by_variable);
  const char *env[] = {var, NULL}, *args[] = {"start", by_call, NULL};
  run_result r = run_control(true, env, args);
  assert_int_equal(r.status, 3);
  assert_string_equal(r.out, "running 1\nstart -7: this process is tracing itself already\n");
  assert_int_equal(access(by_call, F_OK), -1);
  free(read_trace(by_variable)); /* the variable's trace is whole */
  run_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(memtap_variable_makes_the_program_trace_itself),
      cmocka_unit_test(memtrace_variable_samples_and_children_see_it_emptied),
      cmocka_unit_test(no_library_is_loaded_while_the_program_exits),
      cmocka_unit_test(a_trace_file_locked_by_another_process_is_left_alone),
      cmocka_unit_test(start_and_stop_trace_exactly_the_window_under_preload),
      cmocka_unit_test(start_and_stop_work_in_a_program_linked_with_the_shim),
      cmocka_unit_test(start_without_the_shim_says_how_to_load_it),
      cmocka_unit_test(the_environment_rate_comes_before_the_argument),
      cmocka_unit_test(a_second_start_and_a_second_stop_are_refused),
      cmocka_unit_test(start_is_refused_while_the_memtap_variable_traces),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
