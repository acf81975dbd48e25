/* The causal repair (src/record/order.c) fed events directly, stamped and arriving in the orders
 * that clock skew and late publishing produce; the trace it writes is read back and checked
 * (no collect before its allocation, never two live objects at one address). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record_testlib.h"
#include "testutil.h"

#include "memtap/tracer.h"
#include "record/record_internal.h"

#define BASE_NS 1000000000000000ll /* trace start, ns since the epoch */

typedef struct fixture {
  rec_order order;
  rec_output out;
  rec_modules modules;
  rec_sites sites;
  rec_symboliser *symboliser;
  mt_recorder_stats stats;
  rec_sink sink;
  int fd;
  const char *path;
  uint64_t arrival;
} fixture;

static void no_writer_needed(void *user) {
  (void)user;
}

static void open_fixture(fixture *f, const char *name) {
  memset(f, 0, sizeof *f);
  f->path = tu_temp_path(name);
  f->fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(f->fd >= 0);
  mt_trace_info info = {.start_time = BASE_NS / 1000,
                        .sample_rate = 1,
                        .executable_name = "t",
                        .host_name = "h",
                        .ocaml_runtime_params = "",
                        .context = ""};
  assert_int_equal(rec_output_open(&f->out, f->fd, false, &info, 3), MT_OK);
  assert_true(rec_order_init(&f->order, 1000 * 1000, 1000 * 1000 * 1000));
  f->symboliser = rec_symboliser_new(true, false);
  f->sink = (rec_sink){.out = &f->out,
                       .modules = &f->modules,
                       .sites = &f->sites,
                       .symboliser = f->symboliser,
                       .stats = &f->stats,
                       .start_us = BASE_NS / 1000,
                       .ensure_writer = no_writer_needed};
}

/* An event stamped `us` after the start, written by thread `source`. */
static void feed(fixture *f, uint32_t type, uint64_t source, int64_t us, uint64_t addr) {
  rec_event *e = rec_event_new(0);
  assert_non_null(e);
  e->type = type;
  e->source = source;
  e->time_ns = BASE_NS + us * 1000;
  e->order = f->arrival++;
  e->addr = addr;
  e->size = 16;
  e->nsamples = 2;
  rec_order_process(&f->order, &f->sink, e);
  free(e);
}

static void close_fixture(fixture *f, rr_trace *t) {
  rec_order_expire(&f->order, &f->sink, INT64_MAX, true);
  rec_output_close(&f->out);
  assert_false(f->out.failed);
  rec_order_free(&f->order);
  rec_symboliser_free(f->symboliser);
  rec_sites_free(&f->sites);
  rec_modules_free(&f->modules);
  close(f->fd);
  rr_read(f->path, t);
}

static void allocation_at_a_live_address_waits_for_the_late_free(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f, "held.ctf");
  feed(&f, MT_TRACER_REC_ALLOC, 1, 10, 0x1000);
  /* Thread 2 got 0x1000 again after thread 1 freed it, but thread 1's free was published late. */
  feed(&f, MT_TRACER_REC_ALLOC, 2, 20, 0x1000);
  assert_int_equal(f.stats.allocations, 1);
  feed(&f, MT_TRACER_REC_FREE, 1, 15, 0x1000);
  feed(&f, MT_TRACER_REC_FREE, 2, 30, 0x1000);
  rr_trace t;
  close_fixture(&f, &t);
  assert_int_equal(t.count, 4);
  assert_int_equal(t.events[0].kind, MT_EVENT_ALLOC);
  assert_int_equal(t.events[1].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[1].obj_id, 0);
  assert_int_equal(t.events[2].kind, MT_EVENT_ALLOC);
  assert_int_equal(t.events[2].obj_id, 1);
  assert_int_equal(t.events[3].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[3].obj_id, 1);
  assert_int_equal(f.stats.unknown_frees, 0);
  assert_int_equal(f.stats.implied_frees, 0);
  /* Each at its own stamp: the held allocation after the free that released it. */
  assert_int_equal(t.events[1].time - BASE_NS / 1000, 15);
  assert_int_equal(t.events[2].time - BASE_NS / 1000, 20);
  rr_trace_free(&t);
}

