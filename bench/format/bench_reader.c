/* Reader throughput benchmark (DESIGN.md §6: ≥ 100 M events/s with and without backtraces, one
 * core).
 * Builds a large realistic trace by replaying a real trace's event stream N times through the
 * writer (times shifted past the previous replay, ids remapped), then reads it back: events/s with
 * and without backtrace decoding, and ns per event by type (rdtsc around each call, minus the
 * measured cost of the timing itself). Prints figures; checks nothing.
 *
 *   bench_reader [TRACE [REPLAYS [OUT]]]   replay, then time the three modes
 *   bench_reader --read MODE TRACE [N]     the best of N passes (default 1) over TRACE in MODE
 *                                          (none, runs or flat); one pass is what valgrind
 *                                          --tool=callgrind counts per event. MODE floor is not
 *                                          a reader: the work no reader can skip (bench_floor.c) */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "bench_floor.h"
#include "common/hashmap.h"
#include "memtap/format.h"

typedef struct recorded {
  mt_event ev;
  uint64_t *stack; /* innermost first */
} recorded;

static mt_reader *source_reader;

static int resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  (void)user;
  if (!mt_reader_lookup_location(source_reader, (int64_t)code, entries, count))
    *count = 0;
  return MT_OK;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of this thread: passes on a loaded machine are timed by it too. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const mt_error *err) {
  fprintf(stderr, "bench_reader: %s: %s\n", what, err ? err->message : "");
  exit(1);
}

/* The default trace: demo_v3.ctf in $MEMTAP_TESTDATA, else in ../shared/testdata from the project
 * root (as the tests find it), wherever the benchmark runs from. */
static const char *default_input(void) {
  static char path[4096];
  const char *dir = getenv("MEMTAP_TESTDATA");
  if (dir && *dir)
    snprintf(path, sizeof path, "%s/memtrace/demo_v3.ctf", dir);
  else
    snprintf(path, sizeof path, "%s/../shared/testdata/memtrace/demo_v3.ctf", MEMTAP_SOURCE_DIR);
  return path;
}

/* `passes` passes over `path` in `mode` (0 without backtraces, 1 runs, 2 flat): the best one's
 * speed, and what valgrind --tool=callgrind counts per event with one pass. */
static int read_passes(const char *path, int mode, int passes) {
  double best = 1e9, best_cpu = 1e9;
  uint64_t count = 0, frames = 0;
  for (int k = 0; k < passes && mode == 3; k++) {
    double s = now_s(), c = cpu_s();
    long events;
    if (bench_floor(path, &events))
      die(path, NULL);
    double e = now_s() - s, ec = cpu_s() - c;
    count = (uint64_t)events;
    best = e < best ? e : best;
    best_cpu = ec < best_cpu ? ec : best_cpu;
  }
  for (int k = 0; k < passes && mode < 3; k++) {
    mt_reader *r;
    mt_error err;
    mt_reader_options o = {.backtraces = mode > 0, .runs_only = mode == 1};
    double s = now_s(), c = cpu_s();
    if (mt_reader_open(&r, path, &o, &err))
      die(path, &err);
    mt_event ev;
    int rc;
    count = frames = 0;
    while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
      count++;
      frames += ev.backtrace_length;
    }
    if (rc < 0)
      die(path, &err);
    mt_reader_close(r);
    double e = now_s() - s, ec = cpu_s() - c;
    if (e < best)
      best = e;
    if (ec < best_cpu)
      best_cpu = ec;
  }
  printf("%" PRIu64 " events, %" PRIu64 " frames: %.3f s = %.1f M events/s, CPU %.3f s = %.1f M "
         "events/s (best of %d)\n",
         count, frames, best, (double)count / best / 1e6, best_cpu, (double)count / best_cpu / 1e6,
         passes);
  return 0;
}

