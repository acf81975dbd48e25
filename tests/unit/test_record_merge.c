/* The merge of the threads' queues (src/record/merge.c): events come out in (time, arrival) order
 * (between threads' events stamped alike, allocations first) with their own fields and frames
 * whatever the number of threads (pushed inline or not), a
 * thread whose queue empties leaves its slot array to the spares, and one that released its ring
 * (rec_merge_retire) leaves the merge with its frame buffer once its queue is empty, without
 * pulling the frames of the last event popped from under it: short-lived threads neither keep
 * memory nor make every new thread grow fresh arrays. */
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

/* Two threads' events stamped alike (the shared clock tick stamps a polling period's records
 * alike): an allocation goes before another thread's free, whichever arrived first, so that a
 * block handed over and freed within one tick comes out in causal order; each thread's own order
 * holds (thread 200 frees, then allocates; thread 100 allocates, then frees). One pop at a time
 * and in one batch alike. */
static void alike_stamps_put_allocations_before_other_threads_frees(void **state) {
  (void)state;
  static const struct {
    uint64_t source;
    uint32_t type;
  } pushed[4] = {{200, MT_TRACER_REC_FREE},
                 {100, MT_TRACER_REC_ALLOC},
                 {100, MT_TRACER_REC_FREE},
                 {200, MT_TRACER_REC_ALLOC}};
  static const uint64_t expected[4] = {1, 0, 3, 2}; /* orders, as they come out */
  for (int batch = 0; batch < 2; batch++) {
    rec_merge m = {0};
    m.by_key.seed = 1;
    for (uint64_t i = 0; i < 4; i++) {
      rec_event e;
      uint64_t frames[3];
      make_event(&e, frames, pushed[i].source, 5000, i);
      e.type = pushed[i].type;
      assert_true(rec_merge_push(&m, &e, 0));
    }
    rec_event out[4], *outp[4] = {&out[0], &out[1], &out[2], &out[3]};
    size_t n = 0;
    if (batch)
      n = rec_merge_pop_many(&m, INT64_MAX, 0, outp, 4);
    else
      while (n < 4 && rec_merge_pop(&m, &out[n]))
        n++;
    assert_int_equal(n, 4);
    for (size_t k = 0; k < 4; k++) {
      assert_int_equal(out[k].order, expected[k]);
      assert_int_equal(out[k].type, pushed[expected[k]].type);
      assert_int_equal(out[k].source, pushed[expected[k]].source);
    }
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
    assert_true(m.spare_slots.count >= 1 && m.spare_slots.count <= REC_MERGE_SPARES);
  }
  assert_int_equal(m.count, 300);
  rec_merge_free(&m);
}

/* An event of thread `source` whose frames all derive from its order (a new stack every time, so
 * that every push stores frames), stamped `time_ns`. */
static void make_unique_event(rec_event *e, uint64_t *frames, uint64_t source, int64_t time_ns,
                              uint64_t order) {
  make_event(e, frames, source, time_ns, order);
  frames[0] = 0x700000 + order;
}

static void assert_frames_of(const rec_event *out) {
  assert_int_equal(out->nframes, 3);
  assert_int_equal(out->frames[0], 0x700000 + out->order);
  assert_int_equal(out->frames[1], 0x500000);
  assert_int_equal(out->frames[2], 0x600000 + out->source);
}

static void exited_threads_leave_the_merge_and_their_frames_are_reused(void **state) {
  (void)state;
  rec_merge m = {0};
  m.by_key.seed = 3;
  uint64_t order = 0;
  int64_t time = 0;
  size_t most_sources = 0, most_buffers = 0;
  /* Two long-lived threads, and 2000 short-lived ones three at a time, each retired (its ring
   * released) once its last event is pushed, while the merge is drained behind them. */
  for (uint64_t t = 0; t < 2000; t++) {
    uint64_t keys[5] = {1, 2, 100 + t, 100 + t + 1, 100 + t + 2};
    for (int i = 0; i < 20; i++) {
      for (int k = 0; k < 5; k++) {
        rec_event e;
        uint64_t frames[3];
        make_unique_event(&e, frames, keys[k], time++, order++);
        assert_true(rec_merge_push(&m, &e, 0));
      }
    }
    rec_merge_retire(&m, 100 + t); /* its last events are still queued */
    /* Drained up to the newest stamp, but for the last few events. */
    rec_event out;
    int64_t t0;
    while (rec_merge_peek_time(&m, &t0) && t0 < time - 8) {
      assert_true(rec_merge_pop(&m, &out));
      assert_frames_of(&out);
    }
    if (m.count > most_sources)
      most_sources = m.count;
    if (m.frame_buffers > most_buffers)
      most_buffers = m.frame_buffers;
    assert_int_equal(m.by_key.count, m.count);
  }
  /* The live threads (2 + 3) and the one retired with events queued; never 2000 sources, nor
   * their buffers (the spares aside). */
  assert_true(most_sources <= 6);
  assert_true(most_buffers <= 6 + REC_MERGE_SPARES);
  rec_merge_free(&m);
}

