/* Threads and rings: claiming on the first record, releasing at exit, reuse with a new
 * generation, running out of rings, and recovering a ring whose thread vanished. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

#include "ring/layout.h"
#include "ring/producer.h"

#define THREADS 1000
#define RECORDS 20
#define WAVE 5

struct consumer {
  mt_cursor *cursor;
  _Atomic int stop;
};

static void *consume(void *p) {
  struct consumer *c = p;
  for (;;) {
    int stop = atomic_load(&c->stop);
    size_t got = 0;
    mt_error err = {0};
    if (mt_cursor_poll(c->cursor, 1000, &got, &err) != MT_OK) {
      fprintf(stderr, "poll: %s\n", err.message);
      abort(); /* not fail_msg: this is not the test's thread */
    }
    if (stop && got == 0 && mt_cursor_drained(c->cursor))
      return NULL;
    if (!got) {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
  }
}

struct writer_arg {
  mt_ring *ring;
  uint64_t number;
};

static void *write_a_few(void *p) {
  struct writer_arg *a = p;
  uint64_t payload[4];
  for (uint64_t i = 0; i < RECORDS; i++) {
    rt_fill(payload, 4, a->number, i);
    if (mt_ring_write(a->ring, MT_RING_TYPE_OPAQUE_FIRST, 0, payload, 4) != MT_OK)
      abort();
  }
  return NULL;
}

/* Identity bookkeeping of the consumer: which (ring, generation) each thread number got. */
struct identities {
  uint32_t ring[THREADS], generation[THREADS];
  uint64_t next[THREADS];
  uint32_t live_generation[64]; /* per ring: started and not yet exited, else 0 */
  size_t starts, exits;
};

static bool check_identity(const mt_ring_event *ev, void *arg) {
  struct identities *id = arg;
  if (ev->ring >= 64)
    return false;
  if (ev->type == MT_RING_TYPE_LIFECYCLE && ev->id == MT_RING_LIFECYCLE_THREAD_START) {
    if (id->live_generation[ev->ring] != 0 || ev->payload[0] != ev->generation)
      return false;
    id->live_generation[ev->ring] = ev->generation;
    id->starts++;
    return true;
  }
  if (ev->type == MT_RING_TYPE_LIFECYCLE && ev->id == MT_RING_LIFECYCLE_THREAD_EXIT) {
    if (id->live_generation[ev->ring] != ev->generation || ev->payload[0] != ev->generation)
      return false;
    id->live_generation[ev->ring] = 0;
    id->exits++;
    return true;
  }
  if (ev->type != MT_RING_TYPE_OPAQUE_FIRST)
    return true;
  uint64_t number, index;
  if (!rt_verify(ev->payload, ev->words, &number, &index) || number >= THREADS)
    return false;
  if (id->live_generation[ev->ring] != ev->generation || index != id->next[number])
    return false;
  if (index == 0) {
    id->ring[number] = ev->ring;
    id->generation[number] = ev->generation;
  } else if (id->ring[number] != ev->ring || id->generation[number] != ev->generation) {
    return false;
  }
  id->next[number]++;
  return true;
}

