/* The analysis model on traces with known event streams: every count, byte estimate, peak, leak,
 * temporary and window number is checked against its exact expected value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_known_trace.h"
#include "memtap/analysis.h"
#include "testutil.h"
#include "tracegen.h"

static mt_analysis *analyse(const uint8_t *data, size_t size, const mt_analysis_options *options) {
  mt_reader_options ro = {.backtraces = true};
  mt_reader *r;
  mt_error err;
  if (mt_reader_open_memory(&r, data, size, &ro, &err))
    fail_msg("open: %s", err.message);
  mt_analysis *a;
  if (mt_analysis_run(&a, r, options, &err))
    fail_msg("analysis: %s", err.message);
  mt_reader_close(r);
  return a;
}

static void assert_amount(const mt_amount *m, uint64_t objects, uint64_t samples,
                          double objects_estimated) {
  assert_int_equal(m->objects, objects);
  assert_int_equal(m->samples, samples);
  assert_true(fabs(m->objects_estimated - objects_estimated) < 1e-9);
}

static void summary_counts_frees_peak_and_leaks_exactly(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = known_trace(&size);
  mt_analysis *a = analyse(data, size, NULL);
  const mt_summary *s = mt_analysis_summary(a);
  assert_true(s->bytes_per_sample == 8);
  assert_amount(&s->allocated, 5, 126, 5);
  assert_amount(&s->allocated_by_source[MT_SOURCE_EXTERNAL], 5, 126, 5);
  assert_amount(&s->freed, 3, 114, 3);
  assert_amount(&s->live_end, 2, 12, 2);
  assert_true(mt_analysis_bytes(a, s->live_end.samples) == 96);
  assert_amount(&s->at_peak, 3, 120, 3);
  assert_int_equal(s->peak_time, 50);
  assert_true(s->temporary_defined);
  assert_amount(&s->temporary, 2, 104, 2);
  assert_int_equal(s->collects, 3);
  assert_int_equal(s->from, 0);
  assert_int_equal(s->to, 80);
  assert_int_equal(s->end_time, TG_START + 80);
  assert_int_equal(s->distinct_backtraces, 2);
  assert_int_equal(s->sites, 2); /* A and B */
  /* sizes: 4 words = 32 B (<= 64), 10 words = 80 B (<= 256), 2 words = 16 B, 100 words = 800 B */
  assert_int_equal(s->sizes[0].objects, 1);
  assert_int_equal(s->sizes[1].objects, 1);
  assert_int_equal(s->sizes[2].objects, 2);
  assert_int_equal(s->sizes[3].objects, 1);
  /* lifetimes: id1 10 us, id0 50 us, id3 20 us -> all <= 100 us but id1 <= 10 us; 2 not freed */
  assert_int_equal(s->lifetimes[0].objects, 1);
  assert_int_equal(s->lifetimes[1].objects, 2);
  assert_int_equal(s->lifetimes[MT_LIFETIME_CLASSES - 1].objects, 2);
  mt_analysis_free(a);
  free(data);
}

