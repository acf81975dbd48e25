/* The primary consumer's clock tick (docs/ring.md §5): a process with one writing thread stamps
 * its fast-path records with the tick the primary stores at every poll; a second writing thread,
 * a tick gone stale, a withdrawn tick or a closed cursor put every writer back on its own clock.
 * Producer and primary live in this process (the primary is the cursor, not a writing thread).
 * Every test runs with the TSC and with CLOCK_MONOTONIC, the clock a file gets where the kernel
 * does not keep time with the TSC: the tick and the fast path serve both. */
#include <pthread.h>
#include <stdlib.h>

#include "ring_testlib.h"
#include "testutil.h"

#include "ring/clock.h"
#include "ring/layout.h"
#include "ring/producer.h"

/* The clock of the group running. */
static mt_ring_clock the_clock;

typedef struct fixture {
  mt_ring *ring;
  mt_cursor *cursor;
  rt_collector got;
} fixture;

static int open_fixture(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  *state = f;
  mt_ring_options o;
  mt_error err = {0};
  assert_int_equal(mt_ring_options_init(&o, &err), MT_OK);
  o.dir = tu_temp_dir();
  o.mode = MT_RING_LOSSLESS;
  o.clock = the_clock;
  o.ring_size = 1 << 20; /* far more than the tests write: no write waits for the cursor */
  o.max_rings = 4;
  o.registry_size = 64 * 1024;
  if (mt_ring_open(&f->ring, &o, &err) != MT_OK)
    fail_msg("mt_ring_open: %s", err.message);
  f->cursor = rt_cursor(-1);
  assert_int_equal(mt_cursor_register_primary(f->cursor, &err), MT_OK);
  f->got = (rt_collector){.keep = true};
  rt_collector_attach(f->cursor, &f->got);
  return 0;
}

/* Also after a failed test, so that the next one opens its own file. */
static int close_fixture(void **state) {
  fixture *f = *state;
  mt_cursor_close(f->cursor);
  rt_collector_free(&f->got);
  int rc = mt_ring_close(f->ring);
  free(f);
  return rc == MT_OK ? 0 : -1;
}

static uint64_t tick_word(void) {
  return atomic_load(&mt_ring_session.header->clock_tick);
}

/* Writes `n` opaque records with id `id` from this thread. */
static void write_records(fixture *f, unsigned id, int n) {
  for (int i = 0; i < n; i++) {
    uint64_t payload[3] = {(uint64_t)i, 2, 3};
    assert_int_equal(mt_ring_write(f->ring, MT_RING_TYPE_OPAQUE_FIRST, id, payload, 3), MT_OK);
  }
}

/* Reads everything written so far, through a poll (which stores a tick when it is offered). */
static void poll_now(fixture *f) {
  size_t got;
  mt_error err = {0};
  assert_int_equal(mt_cursor_poll(f->cursor, 0, &got, &err), MT_OK);
}

/* The records with id `id` in delivery order: their stamps into `out` (at most `max`). */
static size_t stamps_of(const fixture *f, unsigned id, uint64_t *out, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < f->got.count && n < max; i++)
    if (f->got.records[i].type == MT_RING_TYPE_OPAQUE_FIRST && f->got.records[i].id == id)
      out[n++] = f->got.records[i].timestamp;
  return n;
}

/* One thread: a record's stamp is the tick the last poll stored (once the thread has checked the
 * tick against its clock, which takes one record). */
static void single_writer_uses_the_tick(void **state) {
  fixture *f = *state;
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);            /* the first tick */
  write_records(f, 1, 2); /* the claim, and the record whose clock reading checks the tick */
  poll_now(f);            /* a tick after the clock reading, which was this thread's last stamp */
  uint64_t tick = tick_word();
  assert_true(tick != 0);
  write_records(f, 2, 5);
  poll_now(f);
  uint64_t stamps[8];
  assert_int_equal(stamps_of(f, 2, stamps, 8), 5);
  for (int i = 0; i < 5; i++)
    assert_true(stamps[i] == tick); /* no clock read: every one is the tick of the poll before */
}

/* Without the tick offered, or after it is withdrawn, the thread reads its clock: stamps move
 * between records written one after another, and the file holds no tick. */
