/* Lossless mode across processes: a producer process with N threads and a consumer process
 * that registered as the primary; and what happens when that consumer disappears. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

#include "ring/consumer.h"
#include "ring/layout.h"
#include "ring/process.h"

#define RECORDS_PER_THREAD 5000
#define MAX_THREADS 64

struct producer_arg {
  mt_ring *ring;
  uint64_t stream;
  int failures;
};

static void *produce(void *p) {
  struct producer_arg *a = p;
  uint64_t payload[8];
  for (uint64_t i = 0; i < RECORDS_PER_THREAD; i++) {
    size_t words = 3 + (size_t)((a->stream + i) % 6);
    rt_fill(payload, words, a->stream, i);
    if (mt_ring_write(a->ring, MT_RING_TYPE_OPAQUE_FIRST, (unsigned)a->stream, payload, words) !=
        MT_OK)
      a->failures++;
  }
  return NULL;
}

/* What the consumer checks for every record of a producer thread. */
struct order {
  uint64_t next[MAX_THREADS];
  uint32_t ring[MAX_THREADS], generation[MAX_THREADS];
  size_t bad;
};

static bool check_in_order(const mt_ring_event *ev, void *arg) {
  struct order *o = arg;
  if (ev->type != MT_RING_TYPE_OPAQUE_FIRST)
    return true;
  uint64_t stream, index;
  if (!rt_verify(ev->payload, ev->words, &stream, &index) || stream >= MAX_THREADS ||
      stream != ev->id)
    return false;
  if (index != o->next[stream])
    return false; /* per-thread order, nothing missing */
  if (index == 0) {
    o->ring[stream] = ev->ring;
    o->generation[stream] = ev->generation;
  } else if (o->ring[stream] != ev->ring || o->generation[stream] != ev->generation) {
    return false; /* one thread, one (ring, generation) */
  }
  o->next[stream]++;
  return true;
}

/* The run callback (a lossless primary reads runs in place, ring/consumer.c): every record of the
 * run collected, and so checked, as the callbacks collect one. */
static size_t check_run(void *user, uint32_t ring, uint32_t generation, uint64_t first_seq,
                        const uint64_t *rec, size_t words, size_t limit, size_t *used) {
  return rt_collect_run(user, ring, generation, first_seq, rec, words, limit, used);
}

static void run_threads_reading(int threads, bool runs) {
  tu_temp_dir(); /* created by the parent, before fork */
  rt_pipe ready, go;
  rt_pipe_open(&ready);
  rt_pipe_open(&go);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    mt_ring *r = rt_child_open(MT_RING_LOSSLESS, 64 * 1024, (uint32_t)threads + 2, 60000);
    rt_signal(&ready);
    rt_wait(&go);
    pthread_t tids[MAX_THREADS];
    struct producer_arg args[MAX_THREADS];
    for (int i = 0; i < threads; i++) {
      args[i] = (struct producer_arg){r, (uint64_t)i, 0};
      if (pthread_create(&tids[i], NULL, produce, &args[i]) != 0)
        _exit(91);
    }
    int failures = 0;
    for (int i = 0; i < threads; i++) {
      pthread_join(tids[i], NULL);
      failures += args[i].failures;
    }
    mt_ring_close(r);
    _exit(failures ? 92 : 0);
  }
  rt_wait(&ready);
  mt_cursor *c = rt_cursor(pid);
  mt_error err = {0};
  assert_int_equal(mt_cursor_register_primary(c, &err), MT_OK);
  rt_signal(&go);
  struct order order;
  memset(&order, 0, sizeof order);
  rt_collector col = {.check = check_in_order, .check_arg = &order};
  rt_collector_attach(c, &col);
  if (runs)
    mt_cursor_set_run_callback(c, check_run);
  rt_drain(c, true);
  assert_int_equal(rt_wait_child(pid), 0);
  for (int i = 0; i < threads; i++)
    assert_int_equal(order.next[i], RECORDS_PER_THREAD);
  assert_int_equal(col.failures, 0);
  assert_int_equal(col.lost, 0);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_false(info.degraded);
  assert_int_equal(info.records_overwritten, 0);
  assert_int_equal(info.records_no_ring, 0);
  assert_int_equal(col.seen, info.records_written);
  for (int i = 0; i < threads; i++) /* distinct threads, distinct identities */
    for (int j = 0; j < i; j++)
      assert_false(order.ring[i] == order.ring[j] && order.generation[i] == order.generation[j]);
  mt_cursor_close(c);
  rt_collector_free(&col);
}

static void run_threads(int threads) {
  run_threads_reading(threads, false);
}

