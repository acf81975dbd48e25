/* The merge of the threads' queues (src/record/merge.c): events come out in (time, arrival) order
 * with their own fields and frames whatever the number of threads (pushed inline or not), and a
 * thread whose queue empties leaves its slot array to the spares, so that short-lived threads
 * neither keep memory nor make every new thread grow a fresh array. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "memtap/tracer.h"
#include "record/record_internal.h"

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* An ALLOC of thread `source` stamped `time_ns`, its frames derived from its order. */
static void make_event(rec_event *e, uint64_t *frames, uint64_t source, int64_t time_ns,
                       uint64_t order) {
  memset(e, 0, sizeof *e);
  e->type = MT_TRACER_REC_ALLOC;
  e->source = source;
  e->time_ns = time_ns;
  e->order = order;
  e->addr = 0x1000 + order * 16;
  e->size = order % 200 + 1;
  e->nsamples = 1;
  e->nframes = 3;
  frames[0] = 0x400000 + order / 8 % 5; /* runs of one stack, then another */
  frames[1] = 0x500000;
  frames[2] = 0x600000 + source;
  e->frames = frames;
}

static void events_of_many_threads_come_out_in_time_order_with_their_frames(void **state) {
  (void)state;
  for (unsigned threads = 1; threads <= 5; threads++) {
    rec_merge m = {0};
    m.by_key.seed = 1;
    uint64_t rng = 0x1234567 + threads, order = 0;
    int64_t clock[8] = {0};
    int64_t last_time = INT64_MIN;
    uint64_t last_order = 0, pushed = 0, popped = 0, quick = 0;
    for (int round = 0; round < 2000; round++) {
      unsigned burst = (unsigned)(next_random(&rng) % 40);
      for (unsigned k = 0; k < burst; k++) {
        unsigned t = (unsigned)(next_random(&rng) % threads);
        clock[t] += 1 + (int64_t)(next_random(&rng) % 50); /* each thread's stamps increase */
        rec_event e;
        uint64_t frames[3];
        make_event(&e, frames, 100 + t, clock[t], order++);
        /* The recorder's way: the inline push when it applies, else the general one. */
        if (rec_merge_push_quick(&m, &e, 0))
          quick++;
        else
          assert_true(rec_merge_push(&m, &e, 0));
        pushed++;
      }
      /* Take out what every thread has gone past (as the recorder's frontier does). */
      int64_t frontier = INT64_MAX, t0;
      for (unsigned t = 0; t < threads; t++)
        if (clock[t] < frontier)
          frontier = clock[t];
      while (rec_merge_peek_time(&m, &t0) && t0 <= frontier) {
        rec_event out;
        assert_true(rec_merge_pop(&m, &out));
        popped++;
        assert_true(out.time_ns > last_time ||
                    (out.time_ns == last_time && out.order > last_order));
        last_time = out.time_ns;
        last_order = out.order;
        assert_int_equal(out.addr, 0x1000 + out.order * 16);
        assert_int_equal(out.size, out.order % 200 + 1);
        assert_int_equal(out.nframes, 3);
        assert_int_equal(out.frames[0], 0x400000 + out.order / 8 % 5);
        assert_int_equal(out.frames[1], 0x500000);
        assert_int_equal(out.frames[2], 0x600000 + out.source);
      }
    }
    rec_event out;
    while (rec_merge_pop(&m, &out))
      popped++;
    assert_int_equal(popped, pushed);
    assert_true(quick > 0 && quick < pushed); /* both ways were taken */
    assert_int_equal(m.queued, 0);
    rec_merge_free(&m);
  }
}

static void emptied_threads_leave_their_slot_arrays_to_the_spares(void **state) {
  (void)state;
  rec_merge m = {0};
  m.by_key.seed = 2;
  uint64_t order = 0;
  /* Short-lived threads one after the other, each queueing far more than a first array holds. */
  for (uint64_t t = 0; t < 300; t++) {
    for (int i = 0; i < 5000; i++) {
      rec_event e;
      uint64_t frames[3];
      make_event(&e, frames, 1000 + t, (int64_t)order, order);
      order++;
      assert_true(rec_merge_push(&m, &e, 0));
    }
    if (t > 0) /* an array grown by an earlier thread was taken, not a first-size one */
      assert_true(m.sources[t].slot_mask + 1 >= 5000);
    rec_event out;
    while (rec_merge_pop(&m, &out)) {
    }
    for (size_t i = 0; i < m.count; i++)
      assert_null(m.sources[i].slots);
    assert_true(m.spares >= 1 && m.spares <= REC_MERGE_SPARES);
  }
  assert_int_equal(m.count, 300);
  rec_merge_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(events_of_many_threads_come_out_in_time_order_with_their_frames),
      cmocka_unit_test(emptied_threads_leave_their_slot_arrays_to_the_spares),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
