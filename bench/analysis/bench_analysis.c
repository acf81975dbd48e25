/* Reader and analysis benchmark (issues 4 and 11, DESIGN.md §6): side by side, the raw reader
 * (without backtraces, with them as runs, flat) and `memtap check`, `summary`, `top`, `flame` on
 * every real trace of the test data, then on a generated trace of N events (demo_v3's stream
 * replayed by memtap-gentrace) with `report`, peak memory and a window with and without the
 * checkpoint index; then `top` and `flame` on ocamlopt_v1.ctf, which the issue compares with OCaml
 * memtrace's hotspots (~0.5 s) and flamegraph (~1.9 s). Wall times, best of several runs: on a
 * loaded machine, compare instruction counts (callgrind) too. Prints figures; checks nothing.
 *
 *   bench_analysis MEMTAP GENTRACE TESTDATA_DIR [NEVENTS (default 100000000)] [WORK_DIR] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "memtap/format.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Runs argv with stdout to /dev/null; returns wall seconds, stores peak RSS in KB. */
static double run(char *const argv[], long *rss_kb) {
  fflush(stdout); /* or the child would print our buffer again */
  double t0 = now();
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout))
      _exit(126);
    execv(argv[0], argv);
    _exit(127);
  }
  int status;
  struct rusage ru;
  if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    fprintf(stderr, "bench_analysis: %s %s failed\n", argv[0], argv[1]);
    exit(1);
  }
  if (rss_kb)
    *rss_kb = ru.ru_maxrss;
  return now() - t0;
}

/* The raw reader over `path`: 0 without backtraces, 1 with them as runs, 2 flat. Best of `passes`
 * whole passes (seconds); the event count in *events. */
static double reader_pass(const char *path, int mode, int passes, uint64_t *events) {
  double best = 1e9;
  for (int k = 0; k < passes; k++) {
    mt_reader_options o = {.backtraces = mode > 0, .runs_only = mode == 1};
    mt_reader *r;
    mt_error err;
    if (mt_reader_open(&r, path, &o, &err)) {
      fprintf(stderr, "bench_analysis: %s\n", err.message);
      exit(1);
    }
    mt_event ev;
    uint64_t n = 0;
    double t0 = now();
    while (mt_reader_next(r, &ev, &err) > 0)
      n++;
    double s = now() - t0;
    mt_reader_close(r);
    if (s < best)
      best = s;
    *events = n;
  }
  return best;
}

static const char *const reader_modes[] = {"no backtraces", "backtraces (runs)",
                                           "backtraces (flat)"};

static void reader_throughput(const char *path, int passes) {
  for (int mode = 0; mode < 3; mode++) {
    uint64_t n;
    double s = reader_pass(path, mode, passes, &n);
    printf("  raw reader, %-18s %9.3f s  %7.1f M events/s\n", reader_modes[mode], s,
           (double)n / s / 1e6);
  }
}

/* Best of `runs` runs of `memtap COMMAND path`. */
static double best_run(char *memtap, char *command, char *path, int runs, long *rss) {
  double best = 1e9;
  for (int k = 0; k < runs; k++) {
    double t = run((char *[]){memtap, command, path, NULL}, rss);
    if (t < best)
      best = t;
  }
  return best;
}