/* The same through the run callback, which the primary hands its batches in place: a producer
 * waiting on a 64 KiB ring for every batch the consumer reads must never overwrite a record the
 * callback is reading. */
static void lossless_runs_read_in_place_deliver_every_record_of_1_thread(void **state) {
  (void)state;
  run_threads_reading(1, true);
}

static void lossless_runs_read_in_place_deliver_every_record_of_8_threads(void **state) {
  (void)state;
  run_threads_reading(8, true);
}

static void lossless_delivers_every_record_of_1_thread(void **state) {
  (void)state;
  run_threads(1);
}
static void lossless_delivers_every_record_of_2_threads(void **state) {
  (void)state;
  run_threads(2);
}
static void lossless_delivers_every_record_of_8_threads(void **state) {
  (void)state;
  run_threads(8);
}
static void lossless_delivers_every_record_of_64_threads(void **state) {
  (void)state;
  run_threads(64);
}

/* The primary consumer reads a little, then is killed; the producer, which has far more to write
 * than the ring holds, must notice, degrade to a flight recorder and finish. */
static void producer_degrades_and_finishes_when_primary_consumer_is_killed(void **state) {
  (void)state;
  tu_temp_dir();
  mt_ring *r = rt_open(MT_RING_LOSSLESS, MT_RING_MIN_SIZE, 4, false);
  rt_pipe registered;
  rt_pipe_open(&registered);
  fflush(NULL);
  pid_t parent = getpid();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    mt_cursor *c = NULL;
    if (mt_cursor_open(&c, tu_temp_dir(), parent, NULL) != MT_OK ||
        mt_cursor_register_primary(c, NULL) != MT_OK)
      _exit(93);
    rt_signal(&registered);
    size_t got = 0, total = 0;
    while (total < 100) {
      if (mt_cursor_poll(c, 100 - total, &got, NULL) != MT_OK)
        _exit(94);
      total += got;
    }
    raise(SIGKILL);
    _exit(95);
  }
  rt_wait(&registered);
  uint64_t payload[2] = {0, 0};
  for (uint64_t i = 0; i < 100000; i++) {
    payload[0] = i;
    assert_int_equal(mt_ring_write(r, 20, 0, payload, 2), MT_OK);
  }
  assert_int_equal(rt_wait_child(pid), 128 + SIGKILL);
  mt_cursor *c = rt_cursor(-1);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_true(info.degraded);
  assert_true(info.records_overwritten > 0);
  assert_true(info.records_overwritten < info.records_written);
  mt_cursor_close(c);
  mt_ring_close(r);
}

static void producer_degrades_when_no_primary_attaches_in_time(void **state) {
  (void)state;
  mt_ring_options o;
  mt_ring_options_init(&o, NULL);
  o.dir = tu_temp_dir();
  o.mode = MT_RING_LOSSLESS;
  o.ring_size = MT_RING_MIN_SIZE;
  o.max_rings = 2;
  o.attach_timeout_ms = 50;
  mt_ring *r = NULL;
  assert_int_equal(mt_ring_open(&r, &o, NULL), MT_OK);
  for (uint64_t i = 0; i < 10000; i++)
    assert_int_equal(mt_ring_write_counter(r, 1, i), MT_OK);
  mt_cursor *c = rt_cursor(-1);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_true(info.degraded);
  assert_true(info.records_overwritten > 0);
  mt_cursor_close(c);
  mt_ring_close(r);
}

static void closing_the_primary_cursor_degrades_the_producer(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_LOSSLESS, MT_RING_MIN_SIZE, 2, false);
  mt_cursor *c = rt_cursor(-1);
  mt_error err = {0};
  if (mt_cursor_register_primary(c, &err) != MT_OK)
    fail_msg("%s", err.message);
  mt_cursor *second = rt_cursor(-1);
  assert_int_equal(mt_cursor_register_primary(second, &err), MT_E_STATE);
  assert_non_null(strstr(err.message, "already is the primary"));
  mt_ring_file_info info;
  mt_cursor_info(second, &info);
  assert_int_equal(info.primary_pid, getpid());
  mt_cursor_close(c);
  for (uint64_t i = 0; i < 10000; i++)
    assert_int_equal(mt_ring_write_counter(r, 1, i), MT_OK);
  mt_cursor_info(second, &info);
  assert_true(info.degraded);
  assert_int_equal(info.primary_pid, 0);
  mt_cursor_close(second);
  mt_ring_close(r);
}

/* ---------------------------------------------------------------------------------------------
 * Consumers racing to become the primary
 * ------------------------------------------------------------------------------------------- */