int main(int argc, char **argv) {
  if ((argc == 4 || argc == 5) && !strcmp(argv[1], "--read")) {
    int mode = !strcmp(argv[2], "runs")    ? 1
               : !strcmp(argv[2], "flat")  ? 2
               : !strcmp(argv[2], "floor") ? 3
                                           : 0;
    return read_passes(argv[3], mode, argc == 5 ? atoi(argv[4]) : 1);
  }
  const char *input = argc > 1 ? argv[1] : default_input();
  int replays = argc > 2 ? atoi(argv[2]) : 1000;
  const char *out_path = argc > 3 ? argv[3] : "/tmp/memtap-bench-reader.ctf";
  mt_error err;
  mt_reader_options opts = {.backtraces = true};
  if (mt_reader_open(&source_reader, input, &opts, &err))
    die(input, &err);
  size_t n = 0, cap = 1 << 14;
  recorded *events = malloc(cap * sizeof *events);
  mt_event ev;
  int rc;
  while ((rc = mt_reader_next(source_reader, &ev, &err)) > 0) {
    if (n == cap)
      events = realloc(events, (cap *= 2) * sizeof *events);
    events[n].ev = ev;
    events[n].stack = malloc((ev.backtrace_length + 1) * sizeof(uint64_t));
    for (size_t i = 0; i < ev.backtrace_length; i++)
      events[n].stack[i] = (uint64_t)ev.backtrace[ev.backtrace_length - 1 - i];
    n++;
  }
  if (rc < 0)
    die(input, &err);
  const mt_trace_info *info = mt_reader_info(source_reader);
  int64_t span = events[n - 1].ev.time - info->start_time + 1;

  /* Write the replayed trace. */
  int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror(out_path);
    return 1;
  }
  mt_writer *w;
  if (mt_writer_create(&w, fd, info, NULL, &err))
    die("writer", &err);
  double t0 = now_s();
  uint64_t written = 0;
  for (int k = 0; k < replays; k++) {
    mt_hashmap ids = {0};
    int64_t shift = (int64_t)k * span;
    for (size_t i = 0; i < n; i++) {
      const mt_event *e = &events[i].ev;
      int64_t t = e->time + shift, id;
      uint64_t mapped;
      if (e->kind == MT_EVENT_ALLOC) {
        if (mt_writer_put_alloc(w, t, e->length, e->nsamples, e->source, events[i].stack,
                                e->backtrace_length, resolve, NULL, &id, &err))
          die("put_alloc", &err);
        mt_hashmap_put(&ids, e->obj_id, (uint64_t)id);
      } else if (mt_hashmap_get(&ids, e->obj_id, &mapped)) {
        rc = e->kind == MT_EVENT_PROMOTE ? mt_writer_put_promote(w, t, (int64_t)mapped, &err)
                                         : mt_writer_put_collect(w, t, (int64_t)mapped, &err);
        if (rc)
          die("put", &err);
      } else {
        continue; /* an object allocated before the source trace started */
      }
      written++;
    }
    mt_hashmap_free(&ids);
  }
  if (mt_writer_close(w, &err))
    die("close", &err);
  double write_s = now_s() - t0;
  off_t size = lseek(fd, 0, SEEK_END);
  close(fd);
  printf("trace: %s replayed %d times: %" PRIu64 " events, %.1f MB, written in %.2f s "
         "(%.1f M events/s)\n",
         input, replays, written, (double)size / 1e6, write_s, (double)written / write_s / 1e6);

  /* Warm the page cache, then time whole passes: without backtraces, with them as runs (what
   * check and the analyses read), with them flat (what dump and copy read). */
  static const char *const modes[] = {"without backtraces     ", "with backtraces as runs",
                                      "with backtraces flat   "};
  for (int mode = 0; mode < 3; mode++) {
    double best = 1e9;
    uint64_t count = 0;
    for (int rep = 0; rep < 5; rep++) {
      mt_reader *r;
      mt_reader_options o = {.backtraces = mode > 0, .runs_only = mode == 1};
      double s = now_s();
      if (mt_reader_open(&r, out_path, &o, &err))
        die(out_path, &err);
      count = 0;
      uint64_t frames = 0;
      while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
        count++;
        frames += ev.backtrace_length;
      }
      if (rc < 0)
        die(out_path, &err);
      double e = now_s() - s;
      if (e < best)
        best = e;
      mt_reader_close(r);
      if (frames == 1)
        printf("(unlikely)\n");
    }
    printf("read %s: %" PRIu64 " events in %.3f s = %.1f M events/s (best of 5)\n", modes[mode],
           count, best, (double)count / best / 1e6);
  }

  /* ns per event by type: rdtsc around each call, calibrated against the clock. */
  double c0 = now_s();
  uint64_t k0 = __rdtsc();
  while (now_s() - c0 < 0.2) {
  }
  double ghz = (double)(__rdtsc() - k0) / ((now_s() - c0) * 1e9);
  uint64_t overhead = UINT64_MAX;
  for (int i = 0; i < 1000; i++) {
    uint64_t a = __rdtsc(), b = __rdtsc();
    if (b - a < overhead)
      overhead = b - a;
  }
  for (int mode = 0; mode < 3; mode++) {
    mt_reader *r;
    mt_reader_options o = {.backtraces = mode > 0, .runs_only = mode == 1};
    if (mt_reader_open(&r, out_path, &o, &err))
      die(out_path, &err);
    uint64_t cycles[4] = {0}, counts[4] = {0};
    for (;;) {
      uint64_t a = __rdtsc();
      rc = mt_reader_next(r, &ev, &err);
      uint64_t b = __rdtsc();
      if (rc <= 0)
        break;
      int type = ev.kind == MT_EVENT_ALLOC ? (ev.short_form ? 0 : 1) : ev.kind + 1;
      cycles[type] += b - a > overhead ? b - a - overhead : 0;
      counts[type]++;
    }
    mt_reader_close(r);
    static const char *names[] = {"alloc (short)", "alloc (long)", "promote", "collect"};
    printf("ns/event %s:", modes[mode]);
    for (int t = 0; t < 4; t++)
      printf("  %s %.1f", names[t], counts[t] ? (double)cycles[t] / counts[t] / ghz : 0.0);
    printf("\n");
  }
  if (!getenv("MEMTAP_BENCH_KEEP"))
    unlink(out_path);
  return 0;
}
