/* The primary consumer's clock tick (docs/ring.md §5): every writing thread stamps its records
 * with the tick the primary stores at every poll; a writer that finds the tick stale advances it
 * for all; the tick never goes back, so that a record written after another (on any thread, in
 * the program's own order) is never stamped before it; a withdrawn tick or a closed cursor put
 * every writer back on its own clock. Producer and primary live in this process (the primary is
 * the cursor, not a writing thread). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ring_testlib.h"
#include "testutil.h"

#include "ring/clock.h"
#include "ring/layout.h"
#include "ring/producer.h"
#include "ring/write_fast.h"

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
  o.clock = MT_RING_CLOCK_TSC;
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

/* A second writing thread stamps with the tick too, and the first goes on doing so. The new
 * thread's first CLOCK record (a clock reading, written after its start record) raises the tick
 * for every writer. Slow machines: no tick goes stale within the test (a bound of 100 s). */
static void second_writer_uses_the_tick_too(void **state) {
  fixture *f = *state;
  mt_ring_session.tick_stale_ticks = mt_ring_session.geo.clock_hz * 100;
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);
  write_records(f, 1, 2);
  poll_now(f);
  uint64_t tick = tick_word();
  assert_true(tick != 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, write_one, f), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  uint64_t raised = tick_word();
  assert_true(raised > tick);
  write_records(f, 2, 5);
  poll_now(f);
  uint64_t stamps[8];
  assert_int_equal(stamps_of(f, 9, stamps, 8), 1);
  assert_true(stamps[0] == raised);
  assert_int_equal(stamps_of(f, 2, stamps, 8), 5);
  for (int i = 0; i < 5; i++)
    assert_true(stamps[i] == raised);
}

/* The primary's poll never moves the tick back, even when a writer advanced it past the
 * primary's own reading: writers that read it later must not stamp earlier. */
static void primary_never_moves_the_tick_back(void **state) {
  fixture *f = *state;
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);
  uint64_t ahead = mt_clock_rdtsc() + mt_ring_session.geo.clock_hz / 1000; /* 1 ms ahead */
  atomic_store(&mt_ring_session.header->clock_tick, ahead);
  poll_now(f);
  assert_true(tick_word() == ahead);
  write_records(f, 3, 5);
  poll_now(f);
  uint64_t stamps[8];
  assert_int_equal(stamps_of(f, 3, stamps, 8), 5);
  for (int i = 0; i < 5; i++)
    assert_true(stamps[i] == ahead);
}

/* Two threads hand a token back and forth, each writing a record numbered in the token's order
 * once it holds it, while a third polls (storing ticks) all along: numbered in the program's own
 * order, the stamps never go back, whichever thread wrote them and whether each came from a tick,
 * a tick advanced by a writer or a clock reading. (Stamping the records that check the tick with
 * the clock reading, as the tick's first version did, breaks this: the next thread stamps the
 * tick, behind that reading.) */
#define HANDOFFS 20000

typedef struct handoff {
  fixture *f;
  pthread_mutex_t lock;
  pthread_cond_t turn_changed;
  int turn;
  unsigned next; /* the next record's number */
  atomic_bool done;
} handoff;

static void *hand_off(void *arg) {
  handoff *h = ((void **)arg)[0];
  int self = (int)(long)((void **)arg)[1];
  for (;;) {
    pthread_mutex_lock(&h->lock);
    while (h->turn != self && h->next < HANDOFFS)
      pthread_cond_wait(&h->turn_changed, &h->lock);
    if (h->next >= HANDOFFS) {
      pthread_mutex_unlock(&h->lock);
      return NULL;
    }
    uint64_t payload[3] = {h->next++, 0, 0};
    assert_int_equal(mt_ring_write(h->f->ring, MT_RING_TYPE_OPAQUE_FIRST, 4, payload, 3), MT_OK);
    h->turn = !self;
    pthread_cond_broadcast(&h->turn_changed);
    pthread_mutex_unlock(&h->lock);
  }
}

static void *keep_polling(void *arg) {
  handoff *h = arg;
  while (!atomic_load(&h->done))
    poll_now(h->f);
  return NULL;
}

static void stamps_follow_the_programs_order_across_threads(void **state) {
  fixture *f = *state;
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  handoff h = {.f = f, .turn = 0};
  pthread_mutex_init(&h.lock, NULL);
  pthread_cond_init(&h.turn_changed, NULL);
  void *args[2][2] = {{&h, (void *)0L}, {&h, (void *)1L}};
  pthread_t poller, writers[2];
  assert_int_equal(pthread_create(&poller, NULL, keep_polling, &h), 0);
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&writers[i], NULL, hand_off, args[i]), 0);
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_join(writers[i], NULL), 0);
  atomic_store(&h.done, true);
  assert_int_equal(pthread_join(poller, NULL), 0);
  poll_now(f);
  uint64_t *stamp = calloc(HANDOFFS, sizeof *stamp);
  assert_non_null(stamp);
  size_t n = 0;
  for (size_t i = 0; i < f->got.count; i++) {
    const rt_record *r = &f->got.records[i];
    if (r->type == MT_RING_TYPE_OPAQUE_FIRST && r->id == 4) {
      assert_true(r->payload[0] < HANDOFFS);
      stamp[r->payload[0]] = r->timestamp;
      n++;
    }
  }
  assert_int_equal(n, HANDOFFS);
  for (size_t k = 1; k < HANDOFFS; k++)
    if (stamp[k] < stamp[k - 1])
      fail_msg("record %zu is stamped %llu ticks before record %zu, written before it", k,
               (unsigned long long)(stamp[k - 1] - stamp[k]), k - 1);
  free(stamp);
  pthread_cond_destroy(&h.turn_changed);
  pthread_mutex_destroy(&h.lock);
}

/* A tick that stopped moving (a primary killed, or descheduled, while it offered one): the
 * thread's next clock reading finds it older than the bound and advances it, for every writer, to
 * that reading; at most MT_RING_TICK_USES records in between are stamped with the stale tick, or
 * the thread's last stamp if later. */
static void stale_tick_is_advanced(void **state) {
  fixture *f = *state;
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);
  write_records(f, 1, 2); /* checked: fresh */
  /* The primary "dies" with its tick 10 ms in the past (its cursor stays open, not polling). */
  uint64_t stale = mt_clock_rdtsc() - mt_ring_session.geo.clock_hz / 100;
  atomic_store(&mt_ring_session.header->clock_tick, stale);
  uint64_t before = mt_clock_rdtsc();
  write_records(f, 2, 300); /* more than a thread stamps between two clock readings */
  uint64_t tick = tick_word();
  assert_true(tick >= before); /* advanced to a reading taken while writing */
  poll_now(f);
  uint64_t stamps[300];
  assert_int_equal(stamps_of(f, 2, stamps, 300), 300);
  int early = 0;
  for (int i = 0; i < 300; i++) {
    early += stamps[i] < before;
    if (i)
      assert_true(stamps[i] >= stamps[i - 1]);
  }
  assert_true(early <= (int)MT_RING_TICK_USES);
  assert_true(stamps[299] == tick); /* the last ones stamped with the advanced tick */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(single_writer_uses_the_tick, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(withdrawn_tick_is_not_used, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(secondary_cannot_offer, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(second_writer_uses_the_tick_too, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(primary_never_moves_the_tick_back, open_fixture,
                                      close_fixture),
      cmocka_unit_test_setup_teardown(stamps_follow_the_programs_order_across_threads, open_fixture,
                                      close_fixture),
      cmocka_unit_test_setup_teardown(stale_tick_is_advanced, open_fixture, close_fixture)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