/* Every real trace: reader and analyses side by side. */
static void real_traces(char *memtap, const char *data) {
  static const char *const names[] = {"tiny_v3",     "lists_and_sets_v1", "demo_v2",    "demo_v3",
                                      "ocamlopt_v2", "ocamlopt_v3",       "ocamlopt_v1"};
  printf("real traces (%s/memtrace): M events/s, best of 5 (commands: wall time)\n", data);
  printf("  %-18s %9s %9s %9s %9s %9s %9s %9s %9s\n", "trace", "events", "no bt", "runs", "flat",
         "check", "summary", "top", "flame");
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/memtrace/%s.ctf", data, names[i]);
    uint64_t n = 0;
    double rate[3];
    for (int mode = 0; mode < 3; mode++) {
      double s = reader_pass(path, mode, 5, &n);
      rate[mode] = (double)n / s / 1e6;
    }
    printf("  %-18s %9llu %9.1f %9.1f %9.1f", names[i], (unsigned long long)n, rate[0], rate[1],
           rate[2]);
    char *commands[] = {"check", "summary", "top", "flame"};
    for (int c = 0; c < 4; c++)
      printf(" %8.3fs", best_run(memtap, commands[c], path, 5, NULL));
    printf("\n");
  }
  printf("\n");
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: bench_analysis MEMTAP GENTRACE TESTDATA_DIR [NEVENTS] [WORK_DIR]\n");
    return 64;
  }
  char *memtap = argv[1], *gentrace = argv[2];
  const char *data = argv[3];
  const char *nevents = argc > 4 ? argv[4] : "100000000";
  const char *work = argc > 5 ? argv[5] : "/tmp";
  char demo[4096], ocamlopt[4096], big[4096], html[4096];
  snprintf(demo, sizeof demo, "%s/memtrace/demo_v3.ctf", data);
  snprintf(ocamlopt, sizeof ocamlopt, "%s/memtrace/ocamlopt_v1.ctf", data);
  snprintf(big, sizeof big, "%s/memtap-bench-%d.ctf", work, (int)getpid());
  snprintf(html, sizeof html, "%s/memtap-bench-%d.html", work, (int)getpid());

  real_traces(memtap, data);
  printf("generating %s events (demo_v3 replayed) ...\n", nevents);
  double g = run((char *[]){gentrace, "replay", demo, big, (char *)nevents, NULL}, NULL);
  FILE *f = fopen(big, "rb");
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  printf("  %s: %.0f MB, written in %.1f s\n\n", big, (double)size / 1e6, g);

  printf("%s events:\n", nevents);
  reader_throughput(big, 3);
  char *commands[][6] = {{memtap, "check", big, NULL},
                         {memtap, "summary", big, NULL},
                         {memtap, "top", big, NULL},
                         {memtap, "flame", big, NULL},
                         {memtap, "report", big, "-o", html, NULL}};
  double events = strtod(nevents, NULL);
  for (int i = 0; i < 5; i++) {
    long rss;
    double s = run(commands[i], &rss);
    printf("  memtap %-8s %10.2f s  %7.1f M events/s  peak RSS %6.1f MB\n", commands[i][1], s,
           events / s / 1e6, (double)rss / 1024);
  }
  /* A window on the last tenth: from the trace's start, then with the checkpoint index (its first
   * use builds it, the second resumes from it). */
  char from[64], idx[4200];
  {
    mt_reader *r;
    mt_error err;
    if (mt_reader_open(&r, big, NULL, &err)) {
      fprintf(stderr, "bench_analysis: %s\n", err.message);
      return 1;
    }
    int64_t start = mt_reader_info(r)->start_time, last = start;
    mt_event ev;
    while (mt_reader_next(r, &ev, &err) > 0)
      last = ev.time;
    mt_reader_close(r);
    snprintf(from, sizeof from, "%.6f", (double)(last - start) * 0.9 / 1e6);
  }
  snprintf(idx, sizeof idx, "%s.idx", big);
  unlink(idx);
  char *windows[][7] = {{memtap, "summary", "--from", from, "--no-index", big, NULL},
                        {memtap, "summary", "--from", from, "--index", big, NULL},
                        {memtap, "summary", "--from", from, "--index", big, NULL}};
  const char *what[] = {"no index", "index built", "index used"};
  for (int i = 0; i < 3; i++) {
    long rss;
    double s = run(windows[i], &rss);
    printf("  memtap summary --from %s s (last 10%%), %-11s %6.2f s  peak RSS %6.1f MB\n", from,
           what[i], s, (double)rss / 1024);
  }
  f = fopen(idx, "rb");
  if (f) {
    fseek(f, 0, SEEK_END);
    printf("  index size: %.1f MB\n", (double)ftell(f) / 1e6);
    fclose(f);
  }
  unlink(idx);
  /* The same analysis reading from a pipe (no mapping at all), for comparison of peak RSS. */
  char pipeline[8192];
  snprintf(pipeline, sizeof pipeline, "cat '%s' | exec '%s' summary -", big, memtap);
  long rss;
  double s = run((char *[]){"/bin/sh", "-c", pipeline, NULL}, &rss);
  printf("  memtap summary - (through a pipe) %6.2f s  peak RSS %6.1f MB\n", s, (double)rss / 1024);
  f = fopen(html, "rb");
  if (f) {
    fseek(f, 0, SEEK_END);
    printf("  report size: %.1f KB\n", (double)ftell(f) / 1024);
    fclose(f);
  }
  unlink(big);
  unlink(html);

  printf("\nocamlopt_v1.ctf (175 035 events); memtrace: hotspots ~0.5 s, flamegraph ~1.9 s:\n");
  char *small[][4] = {{memtap, "top", ocamlopt, NULL}, {memtap, "flame", ocamlopt, NULL}};
  for (int i = 0; i < 2; i++) {
    double best = 1e9;
    long peak = 0;
    for (int k = 0; k < 5; k++) {
      double t = run(small[i], &peak);
      if (t < best)
        best = t;
    }
    printf("  memtap %-8s %10.3f s (best of 5)  peak RSS %6.1f MB\n", small[i][1], best,
           (double)peak / 1024);
  }
  return 0;
}
