/* The shared clock tick (ring/tick.h, docs/ring.md §5): every writing thread stamps its fast-path
 * records with the tick the primary raises at every poll; the stamps keep the program's order
 * across threads (a record written after another, through the program's own synchronisation, is
 * never stamped before it; an ordered record stands strictly between its neighbours), whatever
 * the primary does meanwhile (withdraws the tick, offers it again, stops). A stale tick is raised
 * by the writers, one far ahead of their clock is given up. Producer and primary live in this
 * process (the primary is the cursor, not a writing thread). Every test runs with the TSC and
 * with CLOCK_MONOTONIC, the clock a file gets where the kernel does not keep time with the TSC. */
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <stdlib.h>

#include "ring_testlib.h"
#include "testutil.h"

#include "ring/clock.h"
#include "ring/layout.h"
#include "ring/producer.h"
#include "ring/tick.h"
#include "ring/write_fast.h"

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
  return atomic_load(&mt_ring_session.header->shared_tick);
}

static uint64_t tick_value(void) {
  return mt_ring_tick_value(tick_word());
}

/* Writes `n` opaque records with id `id` from this thread (payload: i, `ordered`). */
static void write_some(fixture *f, unsigned id, int n, bool ordered) {
  for (int i = 0; i < n; i++) {
    uint64_t payload[3] = {(uint64_t)i, ordered, 3};
    if (ordered)
      assert_int_equal(mt_ring_write_ordered(MT_RING_TYPE_OPAQUE_FIRST, id, payload, 3), MT_OK);
    else
      assert_int_equal(mt_ring_write(f->ring, MT_RING_TYPE_OPAQUE_FIRST, id, payload, 3), MT_OK);
  }
}

static void write_records(fixture *f, unsigned id, int n) {
  write_some(f, id, n, false);
}

/* Reads everything written so far, through a poll (which raises the tick when it is offered). */
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

/* Offers the tick, lets this thread claim its ring and check the tick against its clock (two
 * records), and polls again: returns the tick this thread's next records are stamped with. */
static uint64_t offer_and_settle(fixture *f) {
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);            /* the first tick */
  write_records(f, 1, 2); /* the claim, and the record whose clock reading checks the tick */
  poll_now(f);
  return tick_value();
}

/* Runs `fn(f)` on a thread of its own, to its end. */
static void on_a_thread(fixture *f, void *(*fn)(void *)) {
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, fn, f), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
}

/* One thread: a record's stamp is the tick the last poll left (once the thread has checked the
 * tick against its clock, which takes one record). */
static void single_writer_uses_the_tick(void **state) {
  fixture *f = *state;
  uint64_t tick = offer_and_settle(f);
  assert_true(tick != 0);
  assert_true((tick_word() & MT_RING_TICK_FLAGS) == 0);
  write_records(f, 2, 5);
  poll_now(f);
  uint64_t stamps[8];
  assert_int_equal(stamps_of(f, 2, stamps, 8), 5);
  for (int i = 0; i < 5; i++)
    assert_true(stamps[i] == tick); /* no clock read: every one is the tick of the poll before */
}

static void *write_five(void *arg) {
  write_records(arg, 9, 5);
  return NULL;
}

/* A second writing thread stamps with the same tick (the first design gave the tick up at a
 * second thread's claim: two clock readings per malloc+free pair for every multi-threaded
 * program). */
static void second_writer_uses_the_tick(void **state) {
  fixture *f = *state;
  uint64_t tick = offer_and_settle(f);
  on_a_thread(f, write_five);
  write_records(f, 2, 5);
  poll_now(f);
  /* The new thread's first record is its claim's, on the general path, ordered (past the tick);
   * after it, each thread stamps the word's value: no clock reading per record. */
  uint64_t theirs[8], ours[8];
  assert_int_equal(stamps_of(f, 9, theirs, 8), 5);
  assert_int_equal(stamps_of(f, 2, ours, 8), 5);
  assert_true(theirs[0] > tick);
  for (int i = 1; i < 5; i++)
    assert_true(theirs[i] == theirs[1] && ours[i] == ours[0]);
  assert_true(ours[0] >= theirs[1]);
}

/* An ordered record (a realloc, a mapping) stands strictly between the records before and after
 * it, far enough apart to stay apart in nanoseconds, without a clock reading of its own, once a
 * second thread has claimed a ring; before that it is stamped like any other (one thread has
 * nothing to order it against, and a compare-and-swap per realloc costs). */
