/* Flight-recorder mode under a flood: a tiny ring overwritten many times over while cursors read
 * it concurrently. Every record is either delivered intact or counted as lost, exactly. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

#define FLOOD 1000000

struct tally {
  uint64_t verified, torn, out_of_order, last_index;
  bool any;
};

static bool check_intact(const mt_ring_event *ev, void *arg) {
  struct tally *t = arg;
  if (ev->type != MT_RING_TYPE_OPAQUE_FIRST)
    return true;
  uint64_t stream, index;
  if (!rt_verify(ev->payload, ev->words, &stream, &index) || stream != 1) {
    t->torn++;
    return false;
  }
  if (t->any && index <= t->last_index) {
    t->out_of_order++;
    return false;
  }
  t->any = true;
  t->last_index = index;
  t->verified++;
  return true;
}

struct reader {
  mt_cursor *cursor;
  rt_collector col;
  struct tally tally;
  _Atomic int *producer_done;
  size_t batch;
  long pause_ns;
  int error;
};

/* A deliberately slow consumer: small polls with pauses, so the producer laps it often. */
static void *read_slowly(void *p) {
  struct reader *r = p;
  for (;;) {
    int done = atomic_load(r->producer_done);
    size_t got = 0;
    if (mt_cursor_poll(r->cursor, r->batch, &got, NULL) != MT_OK) {
      r->error = 1;
      return NULL;
    }
    if (done && got == 0 && mt_cursor_drained(r->cursor))
      return NULL;
    struct timespec ts = {0, r->pause_ns};
    nanosleep(&ts, NULL);
  }
}

struct flood {
  mt_ring *ring;
  uint64_t written;
};

static void *flood(void *p) {
  struct flood *f = p;
  uint64_t payload[40];
  for (uint64_t i = 0; i < FLOOD; i++) {
    /* Mostly 4-word records, some much larger, so that padding and multi-record laps occur. */
    size_t words = i % 97 == 0 ? 37 : 3 + (size_t)(i % 4);
    rt_fill(payload, words, 1, i);
    if (mt_ring_write(f->ring, MT_RING_TYPE_OPAQUE_FIRST, 0, payload, words) == MT_OK)
      f->written++;
  }
  return NULL;
}

static void start_reader(struct reader *r, _Atomic int *done, size_t batch, long pause_ns) {
  memset(r, 0, sizeof *r);
  r->cursor = rt_cursor(-1);
  r->col.check = check_intact;
  r->col.check_arg = &r->tally;
  r->producer_done = done;
  r->batch = batch;
  r->pause_ns = pause_ns;
  rt_collector_attach(r->cursor, &r->col);
}

static void flood_of_tiny_ring_delivers_or_counts_every_record(void **state) {
  (void)state;
  mt_ring *ring = rt_open(MT_RING_FLIGHT_RECORDER, MT_RING_MIN_SIZE, 4, false);
  _Atomic int done = 0;
  /* Two cursors at once: one slow, one polling flat out (often lapped in the middle of a copy).
   * Each has its own exact account. */
  struct reader readers[2];
  start_reader(&readers[0], &done, 64, 200000);
  start_reader(&readers[1], &done, 1000, 0);
  pthread_t reader_threads[2], producer;
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&reader_threads[i], NULL, read_slowly, &readers[i]), 0);
  struct flood f = {ring, 0};
  assert_int_equal(pthread_create(&producer, NULL, flood, &f), 0);
  pthread_join(producer, NULL);
  mt_ring_close(ring);
  atomic_store(&done, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(reader_threads[i], NULL);
  assert_int_equal(f.written, FLOOD);

  for (int i = 0; i < 2; i++) {
    struct reader *r = &readers[i];
    mt_ring_file_info info;
    mt_cursor_info(r->cursor, &info);
    assert_int_equal(r->error, 0);
    assert_int_equal(r->tally.torn, 0);
    assert_int_equal(r->tally.out_of_order, 0);
    assert_int_equal(r->col.failures, 0);
    /* Exact accounting: every record the producer wrote, on every ring, since the cursor was
     * opened (before any of them). */
    assert_int_equal(r->col.seen + r->col.lost, info.records_written);
    assert_int_equal(r->col.lost, mt_cursor_lost_records(r->cursor));
    assert_true(r->col.lost > 0);                         /* the ring was lapped... */
    assert_true(r->col.lost <= info.records_overwritten); /* ...only by what it overwrote */
    assert_true(r->tally.verified > 0);
    mt_cursor_close(r->cursor);
    rt_collector_free(&r->col);
  }
}

/* A cursor opened on a ring that has already wrapped starts at its oldest record and reports
 * nothing lost for the history that was gone before it existed. */
static void cursor_opened_late_reports_no_history_as_lost(void **state) {
  (void)state;
  mt_ring *ring = rt_open(MT_RING_FLIGHT_RECORDER, MT_RING_MIN_SIZE, 2, false);
  struct flood f = {ring, 0};
  flood(&f);
  mt_cursor *c = rt_cursor(-1);
  struct tally tally = {0};
  rt_collector col = {.check = check_intact, .check_arg = &tally};
  rt_collector_attach(c, &col);
  rt_drain(c, false);
  assert_int_equal(col.lost, 0);
  assert_int_equal(col.failures, 0);
  assert_true(tally.verified > 100);
  assert_int_equal(tally.last_index, FLOOD - 1); /* the newest record is there */
  mt_cursor_close(c);
  mt_ring_close(ring);
  rt_collector_free(&col);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(flood_of_tiny_ring_delivers_or_counts_every_record),
      cmocka_unit_test(cursor_opened_late_reports_no_history_as_lost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
