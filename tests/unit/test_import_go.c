/* Tests of the Go execution-trace import (memtap/import.h, src/import): the shared testdata traces
 * convert to exactly the counts their README lists, with every free naming an earlier allocation
 * and each type's objects sized from their spans; traces built here check the format's rules
 * (versions, generations, batch bounds, tables), slot sizes, times and the ordering of frees
 * across threads; damaged files fail with one message naming a byte. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/hashmap.h"
#include "go_trace_builder.h"
#include "memtap/import.h"
#include "testutil.h"
#include "tracegen.h"

/* Warnings seen by the last import. */
static char warnings[4][256];
static int nwarnings;

static void on_warning(void *user, int64_t offset, const char *message) {
  (void)user;
  (void)offset;
  if (nwarnings < 4)
    snprintf(warnings[nwarnings], sizeof warnings[0], "%s", message);
  nwarnings++;
}

/* Imports `data`; returns the status, the memtrace bytes in *out (caller frees) on success. */
static int import(const void *data, size_t size, const mt_go_import_options *options,
                  mt_go_import_stats *stats, uint8_t **out, size_t *out_size, mt_error *err) {
  int fd = memfd_create("ctf", 0);
  assert_true(fd >= 0);
  mt_go_import_options o = options ? *options : (mt_go_import_options){0};
  o.on_warning = on_warning;
  nwarnings = 0;
  int rc = mt_go_import_memory(data, size, fd, &o, stats, err);
  if (out)
    *out = rc ? NULL : tg_fd_bytes(fd, out_size);
  close(fd);
  return rc;
}

/* What a converted trace holds, per location name. */
typedef struct per_name {
  char name[96];
  uint64_t allocs, bytes, collects;
  mt_source source;
} per_name;

typedef struct summary {
  per_name names[256];
  size_t nnames;
  uint64_t allocs, collects, bad_collects;
  int64_t start, first, last;
  mt_trace_info info;
} summary;

static per_name *find_name(summary *s, const char *name) {
  for (size_t i = 0; i < s->nnames; i++)
    if (!strcmp(s->names[i].name, name))
      return &s->names[i];
  return NULL;
}

/* Reads a converted trace back: per name counts and bytes, and every collect checked against the
 * allocations before it (none may name an unknown or already freed object). */
static void read_back(const uint8_t *data, size_t size, summary *s) {
  memset(s, 0, sizeof *s);
  mt_reader_options ro = {.backtraces = true};
  mt_reader *r;
  mt_error err;
  if (mt_reader_open_memory(&r, data, size, &ro, &err))
    fail_msg("reader: %s", err.message);
  s->info = *mt_reader_info(r);
  s->start = s->info.start_time;
  mt_hashmap live = {0}; /* object id -> index + 1 in names */
  mt_event ev;
  int rc;
  bool first = true;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
    if (first)
      s->first = ev.time, first = false;
    s->last = ev.time;
    if (ev.kind == MT_EVENT_ALLOC) {
      assert_int_equal(ev.backtrace_length, 1);
      const mt_location *locs;
      size_t n;
      assert_true(mt_reader_lookup_location(r, ev.backtrace[0], &locs, &n));
      assert_int_equal(n, 1);
      per_name *p = find_name(s, locs[0].defname);
      if (!p) {
        assert_true(s->nnames < 256);
        p = &s->names[s->nnames++];
        snprintf(p->name, sizeof p->name, "%s", locs[0].defname);
        p->source = ev.source;
      }
      assert_int_equal(p->source, ev.source);   /* one name, one kind */
      assert_int_equal(ev.nsamples, ev.length); /* rate 1: every word a sample */
      p->allocs++;
      p->bytes += (uint64_t)ev.length * 8;
      s->allocs++;
      assert_true(mt_hashmap_put(&live, ev.obj_id, (uint64_t)(p - s->names) + 1));
    } else if (ev.kind == MT_EVENT_COLLECT) {
      uint64_t index;
      s->collects++;
      if (!mt_hashmap_get(&live, ev.obj_id, &index)) {
        s->bad_collects++;
        continue;
      }
      mt_hashmap_remove(&live, ev.obj_id);
      s->names[index - 1].collects++;
    }
  }
  if (rc < 0)
    fail_msg("reading the converted trace: %s", err.message);
  mt_hashmap_free(&live);
  mt_reader_close(r);
}

static uint8_t *testdata_trace(const char *name, size_t *size) {
  char rel[64];
  snprintf(rel, sizeof rel, "go/%s", name);
  return tu_read_file(tu_testdata(rel), size);
}

