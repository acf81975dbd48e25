/* Backtraces as runs (format.h: mt_reader_options.runs_only, mt_event.backtrace_runs and
 * common_runs, mt_reader_set_runs_only): on every real trace and on written ones (deep recursion,
 * a backtrace cut at the 4 KiB encoding limit), the runs are the flat backtrace exactly, maximal,
 * and their first common_runs equal the previous allocation's; switching modes mid-trace and
 * restoring a saved state in either mode change nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tracegen.h"

/* The previous allocation's runs, per domain (the tests' traces use few domains). */
typedef struct previous {
  uint16_t domain[8];
  mt_backtrace_run *runs[8];
  size_t count[8], ndomains;
} previous;

static void previous_free(previous *p) {
  for (size_t i = 0; i < p->ndomains; i++)
    free(p->runs[i]);
}

static size_t domain_slot(previous *prev, uint16_t domain) {
  size_t d = 0;
  while (d < prev->ndomains && prev->domain[d] != domain)
    d++;
  if (d == prev->ndomains) {
    assert_true(d < 8);
    prev->domain[prev->ndomains++] = domain;
  }
  return d;
}

/* Remembers the runs of a flat allocation's backtrace as the domain's previous ones. */
static void remember_flat(previous *prev, const mt_event *ev) {
  if (ev->kind != MT_EVENT_ALLOC)
    return;
  size_t d = domain_slot(prev, ev->domain), m = 0;
  free(prev->runs[d]);
  prev->runs[d] = malloc((ev->backtrace_length + 1) * sizeof(mt_backtrace_run));
  for (size_t i = 0; i < ev->backtrace_length; i++) {
    if (m && prev->runs[d][m - 1].code == ev->backtrace[i]) {
      prev->runs[d][m - 1].count++;
      continue;
    }
    prev->runs[d][m++] = (mt_backtrace_run){ev->backtrace[i], (uint32_t)i, 1};
  }
  prev->count[d] = m;
}

/* Checks that `run_ev` (runs only) holds the backtrace of `flat_ev` (flat), in maximal runs whose
 * first common_runs equal those of the domain's previous allocation, then remembers its runs. */
static void check_runs(const mt_event *flat_ev, const mt_event *run_ev, previous *prev) {
  assert_int_equal(run_ev->kind, flat_ev->kind);
  assert_int_equal(run_ev->time, flat_ev->time);
  assert_int_equal(run_ev->obj_id, flat_ev->obj_id);
  assert_int_equal(run_ev->offset, flat_ev->offset);
  assert_int_equal(run_ev->common_prefix, flat_ev->common_prefix);
  assert_null(flat_ev->backtrace_runs);
  assert_int_equal(flat_ev->backtrace_run_count, 0);
  if (run_ev->kind != MT_EVENT_ALLOC) {
    assert_null(run_ev->backtrace_runs);
    assert_int_equal(run_ev->backtrace_run_count, 0);
    return;
  }
  assert_null(run_ev->backtrace);
  assert_int_equal(run_ev->backtrace_length, flat_ev->backtrace_length);
  size_t at = 0;
  for (size_t i = 0; i < run_ev->backtrace_run_count; i++) {
    const mt_backtrace_run *run = &run_ev->backtrace_runs[i];
    assert_int_equal(run->start, at);
    assert_true(run->count >= 1);
    if (i > 0)
      assert_true(run->code != run_ev->backtrace_runs[i - 1].code); /* maximal */
    for (uint32_t j = 0; j < run->count; j++)
      assert_int_equal(flat_ev->backtrace[at + j], run->code);
    at += run->count;
  }
  assert_int_equal(at, flat_ev->backtrace_length);
  size_t d = domain_slot(prev, run_ev->domain);
  assert_true(run_ev->common_runs <= run_ev->backtrace_run_count);
  assert_true(run_ev->common_runs <= prev->count[d]);
  if (run_ev->common_runs)
    assert_memory_equal(run_ev->backtrace_runs, prev->runs[d],
                        run_ev->common_runs * sizeof(mt_backtrace_run));
  free(prev->runs[d]);
  prev->count[d] = run_ev->backtrace_run_count;
  prev->runs[d] = malloc((prev->count[d] + 1) * sizeof(mt_backtrace_run));
  memcpy(prev->runs[d], run_ev->backtrace_runs, prev->count[d] * sizeof(mt_backtrace_run));
}

