/* The report's cells (analysis/cells.c) on a trace of more objects than wait in the cells' log, so
 * that they are counted in several rounds at different step widths: every cell must equal what
 * counting each object once at the final width gives. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "testutil.h"
#include "tracegen.h"

#define OBJECTS 200000 /* more than the log's 131072 */
#define STACKS 4

/* Object k: allocated at 10k µs with 1 + k % 50 words at the stack of code 102 + 3 (k % 4);
 * k % 4 == 0 freed 52 steps later, k % 4 == 2 freed 2000 steps later (if the trace lasts that
 * long), odd ones never. */
static int64_t alloc_time(int64_t k) {
  return 10 * k;
}

static int64_t free_time(int64_t k) {
  int64_t step = k % 4 == 0 ? k + 52 : k % 4 == 2 ? k + 2000 : OBJECTS;
  return step < OBJECTS ? 10 * step + 5 : -1; /* freed by the object allocated at that step */
}

/* A trace at `rate` of n objects: object k allocated at 10k µs with words(k) words and as many
 * samples at the stack of code 102 + 3 (k % stacks), then the object freed_by(k) names (if any)
 * freed at 10k + 5 µs. */
static uint8_t *write_trace(double rate, int64_t n, int64_t stacks, int64_t (*words)(int64_t),
                            int64_t (*freed_by)(int64_t), size_t *size) {
  int fd;
  mt_writer *w = tg_writer(3, rate, &fd);
  mt_error err;
  int64_t *ids = malloc((size_t)n * sizeof *ids);
  for (int64_t k = 0; k < n; k++) {
    uint64_t stack[] = {102 + 3 * (uint64_t)(k % stacks), 200, 300};
    if (mt_writer_put_alloc(w, TG_START + 10 * k, words(k), words(k), MT_SOURCE_EXTERNAL, stack, 3,
                            tg_resolve, NULL, &ids[k], &err))
      fail_msg("alloc: %s", err.message);
    int64_t j = freed_by(k);
    if (j >= 0 && mt_writer_put_collect(w, TG_START + 10 * k + 5, ids[j], &err))
      fail_msg("collect: %s", err.message);
  }
  free(ids);
  return tg_finish(w, fd, size);
}

static int64_t objects_words(int64_t k) {
  return 1 + k % 50;
}

static int64_t objects_freed_by(int64_t k) { /* free_time's frees */
  return k % 4 == 0 ? k - 52 : k % 4 == 2 ? k - 2000 : -1;
}

static uint8_t *objects_trace(size_t *size) {
  return write_trace(1.0, OBJECTS, STACKS, objects_words, objects_freed_by, size);
}

typedef struct expected {
  uint64_t key; /* site code, steps and classes packed */
  uint64_t objects, samples;
} expected;

static uint64_t pack(unsigned code, unsigned ab, unsigned fb, unsigned sc, unsigned lc) {
  return (uint64_t)code << 32 | ab << 24 | fb << 16 | sc << 8 | lc;
}

static int by_key(const void *p, const void *q) {
  const expected *x = p, *y = q;
  return (x->key > y->key) - (x->key < y->key);
}

/* Sorted and merged by key; returns the count. */
static size_t merge(expected *e, size_t n) {
  qsort(e, n, sizeof *e, by_key);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (m && e[m - 1].key == e[i].key) {
      e[m - 1].objects += e[i].objects;
      e[m - 1].samples += e[i].samples;
    } else {
      e[m++] = e[i];
    }
  }
  return m;
}

/* The analysis of a trace in memory with cells, over [from, to); *r is its reader, to close after
 * the analysis is freed. */
static mt_analysis *analyse_with_cells(const uint8_t *data, size_t size, int64_t from, int64_t to,
                                       mt_reader **r) {
  mt_reader_options ro = {.backtraces = true};
  mt_error err;
  assert_int_equal(mt_reader_open_memory(r, data, size, &ro, &err), MT_OK);
  mt_analysis_options o = mt_analysis_default_options();
  o.cells = true;
  o.from = from;
  o.to = to;
  mt_analysis *a;
  assert_int_equal(mt_analysis_run(&a, *r, &o, &err), MT_OK);
  return a;
}

