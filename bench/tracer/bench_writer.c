/* The trace writer's own throughput on a recorded stream (tracer benchmark): loads every event of
 * a trace (e.g. one `memtap record --full` made) into memory, then times only the encoding: the
 * same events written again through mt_writer (ids remapped through an array, codes resolved from
 * the source trace's location table) to OUT, best of REPEATS passes. Prints one line ending in
 * events/s. Usage: bench_tracer_writer TRACE [OUT [REPEATS [MAX_EVENTS]]] (OUT default /dev/null, 3
 * passes, the first 20 M events). */
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/hashmap.h"
#include "memtap/format.h"

typedef struct recorded {
  mt_event ev;
  const uint64_t *stack; /* innermost first, as the writer takes it; shared with the previous
                          * event's when equal, which keeps a long trace in memory */
  bool owned;
} recorded;

static mt_reader *source;

static int resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  (void)user;
  if (!mt_reader_lookup_location(source, (int64_t)code, entries, count))
    *count = 0;
  return MT_OK;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const mt_error *err) {
  fprintf(stderr, "bench_tracer_writer: %s: %s\n", what, err ? err->message : "");
  exit(1);
}

static void *xrealloc(void *p, size_t size) {
  p = realloc(p, size);
  if (!p) {
    fprintf(stderr, "bench_tracer_writer: out of memory\n");
    exit(1);
  }
  return p;
}

/* One pass: every loaded event through a fresh writer on `fd`; returns the events written. Each
 * event's obj_id is the ordinal of its allocation (see main), so the id map is one array. */
static uint64_t write_all(int fd, const mt_trace_info *info, const recorded *events, size_t n,
                          int64_t *ids) {
  mt_error err;
  mt_writer *w;
  mt_writer_options wopts = {.version = info->version >= 3 ? 3 : 2};
  if (mt_writer_create(&w, fd, info, &wopts, &err))
    die("writer", &err);
  uint64_t written = 0;
  for (size_t i = 0; i < n; i++) {
    const mt_event *e = &events[i].ev;
    int rc;
    if (e->kind == MT_EVENT_ALLOC)
      rc = mt_writer_put_alloc(w, e->time, e->length, e->nsamples, e->source, events[i].stack,
                               e->backtrace_length, resolve, NULL, &ids[e->obj_id], &err);
    else if (e->obj_id < 0)
      continue; /* an object allocated past the loaded part */
    else if (e->kind == MT_EVENT_PROMOTE)
      rc = mt_writer_put_promote(w, e->time, ids[e->obj_id], &err);
    else
      rc = mt_writer_put_collect(w, e->time, ids[e->obj_id], &err);
    if (rc)
      die("put", &err);
    written++;
  }
  if (mt_writer_close(w, &err))
    die("close", &err);
  return written;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 5) {
    fprintf(stderr, "usage: bench_tracer_writer TRACE [OUT [REPEATS [MAX_EVENTS]]]\n");
    return 64;
  }
  const char *out_path = argc > 2 ? argv[2] : "/dev/null";
  int repeats = argc > 3 ? atoi(argv[3]) : 3;
  size_t max_events = argc > 4 ? (size_t)strtoull(argv[4], NULL, 10) : 20000000;
  if (repeats < 1)
    repeats = 1;
  mt_error err;
  mt_reader_options opts = {.backtraces = true};
  if (mt_reader_open(&source, argv[1], &opts, &err))
    die(argv[1], &err);
  size_t n = 0, cap = 1 << 16, frames = 0, allocs = 0;
  mt_hashmap ordinals = {0};
  recorded *events = xrealloc(NULL, cap * sizeof *events);
  uint64_t stack[4096];
  mt_event ev;
  int rc = 0;
  double t0 = now_s();
  while (n < max_events && (rc = mt_reader_next(source, &ev, &err)) > 0) {
    if (n == cap)
      events = xrealloc(events, (cap *= 2) * sizeof *events);
    size_t len = ev.backtrace_length < 4096 ? ev.backtrace_length : 4096;
    for (size_t i = 0; i < len; i++)
      stack[i] = (uint64_t)ev.backtrace[ev.backtrace_length - 1 - i];
    const recorded *prev = n ? &events[n - 1] : NULL;
    events[n].ev = ev;
    /* Ids become allocation ordinals here, outside the timed passes. */
    uint64_t ordinal;
    if (ev.kind == MT_EVENT_ALLOC) {
      mt_hashmap_put(&ordinals, ev.obj_id, allocs);
      events[n].ev.obj_id = (int64_t)allocs++;
    } else {
      events[n].ev.obj_id = mt_hashmap_get(&ordinals, ev.obj_id, &ordinal) ? (int64_t)ordinal : -1;
    }
    events[n].ev.backtrace = NULL;
    events[n].ev.backtrace_length = len;
    events[n].stack = NULL;
    events[n].owned = false;
    if (prev && prev->stack && prev->ev.backtrace_length == len &&
        memcmp(prev->stack, stack, len * sizeof *stack) == 0) {
      events[n].stack = prev->stack;
    } else if (len) {
      uint64_t *copy = xrealloc(NULL, len * sizeof *copy);
      memcpy(copy, stack, len * sizeof *copy);
      events[n].stack = copy;
      events[n].owned = true;
    }
    frames += len;
    n++;
  }
  if (rc < 0)
    die(argv[1], &err);
  double read_s = now_s() - t0;
  mt_hashmap_free(&ordinals);
  int64_t *ids = xrealloc(NULL, (allocs + 1) * sizeof *ids);
  const mt_trace_info *info = mt_reader_info(source);

  double best = 1e30;
  uint64_t written = 0;
  for (int k = 0; k < repeats; k++) {
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      perror(out_path);
      return 1;
    }
    double s = now_s();
    written = write_all(fd, info, events, n, ids);
    double e = now_s() - s;
    close(fd);
    if (e < best)
      best = e;
  }
  printf("writer: %" PRIu64 " events (%.1f frames each), decoded in %.3f s, encoded in %.3f s "
         "(best of %d) = %.2f M events/s\n",
         written, n ? (double)frames / (double)n : 0.0, read_s, best, repeats,
         (double)written / best / 1e6);
  for (size_t i = 0; i < n; i++)
    if (events[i].owned)
      free((void *)events[i].stack);
  free(events);
  free(ids);
  mt_reader_close(source);
  return 0;
}