/* Reads `data` flat and as runs side by side (switching the second reader's mode every
 * `switch_every` events when non-zero); returns the number of runs the runs reader handed out, and
 * in *max_common the largest common_runs seen. */
static size_t compare_readers(const uint8_t *data, size_t size, size_t switch_every,
                              size_t *max_common) {
  mt_reader *flat = tg_open_memory(data, size, false), *runs = tg_open_memory(data, size, true);
  previous prev = {0};
  mt_event fe, re;
  mt_error err;
  int rf, rr;
  size_t n = 0, total_runs = 0;
  *max_common = 0;
  while ((rf = mt_reader_next(flat, &fe, &err)) > 0) {
    rr = mt_reader_next(runs, &re, &err);
    assert_int_equal(rr, 1);
    if (mt_reader_runs_only(runs)) {
      check_runs(&fe, &re, &prev);
      total_runs += re.backtrace_run_count;
      if (re.common_runs > *max_common)
        *max_common = re.common_runs;
    } else {
      /* Flat again after a switch: the very backtrace of the flat reader. */
      assert_int_equal(re.backtrace_length, fe.backtrace_length);
      if (fe.backtrace_length)
        assert_memory_equal(re.backtrace, fe.backtrace, fe.backtrace_length * sizeof(int64_t));
      assert_null(re.backtrace_runs);
      remember_flat(&prev, &fe); /* what the next runs are compared with after a switch */
    }
    if (switch_every && ++n % switch_every == 0)
      assert_int_equal(mt_reader_set_runs_only(runs, !mt_reader_runs_only(runs), NULL), MT_OK);
  }
  assert_int_equal(rf, 0);
  assert_int_equal(mt_reader_next(runs, &re, &err), 0);
  previous_free(&prev);
  mt_reader_close(flat);
  mt_reader_close(runs);
  return total_runs;
}

static const char *const real_traces[] = {
    "memtrace/tiny_v3.ctf",     "memtrace/demo_v3.ctf",           "memtrace/demo_v2.ctf",
    "memtrace/ocamlopt_v3.ctf", "memtrace/lists_and_sets_v1.ctf", "memtrace/ocamlopt_v1.ctf"};

static void runs_are_the_flat_backtraces_of_every_real_trace(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof real_traces / sizeof *real_traces; i++) {
    size_t size, max_common;
    uint8_t *data = tu_read_file(tu_testdata(real_traces[i]), &size);
    size_t runs = compare_readers(data, size, 0, &max_common);
    assert_true(runs > 0);
    if (strstr(real_traces[i], "demo"))
      assert_true(max_common > 1); /* consecutive deep backtraces share runs */
    free(data);
  }
}

static void switching_modes_mid_trace_keeps_every_backtrace(void **state) {
  (void)state;
  const size_t every[] = {1, 7, 1000};
  for (size_t k = 0; k < 3; k++)
    for (size_t i = 0; i < sizeof real_traces / sizeof *real_traces; i++) {
      size_t size, max_common;
      uint8_t *data = tu_read_file(tu_testdata(real_traces[i]), &size);
      compare_readers(data, size, every[k], &max_common);
      free(data);
    }
}

/* A trace of `n` allocations of the given stacks (innermost first), taken in turn. */
static uint8_t *write_stacks(uint64_t **stacks, const size_t *depth, size_t nstacks, size_t n,
                             size_t *size) {
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(mt_writer_put_alloc(w, TG_START + (int64_t)i, 1, 1, MT_SOURCE_MINOR,
                                         stacks[i % nstacks], depth[i % nstacks], tg_resolve, NULL,
                                         NULL, NULL),
                     MT_OK);
  return tg_finish(w, fd, size);
}

