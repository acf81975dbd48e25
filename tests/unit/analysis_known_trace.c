/* The known trace of analysis_known_trace.h. */
#include "analysis_known_trace.h"

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

const char *known_trace_file(const char *name, const uint8_t *data, size_t size) {
  const char *path = tu_temp_path(name);
  tu_write_file(path, data, size);
  return path;
}