static void allocfree_trace_imports_to_the_readme_counts(void **state) {
  (void)state;
  size_t size, out_size;
  uint8_t *data = testdata_trace("allocfree.trace", &size), *out;
  mt_go_import_stats st;
  mt_error err;
  if (import(data, size, NULL, &st, &out, &out_size, &err))
    fail_msg("%s", err.message);
  assert_int_equal(st.format_version, 23);
  assert_true(st.experiment);
  assert_int_equal(st.generations, 1);
  assert_int_equal(st.objects.allocated, 8041);
  assert_int_equal(st.objects.snapshot, 1136);
  assert_int_equal(st.objects.frees, 8967);
  assert_int_equal(st.spans.allocated, 70);
  assert_int_equal(st.spans.snapshot, 55);
  assert_int_equal(st.spans.frees, 77);
  assert_int_equal(st.stacks.allocated, 7);
  assert_int_equal(st.stacks.snapshot, 5);
  assert_int_equal(st.stacks.frees, 2);
  /* Every object free names an object seen before; the two stack frees name stacks that were
   * never shown (counted, not written), and one stack is handed to a new goroutine while live. */
  assert_int_equal(st.objects.unknown_frees, 0);
  assert_int_equal(st.spans.unknown_frees, 0);
  assert_int_equal(st.stacks.unknown_frees, 2);
  assert_int_equal(st.stacks.replaced, 1);
  assert_int_equal(st.stacks.empty, 0);
  /* What was written adds up to what is live at the end (the line import-go prints). */
  assert_int_equal(st.stacks.freed, 1); /* the one replaced: both real frees were unknown */
  assert_int_equal(st.stacks.allocated + st.stacks.snapshot - st.stacks.freed, st.stacks.live_end);
  assert_int_equal(st.objects.allocated + st.objects.snapshot - st.objects.freed,
                   st.objects.live_end);
  assert_int_equal(st.objects_outside_spans, 0);
  assert_int_equal(nwarnings, 1);
  assert_non_null(strstr(warnings[0], "2 frees of memory the trace never showed allocated"));
  /* It has a start snapshot: the stacks are the runtime's, not a missing snapshot. */
  assert_non_null(strstr(warnings[0], "stack memory Go's runtime reuses without an event"));

  summary s;
  read_back(out, out_size, &s);
  assert_int_equal(s.bad_collects, 0);
  assert_int_equal(s.allocs, 8041 + 1136 + 70 + 55 + 7 + 5);
  assert_int_equal(s.collects, st.objects.freed + st.spans.freed + st.stacks.freed);
  assert_int_equal(st.objects.freed, 8967);
  assert_int_equal(st.spans.freed, 77);
  assert_int_equal(st.stacks.freed, 1);
  assert_int_equal(s.allocs - s.collects,
                   st.objects.live_end + st.spans.live_end + st.stacks.live_end);
  free(out);
  free(data);
}

static void allocfree_types_are_sized_by_their_slots(void **state) {
  (void)state;
  size_t size, out_size;
  uint8_t *data = testdata_trace("allocfree.trace", &size), *out;
  mt_error err;
  if (import(data, size, NULL, NULL, &out, &out_size, &err))
    fail_msg("%s", err.message);
  summary s;
  read_back(out, out_size, &s);
  /* The workload's nodes: 2 goroutines x 4000, each a 64-byte slot, all but the last list freed
   * by the GC (runtime.GC() at the end sweeps them). */
  per_name *node = find_name(&s, "main.node");
  assert_non_null(node);
  assert_int_equal(node->source, MT_SOURCE_EXTERNAL);
  assert_int_equal(node->allocs, 8000);
  assert_int_equal(node->bytes, 8000 * 64);
  assert_int_equal(node->collects, 7938);
  /* The snapshot has no types for objects of small spans (the runtime keeps none for them): the
   * 1000 nodes made before tracing are among the 64-byte [no type] objects. */
  per_name *untyped = find_name(&s, "[no type]");
  assert_non_null(untyped);
  assert_int_equal(untyped->allocs, 1131);
  assert_int_equal(untyped->bytes, 2181568);
  assert_true(untyped->collects >= 1000); /* the early nodes are dropped, then swept */
  assert_int_equal(untyped->collects, 1014);
  per_name *g = find_name(&s, "runtime.g");
  assert_non_null(g);
  assert_int_equal(g->allocs, 6);
  assert_int_equal(g->bytes, 6 * 448);
  per_name *ptr = find_name(&s, "unsafe.Pointer"); /* large: sized by their spans' pages */
  assert_non_null(ptr);
  assert_int_equal(ptr->allocs, 2);
  assert_int_equal(ptr->bytes, 2 * 131072);
  per_name *stack = find_name(&s, "[goroutine stack]");
  assert_non_null(stack);
  assert_int_equal(stack->source, MT_SOURCE_MINOR);
  assert_int_equal(stack->allocs, 12);
  assert_int_equal(stack->bytes, 11 * 2048 + 16384);
  per_name *large = find_name(&s, "[span large]");
  assert_non_null(large);
  assert_int_equal(large->source, MT_SOURCE_MAJOR);
  assert_int_equal(large->allocs, 4);
  assert_int_equal(large->bytes, 2 * 131072 + 2 * 1048576);
  per_name *c6 = find_name(&s, "[span class 6, 64 B]");
  assert_non_null(c6);
  assert_int_equal(c6->allocs, 73);
  assert_int_equal(c6->bytes, 73 * 8192);
  free(out);
  free(data);
}