static void cells_counted_in_rounds_equal_one_count_at_the_final_width(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = objects_trace(&size);
  mt_reader *r;
  mt_analysis *a = analyse_with_cells(data, size, MT_TIME_UNBOUNDED, MT_TIME_UNBOUNDED, &r);
  size_t n;
  int64_t width;
  const mt_cell *cells = mt_analysis_cells(a, &n, &width);
  expected *got = malloc(n * sizeof *got);
  for (size_t i = 0; i < n; i++) {
    const char *site = mt_analysis_frame(a, mt_analysis_stack_site(a, cells[i].stack)).function;
    unsigned code = (unsigned)atoi(site + strlen("fn_"));
    got[i] = (expected){pack(code, cells[i].alloc_bucket, cells[i].free_bucket, cells[i].size_class,
                             cells[i].lifetime_class),
                        cells[i].amount.objects, cells[i].amount.samples};
  }
  assert_int_equal(merge(got, n), n); /* no key twice */
  expected *want = malloc(OBJECTS * sizeof *want);
  int64_t from = mt_analysis_summary(a)->from;
  for (int64_t k = 0; k < OBJECTS; k++) {
    int64_t f = free_time(k);
    unsigned ab = (unsigned)((alloc_time(k) - from) / width);
    unsigned fb = f < 0 ? MT_CELL_NEVER : (unsigned)((f - from) / width);
    int sc = mt_size_class_of((1 + k % 50) * 8);
    int lc = f < 0 ? MT_LIFETIME_CLASSES - 1 : mt_lifetime_class_of(f - alloc_time(k));
    want[k] = (expected){pack(102 + 3 * (unsigned)(k % STACKS), ab, fb, (unsigned)sc, (unsigned)lc),
                         1, (uint64_t)(1 + k % 50)};
    assert_true(ab < MT_CELL_TIME_BUCKETS);
  }
  size_t m = merge(want, OBJECTS);
  assert_int_equal(n, m);
  for (size_t i = 0; i < m; i++) {
    assert_int_equal(got[i].key, want[i].key);
    assert_int_equal(got[i].objects, want[i].objects);
    assert_int_equal(got[i].samples, want[i].samples);
  }
  /* The narrowest steps that reach the last event. */
  assert_true((alloc_time(OBJECTS - 1) - from) / (width / 2) >= MT_CELL_TIME_BUCKETS);
  free(want);
  free(got);
  mt_analysis_free(a);
  mt_reader_close(r);
  free(data);
}

/* A sampled trace (rate 0.05, so each object stands for a fraction of a whole estimate) of
 * SAMPLED_OBJECTS objects of 1..37 words at 7 stacks, one allocated every 10 µs, every third freed
 * 500 µs later. */
#define SAMPLED_OBJECTS 3000
static int64_t sampled_words(int64_t k) {
  return 1 + k % 37;
}

static int64_t sampled_freed_by(int64_t k) {
  return k >= 50 && (k - 50) % 3 == 0 ? k - 50 : -1;
}

static uint8_t *sampled_trace(size_t *size) {
  return write_trace(0.05, SAMPLED_OBJECTS, 7, sampled_words, sampled_freed_by, size);
}

/* The report sums cells: for it to show the counts top, flame and pprof print, each stack's cells
 * must be whole numbers adding up to that stack's rounded estimates (allocated in the window; live
 * at its start for objects allocated before it), with and without a window. */
static void cells_estimates_are_whole_and_add_up_to_each_stacks(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = sampled_trace(&size);
  for (int windowed = 0; windowed < 2; windowed++) {
    mt_reader *r;
    mt_analysis *a = windowed
                         ? analyse_with_cells(data, size, 10 * SAMPLED_OBJECTS / 3,
                                              10 * SAMPLED_OBJECTS * 2 / 3, &r)
                         : analyse_with_cells(data, size, MT_TIME_UNBOUNDED, MT_TIME_UNBOUNDED, &r);
    size_t n, nstacks = mt_analysis_stack_count(a);
    int64_t width;
    const mt_cell *cells = mt_analysis_cells(a, &n, &width);
    assert_true(n > nstacks);
    double *in = calloc(nstacks, sizeof *in), *before = calloc(nstacks, sizeof *before);
    bool fractional = false;
    for (size_t i = 0; i < n; i++) {
      double v = cells[i].amount.objects_estimated;
      if (v != floor(v))
        fractional = true;
      (cells[i].alloc_bucket == MT_CELL_BEFORE ? before : in)[cells[i].stack] += v;
    }
    assert_false(fractional);
    double allocated = 0;
    for (size_t i = 0; i < nstacks; i++) {
      const mt_stats *st = mt_analysis_stack_stats(a, i);
      assert_true(in[i] == st->allocated.objects_estimated);
      assert_true(before[i] == st->live_start.objects_estimated);
      allocated += in[i];
    }
    const mt_summary *s = mt_analysis_summary(a);
    assert_true(allocated == round(s->allocated.objects_estimated));
    assert_true(s->allocated.objects_estimated != round(s->allocated.objects_estimated));
    assert_true(windowed ? s->live_start.objects > 0 : s->live_start.objects == 0);
    free(in);
    free(before);
    mt_analysis_free(a);
    mt_reader_close(r);
  }
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cells_counted_in_rounds_equal_one_count_at_the_final_width),
      cmocka_unit_test(cells_estimates_are_whole_and_add_up_to_each_stacks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