static void sites_rank_by_every_metric(void **state) {
  (void)state;
  size_t size, n;
  uint8_t *data = known_trace(&size);
  mt_analysis *a = analyse(data, size, NULL);
  mt_group *g;
  mt_error err;
  assert_int_equal(mt_analysis_group(a, MT_GROUP_SITE, MT_METRIC_BYTES, &g, &n, &err), MT_OK);
  assert_int_equal(n, 2);
  assert_string_equal(g[0].key.function, "fn_102_0"); /* B: 832 bytes before A: 176 */
  assert_string_equal(g[0].key.file, "file_22.c");
  assert_int_equal(g[0].key.line, 102);
  assert_amount(&g[0].stats.allocated, 2, 104, 2);
  assert_amount(&g[0].stats.temporary, 2, 104, 2);
  assert_amount(&g[0].stats.peak, 1, 100, 1);
  assert_amount(&g[0].stats.live, 0, 0, 0);
  const mt_group *site_a = &g[1];
  assert_string_equal(site_a->key.function, "fn_101_2");
  assert_int_equal(site_a->key.line, 101);
  assert_amount(&site_a->stats.allocated, 3, 22, 3);
  assert_amount(&site_a->stats.live, 2, 12, 2);
  assert_amount(&site_a->stats.peak, 2, 20, 2);
  assert_amount(&site_a->stats.freed, 1, 10, 1);
  free(g);
  /* Leaks: only A has live objects. */
  assert_int_equal(mt_analysis_group(a, MT_GROUP_SITE, MT_METRIC_LIVE, &g, &n, &err), MT_OK);
  assert_int_equal(n, 1);
  assert_string_equal(g[0].key.function, "fn_101_2");
  assert_true(mt_analysis_metric(a, &g[0].stats, MT_METRIC_LIVE) == 96);
  free(g);
  /* By peak: B had 800 bytes at the peak, A 160. */
  assert_int_equal(mt_analysis_group(a, MT_GROUP_SITE, MT_METRIC_PEAK, &g, &n, &err), MT_OK);
  assert_int_equal(n, 2);
  assert_true(mt_analysis_metric(a, &g[0].stats, MT_METRIC_PEAK) == 800);
  assert_true(mt_analysis_metric(a, &g[1].stats, MT_METRIC_PEAK) == 160);
  free(g);
  /* By file: file_22.c and file_21.c; by function: the same two. */
  assert_int_equal(mt_analysis_group(a, MT_GROUP_FILE, MT_METRIC_COUNT, &g, &n, &err), MT_OK);
  assert_int_equal(n, 2);
  assert_string_equal(g[0].key.file, "file_21.c"); /* 3 objects before 2 */
  assert_string_equal(g[0].key.function, "");
  free(g);
  mt_analysis_free(a);
  free(data);
}

static void window_rebuilds_live_set_and_ignores_later_events(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = known_trace(&size);
  mt_analysis_options o = mt_analysis_default_options();
  o.from = 35;
  o.to = 75;
  mt_analysis *a = analyse(data, size, &o);
  const mt_summary *s = mt_analysis_summary(a);
  assert_amount(&s->live_start, 1, 10, 1); /* id0 */
  assert_amount(&s->allocated, 2, 110, 2); /* id2, id3 */
  assert_amount(&s->freed, 2, 110, 2);     /* id0, id3 */
  assert_amount(&s->live_end, 1, 10, 1);   /* id2; id4 comes after the window */
  assert_amount(&s->at_peak, 3, 120, 3);
  assert_int_equal(s->peak_time, 50);
  assert_amount(&s->temporary, 1, 100, 1); /* id3; id0 was allocated before the window */
  assert_int_equal(s->from, 35);
  assert_int_equal(s->to, 75);
  mt_analysis_free(a);
  /* A window after every event: everything live at its start, nothing happens in it. */
  o.from = 1000;
  o.to = MT_TIME_UNBOUNDED;
  a = analyse(data, size, &o);
  s = mt_analysis_summary(a);
  assert_amount(&s->live_start, 2, 12, 2);
  assert_amount(&s->allocated, 0, 0, 0);
  assert_amount(&s->live_end, 2, 12, 2);
  mt_analysis_free(a);
  free(data);
}

static void fractional_rate_estimates_bytes_and_objects(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = known_trace_at_rate(0.25, &size);
  mt_analysis *a = analyse(data, size, NULL);
  const mt_summary *s = mt_analysis_summary(a);
  /* nsamples: 10 -> 3, 4 -> 1, 10 -> 3, 100 -> 25, 2 -> 1 (see known_trace.c) */
  assert_int_equal(s->allocated.samples, 33);
  assert_true(mt_analysis_bytes(a, s->allocated.samples) == 33 / 0.25 * 8);
  /* objects: sum of 1 / (1 - 0.75^words), external blocks: no header word */
  double expected = 0;
  int64_t words[] = {10, 4, 10, 100, 2};
  for (int i = 0; i < 5; i++)
    expected += 1 / (1 - pow(0.75, (double)words[i]));
  assert_true(fabs(s->allocated.objects_estimated - expected) < 1e-9);
  assert_false(s->temporary_defined);
  mt_group *g;
  size_t n;
  mt_error err;
  assert_int_equal(mt_analysis_group(a, MT_GROUP_SITE, MT_METRIC_TEMPORARY, &g, &n, &err),
                   MT_E_UNSUPPORTED);
  assert_non_null(strstr(err.message, "every allocation"));
  mt_analysis_free(a);
  free(data);
}