static void plain_trace_imports_no_allocations_with_a_warning(void **state) {
  (void)state;
  size_t size, out_size;
  uint8_t *data = testdata_trace("plain.trace", &size), *out;
  mt_go_import_stats st;
  mt_error err;
  if (import(data, size, NULL, &st, &out, &out_size, &err))
    fail_msg("%s", err.message);
  assert_false(st.experiment);
  assert_true(st.go_events > 1000);
  assert_int_equal(nwarnings, 1);
  assert_non_null(strstr(warnings[0], "GODEBUG=traceallocfree=1"));
  summary s;
  read_back(out, out_size, &s);
  assert_int_equal(s.allocs, 0);
  assert_int_equal(s.collects, 0);
  free(out);
  /* Its 16-byte header alone: cut short (an error, as a cut inside a generation is), not a trace
   * without the experiment. */
  assert_int_equal(import(data, 16, NULL, &st, &out, &out_size, &err), MT_E_MALFORMED);
  assert_string_equal(err.message,
                      "malformed Go trace at byte 16: the trace ends after its header: it was cut "
                      "short (or its program ended before the trace was first written out), no "
                      "generation to import");
  assert_int_equal(st.generations, 0);
  free(out);
  free(data);
}

/* A malformed import: one message, "malformed Go trace at byte N: ...", N inside the file. */
static void assert_one_clear_message(int rc, const mt_error *err, size_t size) {
  assert_int_equal(rc, MT_E_MALFORMED);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "malformed Go trace at byte %lld: ", (long long)err->offset);
  assert_int_equal(strncmp(err->message, prefix, strlen(prefix)), 0);
  assert_null(strchr(err->message, '\n'));
  assert_true(err->offset >= 0 && (uint64_t)err->offset <= size);
}

static void truncated_traces_fail_with_one_message(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = testdata_trace("allocfree.trace", &size);
  int failed = 0, tried = 0;
  for (size_t cut = 17; cut < size; cut += cut < 96 ? 1 : 811) { /* 16: the header alone */
    mt_error err;
    int rc = import(data, cut, NULL, NULL, NULL, NULL, &err);
    tried++;
    if (rc == MT_OK)
      continue; /* a cut between batches of a later generation would be a shorter trace */
    failed++;
    assert_one_clear_message(rc, &err, cut);
  }
  /* One generation: its tables come last, so every cut of it is missing something. */
  assert_int_equal(failed, tried);
  free(data);
}

static void bit_flips_fail_with_one_message_or_stay_a_trace(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = testdata_trace("allocfree.trace", &size);
  int failed = 0, tried = 0;
  for (size_t at = 0; at < size; at += at < 256 ? 7 : 1499) {
    for (int bit = 0; bit < 8; bit += 3) {
      data[at] ^= (uint8_t)(1u << bit);
      mt_error err;
      mt_go_import_stats st;
      int rc = import(data, size, NULL, &st, NULL, NULL, &err);
      data[at] ^= (uint8_t)(1u << bit);
      tried++;
      if (rc == MT_OK)
        continue; /* a flipped id or time is still a valid trace */
      failed++;
      if (rc == MT_E_UNSUPPORTED) {
        assert_true(at < 16);
        continue;
      }
      assert_one_clear_message(rc, &err, size);
    }
  }
  assert_true(failed > tried / 10);
  free(data);
}

static void header_flip_names_the_version(void **state) {
  (void)state;
  gt_bytes f = {0};
  gt_header(&f, 22);
  mt_error err;
  int rc = import(f.d, f.n, NULL, NULL, NULL, NULL, &err);
  assert_int_equal(rc, MT_E_UNSUPPORTED);
  assert_non_null(strstr(err.message, "go 1.22 is not supported"));
  assert_non_null(strstr(err.message, "Go 1.23 and 1.24"));
  f.n = 0;
  gt_header(&f, 26);
  rc = import(f.d, f.n, NULL, NULL, NULL, NULL, &err);
  assert_int_equal(rc, MT_E_UNSUPPORTED);
  assert_non_null(strstr(err.message, "go 1.26"));
  f.n = 0;
  gt_data(&f, "\xc1\x1f\xfc\xc1 not a Go trace", 20);
  rc = import(f.d, f.n, NULL, NULL, NULL, NULL, &err);
  assert_one_clear_message(rc, &err, f.n);
  assert_false(mt_go_trace_detect(f.d, f.n));
  free(f.d);
}

/* One generation of the alloc/free experiment: 3 types, spans and objects at fixed ticks. */
static void one_generation(gt_bytes *f, int version, uint64_t gen,
                           void (*events)(gt_bytes *f, uint64_t gen)) {
  static const gt_type types[] = {{1, 64, "main.node"}, {2, 1, "uint8"}, {3, 24, "main.small"}};
  gt_info(f, gen);
  events(f, gen);
  gt_types(f, gen, types, 3);
  gt_frequency(f, version, gen, 15625000, 1000, 1700000000, 250000000);
}