static void ordered_record_stands_apart(void **state) {
  fixture *f = *state;
  uint64_t tick = offer_and_settle(f);
  write_records(f, 5, 1);
  write_some(f, 6, 1, true);
  write_records(f, 7, 1);
  on_a_thread(f, write_five);
  poll_now(f);
  uint64_t alone[3] = {0};
  assert_int_equal(stamps_of(f, 5, &alone[0], 1), 1);
  assert_int_equal(stamps_of(f, 6, &alone[1], 1), 1);
  assert_int_equal(stamps_of(f, 7, &alone[2], 1), 1);
  for (int i = 0; i < 3; i++)
    assert_true(alone[i] == tick);
  tick = tick_value();
  write_records(f, 2, 1);
  write_some(f, 3, 1, true);
  write_records(f, 4, 1);
  poll_now(f);
  uint64_t a = 0, b = 0, c = 0;
  assert_int_equal(stamps_of(f, 2, &a, 1), 1);
  assert_int_equal(stamps_of(f, 3, &b, 1), 1);
  assert_int_equal(stamps_of(f, 4, &c, 1), 1);
  uint64_t step = mt_ring_session.tick_step;
  assert_true(step >= 2 && step >= 2 * mt_ring_session.geo.clock_hz / 1000000000u);
  assert_true(a == tick);
  assert_true(b == tick + step);
  assert_true(c == tick + 2 * step); /* the word the ordered record left */
}

/* Without the tick offered the thread reads its clock and the word stays 0. Withdrawn, the word
 * keeps its value (an offer after it must not go below what writers stamped meanwhile): writers
 * stamp their own readings and raise it to each. A closed cursor withdraws it. */
static void withdrawn_tick_keeps_its_floor(void **state) {
  fixture *f = *state;
  write_records(f, 1, 2);
  poll_now(f);
  assert_true(tick_word() == 0); /* never offered */
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);
  uint64_t offered = tick_value();
  assert_true(offered != 0);
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, false), MT_OK);
  assert_true(tick_word() & MT_RING_TICK_WITHDRAWN);
  assert_true(tick_value() == offered);
  write_records(f, 2, 50);
  uint64_t floor = tick_value();
  poll_now(f);
  uint64_t stamps[64];
  assert_int_equal(stamps_of(f, 2, stamps, 64), 50);
  assert_true(stamps[49] > stamps[0]); /* clock readings */
  for (int i = 0; i < 50; i++)
    assert_true(stamps[i] >= offered && stamps[i] <= floor);
  assert_true(floor == stamps[49]);
  /* Offered again: never below the floor, even one ahead of the primary's clock (a writer's TSC
   * a little ahead, ordered records' steps); then the cursor closes, which withdraws it. */
  floor += mt_ring_session.geo.clock_hz / 1000;
  atomic_store(&mt_ring_session.header->shared_tick, floor | MT_RING_TICK_WITHDRAWN);
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);
  assert_true(tick_value() >= floor);
  assert_true((tick_word() & MT_RING_TICK_WITHDRAWN) == 0);
  mt_cursor_close(f->cursor);
  assert_true(tick_word() & MT_RING_TICK_WITHDRAWN);
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

/* Two threads hand a token back and forth; each writes a record (every 7th an ordered one)
 * carrying the turn's number while it holds the token. Meanwhile the primary polls, offering the
 * tick, withdrawing it and offering it again. In turn order, stamps never go back, and an ordered
 * record is strictly after the turn before it and strictly before the turn after it: what the
 * merge of threads needs (a block realloc'd on one thread and freed on the other within one tick
 * was written in the wrong order by the first design for every thread, which also let a stamp go
 * back across threads when a tick was offered again after a withdrawal). */
#define HANDOFF_TURNS 20000

typedef struct handoff {
  fixture *f;
  _Atomic int turn;
  _Atomic int done;
  int me;
} handoff;

typedef struct handoff_side {
  handoff *h;
  int me;
} handoff_side;

