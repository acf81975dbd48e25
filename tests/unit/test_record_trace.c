/* The recorder end to end on rings the test process writes itself: object ids, realloc, unknown
 * frees, regions, module instances, output variants and a failing output. Every trace is read
 * back whole (record_testlib.c checks times, and that collects name live objects only). */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record_testlib.h"
#include "testutil.h"

#include "memtap/tracer.h"
#include "ring/producer.h"

static void ids_follow_allocation_order_and_lengths_are_words(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  rr_alloc(r, 0x1000, 24, NULL, 0);
  rr_alloc(r, 0x2000, 1, NULL, 0);
  rr_alloc(r, 0x3000, 4097, NULL, 0);
  rr_free(r, 0x2000);
  rr_free(r, 0x1000);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "ids.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 5);
  assert_int_equal(t.events[0].kind, MT_EVENT_ALLOC);
  assert_int_equal(t.events[0].obj_id, 0);
  assert_int_equal(t.events[0].length, 3);
  assert_int_equal(t.events[0].nsamples, 3);
  assert_int_equal(t.events[0].source, MT_SOURCE_EXTERNAL);
  assert_int_equal(t.events[1].obj_id, 1);
  assert_int_equal(t.events[1].length, 1);
  assert_int_equal(t.events[2].obj_id, 2);
  assert_int_equal(t.events[2].length, 513);
  assert_int_equal(t.events[3].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[3].obj_id, 1);
  assert_int_equal(t.events[4].obj_id, 0);
  assert_int_equal(st.allocations, 3);
  assert_int_equal(st.frees, 2);
  assert_int_equal(st.unknown_frees, 0);
  assert_int_equal(st.lost_records, 0);
  assert_true(st.bytes > 0);
  const mt_trace_info *info = mt_reader_info(t.reader);
  assert_string_equal(info->executable_name, "/usr/bin/traced-program");
  assert_true(info->sample_rate == 1);
  assert_non_null(strstr(info->ocaml_runtime_params, "mode=full"));
  assert_int_equal(info->version, 3);
  rr_trace_free(&t);
}

static void realloc_is_a_collect_and_an_alloc(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  rr_alloc(r, 0x1000, 16, NULL, 0);
  rr_realloc(r, 0x1000, 0x5000, 800);
  rr_realloc(r, 0x5000, 0x5000, 1600); /* in place */
  rr_realloc(r, 0, 0x9000, 8);         /* realloc(NULL, n) */
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "realloc.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 6);
  assert_int_equal(t.events[1].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[1].obj_id, 0);
  assert_int_equal(t.events[2].kind, MT_EVENT_ALLOC);
  assert_int_equal(t.events[2].obj_id, 1);
  assert_int_equal(t.events[2].length, 100);
  assert_int_equal(t.events[3].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[3].obj_id, 1);
  assert_int_equal(t.events[4].length, 200);
  assert_int_equal(t.events[5].obj_id, 3);
  assert_int_equal(st.unknown_frees, 0);
  rr_trace_free(&t);
}

static void free_of_unknown_block_is_counted_not_written(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  rr_free(r, 0x7777);
  rr_alloc(r, 0x1000, 8, NULL, 0);
  rr_free(r, 0x1000);
  rr_free(r, 0x1000); /* a double free: the block is gone */
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "unknown.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 2);
  assert_int_equal(st.frees, 1);
  assert_int_equal(st.unknown_frees, 2);
  rr_trace_free(&t);
}

static void free_before_its_allocation_on_the_same_thread_is_unknown(void **state) {
  (void)state;
  /* One thread's records of one address alternate: a free first is of an older block. */
  mt_ring *r = rr_open(true, 1);
  rr_free(r, 0x1000);
  rr_alloc(r, 0x1000, 8, NULL, 0);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "same-thread.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 1);
  assert_int_equal(t.events[0].kind, MT_EVENT_ALLOC);
  assert_int_equal(st.unknown_frees, 1);
  rr_trace_free(&t);
}

static void region_is_split_by_a_partial_unmap(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  rr_map(r, 0x100000, 0x4000);
  rr_unmap(r, 0x101000, 0x1000);
  rr_unmap(r, 0x100000, 0x1000); /* the left piece, whole */
  rr_unmap(r, 0x102000, 0x800);  /* the head of the right piece */
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "regions.ctf", NULL, &st), &t);
  /* alloc 0 [0,4000); collect 0, alloc 1 [0,1000), alloc 2 [2000,4000); collect 1;
   * collect 2, alloc 3 [2800,4000), still mapped at the end. */
  assert_int_equal(t.count, 7);
  assert_int_equal(t.events[0].source, MT_SOURCE_MAJOR);
  assert_int_equal(t.events[0].length, 0x4000 / 8);
  assert_int_equal(t.events[1].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[1].obj_id, 0);
  assert_int_equal(t.events[2].length, 0x1000 / 8);
  assert_int_equal(t.events[3].length, 0x2000 / 8);
  assert_int_equal(t.events[3].source, MT_SOURCE_MAJOR);
  assert_int_equal(t.events[4].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[4].obj_id, 1);
  assert_int_equal(t.events[5].obj_id, 2);
  assert_int_equal(t.events[6].kind, MT_EVENT_ALLOC);
  assert_int_equal(t.events[6].length, 0x1800 / 8);
  assert_int_equal(t.events[6].obj_id, 3);
  (void)st;
  rr_trace_free(&t);
}

