/* mt_transcode (what `memtap copy` runs): every event of a real trace comes out of the copy with
 * the same kind, time, size, samples, source, backtrace and locations, whether the reader it copies
 * from hands out flat backtraces or runs; a runs reader is left handing out runs. A promote or
 * collect of an object whose packet the reader skipped is left out when the copy cannot name it. */
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

/* Domain 0's events packets A (ids 0-9), B (10-14) and C (15-24), every allocation with the same
 * backtrace (so that B leaves nothing in the decoder that C needs), B made another process's
 * packet: the reader skips it with a warning. Promotes and collects follow of objects of A, B and
 * C. */
static uint8_t *trace_with_a_foreign_packet(int version, size_t *size) {
  int fd;
  mt_writer *w = tg_writer(version, 1.0, &fd);
  uint64_t stack[] = {1, 2, 3};
  int64_t t = TG_START, id;
  mt_error err;
  for (int64_t i = 0; i < 25; i++) {
    if ((i == 10 || i == 15) && mt_writer_flush(w, &err))
      fail_msg("flush: %s", err.message);
    if (mt_writer_put_alloc(w, t += 10, 4, 1, MT_SOURCE_MINOR, stack, 3, tg_resolve, NULL, &id,
                            &err))
      fail_msg("alloc: %s", err.message);
    assert_int_equal(id, i);
    /* B's last object, when the copy's next id (11) is below it: a promote the writer refuses. */
    if (i == 15 && mt_writer_put_promote(w, t, 14, &err))
      fail_msg("promote: %s", err.message);
  }
  static const struct {
    bool promote;
    int64_t id;
  } after[] = {
      {false, 2},  /* A's: the same id in the copy */
      {false, 11}, /* B's: 11 is the copy's id of C's 16, live: left out */
      {true, 12},  /* B's: 12 is C's 17, live: left out */
      {false, 17}, /* C's: 12 in the copy */
      {false, 12}, /* B's again: 12 names no live object of the copy now, as none of the trace */
      {false, 16}, /* C's: 11 in the copy */
  };
  for (size_t i = 0; i < sizeof after / sizeof *after; i++)
    if ((after[i].promote ? mt_writer_put_promote(w, t += 10, after[i].id, &err)
                          : mt_writer_put_collect(w, t += 10, after[i].id, &err)) != MT_OK)
      fail_msg("event %zu: %s", i, err.message);
  uint8_t *data = tg_finish(w, fd, size);
  static tg_packets p;
  tg_walk_packets(data, *size, &p);
  size_t b = 0;
  while (b < p.count && p.h[b].alloc_id_begin != 10)
    b++;
  assert_true(b < p.count);
  assert_int_equal(p.h[b].alloc_id_end, 15);
  p.h[b].pid = TG_PID + 1;
  mt_packet_header_encode(&p.h[b], data + p.offset[b]);
  return data;
}

static void count_left_out(void *user, int64_t offset, const char *message) {
  (void)offset;
  assert_non_null(strstr(message, "left out"));
  ++*(int *)user;
}

/* FORMAT.md §2.11: a reader skips a packet of another process with a warning, and memtrace's
 * hands out the events after it as they are, a promote or collect of an object allocated in it
 * too: the trace is well-formed (memtap check: ok). copy refused such a promote ("no allocation
 * read before it made") and could collect another object than the trace's; now it copies the
 * trace, leaving out each promote or collect whose object it cannot name, and the copy reads
 * back with every other event naming the objects the trace's did. */
static void a_promote_or_collect_of_a_skipped_packets_object_is_left_out_of_the_copy(void **state) {
  (void)state;
  for (int version = 2; version <= 3; version++) {
    size_t size, copy_size, n;
    uint8_t *data = trace_with_a_foreign_packet(version, &size);
    mt_error err;
    uint64_t warnings;
    assert_int_equal(tg_read_status(data, size, true, &err, &n, &warnings, NULL), 0);
    assert_int_equal(warnings, 1);
    assert_int_equal(n, 20 + 1 + 6); /* A and C, and every promote and collect */

    mt_reader *r = tg_open_memory(data, size, false);
    mt_reader_set_check_codes(r, true); /* as check does */
    int fd, left_out = 0;
    mt_writer *w = memfd_writer(r, &fd);
    mt_transcode_options topts = {.on_left_out = count_left_out, .left_out_user = &left_out};
    if (mt_transcode_with(r, w, &topts, &err) != MT_OK)
      fail_msg("v%d: transcode: %s", version, err.message);
    mt_reader_close(r);
    uint8_t *copy = tg_finish(w, fd, &copy_size);
    assert_int_equal(left_out, 3);

    mt_reader *back;
    tg_event *ev = tg_read_all(copy, copy_size, true, &n, &back);
    assert_int_equal(mt_reader_warning_count(back), 0);
    assert_int_equal(n, 20 + 4); /* the allocations first, their ids the copy's from 0 */
    static const int64_t collected[] = {2, 12, 12, 11};
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      if (ev[i].ev.kind == MT_EVENT_ALLOC) {
        assert_int_equal(ev[i].ev.obj_id, (int64_t)i);
        continue;
      }
      assert_int_equal(ev[i].ev.kind, MT_EVENT_COLLECT);
      assert_true(k < 4);
      assert_int_equal(ev[i].ev.obj_id, collected[k++]);
    }
    assert_int_equal(k, 4);
    tg_free_events(ev, n);
    mt_reader_close(back);
    free(copy);
    free(data);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_flat_reader_copies_every_event),
      cmocka_unit_test(a_rounded_copy_keeps_every_event_at_whole_steps),
      cmocka_unit_test(a_runs_reader_copies_every_event_and_keeps_handing_out_runs),
      cmocka_unit_test(a_promote_or_collect_of_a_skipped_packets_object_is_left_out_of_the_copy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