#define RACERS 6        /* processes, started a clock tick apart so that their start times differ */
#define RACER_THREADS 2 /* cursors racing inside each process (same pid) */
#define CONTENDERS (RACERS * RACER_THREADS)
#define RACE_RECORDS 20000

/* Shared with the racers (MAP_SHARED, set up before fork). */
struct race {
  _Atomic int ready, registered, winners;
  _Atomic int result[CONTENDERS]; /* 0 not yet, 1 won, 2 refused with MT_E_STATE, 3 other */
  _Atomic int32_t pid[CONTENDERS];
  uint64_t ring[CONTENDERS], position[CONTENDERS]; /* where each had read to */
  _Atomic int go, checked;
};

struct contender {
  struct race *race;
  int index;
  int parent;
};

/* In a racer: waits for the parent, but never outlives a parent that failed an assertion. */
static void spin_until(_Atomic int *flag) {
  for (long waited_us = 0; !atomic_load(flag); waited_us += 100) {
    if (waited_us > 30 * 1000000L)
      _exit(83);
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

/* Totals of the winner's reading after the race, checked by its process. */
struct tally {
  uint64_t position;
  uint32_t ring;
};

static int add_position(void *user, const mt_ring_event *ev) {
  struct tally *t = user;
  t->position += ev->words + 2; /* nothing wrapped yet: no padding in between */
  t->ring = ev->ring;
  return MT_CURSOR_NEXT;
}

/* One contender: reads index + 1 records (so that each publishes its own position), waits for
 * the start, registers; the winner then waits for the parent's checks and reads to the end. Its
 * process exits with a status from 80 up when something went wrong. */
static void *contend(void *p) {
  struct contender *me = p;
  struct race *race = me->race;
  mt_cursor *c = NULL;
  if (mt_cursor_open(&c, tu_temp_dir(), me->parent, NULL) != MT_OK) {
    atomic_store(&race->result[me->index], 3);
    atomic_fetch_add(&race->ready, 1);
    atomic_fetch_add(&race->registered, 1);
    return NULL;
  }
  struct tally t = {0};
  mt_cursor_callbacks cb = {0};
  cb.other = add_position;
  mt_cursor_set_callbacks(c, &cb, &t);
  size_t total = 0, got = 0;
  while (total < (size_t)me->index + 1 &&
         mt_cursor_poll(c, me->index + 1 - total, &got, NULL) == MT_OK)
    total += got;
  race->ring[me->index] = t.ring;
  race->position[me->index] = t.position;
  atomic_store(&race->pid[me->index], getpid());
  atomic_fetch_add(&race->ready, 1);
  /* Yield rather than sleep, so that all of them start within microseconds of each other. */
  for (time_t deadline = time(NULL) + 30; !atomic_load(&race->go);) {
    if (time(NULL) > deadline)
      _exit(85);
    sched_yield();
  }
  int rc = mt_cursor_register_primary(c, NULL);
  atomic_store(&race->result[me->index], rc == MT_OK ? 1 : rc == MT_E_STATE ? 2 : 3);
  atomic_fetch_add(&race->registered, 1);
  if (rc != MT_OK) {
    mt_cursor_close(c);
    return NULL;
  }
  atomic_fetch_add(&race->winners, 1);
  spin_until(&race->checked);
  /* Read everything the producer writes, and check that nothing was lost. */
  mt_cursor_set_callbacks(c, NULL, NULL);
  time_t deadline = time(NULL) + 60;
  for (;;) {
    mt_ring_file_info info;
    mt_cursor_info(c, &info);
    if (mt_cursor_poll(c, 0, &got, NULL) != MT_OK)
      _exit(81);
    if (info.stopped && got == 0 && mt_cursor_drained(c))
      break;
    if (time(NULL) > deadline)
      _exit(84);
  }
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  if (info.degraded || info.lost_records || info.records_overwritten)
    _exit(82);
  mt_cursor_close(c);
  return NULL;
}

static void run_racer(struct race *race, int racer, int parent) {
  pthread_t tids[RACER_THREADS];
  struct contender me[RACER_THREADS];
  for (int k = 0; k < RACER_THREADS; k++) {
    me[k] = (struct contender){race, racer * RACER_THREADS + k, parent};
    if (pthread_create(&tids[k], NULL, contend, &me[k]) != 0)
      _exit(80);
  }
  for (int k = 0; k < RACER_THREADS; k++)
    pthread_join(tids[k], NULL);
  _exit(0);
}

/* In the parent: waits until every contender has counted itself in `count`. */
static void wait_for_all(_Atomic int *count) {
  for (long waited_us = 0; atomic_load(count) < CONTENDERS; waited_us += 100) {
    if (waited_us > 30 * 1000000L)
      fail_msg("only %d of %d contenders got there", atomic_load(count), CONTENDERS);
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

static void run_primary_race(void) {
  tu_temp_dir();
  struct race *race =
      mmap(NULL, sizeof *race, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(race != MAP_FAILED);
  memset(race, 0, sizeof *race);
  mt_ring *r = rt_open(MT_RING_LOSSLESS, MT_RING_MIN_SIZE, 2, false);
  for (uint64_t i = 0; i < CONTENDERS + 8; i++)
    assert_int_equal(mt_ring_write_counter(r, 1, i), MT_OK);
  pid_t pids[RACERS];
  long tick_ns = 1000000000L / sysconf(_SC_CLK_TCK);
  for (int i = 0; i < RACERS; i++) {
    fflush(NULL);
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0)
      run_racer(race, i, getppid());
    struct timespec ts = {0, tick_ns + 1000000};
    nanosleep(&ts, NULL);
  }
  wait_for_all(&race->ready);
  atomic_store(&race->go, 1); /* all of them at once */
  wait_for_all(&race->registered);

  int winner = -1, refused = 0;
  for (int i = 0; i < CONTENDERS; i++) {
    int result = atomic_load(&race->result[i]);
    if (result == 1)
      winner = i;
    refused += result == 2;
  }
  assert_int_equal(atomic_load(&race->winners), 1);
  assert_int_equal(refused, CONTENDERS - 1);
  /* What the file says is the winner's: pid, start time, every ring's position. */
  int fd = open(mt_ring_path(r), O_RDONLY);
  assert_true(fd >= 0);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  void *file = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  assert_true(file != MAP_FAILED);
  mt_ring_geometry geo;
  assert_int_equal(mt_ring_layout_check(file, (uint64_t)st.st_size, &geo, NULL), MT_OK);
  mt_ring_file_header *h = mt_ring_header_at(file);
  uint64_t primary = atomic_load(&h->primary);
  int32_t winner_pid = atomic_load(&race->pid[winner]);
  assert_int_equal(mt_ring_primary_pid(primary), winner_pid);
  assert_int_equal(mt_ring_primary_state(primary), MT_RING_PRIMARY_ATTACHED);
  uint64_t start = 0;
  assert_true(mt_process_stat(winner_pid, &start, NULL));
  assert_int_equal(atomic_load(&h->primary_start_time), start);
  for (uint32_t i = 0; i < geo.ring_count; i++)
    assert_int_equal(atomic_load(&mt_ring_block_at(file, &geo, i)->consumer_pos),
                     i == race->ring[winner] ? race->position[winner] : 0);
  munmap(file, (size_t)st.st_size);
  atomic_store(&race->checked, 1);

  /* The producer, with far more to write than the ring holds, waits for the winner alone. */
  for (uint64_t i = 0; i < RACE_RECORDS; i++)
    assert_int_equal(mt_ring_write_counter(r, 2, i), MT_OK);
  mt_cursor *c = rt_cursor(-1);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_false(info.degraded);
  assert_int_equal(info.records_overwritten, 0);
  assert_int_equal(info.primary_pid, winner_pid);
  mt_cursor_close(c);
  mt_ring_close(r);
  for (int i = 0; i < RACERS; i++)
    assert_int_equal(rt_wait_child(pids[i]), 0);
  munmap(race, sizeof *race);
}

/* Consumers in several processes, two threads each, register at once: exactly one wins, the
 * losers write nothing, so the file's pid, start time and positions are the winner's, and the
 * lossless producer waits for it without degrading or overwriting anything. A few rounds, as the
 * interleavings differ from one to the next. */
static void primary_race_has_one_winner_whose_published_state_is_its_own(void **state) {
  (void)state;
  for (int round = 0; round < 3; round++)
    run_primary_race();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lossless_delivers_every_record_of_1_thread),
      cmocka_unit_test(lossless_delivers_every_record_of_2_threads),
      cmocka_unit_test(lossless_delivers_every_record_of_8_threads),
      cmocka_unit_test(lossless_delivers_every_record_of_64_threads),
      cmocka_unit_test(lossless_runs_read_in_place_deliver_every_record_of_1_thread),
      cmocka_unit_test(lossless_runs_read_in_place_deliver_every_record_of_8_threads),
      cmocka_unit_test(producer_degrades_and_finishes_when_primary_consumer_is_killed),
      cmocka_unit_test(producer_degrades_when_no_primary_attaches_in_time),
      cmocka_unit_test(closing_the_primary_cursor_degrades_the_producer),
      cmocka_unit_test(primary_race_has_one_winner_whose_published_state_is_its_own),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