static void thread_start(mt_ring *r, uint64_t tid, uint64_t low, uint64_t high) {
  uint64_t p[3] = {tid, low, high};
  assert_int_equal(mt_ring_write(r, MT_TRACER_REC_THREAD_START, 0, p, 3), MT_OK);
}

static void thread_exit(mt_ring *r, uint64_t tid) {
  assert_int_equal(mt_ring_write(r, MT_TRACER_REC_THREAD_EXIT, 0, &tid, 1), MT_OK);
}

static void thread_stack_is_a_major_region_freed_at_thread_exit(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  thread_start(r, 4242, 0x7f0000000000, 0x7f0000010000);
  rr_alloc(r, 0x1000, 16, NULL, 0);
  thread_exit(r, 4242);
  thread_exit(r, 4242); /* a second exit has nothing left to free */
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "thread-stack.ctf", NULL, &st), &t);
  /* alloc 0 (the stack), alloc 1 (the block), collect 0 */
  assert_int_equal(t.count, 3);
  assert_int_equal(t.events[0].kind, MT_EVENT_ALLOC);
  assert_int_equal(t.events[0].source, MT_SOURCE_MAJOR);
  assert_int_equal(t.events[0].length, 0x10000 / 8);
  assert_int_equal(t.events[0].nsamples, 0x10000 / 8);
  assert_int_equal(t.events[0].depth, 1);
  size_t n;
  const mt_location *site = rr_locations(&t, t.events[0].codes[0], &n);
  assert_int_equal(n, 1);
  assert_string_equal(site->defname, "<thread stack>");
  assert_int_equal(t.events[1].source, MT_SOURCE_EXTERNAL);
  assert_int_equal(t.events[2].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[2].obj_id, t.events[0].obj_id);
  assert_int_equal(st.allocations, 2);
  assert_int_equal(st.frees, 1);
  rr_trace_free(&t);
}

static void main_thread_stack_is_not_a_region(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  thread_start(r, (uint64_t)getpid(), 0x7ff000000000, 0x7ff000800000); /* the process entry's pid */
  rr_alloc(r, 0x1000, 16, NULL, 0);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "main-stack.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 1); /* the block only */
  assert_int_equal(t.events[0].source, MT_SOURCE_EXTERNAL);
  rr_trace_free(&t);
}

static void
running_thread_stack_is_collected_at_the_end_and_own_mapping_not_counted_twice(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  rr_map(r, 0x200000, 0x10000);             /* the program's own mmap... */
  thread_start(r, 100, 0x200000, 0x210000); /* ...given to a thread as its stack */
  thread_start(r, 101, 0x7f0000000000, 0x7f0000008000);
  thread_exit(r, 100); /* leaves the program's mapping alone */
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "thread-stacks.ctf", NULL, &st), &t);
  /* alloc 0 (the mmap), alloc 1 (thread 101's stack), collect 1 at the end */
  assert_int_equal(t.count, 3);
  assert_int_equal(t.events[0].length, 0x10000 / 8);
  assert_int_equal(t.events[1].length, 0x8000 / 8);
  size_t n;
  assert_string_equal(rr_locations(&t, t.events[1].codes[0], &n)->defname, "<thread stack>");
  assert_int_equal(t.events[2].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[2].obj_id, t.events[1].obj_id);
  rr_trace_free(&t);
}

static void map_fixed_over_a_region_replaces_that_part(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  rr_map(r, 0x100000, 0x3000);
  rr_map(r, 0x101000, 0x1000);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "fixed.ctf", NULL, &st), &t);
  /* alloc 0; collect 0, alloc 1 [0,1000), alloc 2 [2000,3000); alloc 3 [1000,2000) */
  assert_int_equal(t.count, 5);
  assert_int_equal(t.events[1].kind, MT_EVENT_COLLECT);
  assert_int_equal(t.events[4].length, 0x1000 / 8);
  assert_int_equal(t.events[4].obj_id, 3);
  rr_trace_free(&t);
}