static void the_last_popped_events_frames_outlive_their_threads_retirement(void **state) {
  (void)state;
  rec_merge m = {0};
  m.by_key.seed = 4;
  uint64_t order = 0;
  int64_t time = 0;
  rec_event e, out;
  uint64_t frames[3];
  /* Threads 1..4 live, and enough threads released that the spares are full: every buffer
   * released from then on is freed, which ASan would catch being read. (The last, empty pop
   * ended the life of the frames popped before it: their thread goes at once too.) */
  for (uint64_t t = 0; t < 2 * REC_MERGE_SPARES; t++) {
    make_unique_event(&e, frames, 10 + t, time++, order++);
    assert_true(rec_merge_push(&m, &e, 0));
  }
  while (rec_merge_pop(&m, &out)) {
  }
  for (uint64_t t = 1; t <= 4; t++) {
    make_unique_event(&e, frames, t, time++, order++);
    assert_true(rec_merge_push(&m, &e, 0));
  }
  for (uint64_t t = 0; t < 2 * REC_MERGE_SPARES; t++)
    rec_merge_retire(&m, 10 + t);
  assert_int_equal(m.count, 4);
  assert_int_equal(m.spare_frames.count, REC_MERGE_SPARES);
  assert_int_equal(m.frame_buffers, 4 + REC_MERGE_SPARES);

  /* Retired before the pop that empties it: the pop keeps it until the next push or pop.
   * Releases move sources about (a released one's place is taken by the last). */
  rec_merge_retire(&m, 1);
  assert_true(rec_merge_pop(&m, &out));
  assert_int_equal(out.source, 1);
  rec_merge_retire(&m, 3); /* queued: stays */
  assert_int_equal(m.count, 4);
  assert_frames_of(&out);
  make_unique_event(&e, frames, 5, time++, order++);
  assert_true(rec_merge_push(&m, &e, 0)); /* thread 1 goes, thread 5 comes */
  assert_int_equal(m.count, 4);
  assert_false(mt_hashmap_get(&m.by_key, 1, NULL));

  /* Retired after the pop that emptied it: likewise. */
  assert_true(rec_merge_pop(&m, &out));
  assert_int_equal(out.source, 2);
  rec_merge_retire(&m, 2);
  assert_int_equal(m.count, 4);
  assert_true(rec_merge_pop(&m, &out)); /* thread 2 goes; thread 3's last event */
  assert_int_equal(m.count, 3);
  assert_int_equal(out.source, 3);
  rec_merge_retire(&m, 4); /* queued: stays */
  assert_frames_of(&out);
  assert_true(rec_merge_pop(&m, &out)); /* thread 3 goes */
  assert_int_equal(out.source, 4);
  assert_int_equal(m.count, 2);
  /* Retired after the pop that emptied it, with another thread's release pending before. */
  assert_true(rec_merge_pop(&m, &out)); /* thread 4 goes */
  assert_int_equal(out.source, 5);
  assert_frames_of(&out);
  rec_merge_retire(&m, 5);
  assert_frames_of(&out);
  assert_false(rec_merge_pop(&m, &out)); /* thread 5 goes */
  assert_int_equal(m.count, 0);
  assert_int_equal(m.by_key.count, 0);
  assert_int_equal(m.frame_buffers, REC_MERGE_SPARES);
  rec_merge_free(&m);
}

/* The recorder takes events out in batches (rec_merge_pop_many, runs of one thread at a time):
 * a batch must hold what the same number of single pops would, in the same order, up to the same
 * limit (or past it while more than max_queued are queued), every event's frames still readable
 * when the batch is complete, however threads come, go and interleave. */