static uint64_t object_id(uint64_t span_page, uint64_t offset) {
  return (span_page * 8192 + offset) / 8;
}

static void sizes_events(gt_bytes *f, uint64_t gen) {
  gt_batch b;
  gt_batch_start(&b, 1000);
  /* A 5-page span of class 0 holding one 40 KiB []uint8 (the type is the element type). */
  gt_event(&b, 129, 1010, 3, (uint64_t)100, (uint64_t)5, (uint64_t)0);
  gt_event(&b, 132, 1020, 2, object_id(100, 0), (uint64_t)2);
  /* A 1-page span of class 6 (64 B, noscan) and an object in its middle. */
  gt_event(&b, 129, 1030, 3, (uint64_t)200, (uint64_t)1, (uint64_t)(6 << 2 | 2));
  gt_event(&b, 132, 1040, 2, object_id(200, 64 * 7), (uint64_t)1);
  /* A 3-page span of class 41 (3072 B): an object on its third page. */
  gt_event(&b, 128, 1050, 3, (uint64_t)300, (uint64_t)3, (uint64_t)(41 << 2));
  gt_event(&b, 131, 1060, 2, object_id(300, 3072 * 5), (uint64_t)0);
  /* An object in no span: sized by its type (24 B). */
  gt_event(&b, 132, 1070, 2, object_id(900, 0), (uint64_t)3);
  /* A goroutine stack of order 13: 4 KiB. A free of a stack never seen. */
  gt_event(&b, 135, 1080, 2, (uint64_t)77, (uint64_t)13);
  gt_event(&b, 136, 1090, 1, (uint64_t)78);
  /* The 40 KiB object and its span go. */
  gt_event(&b, 133, 1100, 1, object_id(100, 0));
  gt_event(&b, 130, 1110, 1, (uint64_t)100);
  gt_batch_end(f, &b, 0, gen, 7);
}

static void objects_take_the_slot_of_their_span(void **state) {
  (void)state;
  gt_bytes f = {0};
  gt_header(&f, 23);
  one_generation(&f, 23, 1, sizes_events);
  size_t out_size;
  uint8_t *out;
  mt_go_import_stats st;
  mt_error err;
  mt_go_import_options o = {.start_time = TG_START};
  if (import(f.d, f.n, &o, &st, &out, &out_size, &err))
    fail_msg("%s", err.message);
  summary s;
  read_back(out, out_size, &s);
  assert_int_equal(s.bad_collects, 0);
  per_name *u8 = find_name(&s, "uint8");
  assert_non_null(u8);
  assert_int_equal(u8->bytes, 40960);
  assert_int_equal(u8->collects, 1);
  per_name *node = find_name(&s, "main.node");
  assert_non_null(node);
  assert_int_equal(node->bytes, 64);
  per_name *untyped = find_name(&s, "[no type]");
  assert_non_null(untyped);
  assert_int_equal(untyped->bytes, 3072);
  per_name *small = find_name(&s, "main.small");
  assert_non_null(small);
  assert_int_equal(small->bytes, 24);
  assert_int_equal(st.objects_outside_spans, 1);
  per_name *stack = find_name(&s, "[goroutine stack]");
  assert_non_null(stack);
  assert_int_equal(stack->bytes, 4096);
  assert_int_equal(st.stacks.unknown_frees, 1);
  assert_non_null(find_name(&s, "[span large]"));
  assert_int_equal(find_name(&s, "[span large]")->bytes, 5 * 8192);
  assert_non_null(find_name(&s, "[span class 41, 3072 B]"));
  assert_non_null(find_name(&s, "[span class 6, 64 B]"));
  assert_int_equal(nwarnings, 2);
  /* Times: ticks of 64 ns from the generation's first batch (tick 1, the tables' batches). */
  assert_int_equal(s.start, TG_START);
  assert_int_equal(s.first, TG_START + (1010 - 1) * 64 / 1000);
  assert_int_equal(s.last, TG_START + (1110 - 1) * 64 / 1000);
  free(out);
  free(f.d);
}

static void go125_trace_takes_its_start_from_the_clock_snapshot(void **state) {
  (void)state;
  gt_bytes f = {0};
  gt_header(&f, 25);
  one_generation(&f, 25, 1, sizes_events);
  size_t out_size;
  uint8_t *out;
  mt_go_import_stats st;
  mt_error err;
  mt_go_import_options o = {.start_time = TG_START};
  if (import(f.d, f.n, &o, &st, &out, &out_size, &err))
    fail_msg("%s", err.message);
  assert_int_equal(st.format_version, 25);
  assert_true(st.wall_clock);
  summary s;
  read_back(out, out_size, &s);
  /* The snapshot (tick 1000) was at 1700000000.25 s; the trace starts 999 ticks earlier. */
  int64_t at_snapshot = INT64_C(1700000000250000);
  assert_true(s.start >= at_snapshot - 999 * 64 / 1000 - 1 && s.start <= at_snapshot - 63);
  free(out);
  free(f.d);
}

