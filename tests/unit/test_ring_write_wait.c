/* How a lossless producer waits for a slower primary consumer (write.c): once its ring is full it
 * goes on only when the consumer has read a sixteenth of the ring, not as soon as one record fits,
 * and it loses nothing. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

#define RING_BYTES (64 * 1024)
#define RING_WORDS (RING_BYTES / 8)
#define PAYLOAD_WORDS 4
#define RECORD_WORDS (PAYLOAD_WORDS + 2)
#define RECORDS (3 * RING_WORDS / RECORD_WORDS)

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static uint64_t written(mt_cursor *c) {
  mt_ring_file_info info;
  assert_int_equal(mt_cursor_info(c, &info), MT_OK);
  return info.records_written;
}

/* Polls up to `records` records into `col`; returns how many were delivered. */
static size_t read_some(mt_cursor *c, size_t records) {
  size_t total = 0;
  for (int tries = 0; total < records && tries < 100000; tries++) {
    size_t got = 0;
    assert_int_equal(mt_cursor_poll(c, records - total, &got, NULL), MT_OK);
    total += got;
  }
  return total;
}

/* The producer fills its ring and waits; the consumer reads the first two records: the producer
 * must still wait (it would write one record and wait again, once per record read, if it went on as
 * soon as one fitted); once the consumer has read more than a sixteenth of the ring it goes on.
 * Every record arrives. */
static void full_lossless_producer_waits_for_a_sixteenth_of_the_ring(void **state) {
  (void)state;
  tu_temp_dir();
  rt_pipe ready, go;
  rt_pipe_open(&ready);
  rt_pipe_open(&go);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    mt_ring *r = rt_child_open(MT_RING_LOSSLESS, RING_BYTES, 2, 60000);
    rt_signal(&ready);
    rt_wait(&go);
    uint64_t payload[PAYLOAD_WORDS];
    int failures = 0;
    for (uint64_t i = 0; i < RECORDS; i++) {
      rt_fill(payload, PAYLOAD_WORDS, 0, i);
      failures += mt_ring_write(r, MT_RING_TYPE_OPAQUE_FIRST, 0, payload, PAYLOAD_WORDS) != MT_OK;
    }
    mt_ring_close(r);
    _exit(failures ? 92 : 0);
  }
  rt_wait(&ready);
  mt_cursor *c = rt_cursor(pid);
  mt_error err = {0};
  assert_int_equal(mt_cursor_register_primary(c, &err), MT_OK);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  rt_signal(&go);

  /* Full: within two records of the ring's capacity, and no further for a while. */
  uint64_t near_full = (RING_WORDS - 2 * RECORD_WORDS - 16) / RECORD_WORDS;
  for (int ms = 0; written(c) < near_full; ms++) {
    assert_true(ms < 30000);
    sleep_ms(1);
  }
  uint64_t full = 0;
  for (int tries = 0; written(c) != full; tries++) {
    assert_true(tries < 600);
    full = written(c);
    sleep_ms(50);
  }
  assert_true(full <= RING_WORDS / RECORD_WORDS + 2); /* + the thread's start and clock records */

  /* The thread's start and clock records read (8 words): room for one record, not for a
   * sixteenth of the ring. */
  assert_int_equal(read_some(c, 2), 2);
  sleep_ms(50);
  assert_int_equal(written(c), full);

  /* A sixteenth and a little more read: the producer goes on. */
  size_t more = RING_WORDS / 16 / RECORD_WORDS + 4;
  assert_int_equal(read_some(c, more), more);
  for (int ms = 0; written(c) == full; ms++) {
    assert_true(ms < 30000);
    sleep_ms(1);
  }

  rt_drain(c, true);
  assert_int_equal(rt_wait_child(pid), 0);
  assert_int_equal(col.failures, 0);
  assert_int_equal(col.lost, 0);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_false(info.degraded);
  assert_int_equal(info.records_overwritten, 0);
  assert_int_equal(col.seen, info.records_written);
  size_t data = 0;
  for (size_t i = 0; i < col.count; i++)
    data += col.records[i].type == MT_RING_TYPE_OPAQUE_FIRST;
  assert_int_equal(data, RECORDS);
  rt_collector_free(&col);
  mt_cursor_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(full_lossless_producer_waits_for_a_sixteenth_of_the_ring),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
