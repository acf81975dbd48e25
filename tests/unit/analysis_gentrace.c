/* memtap-gentrace: writes large traces for the analysis memory test and benchmark.
 *
 *   memtap-gentrace synthetic OUT NEVENTS   a steady state: 20 000 live objects, 500 distinct
 *                                           backtraces 30 frames deep; after the warm-up every
 *                                           allocation frees the oldest object. Whatever NEVENTS,
 *                                           the live set and the backtraces are the same.
 *   memtap-gentrace replay IN OUT NEVENTS   IN's events replayed until NEVENTS are written (new
 *                                           ids, times shifted); what a pass leaves live is freed
 *                                           before the next pass, so the live set stays IN's. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/hashmap.h"
#include "memtap/format.h"

static int resolve_synthetic(void *user, uint64_t code, const mt_location **entries,
                             size_t *count) {
  (void)user;
  static char name[64], file[64];
  static mt_location loc;
  snprintf(name, sizeof name, "function_%llu", (unsigned long long)code);
  snprintf(file, sizeof file, "src/module_%llu.c", (unsigned long long)(code % 17));
  loc = (mt_location){.filename = file, .defname = name, .line = (int32_t)(code % 1000)};
  *entries = &loc;
  *count = 1;
  return MT_OK;
}

static int resolve_from_reader(void *user, uint64_t code, const mt_location **entries,
                               size_t *count) {
  if (!mt_reader_lookup_location(user, (int64_t)code, entries, count))
    *entries = NULL, *count = 0;
  return MT_OK;
}

static mt_writer *open_writer(const char *path, const mt_trace_info *info, int *fd) {
  *fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (*fd < 0) {
    perror(path);
    exit(1);
  }
  mt_writer *w;
  mt_error err;
  if (mt_writer_create(&w, *fd, info, NULL, &err)) {
    fprintf(stderr, "memtap-gentrace: %s\n", err.message);
    exit(1);
  }
  return w;
}

static void check(int rc, const mt_error *err) {
  if (rc) {
    fprintf(stderr, "memtap-gentrace: %s\n", err->message);
    exit(1);
  }
}

static int synthetic(const char *out, uint64_t nevents) {
  enum { LIVE = 20000, STACKS = 500, DEPTH = 30 };
  mt_trace_info info = {.start_time = 1700000000000000,
                        .sample_rate = 1e-3,
                        .word_size = 64,
                        .executable_name = "synthetic",
                        .host_name = "gentrace",
                        .ocaml_runtime_params = "",
                        .pid = 1,
                        .context = ""};
  int fd;
  mt_writer *w = open_writer(out, &info, &fd);
  static uint64_t stacks[STACKS][DEPTH];
  for (int s = 0; s < STACKS; s++)
    for (int d = 0; d < DEPTH;
         d++) /* innermost first: 3 distinct frames, 7 of one of 10 paths, 20 shared */
      stacks[s][d] = d < 3    ? (uint64_t)(50000 + s * 3 + d)
                     : d < 10 ? (uint64_t)(1000 + d + (s % 10) * 100)
                              : (uint64_t)(100 + d);
  int64_t *ring = calloc(LIVE, sizeof *ring);
  uint64_t x = 88172645463325252u, written = 0, n = 0;
  int64_t t = info.start_time;
  mt_error err;
  while (written < nevents) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    t += 1 + (int64_t)(x % 3);
    if (n >= LIVE) {
      check(mt_writer_put_collect(w, t, ring[n % LIVE], &err), &err);
      written++;
    }
    int64_t id;
    check(mt_writer_put_alloc(w, t, 1 + (int64_t)(x % 64), 1 + (int64_t)(x >> 60 & 1),
                              MT_SOURCE_MINOR, stacks[x % STACKS], DEPTH, resolve_synthetic, NULL,
                              &id, &err),
          &err);
    ring[n++ % LIVE] = id;
    written++;
  }
  check(mt_writer_close(w, &err), &err);
  close(fd);
  free(ring);
  return 0;
}

static int replay(const char *in, const char *out, uint64_t nevents) {
  mt_reader_options ro = {.backtraces = true};
  mt_error err;
  mt_reader *probe;
  check(mt_reader_open(&probe, in, &ro, &err), &err);
  mt_trace_info info = *mt_reader_info(probe);
  int fd;
  mt_writer *w = open_writer(out, &info, &fd);
  uint64_t written = 0;
  int64_t shift = 0, last = info.start_time;
  uint64_t *stack = NULL;
  size_t stack_cap = 0;
  while (written < nevents) {
    mt_reader *r;
    check(mt_reader_open(&r, in, &ro, &err), &err);
    mt_hashmap ids = {0}; /* id in IN -> id in OUT, for this pass's live objects */
    mt_event ev;
    int rc;
    while (written < nevents && (rc = mt_reader_next(r, &ev, &err)) > 0) {
      int64_t t = ev.time + shift;
      if (t < last)
        t = last;
      last = t;
      uint64_t mapped;
      if (ev.kind == MT_EVENT_ALLOC) {
        if (ev.backtrace_length > stack_cap) {
          stack_cap = ev.backtrace_length * 2;
          stack = realloc(stack, stack_cap * sizeof *stack);
        }
        for (size_t i = 0; i < ev.backtrace_length; i++) /* the writer wants innermost first */
          stack[i] = (uint64_t)ev.backtrace[ev.backtrace_length - 1 - i];
        int64_t id;
        check(mt_writer_put_alloc(w, t, ev.length, ev.nsamples, ev.source, stack,
                                  ev.backtrace_length, resolve_from_reader, r, &id, &err),
              &err);
        mt_hashmap_put(&ids, ev.obj_id, (uint64_t)id);
      } else if (mt_hashmap_get(&ids, ev.obj_id, &mapped)) {
        if (ev.kind == MT_EVENT_COLLECT) {
          check(mt_writer_put_collect(w, t, (int64_t)mapped, &err), &err);
          mt_hashmap_remove(&ids, ev.obj_id);
        } else {
          check(mt_writer_put_promote(w, t, (int64_t)mapped, &err), &err);
        }
      }
      written++;
    }
    check(rc < 0 ? rc : 0, &err);
    for (size_t i = 0; i < ids.cap; i++) /* free what this pass left live */
      if (ids.state[i] == 1) {
        check(mt_writer_put_collect(w, last, (int64_t)ids.values[i], &err), &err);
        written++;
      }
    shift = last - info.start_time + 1;
    mt_hashmap_free(&ids);
    mt_reader_close(r);
  }
  check(mt_writer_close(w, &err), &err);
  close(fd);
  mt_reader_close(probe);
  free(stack);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "synthetic"))
    return synthetic(argv[2], strtoull(argv[3], NULL, 10));
  if (argc == 5 && !strcmp(argv[1], "replay"))
    return replay(argv[2], argv[3], strtoull(argv[4], NULL, 10));
  fprintf(stderr, "usage: memtap-gentrace synthetic OUT NEVENTS\n"
                  "       memtap-gentrace replay IN OUT NEVENTS\n");
  return 64;
}