static void withdrawn_tick_is_not_used(void **state) {
  fixture *f = *state;
  write_records(f, 1, 2);
  poll_now(f);
  assert_true(tick_word() == 0); /* never offered */
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);
  assert_true(tick_word() != 0);
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, false), MT_OK);
  assert_true(tick_word() == 0);
  write_records(f, 2, 50);
  poll_now(f);
  uint64_t stamps[64];
  assert_int_equal(stamps_of(f, 2, stamps, 64), 50);
  assert_true(stamps[49] > stamps[0]);
  /* Offered again, then the cursor closes: closing withdraws it. */
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);
  assert_true(tick_word() != 0);
  mt_cursor_close(f->cursor);
  assert_true(tick_word() == 0);
  f->cursor = rt_cursor(-1); /* for the teardown */
}

/* Only the primary may offer one. */
static void secondary_cannot_offer(void **state) {
  (void)state;
  mt_cursor *other = rt_cursor(-1);
  assert_int_equal(mt_cursor_set_clock_tick(other, true), MT_E_STATE);
  assert_int_equal(mt_cursor_set_clock_tick(other, false), MT_OK);
  mt_cursor_close(other);
}

static void *write_one(void *arg) {
  write_records(arg, 9, 1);
  return NULL;
}

/* A second writing thread: from its claim on, the first thread reads its clock again, since a
 * tick cannot order two threads' records (a free on one and the allocation of the same address
 * on the other, within one polling period). */
static void second_writer_ends_the_tick(void **state) {
  fixture *f = *state;
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);
  write_records(f, 1, 2);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, write_one, f), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  poll_now(f);
  uint64_t tick = tick_word();
  assert_true(tick != 0); /* still offered: the producer no longer reads it */
  write_records(f, 2, 5);
  poll_now(f);
  uint64_t stamps[8];
  assert_int_equal(stamps_of(f, 2, stamps, 8), 5);
  for (int i = 0; i < 5; i++) {
    assert_true(stamps[i] > tick);
    if (i)
      assert_true(stamps[i] > stamps[i - 1]);
  }
}

/* A tick that stopped moving (a primary killed, or descheduled, while it offered one): the
 * thread's next clock reading finds it older than the bound, withdraws it for every writer and
 * stamps from its clock from then on. */
static void stale_tick_is_withdrawn(void **state) {
  fixture *f = *state;
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);
  write_records(f, 1, 2); /* checked: fresh */
  /* The primary "dies" with its tick 10 ms in the past. */
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, false), MT_OK);
  uint64_t stale = mt_clock_read(the_clock) - mt_ring_session.geo.clock_hz / 100;
  atomic_store(&mt_ring_session.header->clock_tick, stale);
  write_records(f, 2, 300); /* more than a thread stamps between two clock readings */
  assert_true(tick_word() == 0);
  poll_now(f);
  uint64_t stamps[300];
  assert_int_equal(stamps_of(f, 2, stamps, 300), 300);
  for (int i = 0; i < 300; i++)
    assert_true(stamps[i] > stale); /* never before what the thread had already written */
  assert_true(stamps[299] > stamps[0]);
  assert_true(stamps[299] > stamps[298]); /* the last ones read the clock */
}

/* A tick ahead of the thread's own clock (CLOCK_MONOTONIC read by a consumer in another time
 * namespace than the program's; a clock stepped back): the thread's first clock reading finds it
 * more than the bound away and withdraws it before any record uses it, so that its stamps do not
 * jump ahead and freeze there (the per-thread clamp would hold them at the tick). */
static void tick_ahead_of_the_clock_is_withdrawn(void **state) {
  fixture *f = *state;
  uint64_t ahead = mt_clock_read(the_clock) + mt_ring_session.geo.clock_hz / 10; /* 100 ms */
  atomic_store(&mt_ring_session.header->clock_tick, ahead); /* before this thread's claim */
  write_records(f, 2, 300);
  assert_true(tick_word() == 0);
  poll_now(f);
  uint64_t stamps[300];
  assert_int_equal(stamps_of(f, 2, stamps, 300), 300);
  for (int i = 0; i < 300; i++)
    assert_true(stamps[i] < ahead);
  assert_true(stamps[299] > stamps[0]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(single_writer_uses_the_tick, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(withdrawn_tick_is_not_used, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(secondary_cannot_offer, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(second_writer_ends_the_tick, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(stale_tick_is_withdrawn, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(tick_ahead_of_the_clock_is_withdrawn, open_fixture,
                                      close_fixture)};
  the_clock = MT_RING_CLOCK_TSC;
  int failed = cmocka_run_group_tests_name("tsc", tests, NULL, NULL);
  the_clock = MT_RING_CLOCK_MONOTONIC;
  return failed + cmocka_run_group_tests_name("monotonic", tests, NULL, NULL);
}