static void direct_recursion_is_one_run(void **state) {
  (void)state;
  /* main -> f^1000 -> g, and main -> f^600 -> h: innermost first. */
  enum { DEEP = 1000, SHALLOW = 600 };
  uint64_t *a = malloc((DEEP + 2) * sizeof *a), *b = malloc((SHALLOW + 2) * sizeof *b);
  a[0] = 30;
  for (size_t i = 1; i <= DEEP; i++)
    a[i] = 20;
  a[DEEP + 1] = 10;
  b[0] = 40;
  for (size_t i = 1; i <= SHALLOW; i++)
    b[i] = 20;
  b[SHALLOW + 1] = 10;
  uint64_t *stacks[] = {a, b};
  size_t depth[] = {DEEP + 2, SHALLOW + 2}, size;
  uint8_t *data = write_stacks(stacks, depth, 2, 40, &size);
  mt_reader *r = tg_open_memory(data, size, true);
  mt_event ev;
  mt_error err;
  size_t n = 0;
  while (mt_reader_next(r, &ev, &err) > 0) {
    const mt_backtrace_run *runs = ev.backtrace_runs;
    size_t f = n % 2 ? SHALLOW : DEEP;
    assert_int_equal(ev.backtrace_run_count, 3);
    assert_int_equal(ev.backtrace_length, f + 2);
    assert_int_equal(runs[0].code, 10);
    assert_int_equal(runs[0].count, 1);
    assert_int_equal(runs[1].code, 20);
    assert_int_equal(runs[1].start, 1);
    assert_int_equal(runs[1].count, f);
    assert_int_equal(runs[2].code, n % 2 ? 40 : 30);
    assert_int_equal(runs[2].start, f + 1);
    /* After the first, each shares main and possibly the recursion (both when the depths agree,
     * which they never do here): exactly the outermost run. */
    if (n > 0)
      assert_int_equal(ev.common_runs, 1);
    n++;
  }
  assert_int_equal(n, 40);
  mt_reader_close(r);
  size_t max_common;
  compare_readers(data, size, 0, &max_common);
  compare_readers(data, size, 3, &max_common);
  free(data);
  free(a);
  free(b);
}

static void a_backtrace_cut_by_the_encoding_limit_reads_the_same_as_runs(void **state) {
  (void)state;
  /* 3 000 distinct codes are 3 000 cache misses of 10 bytes: the writer cuts the encoding at
   * 4 KiB, the reader keeps the first ~400 frames; the same stack again has a common prefix past
   * them (FORMAT.md §2.7 step 3). Then a shallow one, and the deep one again. */
  enum { DEEP = 3000 };
  uint64_t *deep = malloc(DEEP * sizeof *deep), shallow[] = {7, 3, 1};
  for (size_t i = 0; i < DEEP; i++)
    deep[i] = 1000 + DEEP - i;
  uint64_t *stacks[] = {deep, deep, shallow, deep};
  size_t depth[] = {DEEP, DEEP, 3, DEEP}, size, max_common;
  uint8_t *data = write_stacks(stacks, depth, 4, 16, &size);
  compare_readers(data, size, 0, &max_common);
  compare_readers(data, size, 2, &max_common);
  compare_readers(data, size, 5, &max_common);
  free(data);
  free(deep);
}

static void dropping_frames_of_chains_of_distinct_frames_keeps_the_runs_before_them(void **state) {
  (void)state;
  /* Innermost first: 1 to 4 frames of their own (in runs of two), a chain of 0 to 60 distinct
   * frames shared by all (its outer part), f^50 (f^30 every fifth) and main. From one stack to the
   * next, the reader drops 1 to 64 frames: a few, in fewer runs (the kept run is then looked for
   * forward past some), many (backward), or the middle of the recursion run. */
  enum { STACKS = 45, MAX_DEPTH = 4 + 60 + 50 + 1 };
  uint64_t *stacks[STACKS];
  size_t depth[STACKS], size, max_common;
  for (size_t i = 0; i < STACKS; i++) {
    uint64_t *s = stacks[i] = malloc(MAX_DEPTH * sizeof *s);
    size_t n = 0, tip = 1 + i % 4, chain = i * 13 % 61, recursion = i % 5 == 4 ? 30 : 50;
    for (size_t t = 0; t < tip; t++)
      s[n++] = 5000 + i * 8 + t / 2;
    for (size_t c = chain; c > 0; c--)
      s[n++] = 100 + c;
    for (size_t f = 0; f < recursion; f++)
      s[n++] = 20;
    s[n++] = 10;
    depth[i] = n;
  }
  uint8_t *data = write_stacks(stacks, depth, STACKS, 3 * STACKS, &size);
  assert_true(compare_readers(data, size, 0, &max_common) > 0);
  assert_true(max_common >= 2); /* main and f's run at least */
  compare_readers(data, size, 4, &max_common);
  free(data);
  for (size_t i = 0; i < STACKS; i++)
    free(stacks[i]);
}

