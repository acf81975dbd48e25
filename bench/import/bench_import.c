/* Go trace import benchmark (issue 10: >= 30 M Go events/s on one core, memory flat in the trace's
 * length). Without a trace argument it builds the test program tests/integration/go/allocprog with
 * a Go >= 1.23 toolchain and runs it under GODEBUG=traceallocfree=1 twice, a short run and a run
 * ten times longer, writing the traces to /tmp/memtap-bench-go (never to the repository). Each
 * trace is imported in a child process (CPU time and peak RSS from wait4), and the converted
 * memtrace trace is read back with memtap's reader, without and with backtraces. Prints figures;
 * checks nothing. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "memtap/format.h"
#include "memtap/import.h"

#define WORK "/tmp/memtap-bench-go"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(const struct rusage *ru) {
  return (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec / 1e6 +
         (double)ru->ru_stime.tv_sec + (double)ru->ru_stime.tv_usec / 1e6;
}

static void run(const char *cmd) {
  fprintf(stderr, "bench_import: %s\n", cmd);
  if (system(cmd) != 0) {
    fprintf(stderr, "bench_import: failed: %s\n", cmd);
    exit(1);
  }
}

/* Builds allocprog and writes a trace of `nodes` nodes per goroutine to `out`. */
static void make_trace(const char *go, long nodes, const char *out) {
  char cmd[8192];
  mkdir(WORK, 0755);
  snprintf(cmd, sizeof cmd,
           "cd " WORK " && env GOCACHE=" WORK "/cache GOPATH=" WORK "/gopath GOTOOLCHAIN=local "
           "GOPROXY=off GOFLAGS= GO111MODULE=off '%s' build -o allocprog "
           "'%s/tests/integration/go/allocprog/main.go' && GODEBUG=traceallocfree=1 ./allocprog "
           "-n %ld -o '%s' > /dev/null",
           go, MEMTAP_SOURCE_DIR, nodes, out);
  run(cmd);
}

typedef struct result {
  int ok;
  mt_go_import_stats stats;
} result;

/* Imports `trace` into `ctf` in a child; prints CPU time, events/s and peak RSS. */
static void bench_import(const char *trace, const char *ctf) {
  int p[2];
  if (pipe(p))
    exit(1);
  double t0 = now_s();
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    result r = {0};
    int in = open(trace, O_RDONLY), out = open(ctf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    mt_error err;
    r.ok = in >= 0 && out >= 0 && mt_go_import_fd(in, out, NULL, &r.stats, &err) == MT_OK;
    if (!r.ok)
      fprintf(stderr, "bench_import: %s: %s\n", trace, in < 0 || out < 0 ? "open" : err.message);
    if (write(p[1], &r, sizeof r) != sizeof r)
      _exit(1);
    _exit(0);
  }
  close(p[1]);
  result r;
  ssize_t got = read(p[0], &r, sizeof r);
  close(p[0]);
  int status;
  struct rusage ru;
  wait4(pid, &status, 0, &ru);
  double wall = now_s() - t0;
  if (got != sizeof r || !r.ok)
    exit(1);
  struct stat st;
  stat(trace, &st);
  double cpu = cpu_s(&ru);
  printf("import %s: %.1f MB, %" PRIu64 " generations (largest %.1f MB), %" PRIu64
         " Go events (%" PRIu64 " alloc/free)\n",
         trace, (double)st.st_size / 1e6, r.stats.generations,
         (double)r.stats.largest_generation / 1e6, r.stats.go_events, r.stats.alloc_free_events);
  printf("  CPU %.3f s (wall %.3f s): %.1f M Go events/s, %.0f MB/s; peak RSS %.1f MB\n", cpu, wall,
         (double)r.stats.go_events / cpu / 1e6, (double)st.st_size / cpu / 1e6,
         (double)ru.ru_maxrss / 1024);
}

/* Reads `ctf` with memtap's reader; prints events/s. */
static void bench_read(const char *ctf, bool backtraces) {
  mt_reader_options o = {.backtraces = backtraces};
  mt_reader *r;
  mt_error err;
  if (mt_reader_open(&r, ctf, &o, &err)) {
    fprintf(stderr, "bench_import: %s: %s\n", ctf, err.message);
    exit(1);
  }
  struct rusage a, b;
  getrusage(RUSAGE_SELF, &a);
  mt_event ev;
  uint64_t n = 0;
  int rc;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0)
    n++;
  getrusage(RUSAGE_SELF, &b);
  mt_reader_close(r);
  if (rc < 0)
    exit(1);
  double cpu = cpu_s(&b) - cpu_s(&a);
  printf("  memtap reader on the converted trace, %s backtraces: %" PRIu64
         " events, %.1f M events/s\n",
         backtraces ? "with" : "without", n, (double)n / cpu / 1e6);
}

int main(int argc, char **argv) {
  const char *go = getenv("MEMTAP_GO");
  if (!go || !*go)
    go = "/usr/lib/go-1.23/bin/go";
  long nodes = 5000000;
  if (argc > 2 && !strcmp(argv[1], "--nodes"))
    nodes = atol(argv[2]), argv += 2, argc -= 2;
  if (argc > 1) {
    bench_import(argv[1], WORK "/given.ctf");
    bench_read(WORK "/given.ctf", false);
    bench_read(WORK "/given.ctf", true);
    return 0;
  }
  if (access(go, X_OK)) {
    fprintf(stderr, "bench_import: no Go toolchain at %s (set MEMTAP_GO), or give a trace\n", go);
    return 1;
  }
  make_trace(go, nodes / 10, WORK "/short.trace");
  make_trace(go, nodes, WORK "/long.trace");
  bench_import(WORK "/short.trace", WORK "/short.ctf");
  bench_import(WORK "/long.trace", WORK "/long.ctf");
  bench_read(WORK "/long.ctf", false);
  bench_read(WORK "/long.ctf", true);
  return 0;
}