static void module_unloaded_and_another_at_its_address_get_two_codes(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  uint64_t base = 0x7f0000000000;
  uint64_t frame = base + 0x1235;
  rr_module(r, 1, base, base, base + 0x10000, "/nonexistent/liba.so", "", 0);
  rr_alloc(r, 0x1000, 8, &frame, 1);
  rr_unload(r, 1);
  rr_module(r, 2, base, base, base + 0x10000, "/nonexistent/libb.so", "", 0);
  rr_alloc(r, 0x2000, 8, &frame, 1);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "modules.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 2);
  assert_int_equal(t.events[0].depth, 1);
  assert_int_equal(t.events[1].depth, 1);
  assert_true(t.events[0].codes[0] != t.events[1].codes[0]);
  size_t n;
  const mt_location *a = rr_locations(&t, t.events[0].codes[0], &n);
  assert_int_equal(n, 1);
  assert_string_equal(a->defname, "liba.so+0x1234");
  const mt_location *b = rr_locations(&t, t.events[1].codes[0], &n);
  assert_string_equal(b->defname, "libb.so+0x1234");
  rr_trace_free(&t);
}

static void pc_in_no_module_and_truncated_stack_have_their_own_codes(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  uint64_t p[4 + 2] = {0x1000, 8, 1, MT_TRACER_KIND_MALLOC | MT_TRACER_FLAG_TRUNCATED, 0x4242, 0};
  assert_int_equal(mt_ring_write(r, MT_TRACER_REC_ALLOC, 1, p, 5), MT_OK);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "nomodule.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 1);
  assert_int_equal(t.events[0].depth, 2);
  size_t n;
  /* outermost first: the truncation marker, then the PC */
  assert_string_equal(rr_locations(&t, t.events[0].codes[0], &n)->defname, "<truncated>");
  assert_string_equal(rr_locations(&t, t.events[0].codes[1], &n)->defname, "0x4241");
  rr_trace_free(&t);
}

/* One stack, truncated in the second allocation only: the writer is never told "the same codes as
 * the previous allocation" across the change (the stack serial is shared, the codes are not). */
static void same_frames_truncated_or_not_keep_their_own_codes(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  for (uint64_t i = 0; i < 3; i++) {
    uint64_t flags = i == 1 ? MT_TRACER_FLAG_TRUNCATED : 0;
    uint64_t p[5] = {0x1000 * (i + 1), 8, 1, MT_TRACER_KIND_MALLOC | flags, 0x4242};
    assert_int_equal(mt_ring_write(r, MT_TRACER_REC_ALLOC, 1, p, 5), MT_OK);
  }
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "truncated.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 3);
  assert_int_equal(t.events[0].depth, 1);
  assert_int_equal(t.events[1].depth, 2);
  assert_int_equal(t.events[2].depth, 1);
  size_t n;
  assert_string_equal(rr_locations(&t, t.events[1].codes[0], &n)->defname, "<truncated>");
  assert_string_equal(rr_locations(&t, t.events[2].codes[0], &n)->defname, "0x4241");
  rr_trace_free(&t);
}

/* A mapping not sampled has its stack looked up but not written: an allocation from that stack
 * next is not "the same codes as the previous allocation" for the writer. */
static void allocation_after_an_unwritten_region_of_its_stack_keeps_its_codes(void **state) {
  (void)state;
  mt_ring *r = rr_open(false, 1e-9);
  uint64_t a = 0x4242, b = 0x5252;
  rr_alloc(r, 0x1000, 8, &a, 1);
  uint64_t map[5] = {0x100000, 0x1000, 3, MT_TRACER_KIND_MMAP, b};
  assert_int_equal(mt_ring_write(r, MT_TRACER_REC_MAP, 1, map, 5), MT_OK);
  rr_alloc(r, 0x2000, 8, &b, 1);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "unsampled_region.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 2); /* the region drew no sample */
  size_t n;
  assert_string_equal(rr_locations(&t, t.events[0].codes[0], &n)->defname, "0x4241");
  assert_string_equal(rr_locations(&t, t.events[1].codes[0], &n)->defname, "0x5251");
  rr_trace_free(&t);
}

static void compressed_v2_trace_reads_back(void **state) {
  (void)state;
  mt_ring *r = rr_open(false, 0.01);
  rr_alloc(r, 0x1000, 64, NULL, 0);
  rr_map(r, 0x100000, 0x10000);
  rr_free(r, 0x1000);
  mt_recorder_options o = {.version = 2, .compress = true, .context = "prog --flag"};
  mt_recorder_stats st;
  const char *path = rr_record(r, "small.ctf.zst", &o, &st);
  size_t size;
  uint8_t *bytes = tu_read_file(path, &size);
  assert_true(size >= 4);
  assert_int_equal(bytes[0], 0x28); /* zstd magic 28 b5 2f fd */
  assert_int_equal(bytes[3], 0xfd);
  assert_int_equal(st.bytes, size);
  free(bytes);
  rr_trace t;
  rr_read(path, &t);
  const mt_trace_info *info = mt_reader_info(t.reader);
  assert_int_equal(info->version, 2);
  assert_true(info->sample_rate == 0.01);
  assert_non_null(strstr(info->ocaml_runtime_params, "mode=sampled,interval=800"));
  assert_int_equal(t.count, 3);
  /* A region's samples are drawn at the rate: 0x10000 bytes = 8192 words at 0.01, mean 81.92,
   * sigma 9 */
  assert_true(t.events[1].nsamples >= 37 && t.events[1].nsamples <= 127);
  rr_trace_free(&t);
}