static void late_event_is_written_at_the_time_already_reached(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f, "late.ctf");
  feed(&f, MT_TRACER_REC_ALLOC, 1, 10, 0x1000);
  feed(&f, MT_TRACER_REC_ALLOC, 2, 50, 0x2000);
  feed(&f, MT_TRACER_REC_FREE, 1, 30, 0x1000); /* published after a later-stamped event */
  rr_trace t;
  close_fixture(&f, &t);
  assert_int_equal(t.count, 3);
  assert_int_equal(t.events[2].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[2].time - BASE_NS / 1000, 50);
  assert_int_equal(f.stats.reordered, 1);
  rr_trace_free(&t);
}

static void late_older_block_is_written_as_a_pair_beside_the_live_one(void **state) {
  (void)state;
  /* Thread 3 allocated X at 10 ms and thread 2 freed it at 12 ms; thread 1 got X again at 14 ms
   * (times further apart than the skew tolerance). Thread 3's ring is read late: its allocation
   * arrives last. */
  fixture f;
  open_fixture(&f, "pair.ctf");
  feed(&f, MT_TRACER_REC_FREE, 2, 12000, 0x8000);  /* held: nothing live at X */
  feed(&f, MT_TRACER_REC_ALLOC, 1, 14000, 0x8000); /* the newer block: written, live */
  feed(&f, MT_TRACER_REC_ALLOC, 3, 10000, 0x8000); /* pairs with the held free */
  feed(&f, MT_TRACER_REC_FREE, 1, 20000, 0x8000);  /* frees the newer block */
  rr_trace t;
  close_fixture(&f, &t);
  assert_int_equal(t.count, 4);
  assert_int_equal(t.events[0].obj_id, 0); /* the newer block */
  assert_int_equal(t.events[1].kind, MT_EVENT_ALLOC);
  assert_int_equal(t.events[1].obj_id, 1); /* the older one, late */
  assert_int_equal(t.events[2].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[2].obj_id, 1);
  assert_int_equal(t.events[3].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[3].obj_id, 0);
  assert_int_equal(f.stats.unknown_frees, 0);
  assert_int_equal(f.stats.implied_frees, 0);
  rr_trace_free(&t);
}

static void free_stamped_before_the_live_allocation_waits_for_its_own(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f, "older-free.ctf");
  feed(&f, MT_TRACER_REC_ALLOC, 1, 30000, 0x9000); /* live, stamped at 30 ms */
  feed(&f, MT_TRACER_REC_FREE, 2, 12000, 0x9000);  /* an older block's free: must not free it */
  assert_int_equal(f.stats.frees, 0);
  feed(&f, MT_TRACER_REC_ALLOC, 3, 10000, 0x9000); /* that older block, late */
  assert_int_equal(f.stats.frees, 1);
  feed(&f, MT_TRACER_REC_FREE, 1, 40000, 0x9000);
  rr_trace t;
  close_fixture(&f, &t);
  assert_int_equal(t.count, 4);
  assert_int_equal(t.events[3].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[3].obj_id, 0);
  assert_int_equal(f.stats.unknown_frees, 0);
  rr_trace_free(&t);
}

static void free_stamped_before_its_allocation_on_another_cpu_is_matched(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f, "skew.ctf");
  /* Thread 1 allocates at 100 µs, thread 2 frees it; thread 2's clock runs 200 µs behind. */
  feed(&f, MT_TRACER_REC_FREE, 2, 90, 0x2000);
  feed(&f, MT_TRACER_REC_ALLOC, 1, 100, 0x2000);
  rr_trace t;
  close_fixture(&f, &t);
  assert_int_equal(t.count, 2);
  assert_int_equal(t.events[0].kind, MT_EVENT_ALLOC);
  assert_int_equal(t.events[1].kind, MT_EVENT_COLLECT);
  assert_int_equal(f.stats.unknown_frees, 0);
  rr_trace_free(&t);
}