static void thousand_short_lived_threads_keep_their_identity_and_leak_no_ring(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_LOSSLESS, 16384, 8, false);
  struct consumer consumer = {rt_cursor(-1), 0};
  mt_error err = {0};
  assert_int_equal(mt_cursor_register_primary(consumer.cursor, &err), MT_OK);
  struct identities *ids = calloc(1, sizeof *ids);
  rt_collector col = {.check = check_identity, .check_arg = ids};
  rt_collector_attach(consumer.cursor, &col);
  pthread_t consumer_thread;
  assert_int_equal(pthread_create(&consumer_thread, NULL, consume, &consumer), 0);

  static struct writer_arg args[THREADS];
  for (int first = 0; first < THREADS; first += WAVE) {
    pthread_t tids[WAVE];
    for (int k = 0; k < WAVE; k++) {
      args[first + k] = (struct writer_arg){r, (uint64_t)(first + k)};
      assert_int_equal(pthread_create(&tids[k], NULL, write_a_few, &args[first + k]), 0);
    }
    for (int k = 0; k < WAVE; k++)
      pthread_join(tids[k], NULL);
  }
  mt_ring_file_info info;
  mt_cursor_info(consumer.cursor, &info);
  assert_int_equal(info.rings_in_use, 1); /* only the main thread's */
  assert_int_equal(info.records_no_ring, 0);
  mt_ring_close(r);
  atomic_store(&consumer.stop, 1);
  pthread_join(consumer_thread, NULL);

  mt_cursor_info(consumer.cursor, &info);
  assert_int_equal(info.rings_in_use, 0);
  assert_int_equal(col.failures, 0);
  assert_int_equal(col.lost, 0);
  assert_int_equal(ids->starts, THREADS + 1);
  assert_int_equal(ids->exits, THREADS + 1);
  for (int n = 0; n < THREADS; n++) {
    assert_int_equal(ids->next[n], RECORDS);
    assert_true(ids->ring[n] < 8);
  }
  /* Rings were reused: many more generations than rings. */
  uint32_t max_generation = 0;
  for (int n = 0; n < THREADS; n++)
    if (ids->generation[n] > max_generation)
      max_generation = ids->generation[n];
  assert_true(max_generation >= THREADS / 8);
  mt_cursor_close(consumer.cursor);
  rt_collector_free(&col);
  free(ids);
}

/* Threads started and ended one after another reuse the ring the last one released (its space
 * reserved, its pages mapped in) instead of going through the file one new ring each. */
static void threads_one_after_another_reuse_one_ring(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 16384, 64, false);
  uint64_t payload[4];
  rt_fill(payload, 4, 0, 0);
  assert_int_equal(mt_ring_write(r, MT_RING_TYPE_OPAQUE_FIRST, 0, payload, 4), MT_OK);
  static struct writer_arg args[200];
  for (int n = 0; n < 200; n++) {
    args[n] = (struct writer_arg){r, (uint64_t)n};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, write_a_few, &args[n]), 0);
    pthread_join(t, NULL);
  }
  /* The main thread's ring and one more, not 64 taken in turn. */
  assert_int_equal(atomic_load(&mt_ring_session.header->rings_high), 2);
  mt_ring_close(r);
}

struct holder {
  mt_ring *ring;
  pthread_barrier_t *wrote, *release;
};

static void *hold_a_ring(void *p) {
  struct holder *h = p;
  mt_ring_write_counter(h->ring, 1, 1);
  pthread_barrier_wait(h->wrote);
  pthread_barrier_wait(h->release);
  return NULL;
}

struct late_writer {
  mt_ring *ring;
  pthread_barrier_t *step;
  int before[10], after;
};

static void *write_without_a_ring(void *p) {
  struct late_writer *w = p;
  for (int i = 0; i < 10; i++)
    w->before[i] = mt_ring_write_counter(w->ring, 2, (uint64_t)i);
  pthread_barrier_wait(w->step); /* the holder may go */
  pthread_barrier_wait(w->step); /* it has gone */
  w->after = mt_ring_write_counter(w->ring, 2, 99);
  return NULL;
}

static void when_every_ring_is_taken_records_are_dropped_and_counted(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false); /* main thread holds ring 0 */
  pthread_barrier_t wrote, release, step;
  pthread_barrier_init(&wrote, NULL, 2);
  pthread_barrier_init(&release, NULL, 2);
  pthread_barrier_init(&step, NULL, 2);
  struct holder h = {r, &wrote, &release};
  pthread_t holder, late;
  assert_int_equal(pthread_create(&holder, NULL, hold_a_ring, &h), 0);
  pthread_barrier_wait(&wrote);
  struct late_writer w = {.ring = r, .step = &step};
  assert_int_equal(pthread_create(&late, NULL, write_without_a_ring, &w), 0);
  pthread_barrier_wait(&step);
  pthread_barrier_wait(&release);
  pthread_join(holder, NULL);
  pthread_barrier_wait(&step);
  pthread_join(late, NULL);
  for (int i = 0; i < 10; i++)
    assert_int_equal(w.before[i], MT_E_NOMEM);
  assert_int_equal(w.after, MT_OK); /* the released ring was claimed */
  mt_cursor *c = rt_cursor(-1);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(info.records_no_ring, 10);
  assert_int_equal(info.claims_failed_full, 1);
  mt_cursor_close(c);
  mt_ring_close(r);
  pthread_barrier_destroy(&wrote);
  pthread_barrier_destroy(&release);
  pthread_barrier_destroy(&step);
}