static void sync_batch_is_not_go123(void **state) {
  (void)state;
  gt_bytes f = {0};
  gt_header(&f, 23);
  gt_frequency(&f, 25, 1, 15625000, 1000, 1, 0); /* a Go 1.25 sync batch in a go 1.23 trace */
  gt_frequency(&f, 23, 1, 15625000, 0, 0, 0);
  mt_error err;
  int rc = import(f.d, f.n, NULL, NULL, NULL, NULL, &err);
  assert_one_clear_message(rc, &err, f.n);
  assert_non_null(strstr(err.message, "cannot be in an event batch of \"go 1.23 trace\""));
  free(f.d);
}

/* Thread 1 frees slot X in a burst stamped ahead of real time; thread 2 reuses it "earlier". */
static void late_free_events(gt_bytes *f, uint64_t gen) {
  uint64_t x = object_id(200, 0);
  gt_batch a, b;
  gt_batch_start(&a, 1000);
  gt_event(&a, 129, 1001, 3, (uint64_t)200, (uint64_t)1, (uint64_t)(6 << 2));
  gt_event(&a, 132, 1002, 2, x, (uint64_t)1);
  gt_event(&a, 133, 1035, 1, x);                  /* the sweep's free, stamped late */
  gt_event(&a, 133, 1036, 1, object_id(200, 64)); /* never allocated */
  gt_batch_end(f, &a, 0, gen, 1);
  gt_batch_start(&b, 1000);
  gt_event(&b, 29, 1020, 2, (uint64_t)1, (uint64_t)0); /* GCBegin */
  gt_event(&b, 132, 1030, 2, x, (uint64_t)1);          /* reuse, before the free's stamp */
  gt_event(&b, 132, 1040, 2, object_id(200, 128), (uint64_t)1);
  gt_event(&b, 133, 1040, 1, object_id(200, 128) + 0); /* same tick: free ordered first? no */
  gt_batch_end(f, &b, 0, gen, 2);
}

static void reuse_before_a_late_free_frees_the_old_object_once(void **state) {
  (void)state;
  gt_bytes f = {0};
  gt_header(&f, 23);
  one_generation(&f, 23, 1, late_free_events);
  size_t out_size;
  uint8_t *out;
  mt_go_import_stats st;
  mt_error err;
  if (import(f.d, f.n, NULL, &st, &out, &out_size, &err))
    fail_msg("%s", err.message);
  assert_int_equal(st.objects.replaced, 1);
  assert_int_equal(st.late_frees, 1);
  assert_int_equal(st.objects.unknown_frees, 1);
  /* No start snapshot in this trace: that is the first thing to suspect. */
  assert_non_null(strstr(warnings[0], "a trace without its start snapshot?"));
  summary s;
  read_back(out, out_size, &s);
  assert_int_equal(s.bad_collects, 0);
  per_name *node = find_name(&s, "main.node");
  assert_int_equal(node->allocs, 3);
  assert_int_equal(node->collects, 2);      /* the first X at its reuse, the third object */
  assert_int_equal(st.objects.live_end, 1); /* the second X */
  free(out);
  free(f.d);
}

static void frees_of_one_tick_come_before_allocations(void **state) {
  (void)state;
  uint64_t x = object_id(200, 0);
  gt_bytes f = {0};
  gt_header(&f, 23);
  gt_info(&f, 1);
  gt_batch a, b;
  gt_batch_start(&b, 1000); /* M 1: allocates at tick 1050, listed first */
  gt_event(&b, 29, 1010, 2, (uint64_t)1, (uint64_t)0);
  gt_event(&b, 132, 1050, 2, x, (uint64_t)0);
  gt_batch_end(&f, &b, 0, 1, 1);
  gt_batch_start(&a, 1000); /* M 2: the span, the first object, its free at tick 1050 */
  gt_event(&a, 129, 1001, 3, (uint64_t)200, (uint64_t)1, (uint64_t)(6 << 2));
  gt_event(&a, 132, 1002, 2, x, (uint64_t)0);
  gt_event(&a, 133, 1050, 1, x);
  gt_batch_end(&f, &a, 0, 1, 2);
  gt_frequency(&f, 23, 1, 15625000, 0, 0, 0);
  mt_go_import_stats st;
  mt_error err;
  if (import(f.d, f.n, NULL, &st, NULL, NULL, &err))
    fail_msg("%s", err.message);
  assert_int_equal(st.objects.replaced, 0);
  assert_int_equal(st.objects.freed, 1);
  assert_int_equal(st.objects.live_end, 1);
  free(f.d);
}