/* Saves the state of a reader (in `save_runs` mode) at every packet boundary and restores it into a
 * fresh reader in `load_runs` mode, which must then read the rest as a reference reader does. */
static void restore_in_mode(const uint8_t *data, size_t size, bool save_runs, bool load_runs) {
  mt_reader *saver = tg_open_memory(data, size, save_runs);
  mt_event ev, ref_ev, got;
  mt_error err;
  size_t checked = 0, index = 0;
  void *locations[256];
  size_t locations_size[256], nlocations = 0, mark = 0;
  while (mt_reader_next(saver, &ev, &err) > 0) {
    index++;
    if (!mt_reader_between_packets(saver) || index % 3)
      continue;
    void *state;
    size_t state_size;
    int rc = mt_reader_save_state(saver, &state, &state_size, &err);
    if (rc == MT_E_INVALID) /* the last packet: nothing follows */
      continue;
    assert_int_equal(rc, MT_OK);
    assert_true(nlocations < 256);
    assert_int_equal(mt_reader_save_locations(saver, &mark, &locations[nlocations],
                                              &locations_size[nlocations], &err),
                     MT_OK);
    nlocations++;
    mt_reader *restored = tg_open_memory(data, size, load_runs);
    for (size_t j = 0; j < nlocations; j++)
      assert_int_equal(mt_reader_load_locations(restored, locations[j], locations_size[j], &err),
                       MT_OK);
    assert_int_equal(mt_reader_load_state(restored, state, state_size, &err), MT_OK);
    free(state);
    /* The reference: a flat reader that read everything up to here. */
    mt_reader *ref = tg_open_memory(data, size, false);
    previous prev = {0}; /* the restored state's previous backtraces */
    for (size_t i = 0; i < index; i++) {
      assert_int_equal(mt_reader_next(ref, &ref_ev, &err), 1);
      remember_flat(&prev, &ref_ev);
    }
    while (mt_reader_next(ref, &ref_ev, &err) > 0) {
      assert_int_equal(mt_reader_next(restored, &got, &err), 1);
      if (load_runs) {
        check_runs(&ref_ev, &got, &prev);
      } else {
        assert_int_equal(got.backtrace_length, ref_ev.backtrace_length);
        if (got.backtrace_length)
          assert_memory_equal(got.backtrace, ref_ev.backtrace,
                              got.backtrace_length * sizeof(int64_t));
      }
      checked++;
    }
    previous_free(&prev);
    mt_reader_close(ref);
    mt_reader_close(restored);
  }
  assert_true(checked > 0);
  for (size_t j = 0; j < nlocations; j++)
    free(locations[j]);
  mt_reader_close(saver);
}

static void states_saved_and_restored_in_either_mode_read_the_same(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata("memtrace/demo_v3.ctf"), &size);
  for (int save = 0; save < 2; save++)
    for (int load = 0; load < 2; load++)
      restore_in_mode(data, size, save, load);
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(runs_are_the_flat_backtraces_of_every_real_trace),
      cmocka_unit_test(switching_modes_mid_trace_keeps_every_backtrace),
      cmocka_unit_test(direct_recursion_is_one_run),
      cmocka_unit_test(a_backtrace_cut_by_the_encoding_limit_reads_the_same_as_runs),
      cmocka_unit_test(dropping_frames_of_chains_of_distinct_frames_keeps_the_runs_before_them),
      cmocka_unit_test(states_saved_and_restored_in_either_mode_read_the_same),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
