/* The cursor's runs (mt_cursor_set_run_callback, ring/consumer.h): every record delivered once
 * and in order, whether through a run or a callback, each run one thread's intact opaque records
 * numbered from its first_seq, the poll's budget kept, and a run consumed in part resumed at the
 * first record not consumed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring_testlib.h"
#include "testutil.h"

#include "ring/consumer.h"
#include "ring/layout.h"

#define OPAQUE_TYPE 20u
#define RECORDS 300u

/* What the run callback saw; records through a run go to `col` as the callbacks' would. */
static struct {
  rt_collector *col;
  size_t runs, through_runs;
  size_t take_at_most; /* 0: the whole run */
  const char *file;    /* when set, runs_in_file counts the runs handed out inside its mappings */
  size_t runs_in_file;
} seen;

/* Whether `p` lies in a mapping of the file `path` (/proc/self/maps). */
static bool in_mapping_of(const void *p, const char *path) {
  FILE *f = fopen("/proc/self/maps", "r");
  assert_non_null(f);
  char line[4096 + 128];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    int name = 0;
    if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &name) < 2 || !name)
      continue;
    line[strcspn(line, "\n")] = 0;
    found = strcmp(line + name, path) == 0 && (uintptr_t)p >= lo && (uintptr_t)p < hi;
  }
  fclose(f);
  return found;
}

static size_t take_run(void *user, uint32_t ring, uint32_t generation, uint64_t first_seq,
                       const uint64_t *rec, size_t words, size_t limit, size_t *used) {
  assert_ptr_equal(user, seen.col);
  assert_true(limit >= 1);
  /* The first record is the run's: the cursor checked it. */
  assert_int_not_equal(mt_cursor_run_record(rec, words, (uint32_t)first_seq), 0);
  size_t take = seen.take_at_most && seen.take_at_most < limit ? seen.take_at_most : limit;
  seen.runs++;
  if (seen.file && in_mapping_of(rec, seen.file))
    seen.runs_in_file++;
  size_t k = rt_collect_run(seen.col, ring, generation, first_seq, rec, words, take, used);
  seen.through_runs += k;
  return k;
}

/* Opaque records of 3..6 words with a counter every 7th, so that runs are cut by records of the
 * transport's own types. */
static void write_mixed(mt_ring *r) {
  for (uint64_t i = 0; i < RECORDS; i++) {
    uint64_t payload[6];
    size_t words = 3 + i % 4;
    rt_fill(payload, words, 1, i);
    assert_int_equal(mt_ring_write(r, OPAQUE_TYPE, 3, payload, words), MT_OK);
    if (i % 7 == 6)
      assert_int_equal(mt_ring_write_counter(r, 9, i), MT_OK);
  }
}

/* The opaque records in `col`, in order, are exactly those write_mixed wrote, with consecutive
 * sequence numbers across runs and callbacks. */
static void check_delivered(const rt_collector *col) {
  uint64_t next = 0, counters = 0, last_seq = 0;
  for (size_t i = 0; i < col->count; i++) {
    const rt_record *rec = &col->records[i];
    if (i)
      assert_int_equal(rec->seq, last_seq + 1);
    last_seq = rec->seq;
    if (rec->type == MT_RING_TYPE_COUNTER && rec->id == 9) {
      counters++;
      continue;
    }
    if (rec->type != OPAQUE_TYPE)
      continue;
    uint64_t stream, index;
    assert_int_equal(rec->words, 3 + next % 4);
    assert_true(rt_verify(rec->payload, rec->words, &stream, &index));
    assert_int_equal(index, next);
    next++;
  }
  assert_int_equal(next, RECORDS);
  assert_int_equal(counters, RECORDS / 7);
  assert_int_equal(col->lost, 0);
}

/* A ring holding write_mixed's records and a cursor on it whose callbacks collect into `f->col`,
 * the run callback not yet set (`seen` emptied). */
typedef struct fixture {
  mt_ring *ring;
  rt_collector col;
} fixture;

static mt_cursor *open_fixture(fixture *f) {
  f->ring = rt_open(MT_RING_LOSSLESS, 0, 2, false);
  write_mixed(f->ring);
  mt_cursor *c = rt_cursor(-1);
  f->col = (rt_collector){.keep = true};
  rt_collector_attach(c, &f->col);
  memset(&seen, 0, sizeof seen);
  seen.col = &f->col;
  return c;
}

static void close_fixture(fixture *f, mt_cursor *c) {
  mt_cursor_close(c);
  rt_collector_free(&f->col);
  mt_ring_close(f->ring);
}

static void runs_and_callbacks_deliver_every_record_once_in_order(void **state) {
  (void)state;
  fixture f;
  mt_cursor *c = open_fixture(&f);
  mt_cursor_set_run_callback(c, take_run);
  rt_drain(c, false);
  check_delivered(&f.col);
  assert_true(seen.runs > 0);
  assert_true(seen.through_runs > RECORDS / 2); /* most opaque records came in runs */
  assert_true(seen.runs < seen.through_runs);   /* several records per run */
  close_fixture(&f, c);
}

static void poll_budget_counts_records_in_runs(void **state) {
  (void)state;
  fixture f;
  mt_cursor *c = open_fixture(&f);
  mt_cursor_set_run_callback(c, take_run);
  size_t got, before = 0;
  do {
    mt_error err = {0};
    assert_int_equal(mt_cursor_poll(c, 5, &got, &err), MT_OK);
    assert_true(got <= 5);
    assert_int_equal(f.col.count - before, got);
    before = f.col.count;
  } while (got);
  check_delivered(&f.col);
  close_fixture(&f, c);
}

static void run_consumed_in_part_resumes_at_the_first_record_not_consumed(void **state) {
  (void)state;
  fixture f;
  mt_cursor *c = open_fixture(&f);
  seen.take_at_most = 2;
  mt_cursor_set_run_callback(c, take_run);
  size_t got, polls = 0;
  do {
    mt_error err = {0};
    assert_int_equal(mt_cursor_poll(c, 0, &got, &err), MT_OK);
    polls++;
  } while (got);
  check_delivered(&f.col);
  assert_true(polls > 10); /* the polls did stop at the partly consumed runs */
  close_fixture(&f, c);
}

/* A lossless ring's primary cursor hands its runs out of the ring file itself, without copying
 * them (its producer overwrites nothing it has not read); a cursor that is not the primary, whose
 * records the producer may overwrite while it reads them, copies them out first. Both deliver the
 * same records. */
static void a_lossless_primary_reads_runs_in_place_and_others_copy_them(void **state) {
  (void)state;
  for (int primary = 0; primary < 2; primary++) {
    fixture f;
    mt_cursor *c = open_fixture(&f);
    char path[4096];
    snprintf(path, sizeof path, "%s", mt_ring_path(f.ring));
    mt_error err = {0};
    if (primary)
      assert_int_equal(mt_cursor_register_primary(c, &err), MT_OK);
    seen.file = path;
    mt_cursor_set_run_callback(c, take_run);
    rt_drain(c, false);
    check_delivered(&f.col);
    assert_true(seen.runs > 0);
    assert_int_equal(seen.runs_in_file, primary ? seen.runs : 0);
    close_fixture(&f, c);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(runs_and_callbacks_deliver_every_record_once_in_order),
      cmocka_unit_test(poll_budget_counts_records_in_runs),
      cmocka_unit_test(run_consumed_in_part_resumes_at_the_first_record_not_consumed),
      cmocka_unit_test(a_lossless_primary_reads_runs_in_place_and_others_copy_them),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