/* The sources trace (analysis_known_trace.h) at rate 0.5: an OCaml block of w words plus its
 * header is sampled with p = 1 - 0.5^(w + 1), an external block with p = 1 - 0.5^w. */
static void ocaml_blocks_count_their_header_word_in_the_estimate(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = known_sources_trace("v=0x400", &size);
  mt_analysis *a = analyse(data, size, NULL);
  const mt_summary *s = mt_analysis_summary(a);
  assert_true(s->bytes_per_sample == 16);                                        /* 8 / 0.5 */
  assert_amount(&s->allocated_by_source[MT_SOURCE_MINOR], 3, 3, 3 * 4.0 / 3);    /* 1 / (1 - 1/4) */
  assert_amount(&s->allocated_by_source[MT_SOURCE_MAJOR], 1, 1, 8.0 / 7);        /* 1 / (1 - 1/8) */
  assert_amount(&s->allocated_by_source[MT_SOURCE_EXTERNAL], 2, 3, 2 + 4.0 / 3); /* 1/(1-1/2) */
  assert_amount(&s->allocated, 6, 7, 178.0 / 21);
  assert_amount(&s->freed, 2, 2, 4.0 / 3 + 8.0 / 7);            /* m2, j0 */
  assert_amount(&s->live_end, 4, 5, 2 * 4.0 / 3 + 2 + 4.0 / 3); /* m0, m1, e0, e1 */
  assert_amount(&s->live_end_by_source[MT_SOURCE_MINOR], 2, 2, 8.0 / 3);
  assert_amount(&s->live_end_by_source[MT_SOURCE_MAJOR], 0, 0, 0);
  assert_amount(&s->at_peak, 6, 7, 178.0 / 21);
  assert_int_equal(s->peak_time, 60);
  assert_int_equal(s->promotes, 2);         /* m0, m1 */
  assert_int_equal(s->collects, 2);         /* m2, j0 */
  assert_int_equal(s->unknown_collects, 2); /* j0 collected again, m2 promoted after its collect */
  assert_string_equal(mt_analysis_source_name(a, MT_SOURCE_MAJOR), "major");
  assert_string_equal(mt_analysis_source_name(a, MT_SOURCE_EXTERNAL), "external");
  mt_analysis_free(a);
  free(data);
  /* The same events in a trace memtap recorded: the sources are named by what they are there. */
  data = known_sources_trace("memtap-test", &size);
  a = analyse(data, size, NULL);
  assert_string_equal(mt_analysis_source_name(a, MT_SOURCE_MINOR), "minor");
  assert_string_equal(mt_analysis_source_name(a, MT_SOURCE_MAJOR), "mapped");
  assert_string_equal(mt_analysis_source_name(a, MT_SOURCE_EXTERNAL), "malloc");
  assert_amount(&mt_analysis_summary(a)->allocated, 6, 7, 178.0 / 21);
  mt_analysis_free(a);
  free(data);
}

/* The stacks trace (analysis_known_trace.h): s5 is freed after domain 1 allocated s6, but domain 0
 * allocated nothing since s5, so s5 is temporary; s4 is not, domain 1 having allocated s6. */
static void temporaries_are_counted_per_domain(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = known_stacks_trace(&size);
  mt_analysis *a = analyse(data, size, NULL);
  const mt_summary *s = mt_analysis_summary(a);
  assert_amount(&s->allocated, 6, 47, 6); /* 10 + 20 + 5 + 3 + 8 + 1 words */
  assert_amount(&s->freed, 3, 21, 3);     /* s5, s1, s4: 8 + 10 + 3 */
  assert_amount(&s->temporary, 1, 8, 1);  /* s5 */
  assert_amount(&s->live_end, 3, 26, 3);  /* s2, s3, s6: 20 + 5 + 1 */
  assert_int_equal(s->distinct_backtraces, 6);
  mt_analysis_free(a);
  free(data);
}