static void free_far_before_an_allocation_is_of_an_unknown_block(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f, "far.ctf");
  feed(&f, MT_TRACER_REC_FREE, 2, 0, 0x3000);
  feed(&f, MT_TRACER_REC_ALLOC, 1, 5000, 0x3000); /* 5 ms later: beyond the skew tolerance */
  rr_trace t;
  close_fixture(&f, &t);
  assert_int_equal(t.count, 1);
  assert_int_equal(f.stats.unknown_frees, 1);
  rr_trace_free(&t);
}

static void unmatched_free_expires_after_the_bound_once_rings_caught_up(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f, "expire.ctf");
  feed(&f, MT_TRACER_REC_FREE, 2, 0, 0x4000);
  rec_order_expire(&f.order, &f.sink, BASE_NS + 500 * 1000 * 1000ll, false);
  assert_int_equal(f.stats.unknown_frees, 0); /* within the bound: still waiting */
  rec_order_expire(&f.order, &f.sink, BASE_NS + 1500 * 1000 * 1000ll, false);
  assert_int_equal(f.stats.unknown_frees, 0); /* the rings were not caught up since: waiting */
  f.order.epoch += 2;
  rec_order_expire(&f.order, &f.sink, BASE_NS + 1500 * 1000 * 1000ll, false);
  assert_int_equal(f.stats.unknown_frees, 1);
  /* An allocation arriving after that is a new block. */
  feed(&f, MT_TRACER_REC_ALLOC, 1, 1600 * 1000, 0x4000);
  rr_trace t;
  close_fixture(&f, &t);
  assert_int_equal(t.count, 1);
  assert_int_equal(t.events[0].kind, MT_EVENT_ALLOC);
  rr_trace_free(&t);
}

static void allocation_whose_free_never_comes_implies_it_at_the_end(void **state) {
  (void)state;
  fixture f;
  open_fixture(&f, "implied.ctf");
  feed(&f, MT_TRACER_REC_ALLOC, 1, 10, 0x5000);
  feed(&f, MT_TRACER_REC_ALLOC, 2, 20, 0x5000); /* the free was lost */
  rr_trace t;
  close_fixture(&f, &t);
  assert_int_equal(t.count, 3);
  assert_int_equal(t.events[1].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[1].obj_id, 0);
  assert_int_equal(t.events[2].obj_id, 1);
  assert_int_equal(f.stats.implied_frees, 1);
  rr_trace_free(&t);
}

static void handoff_chain_between_threads_stays_causal(void **state) {
  (void)state;
  /* 200 rounds of: thread A allocates X, thread B frees it, thread A allocates X again; B's
   * frees arrive one round late and stamped slightly early. */
  fixture f;
  open_fixture(&f, "chain.ctf");
  int64_t t = 0;
  for (int i = 0; i < 200; i++, t += 10) {
    feed(&f, MT_TRACER_REC_ALLOC, 1, t + 5, 0x6000);
    if (i > 0)
      feed(&f, MT_TRACER_REC_FREE, 2, t - 3, 0x6000);
  }
  feed(&f, MT_TRACER_REC_FREE, 2, t, 0x6000);
  rr_trace tr;
  close_fixture(&f, &tr);
  assert_int_equal(tr.count, 400);
  assert_int_equal(f.stats.frees, 200);
  assert_int_equal(f.stats.unknown_frees, 0);
  assert_int_equal(f.stats.implied_frees, 0);
  rr_trace_free(&tr);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(allocation_at_a_live_address_waits_for_the_late_free),
      cmocka_unit_test(late_event_is_written_at_the_time_already_reached),
      cmocka_unit_test(late_older_block_is_written_as_a_pair_beside_the_live_one),
      cmocka_unit_test(free_stamped_before_the_live_allocation_waits_for_its_own),
      cmocka_unit_test(free_stamped_before_its_allocation_on_another_cpu_is_matched),
      cmocka_unit_test(free_far_before_an_allocation_is_of_an_unknown_block),
      cmocka_unit_test(unmatched_free_expires_after_the_bound_once_rings_caught_up),
      cmocka_unit_test(allocation_whose_free_never_comes_implies_it_at_the_end),
      cmocka_unit_test(handoff_chain_between_threads_stays_causal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