static void *hand_over(void *arg) {
  handoff_side *side = arg;
  handoff *h = side->h;
  for (;;) {
    int turn;
    while ((turn = atomic_load_explicit(&h->turn, memory_order_acquire)) % 2 != side->me)
      if (turn >= HANDOFF_TURNS)
        return NULL;
    if (turn >= HANDOFF_TURNS)
      return NULL;
    uint64_t payload[3] = {(uint64_t)turn, turn % 7 == 0, 3};
    if (turn % 7 == 0)
      assert_int_equal(mt_ring_write_ordered(MT_RING_TYPE_OPAQUE_FIRST, 5, payload, 3), MT_OK);
    else
      assert_int_equal(mt_ring_write(h->f->ring, MT_RING_TYPE_OPAQUE_FIRST, 5, payload, 3), MT_OK);
    atomic_store_explicit(&h->turn, turn + 1, memory_order_release);
  }
}

static void handed_over_records_keep_their_order(void **state) {
  fixture *f = *state;
  handoff h = {.f = f};
  handoff_side sides[2] = {{&h, 0}, {&h, 1}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, hand_over, &sides[i]), 0);
  unsigned polls = 0;
  while (atomic_load(&h.turn) < HANDOFF_TURNS) {
    /* Offered for three polls, withdrawn for one, and so on. */
    assert_int_equal(mt_cursor_set_clock_tick(f->cursor, polls % 4 != 3), MT_OK);
    poll_now(f);
    polls++;
  }
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_join(th[i], NULL), 0);
  poll_now(f);
  uint64_t *by_turn = calloc(HANDOFF_TURNS, sizeof *by_turn);
  assert_non_null(by_turn);
  size_t seen = 0;
  for (size_t i = 0; i < f->got.count; i++) {
    const rt_record *r = &f->got.records[i];
    if (r->type != MT_RING_TYPE_OPAQUE_FIRST || r->id != 5)
      continue;
    assert_true(r->words >= 1 && r->payload[0] < HANDOFF_TURNS);
    by_turn[r->payload[0]] = r->timestamp;
    seen++;
  }
  assert_int_equal(seen, HANDOFF_TURNS);
  unsigned back = 0, ordered_ties = 0;
  for (int t = 1; t < HANDOFF_TURNS; t++) {
    if (by_turn[t] < by_turn[t - 1])
      back++;
    if ((t % 7 == 0 || (t - 1) % 7 == 0) && by_turn[t] <= by_turn[t - 1])
      ordered_ties++;
  }
  free(by_turn);
  if (back || ordered_ties)
    fail_msg("%u of %d turns stamped before the turn before them, %u ordered records not strictly "
             "apart (%u polls)",
             back, HANDOFF_TURNS, ordered_ties, polls);
}

/* A tick that stopped moving (a primary killed, or descheduled, while it offered one): the
 * thread's next clock reading finds it older than the bound and raises it to that reading, so
 * that at most 15 records take the stale value, and the ones after move with the clock. */
static void stale_tick_is_raised(void **state) {
  fixture *f = *state;
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  poll_now(f);
  write_records(f, 1, 2); /* checked: fresh */
  /* The primary "dies" with its tick 10 ms in the past (not withdrawn). */
  uint64_t stale = mt_clock_read(the_clock) - mt_ring_session.geo.clock_hz / 100;
  atomic_store(&mt_ring_session.header->shared_tick, stale);
  mt_ring_self.last_time = stale; /* as if this thread's records had been stamped with it */
  write_records(f, 2, 300);       /* more than a thread stamps between two clock readings */
  assert_true(tick_value() > stale + mt_ring_session.geo.clock_hz / 200);
  poll_now(f);
  uint64_t stamps[300];
  assert_int_equal(stamps_of(f, 2, stamps, 300), 300);
  unsigned at_stale = 0;
  for (int i = 0; i < 300; i++) {
    assert_true(stamps[i] >= stale);
    if (i)
      assert_true(stamps[i] >= stamps[i - 1]);
    at_stale += stamps[i] == stale;
  }
  assert_true(at_stale <= 15);
  assert_true(stamps[299] > stamps[0]);
}

/* A tick far ahead of the thread's own clock (CLOCK_MONOTONIC read by a consumer in another time
 * namespace than the program's; a clock stepped back): the thread's first clock reading finds it
 * more than the bound away and gives the tick up for every writer before any record uses it, so
 * that stamps do not jump ahead and freeze there (the per-thread clamp would hold them at it). */