static void two_gen_events_1(gt_bytes *f, uint64_t gen) {
  gt_batch b;
  gt_batch_start(&b, 1000);
  gt_event(&b, 129, 1001, 3, (uint64_t)200, (uint64_t)1, (uint64_t)(6 << 2));
  gt_event(&b, 132, 1002, 2, object_id(200, 0), (uint64_t)1);
  gt_batch_end(f, &b, 0, gen, 1);
}

static void objects_live_across_generations(void **state) {
  (void)state;
  gt_bytes f = {0};
  gt_header(&f, 23);
  one_generation(&f, 23, 1, two_gen_events_1);
  /* Generation 2: its own type table, where main.node is id 9; the object goes. */
  gt_batch b;
  gt_batch_start(&b, 2000000);
  gt_event(&b, 133, 2000100, 1, object_id(200, 0));
  gt_event(&b, 132, 2000200, 2, object_id(200, 64), (uint64_t)9);
  gt_batch_end(&f, &b, 0, 2, 1);
  static const gt_type types2[] = {{9, 64, "main.node"}};
  gt_types(&f, 2, types2, 1);
  gt_frequency(&f, 23, 2, 15625000, 0, 0, 0);
  size_t out_size;
  uint8_t *out;
  mt_go_import_stats st;
  mt_error err;
  mt_go_import_options o = {.start_time = TG_START};
  if (import(f.d, f.n, &o, &st, &out, &out_size, &err))
    fail_msg("%s", err.message);
  assert_int_equal(st.generations, 2);
  summary s;
  read_back(out, out_size, &s);
  per_name *node = find_name(&s, "main.node");
  assert_int_equal(node->allocs, 2);
  assert_int_equal(node->collects, 1);
  assert_int_equal(s.last, TG_START + (2000200 - 1) * 64 / 1000);
  free(out);
  /* Generation 3 after 1 is refused. */
  gt_bytes g = {0};
  gt_header(&g, 23);
  one_generation(&g, 23, 1, two_gen_events_1);
  size_t second = g.n;
  gt_frequency(&g, 23, 3, 15625000, 0, 0, 0);
  int rc = import(g.d, g.n, NULL, NULL, NULL, NULL, &err);
  assert_one_clear_message(rc, &err, g.n);
  assert_int_equal(err.offset, (int64_t)second + 1);
  assert_non_null(strstr(err.message, "generation 3 follows generation 1"));
  free(g.d);
  free(f.d);
}

static void format_rules_are_checked(void **state) {
  (void)state;
  mt_error err;
  /* A batch claiming more than 64 KiB. */
  gt_bytes f = {0};
  gt_header(&f, 23);
  gt_u8(&f, 1);
  gt_uv(&f, 1);
  gt_uv(&f, 1);
  gt_uv(&f, 1);
  gt_uv(&f, 70000);
  int rc = import(f.d, f.n, NULL, NULL, NULL, NULL, &err);
  assert_one_clear_message(rc, &err, f.n);
  assert_non_null(strstr(err.message, "batch of 70000 bytes"));
  /* A generation without a frequency. */
  f.n = 0;
  gt_header(&f, 23);
  gt_info(&f, 1);
  rc = import(f.d, f.n, NULL, NULL, NULL, NULL, &err);
  assert_one_clear_message(rc, &err, f.n);
  assert_non_null(strstr(err.message, "has no frequency"));
  /* An event naming a stack the generation lacks (GCBegin's stack). */
  f.n = 0;
  gt_header(&f, 23);
  gt_batch b;
  gt_batch_start(&b, 10);
  gt_event(&b, 29, 11, 2, (uint64_t)0, (uint64_t)5);
  size_t event_at = f.n + 5;
  gt_batch_end(&f, &b, 0, 1, 1);
  gt_frequency(&f, 23, 1, 15625000, 0, 0, 0);
  rc = import(f.d, f.n, NULL, NULL, NULL, NULL, &err);
  assert_one_clear_message(rc, &err, f.n);
  assert_non_null(strstr(err.message, "names stack 5"));
  assert_int_equal(err.offset, (int64_t)event_at);
  /* An unknown event type. */
  f.n = 0;
  gt_header(&f, 23);
  gt_batch_start(&b, 10);
  gt_event(&b, 99, 11, 0);
  gt_batch_end(&f, &b, 0, 1, 1);
  gt_frequency(&f, 23, 1, 15625000, 0, 0, 0);
  rc = import(f.d, f.n, NULL, NULL, NULL, NULL, &err);
  assert_one_clear_message(rc, &err, f.n);
  assert_non_null(strstr(err.message, "event type 99"));
  /* An alloc/free event before the info batch (none at all). */
  f.n = 0;
  gt_header(&f, 23);
  gt_batch_start(&b, 10);
  gt_event(&b, 132, 11, 2, (uint64_t)1, (uint64_t)0);
  gt_batch_end(&f, &b, 0, 1, 1);
  gt_frequency(&f, 23, 1, 15625000, 0, 0, 0);
  rc = import(f.d, f.n, NULL, NULL, NULL, NULL, &err);
  assert_one_clear_message(rc, &err, f.n);
  assert_non_null(strstr(err.message, "before the experiment's info batch"));
  free(f.d);
}