static void compression_level_is_used_and_checked(void **state) {
  (void)state;
  /* Many allocations alike: a high level must give a smaller stream than the fastest one. */
  size_t sizes[2];
  const int levels[2] = {-50, 19};
  for (int k = 0; k < 2; k++) {
    mt_ring *r = rr_open(false, 1);
    for (uint64_t i = 0; i < 3000; i++) {
      rr_alloc(r, 0x10000 + i * 64, 8 + i % 40, NULL, 0);
      rr_free(r, 0x10000 + i * 64);
    }
    mt_recorder_options o = {.compress = true, .compress_level = levels[k]};
    mt_recorder_stats st;
    const char *path = rr_record(r, k ? "level19.ctf.zst" : "fast.ctf.zst", &o, &st);
    sizes[k] = (size_t)st.bytes;
    rr_trace t;
    rr_read(path, &t);
    assert_int_equal(t.count, 6000);
    rr_trace_free(&t);
  }
  assert_true(sizes[1] < sizes[0]);
  mt_recorder *rec;
  mt_error err = {0};
  mt_recorder_options bad = {.compress = true, .compress_level = 1000};
  assert_int_equal(mt_recorder_create(&rec, 1, &bad, &err), MT_E_INVALID);
  assert_null(rec);
}

static void small_regions_in_sampled_mode_are_estimated_without_bias(void **state) {
  (void)state;
  /* 2000 regions of 512 words at rate 0.01: 10 240 sample points expected (sigma 101); rounding
   * each region up to one sample would give 2000 samples for 2000 regions, i.e. 20 times too
   * many bytes at this rate. */
  mt_ring *r = rr_open(false, 0.01);
  for (uint64_t i = 0; i < 2000; i++)
    rr_map(r, 0x10000000 + i * 0x2000, 0x1000);
  for (uint64_t i = 0; i < 2000; i++)
    rr_unmap(r, 0x10000000 + i * 0x2000, 0x1000);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "sampled-regions.ctf", NULL, &st), &t);
  int64_t samples = 0;
  size_t allocs = 0, collects = 0;
  for (size_t i = 0; i < t.count; i++) {
    if (t.events[i].kind == MT_EVENT_ALLOC) {
      samples += t.events[i].nsamples;
      allocs++;
      assert_true(t.events[i].nsamples >= 1);
    } else {
      collects++;
    }
  }
  assert_true(samples > 10240 - 505 && samples < 10240 + 505); /* 5 sigma */
  assert_int_equal(allocs, collects); /* every written region is collected, no other */
  assert_true(allocs < 2000);         /* regions that drew no sample are not written */
  rr_trace_free(&t);
}

#define HANDOFF_THREADS 4
#define HANDOFF_ROUNDS 80000
static _Atomic(uint64_t) handoff_slots[64];
static mt_ring *handoff_ring;

static int handoff_rounds = HANDOFF_ROUNDS;

/* Like the shim: ALLOC after malloc returned, FREE before free; blocks go to other threads. */
static void *handoff_thread(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  for (int i = 0; i < handoff_rounds; i++) {
    size_t size = 16 + (size_t)(rand_r(&seed) % 100);
    void *p = malloc(size);
    uint64_t a[4] = {(uint64_t)(uintptr_t)p, size, (size + 7) / 8, MT_TRACER_KIND_MALLOC};
    mt_ring_write(handoff_ring, MT_TRACER_REC_ALLOC, 0, a, 4);
    uint64_t old = atomic_exchange(&handoff_slots[rand_r(&seed) % 64], a[0]);
    if (old) {
      mt_ring_write(handoff_ring, MT_TRACER_REC_FREE, 0, &old, 1);
      free((void *)(uintptr_t)old);
    }
  }
  return NULL;
}

/* Runs `threads` handoff threads of `rounds` each on a new ring file made with `o` (its
 * directory the test's), frees what the slots still hold, then records the file poll by poll,
 * after the run, with merge lag `lag_ms` (0: the default) into `name`. Returns the recorder's
 * stats; *polls the polls it took. */