static void batches_come_out_as_single_pops_would(void **state) {
  (void)state;
  rec_merge one = {0}, many = {0};
  one.by_key.seed = many.by_key.seed = 5;
  uint64_t rng = 0xfeed, order = 0, popped = 0, batches = 0, limited = 0;
  int64_t clock[6] = {0};
  uint64_t generation[6] = {0};
  rec_event *batch[16], single;
  for (int i = 0; i < 16; i++)
    batch[i] = rec_event_new(0);
  for (int round = 0; round < 3000; round++) {
    unsigned burst = (unsigned)(next_random(&rng) % 60);
    for (unsigned k = 0; k < burst; k++) {
      unsigned t = (unsigned)(next_random(&rng) % 6);
      /* threads 0-3 interleave finely, 4 and 5 in runs */
      unsigned run = t < 4 ? 1 : 1 + (unsigned)(next_random(&rng) % 20);
      for (unsigned j = 0; j < run; j++) {
        clock[t] += 1 + (int64_t)(next_random(&rng) % 30);
        rec_event e;
        uint64_t frames[3];
        uint64_t key = 100 + t * 1000 + generation[t];
        if (next_random(&rng) % 3)
          make_event(&e, frames, key, clock[t], order);
        else
          make_unique_event(&e, frames, key, clock[t], order);
        if (next_random(&rng) % 4 == 0)
          e.nframes = 0, e.type = MT_TRACER_REC_FREE;
        order++;
        assert_true(rec_merge_push(&one, &e, 0));
        assert_true(rec_merge_push(&many, &e, 0));
      }
      if (t >= 4 && next_random(&rng) % 8 == 0) { /* the thread exits, another takes its ring */
        rec_merge_retire(&one, 100 + t * 1000 + generation[t]);
        rec_merge_retire(&many, 100 + t * 1000 + generation[t]);
        generation[t]++;
      }
    }
    int64_t limit = INT64_MAX;
    for (unsigned t = 0; t < 6; t++)
      if (clock[t] - 40 < limit)
        limit = clock[t] - 40;
    size_t max_queued = next_random(&rng) % 5 == 0 ? 50 : SIZE_MAX;
    for (;;) {
      size_t n = 1 + (size_t)(next_random(&rng) % 16);
      size_t got = rec_merge_pop_many(&many, limit, max_queued, batch, n);
      batches++;
      for (size_t i = 0; i < got; i++) {
        size_t queued = one.queued;
        assert_true(rec_merge_pop_before(&one, limit, max_queued, &single));
        if (single.time_ns > limit) { /* past the limit only while too many wait */
          assert_true(queued > max_queued);
          limited++;
        }
        assert_int_equal(batch[i]->order, single.order);
        assert_int_equal(batch[i]->source, single.source);
        assert_int_equal(batch[i]->time_ns, single.time_ns);
        assert_int_equal(batch[i]->type, single.type);
        assert_int_equal(batch[i]->addr, single.addr);
        assert_int_equal(batch[i]->size, single.size);
        assert_int_equal(batch[i]->nframes, single.nframes);
        assert_int_equal(batch[i]->stack_hash, single.stack_hash);
        if (single.nframes)
          assert_memory_equal(batch[i]->frames, single.frames, 3 * sizeof *single.frames);
      }
      popped += got;
      if (!got) {
        assert_false(rec_merge_pop_before(&one, limit, max_queued, &single));
        break;
      }
    }
    assert_int_equal(many.queued, one.queued);
  }
  assert_int_equal(popped + many.queued, order);
  assert_true(limited > 0);      /* max_queued let events past the limit */
  assert_true(popped > batches); /* batches of more than one */
  for (int i = 0; i < 16; i++)
    free(batch[i]);
  rec_merge_free(&one);
  rec_merge_free(&many);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(events_of_many_threads_come_out_in_time_order_with_their_frames),
      cmocka_unit_test(alike_stamps_put_allocations_before_other_threads_frees),
      cmocka_unit_test(emptied_threads_leave_their_slot_arrays_to_the_spares),
      cmocka_unit_test(exited_threads_leave_the_merge_and_their_frames_are_reused),
      cmocka_unit_test(the_last_popped_events_frames_outlive_their_threads_retirement),
      cmocka_unit_test(batches_come_out_as_single_pops_would),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
