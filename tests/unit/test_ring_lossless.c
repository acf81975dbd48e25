/* Lossless mode across processes: a producer process with N threads and a consumer process
 * that registered as the primary; and what happens when that consumer disappears. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

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

static void run_threads(int threads) {
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lossless_delivers_every_record_of_1_thread),
      cmocka_unit_test(lossless_delivers_every_record_of_2_threads),
      cmocka_unit_test(lossless_delivers_every_record_of_8_threads),
      cmocka_unit_test(lossless_delivers_every_record_of_64_threads),
      cmocka_unit_test(producer_degrades_and_finishes_when_primary_consumer_is_killed),
      cmocka_unit_test(producer_degrades_when_no_primary_attaches_in_time),
      cmocka_unit_test(closing_the_primary_cursor_degrades_the_producer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