static mt_recorder_stats handoff_record(mt_ring_options *o, int threads, int rounds,
                                        uint32_t lag_ms, const char *name, size_t *polls) {
  o->dir = tu_temp_dir();
  o->registry_size = 64 * 1024;
  o->preserve = true;
  assert_int_equal(mt_ring_open(&handoff_ring, o, NULL), MT_OK);
  handoff_rounds = rounds;
  pthread_t *t = malloc((size_t)threads * sizeof *t);
  assert_non_null(t);
  for (uintptr_t i = 0; i < (uintptr_t)threads; i++)
    assert_int_equal(pthread_create(&t[i], NULL, handoff_thread, (void *)(i + 1)), 0);
  for (int i = 0; i < threads; i++)
    pthread_join(t[i], NULL);
  free(t);
  handoff_rounds = HANDOFF_ROUNDS;
  for (int i = 0; i < 64; i++) {
    uint64_t old = atomic_exchange(&handoff_slots[i], 0);
    if (old) {
      mt_ring_write(handoff_ring, MT_TRACER_REC_FREE, 0, &old, 1);
      free((void *)(uintptr_t)old);
    }
  }
  char ring_path[4096];
  snprintf(ring_path, sizeof ring_path, "%s", mt_ring_path(handoff_ring));
  assert_int_equal(mt_ring_close(handoff_ring), MT_OK);
  int fd = open(tu_temp_path(name), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  mt_recorder *rec;
  mt_error err = {0};
  mt_recorder_options ro = {.merge_lag_ms = lag_ms};
  assert_int_equal(mt_recorder_create(&rec, fd, &ro, &err), MT_OK);
  assert_int_equal(mt_recorder_attach(rec, ring_path, false, &err), MT_OK);
  *polls = 0;
  for (bool progress = true; progress; ++*polls)
    assert_int_equal(mt_recorder_poll(rec, &progress, &err), MT_OK);
  assert_int_equal(mt_recorder_finish(rec, &err), MT_OK);
  mt_recorder_stats st;
  mt_recorder_stats_get(rec, &st);
  mt_recorder_destroy(rec);
  close(fd);
  unlink(ring_path);
  return st;
}

static void handoffs_between_threads_read_poll_by_poll_match_every_free(void **state) {
  (void)state;
  /* 640 000 records from 4 threads: more than one poll reads (256 K), so the recorder works
   * behind, and the threads' rings are read at different speeds; the merge is drained within
   * polls as well as after them. */
  mt_ring_options o;
  assert_int_equal(mt_ring_options_init(&o, NULL), MT_OK);
  o.ring_size = 16u << 20;
  o.max_rings = HANDOFF_THREADS + 1;
  size_t polls;
  mt_recorder_stats st =
      handoff_record(&o, HANDOFF_THREADS, HANDOFF_ROUNDS, 1, "handoff.ctf", &polls);
  assert_true(polls > 2);
  assert_int_equal(st.allocations, HANDOFF_THREADS * HANDOFF_ROUNDS);
  assert_int_equal(st.frees, HANDOFF_THREADS * HANDOFF_ROUNDS); /* every block, each once */
  assert_int_equal(st.unknown_frees, 0);
  assert_int_equal(st.implied_frees, 0);
  /* Every record was in a ring before the first poll: each is written in its place in time,
   * whenever the merge drains (between two cursor calls of a poll too), none late. */
  assert_int_equal(st.reordered, 0);
  rr_trace tr;
  rr_read(tu_temp_path("handoff.ctf"), &tr); /* collects only of live objects, times in order */
  rr_trace_free(&tr);
}

/* 96 threads at once, each writing its own ring (more than the 64 a time-ordered poll once
 * handled: past them the rings were read in turn), blocks passing from thread to thread, 1.2 M
 * records in all: more than the merge may hold (MERGE_MAX_QUEUED), so a reading out of time
 * order has to let events go early. Read poll by poll after the run, every free must still come
 * after its allocation, none repaired: the real case was a program whose threads came and went
 * by the hundred, where hundreds of frees were written as unknown and their blocks' lifetimes
 * wrong. Polls stop at a cap (256 K records): a ring not read at all in a poll, whose next
 * record is older than what other rings gave, must hold the poll's writing back too (before,
 * this test failed in about one run of eight on a loaded machine). */
static void handoffs_across_a_hundred_rings_are_read_in_time_order(void **state) {
  (void)state;
  enum { THREADS = 96, ROUNDS = 6500 };
  mt_ring_options o;
  assert_int_equal(mt_ring_options_init(&o, NULL), MT_OK);
  /* Nothing reads while the threads run: a ring must hold whatever its threads write (a thread
   * that ended gives its ring to the next, unread; 16 MiB is 17 threads' records), or the
   * oldest would be overwritten. */
  o.ring_size = 16u << 20;
  o.max_rings = THREADS + 1;
  o.mode = MT_RING_LOSSLESS;
  size_t polls;
  mt_recorder_stats st = handoff_record(&o, THREADS, ROUNDS, 0, "hundred.ctf", &polls);
  assert_int_equal(st.lost_records, 0);
  assert_int_equal(st.allocations, THREADS * ROUNDS);
  assert_int_equal(st.frees, THREADS * ROUNDS);
  assert_int_equal(st.unknown_frees, 0);
  assert_int_equal(st.implied_frees, 0);
  assert_int_equal(st.reordered, 0);
}

/* Threads taking turns at writing runs of records, each allocation from one of its thread's
 * stacks; the size says which thread and stack. */
enum { STACK_THREADS = 3, STACK_TURNS = 1500 };
static mt_ring *stack_ring;
static _Atomic(unsigned) stack_turn;

/* Stack `s` of thread `t` (innermost first): 0 and 1 differ in the innermost frame only, 2 from
 * 0 in the outermost only, 3 is deeper. */
static size_t stack_frames(unsigned t, unsigned s, uint64_t *frames) {
  size_t n = s == 3 ? 5 : 3;
  for (size_t i = 0; i < n; i++)
    frames[i] = 0x10000 + t * 0x1000 + i * 0x10 + (s == 3 ? 0x300 : 0);
  if (s == 1)
    frames[0] += 0x100;
  if (s == 2)
    frames[n - 1] += 0x200;
  return n;
}

static void *stack_thread(void *arg) {
  unsigned t = (unsigned)(uintptr_t)arg, seed = t + 7, stack = 0;
  uint64_t addr = 0x1000000 * (t + 1), frames[8];
  for (unsigned turn = 0; turn < STACK_TURNS; turn++) {
    while (atomic_load(&stack_turn) % STACK_THREADS != t)
      sched_yield(); /* three threads, maybe fewer cores: let the one whose turn it is run */
    unsigned run = 1 + (unsigned)rand_r(&seed) % 6;
    for (unsigned k = 0; k < run; k++) {
      if (rand_r(&seed) % 3 == 0)
        stack = (unsigned)rand_r(&seed) % 4;
      size_t n = stack_frames(t, stack, frames);
      if (rand_r(&seed) % 11 == 0)
        rr_alloc(stack_ring, 0, 64, frames, n); /* a malloc that failed */
      rr_alloc(stack_ring, addr, 8 * (1 + t * 4 + stack), frames, n);
      if (rand_r(&seed) % 7 == 0)
        rr_free(stack_ring, 0);
      rr_free(stack_ring, addr);
      addr += 16;
    }
    atomic_fetch_add(&stack_turn, 1);
  }
  return NULL;
}

/* Threads whose records interleave are merged by stamp (with runs of one thread queued at once):
 * every allocation keeps its own stack, whichever thread's stack came before it, whether stacks
 * differ in their innermost frame, their outermost or their depth. */
static void interleaved_threads_allocations_keep_their_own_stacks(void **state) {
  (void)state;
  stack_ring = rr_open(true, 1);
  atomic_store(&stack_turn, 0);
  pthread_t th[STACK_THREADS];
  for (uintptr_t t = 0; t < STACK_THREADS; t++)
    assert_int_equal(pthread_create(&th[t], NULL, stack_thread, (void *)t), 0);
  for (int t = 0; t < STACK_THREADS; t++)
    pthread_join(th[t], NULL);
  mt_recorder_stats st;
  rr_trace tr;
  rr_read(rr_record(stack_ring, "stacks.ctf", NULL, &st), &tr);
  assert_int_equal(st.unknown_frees, 0);
  size_t allocs = 0;
  for (size_t i = 0; i < tr.count; i++) {
    const rr_event *e = &tr.events[i];
    if (e->kind != MT_EVENT_ALLOC)
      continue;
    allocs++;
    unsigned t = (unsigned)(e->length - 1) / 4, s = (unsigned)(e->length - 1) % 4;
    assert_true(t < STACK_THREADS);
    uint64_t frames[8];
    size_t n = stack_frames(t, s, frames);
    assert_int_equal(e->depth, n);
    for (size_t k = 0; k < n; k++) {
      size_t count;
      char want[32];
      snprintf(want, sizeof want, "0x%llx", (unsigned long long)frames[n - 1 - k] - 1);
      assert_string_equal(rr_locations(&tr, e->codes[k], &count)->defname, want);
    }
  }
  assert_int_equal(allocs, st.allocations);
  assert_int_equal(st.frees, st.allocations);
  assert_true(st.allocations > STACK_THREADS * STACK_TURNS);
  rr_trace_free(&tr);
}

static void *write_one_alloc(void *arg) {
  uint64_t a[4] = {0x5000, 16, 2, MT_TRACER_KIND_MALLOC};
  mt_ring_write(arg, MT_TRACER_REC_ALLOC, 0, a, 4);
  return NULL;
}

/* A thread that found every ring taken drops its records: the stats count them lost and say why
 * (memtap record's closing line names the cause). */
static void records_lost_for_want_of_a_ring_are_said_why(void **state) {
  (void)state;
  mt_ring_options o;
  assert_int_equal(mt_ring_options_init(&o, NULL), MT_OK);
  o.dir = tu_temp_dir();
  o.ring_size = 64u << 10;
  o.max_rings = 1;
  o.preserve = true;
  mt_ring *r;
  assert_int_equal(mt_ring_open(&r, &o, NULL), MT_OK);
  uint64_t a[4] = {0x4000, 16, 2, MT_TRACER_KIND_MALLOC};
  mt_ring_write(r, MT_TRACER_REC_ALLOC, 0, a, 4); /* this thread takes the only ring */
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, write_one_alloc, r), 0);
  pthread_join(t, NULL);
  mt_recorder_stats st;
  rr_record(r, "no-ring.ctf", NULL, &st);
  assert_int_equal(st.allocations, 1);
  assert_true(st.lost_records >= 1);
  assert_true(st.claims_failed_full >= 1);
  assert_int_equal(st.claims_failed_space, 0);
}