static void tick_ahead_of_the_clock_is_given_up(void **state) {
  fixture *f = *state;
  uint64_t ahead = mt_clock_read(the_clock) + mt_ring_session.geo.clock_hz / 10; /* 100 ms */
  atomic_store(&mt_ring_session.header->shared_tick, ahead); /* before this thread's claim */
  write_records(f, 2, 300);
  assert_true(tick_word() & MT_RING_TICK_DISABLED);
  poll_now(f);
  uint64_t stamps[300];
  assert_int_equal(stamps_of(f, 2, stamps, 300), 300);
  for (int i = 0; i < 300; i++)
    assert_true(stamps[i] < ahead);
  assert_true(stamps[299] > stamps[0]);
}

/* A writer delayed between its clock reading and its load of the word (it lost its CPU, or a
 * signal handler ran there) while the primary raised the word: the tick then looks far ahead of
 * that reading, but it is not, and must not be given up (a first version did, for good, within
 * 0.4-1.6 s of a program whose handler spins 3 ms every 5 ms, and under a loaded machine's
 * preemption alone). The writer writes for a second and a half with such a handler while this
 * thread polls, offering the tick. */
static _Atomic int spinning_writer_stop, spinning_writer_done;

static void spin_3ms(int sig) {
  (void)sig;
  uint64_t start = mt_clock_ns(CLOCK_MONOTONIC);
  while (mt_clock_ns(CLOCK_MONOTONIC) - start < 3000000u) {
  }
}

static void *write_until_stopped(void *arg) {
  fixture *f = arg;
  uint64_t payload[3] = {1, 2, 3};
  while (!atomic_load(&spinning_writer_stop))
    assert_int_equal(mt_ring_write(f->ring, MT_RING_TYPE_OPAQUE_FIRST, 8, payload, 3), MT_OK);
  atomic_store(&spinning_writer_done, 1);
  return NULL;
}

static void delayed_writer_keeps_the_tick(void **state) {
  fixture *f = *state;
  f->got.keep = false;
  atomic_store(&spinning_writer_stop, 0);
  atomic_store(&spinning_writer_done, 0);
  struct sigaction sa = {.sa_handler = spin_3ms, .sa_flags = SA_RESTART}, old;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
  sigset_t alarm, saved;
  sigemptyset(&alarm);
  sigaddset(&alarm, SIGALRM);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, write_until_stopped, f), 0);
  assert_int_equal(pthread_sigmask(SIG_BLOCK, &alarm, &saved), 0); /* the writer takes them */
  struct itimerval every_5ms = {{0, 5000}, {0, 5000}}, off = {{0, 0}, {0, 0}};
  assert_int_equal(setitimer(ITIMER_REAL, &every_5ms, NULL), 0);
  assert_int_equal(mt_cursor_set_clock_tick(f->cursor, true), MT_OK);
  uint64_t start = mt_clock_ns(CLOCK_MONOTONIC);
  while (mt_clock_ns(CLOCK_MONOTONIC) - start < 1500000000u &&
         !(tick_word() & MT_RING_TICK_DISABLED))
    poll_now(f);
  setitimer(ITIMER_REAL, &off, NULL);
  atomic_store(&spinning_writer_stop, 1);
  /* The ring is lossless: a writer that filled it waits for this cursor, which reads on. */
  while (!atomic_load(&spinning_writer_done))
    poll_now(f);
  assert_int_equal(pthread_join(th, NULL), 0);
  poll_now(f);
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  sigaction(SIGALRM, &old, NULL);
  assert_true((tick_word() & MT_RING_TICK_DISABLED) == 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(single_writer_uses_the_tick, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(second_writer_uses_the_tick, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(ordered_record_stands_apart, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(withdrawn_tick_keeps_its_floor, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(secondary_cannot_offer, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(handed_over_records_keep_their_order, open_fixture,
                                      close_fixture),
      cmocka_unit_test_setup_teardown(stale_tick_is_raised, open_fixture, close_fixture),
      cmocka_unit_test_setup_teardown(tick_ahead_of_the_clock_is_given_up, open_fixture,
                                      close_fixture),
      cmocka_unit_test_setup_teardown(delayed_writer_keeps_the_tick, open_fixture, close_fixture)};
  the_clock = MT_RING_CLOCK_TSC;
  int failed = cmocka_run_group_tests_name("tsc", tests, NULL, NULL);
  the_clock = MT_RING_CLOCK_MONOTONIC;
  return failed + cmocka_run_group_tests_name("monotonic", tests, NULL, NULL);
}