/* The alloc/free info batch's fields are checked one by one: the error names the field, the value
 * found and what was expected, at the field's byte (it said "alloc/free info with page size P,
 * alignment A, stack S", at the batch, whichever was wrong). */
static void a_bad_alloc_free_info_names_the_field_its_value_and_the_rule(void **state) {
  (void)state;
  gt_bytes f = {0};
  gt_header(&f, 23);
  gt_frequency(&f, 23, 1, 15625000, 0, 0, 0);
  size_t info_batch = f.n;
  gt_info(&f, 1);
  /* Page 8192, alignment 8, stack 2048 as varints. */
  const uint8_t *fields = memmem(f.d + info_batch, f.n - info_batch, "\x80\x40\x08\x80\x10", 5);
  assert_non_null(fields);
  size_t page = (size_t)(fields - f.d);
  struct {
    size_t at;
    uint8_t byte;
    const char *words;
  } bad[] = {
      {page, 0x81,
       "the alloc/free info's page size is 8193, expected a power of two from 512 to "
       "1048576"},
      {page + 2, 0x03,
       "the alloc/free info's heap alignment is 3, expected a power of two no "
       "larger than its page size (8192)"},
      {page + 2, 0x7F, "heap alignment is 127"},
      {page + 3, 0x81,
       "the alloc/free info's fixed stack size is 2049, expected a power of two up "
       "to 1073741824"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    uint8_t saved = f.d[bad[i].at];
    f.d[bad[i].at] = bad[i].byte;
    mt_error err;
    int rc = import(f.d, f.n, NULL, NULL, NULL, NULL, &err);
    assert_one_clear_message(rc, &err, f.n);
    if (!strstr(err.message, bad[i].words) || err.offset != (int64_t)bad[i].at)
      fail_msg("expected \"%s\" at byte %zu, got: %s", bad[i].words, bad[i].at, err.message);
    f.d[bad[i].at] = saved;
  }
  free(f.d);
}

static void only_objects_writes_only_objects(void **state) {
  (void)state;
  size_t size, out_size;
  uint8_t *data = testdata_trace("allocfree.trace", &size), *out;
  mt_error err;
  mt_go_import_options o = {.kinds = MT_GO_OBJECTS};
  if (import(data, size, &o, NULL, &out, &out_size, &err))
    fail_msg("%s", err.message);
  summary s;
  read_back(out, out_size, &s);
  assert_int_equal(s.allocs, 8041 + 1136);
  assert_int_equal(s.collects, 8967);
  assert_int_equal(s.bad_collects, 0);
  for (size_t i = 0; i < s.nnames; i++)
    assert_int_equal(s.names[i].source, MT_SOURCE_EXTERNAL);
  free(out);
  free(data);
}

static void cli_imports_and_refuses_its_input_as_output(void **state) {
  (void)state;
  const char *in = tu_testdata("go/allocfree.trace");
  const char *ctf = tu_temp_path("af.ctf");
  char *out, *err;
  int rc = tu_run_cli(&out, NULL, &err, "import-go", in, "-o", ctf, NULL);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "8,041 allocated"));
  assert_non_null(strstr(err, "warning: 2 frees of memory"));
  free(out);
  free(err);
  rc = tu_run_cli(&out, NULL, &err, "check", ctf, NULL);
  assert_int_equal(rc, 0);
  free(out);
  free(err);
  const char *copy = tu_temp_path("copy.trace");
  size_t size;
  uint8_t *data = tu_read_file(in, &size);
  tu_write_file(copy, data, size);
  free(data);
  rc = tu_run_cli(&out, NULL, &err, "import-go", copy, "-o", copy, NULL);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(err, copy));
  free(out);
  free(err);
  rc = tu_run_cli(&out, NULL, &err, "import-go", "--help", NULL);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "GODEBUG=traceallocfree=1"));
  free(out);
  free(err);
}

/* --only is a comma-separated list: an empty item in it ("objects,,spans", a comma first or last)
 * is refused, named by its place, as an unknown kind is; the kinds alone are taken. */
static void only_refuses_an_empty_item_and_names_it(void **state) {
  (void)state;
  const char *in = tu_testdata("go/allocfree.trace");
  const char *ctf = tu_temp_path("only.ctf");
  const char *refused[][2] = {
      {"objects,,spans", "--only 'objects,,spans': item 2 is empty"},
      {",objects", "--only ',objects': item 1 is empty"},
      {"objects,", "--only 'objects,': item 2 is empty"},
      {"objects,bogus", "--only takes objects, spans and stacks, not 'objects,bogus'"},
      {"", "--only takes objects, spans and stacks, not ''"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    char *err;
    int rc =
        tu_run_cli(NULL, NULL, &err, "import-go", "--only", refused[i][0], in, "-o", ctf, NULL);
    if (rc != 64 || !strstr(err, refused[i][1]))
      fail_msg("--only '%s': exit %d, expected 64 and \"%s\": %s", refused[i][0], rc, refused[i][1],
               err);
    free(err);
  }
  char *out, *err;
  int rc =
      tu_run_cli(&out, NULL, &err, "import-go", "--only", "objects,spans", in, "-o", ctf, NULL);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "objects"));
  free(out);
  free(err);
}

