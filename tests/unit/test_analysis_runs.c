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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_reader_comes_back_flat_after_a_window),
      cmocka_unit_test(results_do_not_depend_on_the_readers_mode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
