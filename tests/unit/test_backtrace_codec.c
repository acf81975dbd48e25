/* The backtrace codec (FORMAT.md §2.7) through the writer and the reader: prefixes, predictions
 * (one, many, runs longer than 255), cache eviction with re-described locations, direct
 * recursion, and the 4 KiB cut with the reader's "previous backtrace was cut" rule. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tracegen.h"

static int64_t put(mt_writer *w, int64_t t, const uint64_t *stack, size_t n) {
  int64_t id;
  mt_error err;
  int rc = mt_writer_put_alloc(w, TG_START + t, 2, 1, MT_SOURCE_EXTERNAL, stack, n, tg_resolve,
                               NULL, &id, &err);
  if (rc)
    fail_msg("put_alloc: %s", err.message);
  return id;
}

static void assert_backtrace(const tg_event *e, const uint64_t *innermost_first, size_t n) {
  assert_int_equal(e->ev.backtrace_length, n);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(e->backtrace[i], (int64_t)innermost_first[n - 1 - i]);
}

static void long_stacks_repeat_as_predictions(void **state) {
  (void)state;
  enum { N = 600 };
  uint64_t *a = malloc((N + 1) * sizeof *a);
  for (size_t i = 0; i < N; i++)
    a[i] = 1000 + i;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  /* Build a 600-frame chain in the cache in two steps, each below the 4 KiB cut (300 misses). */
  put(w, 1, a + N / 2, N / 2);
  put(w, 2, a, N);
  mt_writer_flush(w, NULL);
  size_t size_one = 0;
  free(tg_fd_bytes(fd, &size_one));
  a[N] = 77; /* a new outermost frame: no common prefix, all 601 frames encoded again */
  put(w, 3, a, N + 1);
  mt_writer_flush(w, NULL);
  size_t size_two;
  free(tg_fd_bytes(fd, &size_two));
  /* One miss (10 bytes), then 600 cached frames as predicted runs of at most 256 frames (3 bytes
   * each), plus a location packet for code 77 (~70 bytes) and two packet headers. */
  print_message("third allocation: %zu bytes\n", size_two - size_one);
  assert_true(size_two - size_one < 300); /* one hit codeword per frame would be 1200+ */
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 3);
  assert_backtrace(&ev[0], a + N / 2, N / 2);
  assert_backtrace(&ev[1], a, N);
  assert_int_equal(ev[1].ev.common_prefix, N / 2);
  assert_backtrace(&ev[2], a, N + 1);
  assert_int_equal(ev[2].ev.common_prefix, 0);
  tg_free_events(ev, n);
  free(data);
  free(a);
}

static void common_prefix_is_counted_from_the_outermost_frame(void **state) {
  (void)state;
  uint64_t s1[] = {5, 4, 3, 2, 1}, s2[] = {9, 3, 2, 1}, s3[] = {2, 1}, s4[] = {8};
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  put(w, 1, s1, 5);
  put(w, 2, s2, 4);
  put(w, 3, s3, 2);
  put(w, 4, s4, 1);
  put(w, 5, NULL, 0);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 5);
  assert_int_equal(ev[1].ev.common_prefix, 3);
  assert_int_equal(ev[2].ev.common_prefix, 2);
  assert_int_equal(ev[3].ev.common_prefix, 0);
  assert_int_equal(ev[4].ev.common_prefix, 0);
  assert_backtrace(&ev[0], s1, 5);
  assert_backtrace(&ev[1], s2, 4);
  assert_backtrace(&ev[2], s3, 2);
  assert_backtrace(&ev[3], s4, 1);
  assert_int_equal(ev[4].ev.backtrace_length, 0);
  tg_free_events(ev, n);
  free(data);
}

static void direct_recursion_decodes_frame_for_frame(void **state) {
  (void)state;
  enum { DEPTH = 1900 };
  uint64_t *s = malloc(DEPTH * sizeof *s);
  for (size_t i = 0; i < DEPTH; i++)
    s[i] = i < 3 ? 50 + i : 4242; /* main -> f -> f -> ... -> f -> g -> h -> alloc */
  s[DEPTH - 1] = 1;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  put(w, 1, s, DEPTH);
  s[DEPTH - 1] = 2; /* a different root: the whole recursion is encoded again, as predictions */
  put(w, 2, s, DEPTH);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 2);
  s[DEPTH - 1] = 1;
  assert_backtrace(&ev[0], s, DEPTH);
  s[DEPTH - 1] = 2;
  assert_backtrace(&ev[1], s, DEPTH);
  tg_free_events(ev, n);
  free(data);
  free(s);
}

static void colliding_codes_evict_and_are_described_again(void **state) {
  (void)state;
  /* Codes k << 35 hash to bucket 0 under both hash functions (only product bits below 35 are
   * used), so each one evicts the previous: every frame misses. */
  uint64_t s[6];
  for (int i = 0; i < 6; i++)
    s[i] = (uint64_t)(i + 1) << 35;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  put(w, 1, s, 6);
  uint64_t t[6] = {s[0], s[1], s[2], s[3], s[4], (uint64_t)99 << 35};
  put(w, 2, t, 6);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  mt_reader *r;
  tg_event *ev = tg_read_all(data, size, true, &n, &r);
  assert_int_equal(n, 2);
  assert_backtrace(&ev[0], s, 6);
  assert_backtrace(&ev[1], t, 6);
  const mt_location *locs;
  size_t count;
  assert_true(mt_reader_lookup_location(r, (int64_t)s[3], &locs, &count));
  assert_int_equal(count, s[3] % 3 + 1);
  mt_reader_close(r);
  tg_free_events(ev, n);
  free(data);
}

static void the_4k_cut_keeps_outer_frames_and_the_reader_keeps_the_cut_stack(void **state) {
  (void)state;
  enum { N = 1000 };
  uint64_t *s = malloc(N * sizeof *s);
  for (size_t i = 0; i < N; i++)
    s[i] = 100000 + 7 * i; /* all distinct: every frame is a 10-byte miss */
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  put(w, 1, s, N);
  s[0] = 5; /* same stack but for the innermost frame: prefix 999 > what the reader has */
  put(w, 2, s, N);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 2);
  size_t kept = ev[0].ev.backtrace_length;
  assert_true(kept >= 400 && kept <= 410); /* 4086 bytes of 10-byte misses */
  for (size_t i = 0; i < kept; i++)        /* the outermost frames survive */
    assert_int_equal(ev[0].backtrace[i], (int64_t)(100000 + 7 * (N - 1 - i)));
  assert_int_equal(ev[1].ev.common_prefix, N - 1);
  assert_int_equal(ev[1].ev.backtrace_length, kept);
  assert_memory_equal(ev[1].backtrace, ev[0].backtrace, kept * sizeof(int64_t));
  tg_free_events(ev, n);
  free(data);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(long_stacks_repeat_as_predictions),
      cmocka_unit_test(common_prefix_is_counted_from_the_outermost_frame),
      cmocka_unit_test(direct_recursion_decodes_frame_for_frame),
      cmocka_unit_test(colliding_codes_evict_and_are_described_again),
      cmocka_unit_test(the_4k_cut_keeps_outer_frames_and_the_reader_keeps_the_cut_stack),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