/* A lossless file that degraded (its tracer took the consumer for gone, or waited for it past
 * its attach timeout) stopped tracing: nothing is counted lost, so the stats say it, for memtap
 * record's warning. */
static void a_tracer_that_stopped_early_is_said(void **state) {
  (void)state;
  for (int stopped = 0; stopped < 2; stopped++) {
    mt_ring_options o;
    assert_int_equal(mt_ring_options_init(&o, NULL), MT_OK);
    o.dir = tu_temp_dir();
    o.mode = MT_RING_LOSSLESS;
    o.preserve = true;
    mt_ring *r;
    assert_int_equal(mt_ring_open(&r, &o, NULL), MT_OK);
    uint64_t a[4] = {0x4000, 16, 2, MT_TRACER_KIND_MALLOC};
    assert_int_equal(mt_ring_write(r, MT_TRACER_REC_ALLOC, 0, a, 4), MT_OK);
    if (stopped)
      atomic_store(&mt_ring_session.header->degraded, 1);
    mt_recorder_stats st;
    rr_record(r, "stopped.ctf", NULL, &st);
    assert_int_equal(st.allocations, 1);
    assert_int_equal(st.tracer_stopped, stopped);
  }
}

/* A process entry: its executable, then `command` (`command_length` bytes: NUL-separated
 * arguments, as /proc/PID/cmdline), which may be empty. */
