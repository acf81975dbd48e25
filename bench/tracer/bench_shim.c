/* The traced process's own cost (tracer benchmark): runs a program under libmemtap-preload.so in
 * ring mode with a consumer that only reads the records and drops them (no ordering, no
 * symbols, no trace file), so that what the program's CPU time shows is the shim's sampling,
 * unwinding and ring writes and nothing of memtap record's recorder. Prints the program's CPU time
 * (user + system, from wait4), the records the consumer read, and ns of program CPU per record
 * above an untraced run of the same command. Usage:
 *   bench_tracer_shim SHIM [--full | --sample-interval N] [--runs K] [--batch US] -- PROG ARGS...
 * Each of K rounds runs the program untraced and traced, alternated; the fastest of each is
 * reported (on a shared machine the least disturbed run). --batch US makes the consumer sleep US µs
 * after a poll that found little, instead of polling again at once: a consumer right behind the
 * producer keeps pulling the ring's tail and the cache lines being filled away from the producer's
 * core. Not a test. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "memtap/ring.h"

/* --batch US: after a poll that found fewer than 4096 records, the consumer sleeps US µs. */
static long batch_us;

typedef struct result {
  double cpu, sys, wall;
  uint64_t records;
} result;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static pid_t start(char **argv, const char *shim, const char *dir, const char *interval,
                   bool full) {
  pid_t pid = fork();
  if (pid != 0)
    return pid;
  if (shim) {
    char pidbuf[32];
    snprintf(pidbuf, sizeof pidbuf, "%d", (int)getpid());
    setenv("LD_PRELOAD", shim, 1);
    setenv("MEMTAP_RECORD", "1", 1);
    setenv("MEMTAP_RING_DIR", dir, 1);
    setenv("MEMTAP_TRACE_PID", pidbuf, 1);
    if (full)
      setenv("MEMTAP_FULL", "1", 1);
    if (interval)
      setenv("MEMTAP_SAMPLE_INTERVAL", interval, 1);
  }
  int null = open("/dev/null", O_WRONLY);
  if (null >= 0)
    dup2(null, 1);
  execvp(argv[0], argv);
  perror(argv[0]);
  _exit(127);
}

static bool reap(pid_t pid, bool wait, result *r) {
  int status;
  struct rusage ru;
  pid_t got = wait4(pid, &status, wait ? 0 : WNOHANG, &ru);
  if (got != pid)
    return false;
  r->cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
  r->sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fprintf(stderr, "bench_tracer_shim: the program failed (status %#x)\n", status);
  return true;
}

static result run(char **argv, const char *shim, const char *interval, bool full) {
  result r = {0};
  char dir[] = "/tmp/memtap-bench-shim.XXXXXX";
  if (shim && !mkdtemp(dir)) {
    perror("mkdtemp");
    exit(1);
  }
  double t0 = now_s();
  pid_t pid = start(argv, shim, dir, interval, full);
  if (!shim) {
    reap(pid, true, &r);
    r.wall = now_s() - t0;
    return r;
  }
  mt_cursor *c = NULL;
  mt_error err;
  bool exited = false;
  while (!c && !exited) {
    if (mt_cursor_open(&c, dir, pid, &err) != MT_OK) {
      c = NULL;
      exited = reap(pid, false, &r);
      sleep_us(200);
    }
  }
  if (c && mt_cursor_register_primary(c, &err) != MT_OK)
    fprintf(stderr, "bench_tracer_shim: cannot register as primary: %s\n", err.message);
  while (c) {
    size_t n = 0;
    if (mt_cursor_poll(c, 0, &n, &err) != MT_OK && err.code != MT_E_STATE) {
      fprintf(stderr, "bench_tracer_shim: %s\n", err.message);
      break;
    }
    r.records += n;
    if (!exited && !n)
      exited = reap(pid, false, &r);
    if (!exited && batch_us && n < 4096)
      sleep_us(batch_us); /* let records pile up: fewer cache lines shared with the producer */
    if (exited) {
      mt_cursor_set_end(c);
      while (!mt_cursor_drained(c) && mt_cursor_poll(c, 0, &n, &err) == MT_OK)
        r.records += n;
      break;
    }
  }
  if (!exited)
    reap(pid, true, &r);
  r.wall = now_s() - t0;
  if (c)
    mt_cursor_close(c);
  char path[256];
  if (mt_ring_file_path(path, sizeof path, dir, pid) == MT_OK)
    unlink(path);
  rmdir(dir);
  return r;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: bench_tracer_shim SHIM [--full | --sample-interval N] [--runs K] -- "
                    "PROG ARGS...\n");
    return 64;
  }
  const char *shim = argv[1], *interval = NULL;
  bool full = false;
  int runs = 5, i = 2;
  for (; i < argc && strcmp(argv[i], "--"); i++) {
    if (!strcmp(argv[i], "--full"))
      full = true;
    else if (!strcmp(argv[i], "--sample-interval") && i + 1 < argc)
      interval = argv[++i];
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
      batch_us = atol(argv[++i]);
  }
  if (i + 1 >= argc || runs < 1) {
    fprintf(stderr, "bench_tracer_shim: no program after --\n");
    return 64;
  }
  char **prog = argv + i + 1;
  result best_plain = {1e30, 0, 1e30, 0}, best_traced = {1e30, 0, 1e30, 0};
  for (int k = 0; k < runs; k++) {
    result a = run(prog, NULL, NULL, false), b = run(prog, shim, interval, full);
    if (a.cpu < best_plain.cpu)
      best_plain = a;
    if (b.cpu < best_traced.cpu)
      best_traced = b;
  }
  double extra = best_traced.cpu - best_plain.cpu;
  printf("untraced cpu %.3f s; traced (%s) cpu %.3f s (system %.3f), wall %.3f s, %" PRIu64
         " records; %.1f ns of program cpu per record (fastest of %d)\n",
         best_plain.cpu,
         full       ? "full"
         : interval ? interval
                    : "sampled",
         best_traced.cpu, best_traced.sys, best_traced.wall, best_traced.records,
         best_traced.records ? extra * 1e9 / (double)best_traced.records : 0.0, runs);
  return 0;
}
