/* mt_transcode (what `memtap copy` runs): every event of a real trace comes out of the copy with
 * the same kind, time, size, samples, source, backtrace and locations, whether the reader it copies
 * from hands out flat backtraces or runs; a runs reader is left handing out runs. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"
#include "tracegen.h"

static const char *const real_traces[] = {"memtrace/demo_v3.ctf", "memtrace/ocamlopt_v1.ctf",
                                          "memtrace/lists_and_sets_v1.ctf"};

/* A v3 writer of `r`'s trace info into a new memfd (*fd). */
static mt_writer *memfd_writer(mt_reader *r, int *fd) {
  *fd = memfd_create("copy", 0);
  assert_true(*fd >= 0);
  mt_writer_options options = {.version = 3};
  mt_writer *w;
  mt_error err;
  if (mt_writer_create(&w, *fd, mt_reader_info(r), &options, &err) != MT_OK)
    fail_msg("mt_writer_create: %s", err.message);
  return w;
}

/* The copy of `data` through a reader opened flat or runs-only, its times rounded to `step` µs. */
static uint8_t *copy_trace_rounded(const uint8_t *data, size_t size, bool runs_only, int64_t step,
                                   size_t *copy_size) {
  mt_reader *r = tg_open_memory(data, size, runs_only);
  int fd;
  mt_writer *w = memfd_writer(r, &fd);
  mt_error err;
  mt_transcode_options topts = {.time_resolution_us = step};
  if (mt_transcode_with(r, w, step ? &topts : NULL, &err) != MT_OK)
    fail_msg("transcode (runs_only %d): %s", runs_only, err.message);
  assert_int_equal(mt_reader_runs_only(r), runs_only);
  mt_reader_close(r);
  return tg_finish(w, fd, copy_size);
}

static uint8_t *copy_trace(const uint8_t *data, size_t size, bool runs_only, size_t *copy_size) {
  return copy_trace_rounded(data, size, runs_only, 0, copy_size);
}

/* b holds a's events, in a's order, with a's times rounded down to whole `step`s after the start
 * (step 1: the same times). */
static void check_same_events_rounded(const uint8_t *a, size_t a_size, const uint8_t *b,
                                      size_t b_size, int64_t step) {
  size_t na, nb;
  mt_reader *ra, *rb;
  tg_event *ea = tg_read_all(a, a_size, true, &na, &ra);
  tg_event *eb = tg_read_all(b, b_size, true, &nb, &rb);
  assert_int_equal(na, nb);
  int64_t max_id = 0;
  for (size_t i = 0; i < na; i++)
    if (ea[i].ev.obj_id > max_id)
      max_id = ea[i].ev.obj_id;
  int64_t start = mt_reader_info(ra)->start_time;
  assert_int_equal(start, mt_reader_info(rb)->start_time);
  int64_t *copy_id = malloc(((size_t)max_id + 1) * sizeof *copy_id); /* a's id -> b's */
  memset(copy_id, 0xff, ((size_t)max_id + 1) * sizeof *copy_id);
  for (size_t i = 0; i < na; i++) {
    const mt_event *x = &ea[i].ev, *y = &eb[i].ev;
    assert_int_equal(x->kind, y->kind);
    if (x->time >= start)
      assert_int_equal(y->time, start + (x->time - start) / step * step);
    else
      assert_int_equal(y->time, x->time);
    if (x->kind != MT_EVENT_ALLOC) {
      assert_int_equal(y->obj_id, copy_id[x->obj_id]); /* the same object is collected */
      continue;
    }
    copy_id[x->obj_id] = y->obj_id;
    assert_int_equal(x->length, y->length);
    assert_int_equal(x->nsamples, y->nsamples);
    assert_int_equal(x->source, y->source);
    assert_int_equal(x->backtrace_length, y->backtrace_length);
    for (size_t f = 0; f < x->backtrace_length; f++) {
      assert_int_equal(ea[i].backtrace[f], eb[i].backtrace[f]);
      const mt_location *la, *lb;
      size_t ca, cb;
      assert_true(mt_reader_lookup_location(ra, ea[i].backtrace[f], &la, &ca));
      assert_true(mt_reader_lookup_location(rb, eb[i].backtrace[f], &lb, &cb));
      assert_int_equal(ca, cb);
      for (size_t l = 0; l < ca; l++) {
        assert_string_equal(la[l].defname, lb[l].defname);
        assert_string_equal(la[l].filename, lb[l].filename);
        assert_int_equal(la[l].line, lb[l].line);
      }
    }
  }
  free(copy_id);
  tg_free_events(ea, na);
  tg_free_events(eb, nb);
  mt_reader_close(ra);
  mt_reader_close(rb);
}

static void check_same_events(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size) {
  check_same_events_rounded(a, a_size, b, b_size, 1);
}

static void copies_of_real_traces_keep_every_event(bool runs_only) {
  for (size_t i = 0; i < sizeof real_traces / sizeof *real_traces; i++) {
    size_t size, copy_size;
    uint8_t *data = tu_read_file(tu_testdata(real_traces[i]), &size);
    uint8_t *copy = copy_trace(data, size, runs_only, &copy_size);
    check_same_events(data, size, copy, copy_size);
    free(copy);
    free(data);
  }
}

static void a_flat_reader_copies_every_event(void **state) {
  (void)state;
  copies_of_real_traces_keep_every_event(false);
}

static void a_runs_reader_copies_every_event_and_keeps_handing_out_runs(void **state) {
  (void)state;
  copies_of_real_traces_keep_every_event(true);
}

/* memtap copy --time-resolution: every event, its object and its backtrace kept, each time
 * rounded down to a whole step after the start. */
static void a_rounded_copy_keeps_every_event_at_whole_steps(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof real_traces / sizeof *real_traces; i++) {
    size_t size, copy_size;
    uint8_t *data = tu_read_file(tu_testdata(real_traces[i]), &size);
    uint8_t *copy = copy_trace_rounded(data, size, false, 1000, &copy_size);
    check_same_events_rounded(data, size, copy, copy_size, 1000);
    free(copy);
    free(data);
  }
  /* A negative step is refused before anything is written. */
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata(real_traces[0]), &size);
  mt_reader *r = tg_open_memory(data, size, false);
  int fd;
  mt_writer *w = memfd_writer(r, &fd);
  mt_error err;
  mt_transcode_options topts = {.time_resolution_us = -5};
  assert_int_equal(mt_transcode_with(r, w, &topts, &err), MT_E_INVALID);
  assert_non_null(strstr(err.message, "negative"));
  mt_writer_close(w, &err);
  close(fd);
  mt_reader_close(r);
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_flat_reader_copies_every_event),
      cmocka_unit_test(a_rounded_copy_keeps_every_event_at_whole_steps),
      cmocka_unit_test(a_runs_reader_copies_every_event_and_keeps_handing_out_runs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