static void analysis_commands_read_go_traces_directly(void **state) {
  (void)state;
  const char *in = tu_testdata("go/allocfree.trace");
  char *out, *err;
  int rc = tu_run_cli(&out, NULL, &err, "top", "--by", "count", in, NULL);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "main.node"));
  free(out);
  free(err);
  rc = tu_run_cli(&out, NULL, &err, "summary", "--json", "--from", "0", "--to", "0.001", in, NULL);
  assert_int_equal(rc, 0);
  assert_true(tu_json_valid(out, NULL));
  free(out);
  free(err);
  rc = tu_run_cli(&out, NULL, &err, "summary", in, NULL);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "heap objects"));
  assert_non_null(strstr(out, "goroutine stacks"));
  free(out);
  free(err);
  rc = tu_run_cli(&out, NULL, &err, "diff", in, in, NULL);
  assert_int_equal(rc, 0);
  free(out);
  free(err);
  rc = tu_run_cli(&out, NULL, &err, "leaks", in, NULL);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "[span large]"));
  free(out);
  free(err);
  /* A damaged Go trace given to an analysis command: the import's one message. */
  size_t size;
  uint8_t *data = tu_read_file(in, &size);
  const char *cut = tu_temp_path("cut.trace");
  tu_write_file(cut, data, size / 2);
  free(data);
  rc = tu_run_cli(&out, NULL, &err, "info", cut, NULL);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(err, "malformed Go trace at byte "));
  free(out);
  free(err);
}

/* A Go trace damaged in a later generation (a program killed while tracing) is analysed up to
 * it: the generations converted before are a readable trace, the damage a warning, exit 2 as for
 * a damaged memtrace trace. check still fails with the damage. */
static void
analyses_of_a_go_trace_damaged_in_a_later_generation_cover_the_ones_before(void **state) {
  (void)state;
  gt_bytes f = {0};
  gt_header(&f, 23);
  one_generation(&f, 23, 1, two_gen_events_1);
  size_t first = f.n;
  gt_batch b;
  gt_batch_start(&b, 2000000);
  gt_event(&b, 133, 2000100, 1, object_id(200, 0));
  gt_event(&b, 132, 2000200, 2, object_id(200, 64), (uint64_t)9);
  gt_batch_end(&f, &b, 0, 2, 1);
  const char *path = tu_temp_path("killed.trace");
  tu_write_file(path, f.d, first + (f.n - first) / 2); /* cut inside generation 2's batch */
  char *out, *err;
  int rc = tu_run_cli(&out, NULL, &err, "summary", "--json", path, NULL);
  if (rc != 2 || !strstr(err, "warning: malformed Go trace at byte") ||
      !strstr(err, "the analysis covers the generations converted before it"))
    fail_msg("summary of a Go trace cut in generation 2: exit %d, stderr: %s", rc, err);
  assert_true(tu_json_valid(out, NULL));
  assert_true(tu_json_number(strstr(out, "\"allocated\":"), "objects") >= 1);
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(NULL, NULL, &err, "check", path, NULL), 1);
  assert_non_null(strstr(err, "malformed Go trace at byte"));
  free(err);
  free(f.d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(allocfree_trace_imports_to_the_readme_counts),
      cmocka_unit_test(allocfree_types_are_sized_by_their_slots),
      cmocka_unit_test(plain_trace_imports_no_allocations_with_a_warning),
      cmocka_unit_test(truncated_traces_fail_with_one_message),
      cmocka_unit_test(bit_flips_fail_with_one_message_or_stay_a_trace),
      cmocka_unit_test(header_flip_names_the_version),
      cmocka_unit_test(objects_take_the_slot_of_their_span),
      cmocka_unit_test(go125_trace_takes_its_start_from_the_clock_snapshot),
      cmocka_unit_test(sync_batch_is_not_go123),
      cmocka_unit_test(reuse_before_a_late_free_frees_the_old_object_once),
      cmocka_unit_test(frees_of_one_tick_come_before_allocations),
      cmocka_unit_test(objects_live_across_generations),
      cmocka_unit_test(analyses_of_a_go_trace_damaged_in_a_later_generation_cover_the_ones_before),
      cmocka_unit_test(format_rules_are_checked),
      cmocka_unit_test(a_bad_alloc_free_info_names_the_field_its_value_and_the_rule),
      cmocka_unit_test(only_objects_writes_only_objects),
      cmocka_unit_test(cli_imports_and_refuses_its_input_as_output),
      cmocka_unit_test(only_refuses_an_empty_item_and_names_it),
      cmocka_unit_test(analysis_commands_read_go_traces_directly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