static void register_process_with(mt_ring *r, int64_t pid, const char *exe, const char *command,
                                  size_t command_length) {
  uint8_t buf[sizeof(mt_tracer_process) + 128];
  size_t n = strlen(exe);
  assert_true(n + command_length <= 128);
  mt_tracer_process p = {
      .sample_rate = 1, .flags = MT_TRACER_PROCESS_FULL, .exe_length = (uint32_t)n, .pid = pid};
  memcpy(buf, &p, sizeof p);
  memcpy(buf + sizeof p, exe, n);
  memcpy(buf + sizeof p + n, command, command_length);
  assert_int_equal(
      mt_ring_register(r, MT_TRACER_REGISTRY_PROCESS, 0, buf, sizeof p + n + command_length),
      MT_OK);
}

static void register_process(mt_ring *r, int64_t pid, const char *exe) {
  register_process_with(r, pid, exe, "", 0);
}

/* An allocation the shim could not unwind (made before it was ready: MT_TRACER_FLAG_NO_STACK)
 * reads `<start-up, before backtraces>`, not `<no backtrace>`; one with an empty stack for
 * another reason keeps an empty backtrace. */
static void allocations_before_the_tracer_could_unwind_are_named(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  rr_alloc_kind(r, 0x1000, 72704, NULL, 0, MT_TRACER_KIND_MALLOC | MT_TRACER_FLAG_NO_STACK);
  rr_alloc(r, 0x2000, 16, NULL, 0);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "start-up.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 2);
  assert_int_equal(t.events[0].depth, 1);
  size_t n;
  const mt_location *loc = rr_locations(&t, t.events[0].codes[0], &n);
  assert_int_equal(n, 1);
  assert_string_equal(loc[0].defname, "<start-up, before backtraces>");
  assert_int_equal(t.events[1].depth, 0);
  rr_trace_free(&t);
}

/* The trace's context: the command line the process entry carries (arguments joined by spaces),
 * unless the recorder was given one; "" when neither says. */
static void context_is_the_command_line_the_process_gives(void **state) {
  (void)state;
  static const char command[] = "/usr/bin/prog\0-x\0two words\0";
  mt_recorder_stats st;
  rr_trace t;
  mt_ring *r = rr_open(true, 1);
  register_process_with(r, getpid(), "/usr/bin/prog", command, sizeof command - 1);
  rr_alloc(r, 0x1000, 8, NULL, 0);
  rr_read(rr_record(r, "ctx1.ctf", NULL, &st), &t);
  assert_string_equal(mt_reader_info(t.reader)->context, "/usr/bin/prog -x two words");
  rr_trace_free(&t);

  r = rr_open(true, 1);
  register_process_with(r, getpid(), "/usr/bin/prog", command, sizeof command - 1);
  rr_alloc(r, 0x1000, 8, NULL, 0);
  mt_recorder_options given = {.context = "what memtap ran"};
  rr_read(rr_record(r, "ctx2.ctf", &given, &st), &t);
  assert_string_equal(mt_reader_info(t.reader)->context, "what memtap ran");
  rr_trace_free(&t);

  r = rr_open(true, 1);
  register_process(r, getpid(), "/usr/bin/prog"); /* an older shim's entry: no command line */
  rr_alloc(r, 0x1000, 8, NULL, 0);
  rr_read(rr_record(r, "ctx3.ctf", NULL, &st), &t);
  assert_string_equal(mt_reader_info(t.reader)->context, "");
  rr_trace_free(&t);
}