/* The timeline of the known trace, 1 µs buckets: a bucket with no event holds the heap as the last
 * event left it, and a bucket's largest heap includes the heap just before its first event. */
static void timeline_buckets_hold_the_heap_from_before_each_event(void **state) {
  (void)state;
  size_t size, n;
  int64_t width;
  uint8_t *data = known_trace(&size);
  mt_analysis *a = analyse(data, size, NULL);
  const mt_timeline_bucket *tl = mt_analysis_timeline(a, &n, &width);
  assert_int_equal(width, 1);
  assert_int_equal(n, 81);
  for (size_t i = 0; i < 10; i++) /* nothing until id0 at 10 µs */
    assert_true(tl[i].live_max == 0 && tl[i].live_end == 0);
  assert_true(tl[10].live_max == 80 && tl[10].live_end == 80);
  assert_true(tl[19].live_max == 80 && tl[19].live_end == 80);
  assert_true(tl[30].live_max == 112 && tl[30].live_end == 80); /* id1 freed at 30 µs */
  assert_true(tl[39].live_max == 80 && tl[39].live_end == 80);
  assert_true(tl[49].live_max == 160 && tl[50].live_max == 960);
  assert_true(tl[79].live_max == 80 && tl[80].live_end == 96);
  mt_analysis_free(a);
  free(data);
}

static void rate_outside_zero_one_is_an_error(void **state) {
  (void)state;
  /* The writer refuses such rates, so patch the f64 in packet 0 (offset 68 + 4 in v3). */
  size_t size;
  uint8_t *data = known_trace(&size);
  double bad[] = {0.0, -1.0, 2.0, NAN};
  /* The reader refuses them at the rate's offset: no analysis ever divides by one. */
  for (int i = 0; i < 4; i++) {
    memcpy(data + 72, &bad[i], sizeof bad[i]);
    mt_reader_options ro = {.backtraces = true};
    mt_reader *r;
    mt_error err;
    assert_int_equal(mt_reader_open_memory(&r, data, size, &ro, &err), MT_E_MALFORMED);
    assert_int_equal(err.offset, 72);
    assert_non_null(strstr(err.message, "(0, 1]"));
  }
  /* In (0, 1] but so small that one sample stands for more bytes than a double holds: the
   * reader refuses it at the rate's offset, so that check and the analyses agree. */
  double tiny = 1e-320;
  memcpy(data + 72, &tiny, sizeof tiny);
  mt_reader_options ro = {.backtraces = true};
  mt_reader *r;
  mt_error err;
  assert_int_equal(mt_reader_open_memory(&r, data, size, &ro, &err), MT_E_MALFORMED);
  assert_int_equal(err.offset, 72);
  assert_non_null(strstr(err.message, "too small"));
  free(data);
}

/* Resolver for the stack tests: code 7 has no location ($7); others as tg_resolve. */
static int resolve_some_unknown(void *user, uint64_t code, const mt_location **entries,
                                size_t *count) {
  if (code == 7) {
    *entries = NULL;
    *count = 0;
    return MT_OK;
  }
  return tg_resolve(user, code, entries, count);
}