static void *report_tid(void *p) {
  *(pid_t *)p = (pid_t)syscall(SYS_gettid);
  return NULL;
}

static void *write_once(void *p) {
  mt_ring_write_counter(p, 3, 3);
  return NULL;
}

static void ring_of_a_vanished_thread_is_recovered(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  /* A thread id that no longer exists. */
  pid_t gone = 0;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, report_tid, &gone), 0);
  pthread_join(t, NULL);
  /* Make ring 1 look claimed by it, as if it had written after its last destructor round. */
  struct mt_ring *s = (struct mt_ring *)r;
  mt_ring_block *b = mt_ring_block_at(s->base, &s->geo, 1);
  atomic_store(&b->owner_state, MT_RING_CLAIMED);
  atomic_store(&b->owner_tid, gone);
  atomic_store(&b->generation, 7);
  atomic_store(&b->history[7].start, 0);
  atomic_store(&b->history[7].generation, 7);
  atomic_fetch_add(&s->header->rings_in_use, 1);

  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  assert_int_equal(pthread_create(&t, NULL, write_once, r), 0);
  pthread_join(t, NULL);
  rt_drain(c, false);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(info.rings_recovered, 1);
  assert_int_equal(info.records_no_ring, 0);
  assert_int_equal(info.rings_in_use, 1);
  bool exit_on_behalf = false, started = false;
  for (size_t i = 0; i < col.count; i++) {
    rt_record *rec = &col.records[i];
    if (rec->ring != 1 || rec->type != MT_RING_TYPE_LIFECYCLE)
      continue;
    if (rec->id == MT_RING_LIFECYCLE_THREAD_EXIT && rec->payload[0] == 7 && rec->payload[1] == 1)
      exit_on_behalf = true;
    if (rec->id == MT_RING_LIFECYCLE_THREAD_START && rec->generation == 8)
      started = exit_on_behalf;
  }
  assert_true(exit_on_behalf);
  assert_true(started);
  mt_cursor_close(c);
  mt_ring_close(r);
  rt_collector_free(&col);
}

/* A file whose name is gone (mt_ring_unlink, once the consumer has mapped it): a new thread still
 * claims a ring (its space reserved by faulting the pages in, the path being gone), writes, and
 * the consumer reads what it wrote; close removes nothing else. */
static void *write_many(void *p) {
  for (uint64_t i = 0; i < 20000; i++) /* 3 words each: past the first 64 KiB reserved */
    if (mt_ring_write_counter(p, 4, i) != MT_OK)
      abort();
  return NULL;
}

static void threads_write_after_the_file_lost_its_name(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_LOSSLESS, 1u << 20, 4, false);
  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {0};
  rt_collector_attach(c, &col);
  char path[4096];
  snprintf(path, sizeof path, "%s", mt_ring_path(r));
  assert_int_equal(mt_ring_unlink(r), MT_OK);
  assert_int_equal(access(path, F_OK), -1);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, write_many, r), 0);
  pthread_join(t, NULL);
  assert_int_equal(mt_ring_close(r), MT_OK);
  rt_drain(c, true);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(info.claims_failed_space, 0);
  assert_int_equal(info.records_no_ring, 0);
  assert_true(col.seen >= 20000);
  mt_cursor_close(c);
  rt_collector_free(&col);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(thousand_short_lived_threads_keep_their_identity_and_leak_no_ring),
      cmocka_unit_test(threads_one_after_another_reuse_one_ring),
      cmocka_unit_test(when_every_ring_is_taken_records_are_dropped_and_counted),
      cmocka_unit_test(ring_of_a_vanished_thread_is_recovered),
      cmocka_unit_test(threads_write_after_the_file_lost_its_name),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