static void forked_child_trace_describes_the_child_not_the_copied_parent(void **state) {
  (void)state;
  /* A forked child's ring starts with its parent's registry: the parent's description first,
   * then the child's own. */
  mt_ring *r = rr_open(true, 1); /* registers this process (the ring's pid) */
  register_process(r, 1, "/usr/bin/parent-copy");
  rr_alloc(r, 0x1000, 8, NULL, 0);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "child.ctf", NULL, &st), &t);
  assert_int_equal(mt_reader_info(t.reader)->pid, getpid());
  assert_string_equal(mt_reader_info(t.reader)->executable_name, "/usr/bin/traced-program");
  rr_trace_free(&t);

  r = rr_open(true, 1);
  register_process(r, getpid(), "/usr/bin/child-own"); /* the newer entry wins */
  rr_alloc(r, 0x1000, 8, NULL, 0);
  rr_read(rr_record(r, "child2.ctf", NULL, &st), &t);
  assert_string_equal(mt_reader_info(t.reader)->executable_name, "/usr/bin/child-own");
  rr_trace_free(&t);
}

static void unwritable_output_is_reported_and_rings_still_drained(void **state) {
  (void)state;
  mt_ring *r = rr_open(true, 1);
  for (int i = 0; i < 1000; i++)
    rr_alloc(r, 0x1000 + 16 * (uint64_t)i, 8, NULL, 0);
  char ring_path[4096];
  strcpy(ring_path, mt_ring_path(r));
  assert_int_equal(mt_ring_close(r), MT_OK);
  int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  mt_recorder *rec;
  mt_error err = {0};
  assert_int_equal(mt_recorder_create(&rec, fd, NULL, &err), MT_OK);
  assert_int_equal(mt_recorder_attach(rec, ring_path, true, &err), MT_OK);
  assert_int_equal(mt_recorder_poll(rec, NULL, &err), MT_OK);
  assert_int_equal(mt_recorder_finish(rec, &err), MT_E_IO);
  mt_recorder_stats st;
  mt_recorder_stats_get(rec, &st);
  assert_true(st.failed);
  assert_int_equal(st.error.sys_errno, 28 /* ENOSPC */);
  assert_int_equal(st.records, 1000);
  mt_recorder_destroy(rec);
  close(fd);
  unlink(ring_path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ids_follow_allocation_order_and_lengths_are_words),
      cmocka_unit_test(realloc_is_a_collect_and_an_alloc),
      cmocka_unit_test(free_of_unknown_block_is_counted_not_written),
      cmocka_unit_test(free_before_its_allocation_on_the_same_thread_is_unknown),
      cmocka_unit_test(region_is_split_by_a_partial_unmap),
      cmocka_unit_test(map_fixed_over_a_region_replaces_that_part),
      cmocka_unit_test(thread_stack_is_a_major_region_freed_at_thread_exit),
      cmocka_unit_test(main_thread_stack_is_not_a_region),
      cmocka_unit_test(
          running_thread_stack_is_collected_at_the_end_and_own_mapping_not_counted_twice),
      cmocka_unit_test(module_unloaded_and_another_at_its_address_get_two_codes),
      cmocka_unit_test(pc_in_no_module_and_truncated_stack_have_their_own_codes),
      cmocka_unit_test(same_frames_truncated_or_not_keep_their_own_codes),
      cmocka_unit_test(interleaved_threads_allocations_keep_their_own_stacks),
      cmocka_unit_test(allocation_after_an_unwritten_region_of_its_stack_keeps_its_codes),
      cmocka_unit_test(compressed_v2_trace_reads_back),
      cmocka_unit_test(small_regions_in_sampled_mode_are_estimated_without_bias),
      cmocka_unit_test(handoffs_between_threads_read_poll_by_poll_match_every_free),
      cmocka_unit_test(handoffs_across_a_hundred_rings_are_read_in_time_order),
      cmocka_unit_test(records_lost_for_want_of_a_ring_are_said_why),
      cmocka_unit_test(a_tracer_that_stopped_early_is_said),
      cmocka_unit_test(forked_child_trace_describes_the_child_not_the_copied_parent),
      cmocka_unit_test(context_is_the_command_line_the_process_gives),
      cmocka_unit_test(allocations_before_the_tracer_could_unwind_are_named),
      cmocka_unit_test(unwritable_output_is_reported_and_rings_still_drained),
      cmocka_unit_test(compression_level_is_used_and_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
