/* The known trace of analysis_known_trace.h. */
#include "analysis_known_trace.h"

#include <sys/mman.h>

#include "testutil.h"
#include "tracegen.h"

static uint8_t *build(double rate, int64_t last_words, size_t *size) {
  static const uint64_t stack_a[] = {101, 200, 300}, stack_b[] = {102, 200, 300};
  int fd;
  mt_writer *w = tg_writer(3, rate, &fd);
  mt_error err;
  int64_t id;
  struct {
    int64_t t;
    int kind; /* 0 alloc A, 1 alloc B, 2 collect */
    int64_t arg;
  } events[] = {{10, 0, 10},  {20, 1, 4}, {30, 2, 1}, {40, 0, 10},
                {50, 1, 100}, {60, 2, 0}, {70, 2, 3}, {80, 0, last_words}};
  for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
    int64_t t = TG_START + events[i].t;
    int rc;
    if (events[i].kind == 2) {
      rc = mt_writer_put_collect(w, t, events[i].arg, &err);
    } else {
      const uint64_t *stack = events[i].kind == 0 ? stack_a : stack_b;
      /* At rate 1 every word is sampled; at other rates give the allocation its expected count
       * rounded up, so that the numbers stay exact and known. */
      int64_t nsamples = rate >= 1 ? events[i].arg : (int64_t)(events[i].arg * rate + 0.999);
      rc = mt_writer_put_alloc(w, t, events[i].arg, nsamples, MT_SOURCE_EXTERNAL, stack, 3,
                               tg_resolve, NULL, &id, &err);
    }
    if (rc)
      fail_msg("writing the known trace: %s", err.message);
  }
  return tg_finish(w, fd, size);
}

uint8_t *known_trace(size_t *size) {
  return build(1.0, 2, size);
}

uint8_t *known_trace_at_rate(double rate, size_t *size) {
  return build(rate, 2, size);
}

uint8_t *known_trace_variant(int64_t last_words, size_t *size) {
  return build(1.0, last_words, size);
}

uint8_t *known_sources_trace(const char *params, size_t *size) {
  static const uint64_t stack[] = {101, 200, 300};
  int fd = memfd_create("trace", 0);
  assert_true(fd >= 0);
  mt_trace_info info = tg_info(0.5);
  info.ocaml_runtime_params = params;
  mt_writer_options options = {.version = 3};
  mt_writer *w;
  mt_error err;
  if (mt_writer_create(&w, fd, &info, &options, &err))
    fail_msg("mt_writer_create: %s", err.message);
  static const struct {
    int64_t length, nsamples;
    mt_source source;
  } allocs[] = {{1, 1, MT_SOURCE_MINOR}, {1, 1, MT_SOURCE_MINOR},    {1, 1, MT_SOURCE_MINOR},
                {2, 1, MT_SOURCE_MAJOR}, {1, 1, MT_SOURCE_EXTERNAL}, {2, 2, MT_SOURCE_EXTERNAL}};
  int64_t id[6];
  for (int i = 0; i < 6; i++)
    if (mt_writer_put_alloc(w, TG_START + 10 * (i + 1), allocs[i].length, allocs[i].nsamples,
                            allocs[i].source, stack, 3, tg_resolve, NULL, &id[i], &err))
      fail_msg("writing the sources trace: %s", err.message);
  if (mt_writer_put_promote(w, TG_START + 70, id[0], &err) ||
      mt_writer_put_promote(w, TG_START + 80, id[1], &err) ||
      mt_writer_put_collect(w, TG_START + 90, id[2], &err) ||
      mt_writer_put_collect(w, TG_START + 100, id[3], &err) ||
      mt_writer_put_collect(w, TG_START + 110, id[3], &err) ||
      mt_writer_put_promote(w, TG_START + 120, id[2], &err))
    fail_msg("writing the sources trace: %s", err.message);
  return tg_finish(w, fd, size);
}

/* The named frames of the stacks trace (analysis_known_trace.h); code 8 has no location. */
static int resolve_named(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  (void)user;
  static const mt_location frames[] = {
      {"main.ml", "main", 1, 1, 5},     {"main.ml", "run", 5, 1, 5},
      {"parser.ml", "parse", 10, 1, 5}, {"parser.ml", "parse", 20, 1, 5},
      {"parser.ml", "lex", 30, 1, 5},   {"tree.ml", "walk", 7, 1, 5},
      {"alloc.c", "xmalloc", 3, 1, 5}};
  *count = code >= 1 && code <= 7 ? 1 : 0;
  *entries = *count ? &frames[code - 1] : NULL;
  return MT_OK;
}

uint8_t *known_stacks_trace(size_t *size) {
  int fd = memfd_create("trace", 0);
  assert_true(fd >= 0);
  mt_trace_info info = tg_info(1.0);
  info.ocaml_runtime_params = "s=4M";
  mt_writer_options options = {.version = 3};
  mt_writer *w;
  mt_error err;
  if (mt_writer_create(&w, fd, &info, &options, &err))
    fail_msg("mt_writer_create: %s", err.message);
  /* Innermost first, as the writer takes them. */
  static const uint64_t s1[] = {3, 2, 1}, s2[] = {3, 6, 6, 6, 1}, s3[] = {4, 2, 1},
                        s4[] = {5, 3, 2, 1}, s5[] = {7, 5, 2, 1}, s6[] = {8, 6, 1};
  static const struct {
    uint16_t domain;
    int64_t words;
    const uint64_t *stack;
    size_t depth;
  } allocs[] = {{0, 10, s1, 3}, {0, 20, s2, 5}, {0, 5, s3, 3},
                {1, 3, s4, 4},  {0, 8, s5, 4},  {1, 1, s6, 3}};
  int64_t id[6];
  for (int i = 0; i < 6; i++)
    if (mt_writer_put_alloc_in(w, allocs[i].domain, TG_START + 10 * (i + 1), allocs[i].words,
                               allocs[i].words, MT_SOURCE_MINOR, allocs[i].stack, allocs[i].depth,
                               resolve_named, NULL, &id[i], &err))
      fail_msg("writing the stacks trace: %s", err.message);
  if (mt_writer_put_collect_in(w, 0, TG_START + 70, id[4], &err) ||
      mt_writer_put_collect_in(w, 0, TG_START + 80, id[0], &err) ||
      mt_writer_put_collect_in(w, 1, TG_START + 90, id[3], &err))
    fail_msg("writing the stacks trace: %s", err.message);
  return tg_finish(w, fd, size);
}

const char *known_trace_file(const char *name, const uint8_t *data, size_t size) {
  const char *path = tu_temp_path(name);
  tu_write_file(path, data, size);
  return path;
}