static void recursion_folds_hide_drops_and_code_frames_are_skipped_for_sites(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  mt_error err;
  /* innermost first: $7 <- fn_501_0 x3 (501 % 3 == 0: one entry) <- fn_600_0 */
  uint64_t stack[] = {7, 501, 501, 501, 600};
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 5, 3, 3, MT_SOURCE_EXTERNAL, stack, 5,
                                       resolve_some_unknown, NULL, NULL, &err),
                   MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);

  mt_analysis *a = analyse(data, size, NULL);
  assert_int_equal(mt_analysis_stack_count(a), 1);
  size_t depth;
  const uint32_t *frames = mt_analysis_stack_frames(a, 0, &depth, NULL);
  assert_int_equal(depth, 3); /* fn_600_0, fn_501_0 (folded), $7 */
  assert_string_equal(mt_analysis_frame(a, frames[0]).function, "fn_600_0");
  assert_string_equal(mt_analysis_frame(a, frames[1]).function, "fn_501_0");
  assert_string_equal(mt_analysis_frame(a, frames[2]).function, "$7");
  /* The site skips the $7 frame, which has no location. */
  assert_string_equal(mt_analysis_frame(a, mt_analysis_stack_site(a, 0)).function, "fn_501_0");
  mt_analysis_free(a);

  mt_analysis_options o = mt_analysis_default_options();
  o.no_fold = true;
  a = analyse(data, size, &o);
  mt_analysis_stack_frames(a, 0, &depth, NULL);
  assert_int_equal(depth, 5);
  mt_analysis_free(a);

  o = mt_analysis_default_options();
  o.hide = "^fn_501";
  a = analyse(data, size, &o);
  frames = mt_analysis_stack_frames(a, 0, &depth, NULL);
  assert_int_equal(depth, 2);
  assert_string_equal(mt_analysis_frame(a, mt_analysis_stack_site(a, 0)).function, "fn_600_0");
  mt_analysis_free(a);

  o.hide = "([";
  mt_reader_options ro = {.backtraces = true};
  mt_reader *r;
  assert_int_equal(mt_reader_open_memory(&r, data, size, &ro, &err), MT_OK);
  assert_int_equal(mt_analysis_run(&a, r, &o, &err), MT_E_INVALID);
  mt_reader_close(r);
  free(data);
}

static void cells_and_timeline_account_for_every_object(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = known_trace(&size);
  mt_analysis_options o = mt_analysis_default_options();
  o.cells = true;
  mt_analysis *a = analyse(data, size, &o);
  size_t n;
  int64_t width;
  const mt_cell *cells = mt_analysis_cells(a, &n, &width);
  uint64_t objects = 0, samples = 0, never = 0;
  for (size_t i = 0; i < n; i++) {
    objects += cells[i].amount.objects;
    samples += cells[i].amount.samples;
    if (cells[i].free_bucket == MT_CELL_NEVER)
      never += cells[i].amount.samples;
    assert_true(cells[i].alloc_bucket < MT_CELL_TIME_BUCKETS);
  }
  assert_int_equal(objects, 5);
  assert_int_equal(samples, 126);
  assert_int_equal(never, 12);
  assert_true(width * MT_CELL_TIME_BUCKETS > 80);
  const mt_timeline_bucket *tl = mt_analysis_timeline(a, &n, &width);
  double allocated = 0, max = 0;
  for (size_t i = 0; i < n; i++) {
    allocated += tl[i].allocated;
    if (tl[i].live_max > max)
      max = tl[i].live_max;
  }
  assert_true(allocated == 1008);
  assert_true(max == 960);
  assert_true(tl[n - 1].live_end == 96);
  size_t nl;
  const mt_allocation *largest = mt_analysis_largest(a, &nl);
  assert_int_equal(nl, 5);
  assert_int_equal(largest[0].time, 10); /* in time order */
  assert_int_equal(largest[3].words, 100);
  mt_analysis_free(a);
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(summary_counts_frees_peak_and_leaks_exactly),
      cmocka_unit_test(sites_rank_by_every_metric),
      cmocka_unit_test(window_rebuilds_live_set_and_ignores_later_events),
      cmocka_unit_test(fractional_rate_estimates_bytes_and_objects),
      cmocka_unit_test(ocaml_blocks_count_their_header_word_in_the_estimate),
      cmocka_unit_test(temporaries_are_counted_per_domain),
      cmocka_unit_test(timeline_buckets_hold_the_heap_from_before_each_event),
      cmocka_unit_test(rate_outside_zero_one_is_an_error),
      cmocka_unit_test(recursion_folds_hide_drops_and_code_frames_are_skipped_for_sites),
      cmocka_unit_test(cells_and_timeline_account_for_every_object),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
