/* The analysis pass reads backtraces as runs (pass.c switches its reader to runs_only): it gives
 * the reader back in the mode it had, so a caller reading on after a window sees flat backtraces
 * again; and what it finds does not depend on the mode the reader was opened in. */
#include <stdlib.h>
#include <string.h>

#include "memtap/analysis.h"
#include "testutil.h"
#include "tracegen.h"

static void the_reader_comes_back_flat_after_a_window(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata("memtrace/demo_v3.ctf"), &size);
  mt_reader *r = tg_open_memory(data, size, false);
  mt_analysis_options o = mt_analysis_default_options();
  o.to = 50000; /* µs: about half of the trace */
  mt_analysis *a;
  mt_error err;
  assert_int_equal(mt_analysis_run(&a, r, &o, &err), MT_OK);
  assert_false(mt_reader_runs_only(r));
  mt_event ev;
  size_t allocations = 0;
  while (mt_reader_next(r, &ev, &err) > 0)
    if (ev.kind == MT_EVENT_ALLOC) {
      allocations++;
      assert_non_null(ev.backtrace);
      assert_null(ev.backtrace_runs);
      assert_true(ev.backtrace_length > 0);
    }
  assert_true(allocations > 0);
  mt_analysis_free(a);
  mt_reader_close(r);
  free(data);
}

static void results_do_not_depend_on_the_readers_mode(void **state) {
  (void)state;
  static const char *const traces[] = {"memtrace/demo_v3.ctf", "memtrace/ocamlopt_v1.ctf",
                                       "memtrace/lists_and_sets_v1.ctf"};
  for (size_t i = 0; i < 3; i++) {
    size_t size;
    uint8_t *data = tu_read_file(tu_testdata(traces[i]), &size);
    mt_analysis *a[2];
    for (int runs = 0; runs < 2; runs++) {
      mt_reader *r = tg_open_memory(data, size, runs);
      mt_error err;
      assert_int_equal(mt_analysis_run(&a[runs], r, NULL, &err), MT_OK);
      assert_int_equal(mt_reader_runs_only(r), runs);
      mt_reader_close(r);
    }
    const mt_summary *s0 = mt_analysis_summary(a[0]), *s1 = mt_analysis_summary(a[1]);
    assert_int_equal(s0->distinct_backtraces, s1->distinct_backtraces);
    assert_int_equal(s0->peak_time, s1->peak_time);
    assert_int_equal(s0->allocated.samples, s1->allocated.samples);
    assert_int_equal(mt_analysis_stack_count(a[0]), mt_analysis_stack_count(a[1]));
    for (size_t k = 0; k < mt_analysis_stack_count(a[0]); k++) {
      size_t d0, d1;
      const uint32_t *f0 = mt_analysis_stack_frames(a[0], k, &d0, NULL);
      uint32_t *copy = malloc((d0 + 1) * sizeof *copy);
      memcpy(copy, f0, d0 * sizeof *copy);
      const uint32_t *f1 = mt_analysis_stack_frames(a[1], k, &d1, NULL);
      assert_int_equal(d0, d1);
      for (size_t j = 0; j < d0; j++) {
        mt_frame x = mt_analysis_frame(a[0], copy[j]), y = mt_analysis_frame(a[1], f1[j]);
        assert_string_equal(x.function, y.function);
        assert_int_equal(x.line, y.line);
      }
      free(copy);
      assert_int_equal(mt_analysis_stack_stats(a[0], k)->allocated.samples,
                       mt_analysis_stack_stats(a[1], k)->allocated.samples);
    }
    mt_analysis_free(a[0]);
    mt_analysis_free(a[1]);
    free(data);
  }
}

/* Mutual recursion A -> B -> A ... spelled by prediction runs costs the format 3 bytes per 256
 * frames: a crafted trace of 200 KB made the analyses take gigabytes and minutes (10,000
 * backtraces sharing a prefix of millions of frames, each walked whole). Shown backtraces stop at
 * MT_ANALYSIS_SHOWN_DEPTH_MAX frames, outermost kept, and the summary counts the cut ones. */
static void backtraces_deeper_than_the_limit_are_cut_and_counted(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  size_t depth = 3 * (size_t)MT_ANALYSIS_SHOWN_DEPTH_MAX; /* beyond the limit, within 4 KiB */
  uint64_t *stack = malloc((depth + 1) * sizeof *stack);
  assert_non_null(stack);
  for (size_t i = 0; i < depth; i++)
    stack[depth - 1 - i] = i % 2 ? 0x2000 : 0x1000; /* outermost last: A B A B ... */
  mt_error err;
  enum { EVENTS = 300 };
  for (int k = 0; k < EVENTS; k++) {
    stack[0] = 0x3000 + (uint64_t)k; /* a distinct innermost frame per event */
    assert_int_equal(mt_writer_put_alloc(w, TG_START + k, 2, 2, MT_SOURCE_MINOR, stack, depth,
                                         tg_resolve, NULL, NULL, &err),
                     MT_OK);
  }
  /* And one shallow allocation, which stays whole. */
  uint64_t shallow[3] = {0x4000, 0x1000, 0x2000};
  assert_int_equal(mt_writer_put_alloc(w, TG_START + EVENTS, 2, 2, MT_SOURCE_MINOR, shallow, 3,
                                       tg_resolve, NULL, NULL, &err),
                   MT_OK);
  free(stack);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  assert_true(size < 64 * 1024); /* the trace itself is small */
  mt_reader *r = tg_open_memory(data, size, true);
  mt_analysis *a;
  assert_int_equal(mt_analysis_run(&a, r, NULL, &err), MT_OK);
  const mt_summary *s = mt_analysis_summary(a);
  assert_int_equal(s->cut_backtraces, EVENTS);
  assert_int_equal(s->allocated.objects, EVENTS + 1);
  size_t deepest = 0, whole = 0;
  for (size_t k = 0; k < mt_analysis_stack_count(a); k++) {
    size_t d;
    assert_non_null(mt_analysis_stack_frames(a, k, &d, NULL));
    deepest = d > deepest ? d : deepest;
    whole += d < 10;
  }
  assert_int_equal(deepest, MT_ANALYSIS_SHOWN_DEPTH_MAX);
  assert_int_equal(whole, 1);
  /* The deep ones differ past the limit only: they are one stack, walked once. */
  assert_int_equal(mt_analysis_stack_count(a), 2);
  mt_analysis_free(a);
  mt_reader_close(r);
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_reader_comes_back_flat_after_a_window),
      cmocka_unit_test(results_do_not_depend_on_the_readers_mode),
      cmocka_unit_test(backtraces_deeper_than_the_limit_are_cut_and_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
