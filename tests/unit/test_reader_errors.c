/* The reader's rules (FORMAT.md §2.11) on deliberately broken traces: every malformed field is
 * reported with its absolute byte offset and the rule, never a crash; foreign-pid packets and cut
 * ends are warnings that leave everything before them readable; zstd input reads the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "format/buf.h"
#include "format/packet.h"
#include "testutil.h"
#include "tracegen.h"

typedef struct base_trace {
  uint8_t *data;
  size_t size;
  size_t packet[5];
  size_t first_events;  /* packet index of the first events packet */
  size_t second_events; /* packet index of the events packet with a real verifier */
} base_trace;

/* Packets: 0 info, 1 locations, 2 events [alloc ext, alloc minor, promote, collect],
 * 3 locations, 4 events [alloc ext, under a real cache verifier]. */
static base_trace make_base(void) {
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t s1[] = {2, 1}, s2[] = {3, 2, 1};
  int64_t a, b;
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 5, 1, MT_SOURCE_EXTERNAL, s1, 2, tg_resolve,
                                       NULL, &a, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 2, 2, 1, MT_SOURCE_MINOR, s1, 2, tg_resolve,
                                       NULL, &b, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_put_promote(w, TG_START + 3, b, NULL), MT_OK);
  assert_int_equal(mt_writer_put_collect(w, TG_START + 4, a, NULL), MT_OK);
  assert_int_equal(mt_writer_flush(w, NULL), MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 5, 5, 1, MT_SOURCE_EXTERNAL, s2, 3, tg_resolve,
                                       NULL, NULL, NULL),
                   MT_OK);
  base_trace t = {0};
  t.data = tg_finish(w, fd, &t.size);
  tg_packets p;
  tg_walk_packets(t.data, t.size, &p);
  assert_int_equal(p.count, 5);
  memcpy(t.packet, p.offset, sizeof t.packet);
  t.first_events = 2;
  t.second_events = 4;
  return t;
}

static size_t at_packet(const base_trace *t, size_t index, size_t field) {
  return t->packet[index] + field;
}

/* Expects reading a mutated copy to fail with MT_E_MALFORMED at `offset` with `words` in the
 * message. */
static void expect_malformed(const base_trace *t, bool backtraces, int64_t offset,
                             const char *words) {
  mt_error err;
  int rc = tg_read_status(t->data, t->size, backtraces, &err, NULL, NULL, NULL);
  if (rc != MT_E_MALFORMED)
    fail_msg("expected a malformed-trace error (%s), got status %d: %s", words, rc, err.message);
  if (err.offset != offset || !strstr(err.message, words))
    fail_msg("expected '%s' at byte %lld, got: %s (offset %lld)", words, (long long)offset,
             err.message, (long long)err.offset);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "malformed trace at byte %lld: ", (long long)offset);
  assert_non_null(strstr(err.message, prefix));
}

static void header_fields_are_checked_with_their_offsets(void **state) {
  (void)state;
  base_trace t = make_base();
  uint8_t *saved = malloc(t.size);
  memcpy(saved, t.data, t.size);
  size_t p = at_packet(&t, t.first_events, 0);
#define RESTORE() memcpy(t.data, saved, t.size)
  t.data[p] ^= 0xFF;
  expect_malformed(&t, false, (int64_t)p, "not a CTF packet");
  RESTORE();
  mt_store_u16(t.data + p + 28, 4);
  expect_malformed(&t, false, (int64_t)p + 28, "trace format v004");
  RESTORE();
  mt_store_u64(t.data + p + 8, mt_load_u64(t.data + p + 16) + 1);
  expect_malformed(&t, false, (int64_t)p + 16, "timestamps are not monotone");
  RESTORE();
  mt_store_u64(t.data + p + 52, mt_load_u64(t.data + p + 60) + 1);
  expect_malformed(&t, false, (int64_t)p + 60, "alloc ids are not monotone");
  RESTORE();
  mt_store_u32(t.data + p + 4, 8 * 10);
  expect_malformed(&t, false, (int64_t)p + 4, "smaller than its");
  RESTORE();
  mt_store_u32(t.data + p + 4, 8 * 40000);
  expect_malformed(&t, false, (int64_t)p + 4, "exceeds the 32768-byte maximum");
  RESTORE();
  mt_store_u32(t.data + p + 4, 0x80000000u);
  expect_malformed(&t, false, (int64_t)p + 4, "negative packet size");
  RESTORE();
  mt_store_u64(t.data + p + 60, mt_load_u64(t.data + p + 60) + 1);
  expect_malformed(&t, false, (int64_t)p + 60, "alloc id sync");
  RESTORE();
  free(saved);
  free(t.data);
}

static void events_are_checked_with_their_offsets(void **state) {
  (void)state;
  base_trace t = make_base();
  uint8_t *saved = malloc(t.size);
  memcpy(saved, t.data, t.size);
  size_t p = at_packet(&t, t.first_events, 0);
  size_t ev = p + MT_HEADER_SIZE_V3; /* the first event: a long-form external allocation */
  uint32_t word = mt_load_u32(t.data + ev);
  mt_store_u32(t.data + ev, (word & 0x1FFFFFF) | 50u << 25);
  expect_malformed(&t, false, (int64_t)ev, "unknown event code 50");
  RESTORE();
  mt_store_u32(t.data + ev, word & 0x1FFFFFF);
  expect_malformed(&t, false, (int64_t)ev, "multiple trace-info events");
  RESTORE();
  t.data[ev + 6] = 3; /* header(4), length(1), nsamples(1), source */
  expect_malformed(&t, false, (int64_t)ev + 6, "unknown allocation source 3");
  RESTORE();
  mt_store_u64(t.data + p + 16, mt_load_u64(t.data + p + 8)); /* end = begin: events fall out */
  expect_malformed(&t, false, (int64_t)ev, "outside its packet's bounds");
  RESTORE();
  /* Restamp the second location packet (and its one event) 3 µs back: time goes backwards. */
  size_t loc = at_packet(&t, t.second_events - 1, 0);
  mt_store_u64(t.data + loc + 8, TG_START + 1);
  mt_store_u64(t.data + loc + 16, TG_START + 1);
  word = mt_load_u32(t.data + loc + MT_HEADER_SIZE_V3);
  mt_store_u32(t.data + loc + MT_HEADER_SIZE_V3,
               (word & ~0x1FFFFFFu) | (uint32_t)((TG_START + 1) & 0x1FFFFFF));
  expect_malformed(&t, false, (int64_t)loc + MT_HEADER_SIZE_V3, "timestamps are not monotone");
  RESTORE();
  free(saved);
  free(t.data);
}

/* FORMAT.md §2.4 step 4: begin <= t <= end. A packet that begins within 2^25 µs of INT64_MAX makes
 * the reconstructed time wrap to a negative value: it is below the packet's begin, so it is out of
 * bounds, even when the trace started at INT64_MIN and the time is not behind the last one. */
static void an_event_time_that_wraps_past_int64_max_is_out_of_bounds(void **state) {
  (void)state;
  const int64_t start = INT64_MIN, begin = INT64_MAX - 5;
  uint8_t data[256];
  size_t size = 0;
  mt_packet_header h = {.magic = MT_CTF_MAGIC,
                        .version = 3,
                        .pid = 7,
                        .time_begin = start,
                        .time_end = start,
                        .verify_ix = MT_NO_VERIFY};
  static const uint8_t info[] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 64, 'x', 0, 'h',
                                 0, 0, 7, 0, 0, 0, 0,    0,    0,  0,   0};
  h.packet_size_bits = (uint32_t)(MT_HEADER_SIZE_V3 + 4 + sizeof info) * 8;
  mt_packet_header_encode(&h, data);
  mt_store_u32(data + MT_HEADER_SIZE_V3, mt_event_header(MT_CODE_TRACE_INFO, start));
  memcpy(data + MT_HEADER_SIZE_V3 + 4, info, sizeof info);
  size = MT_HEADER_SIZE_V3 + 4 + sizeof info;
  /* An events packet [INT64_MAX - 5, INT64_MAX] holding one alloc01 whose low time bits are 0. */
  h.time_begin = begin;
  h.time_end = INT64_MAX;
  h.alloc_id_end = 1;
  h.packet_size_bits = (MT_HEADER_SIZE_V3 + 6) * 8;
  mt_packet_header_encode(&h, data + size);
  size_t ev = size + MT_HEADER_SIZE_V3;
  mt_store_u32(data + ev, (uint32_t)MT_CODE_ALLOC_SHORT_FIRST << 25);
  data[ev + 4] = 0; /* common prefix */
  data[ev + 5] = 0; /* no codewords */
  size = ev + 6;
  base_trace t = {.data = data, .size = size};
  expect_malformed(&t, false, (int64_t)ev, "outside its packet's bounds");
}

static void cache_verifier_is_checked_only_when_decoding_backtraces(void **state) {
  (void)state;
  base_trace t = make_base();
  size_t q = at_packet(&t, t.second_events, 0);
  assert_int_equal(mt_load_u16(t.data + q + 40), 4242);
  mt_store_u64(t.data + q + 44, 12345);
  expect_malformed(&t, true, (int64_t)q + 40, "backtrace cache verification failed");
  mt_error err;
  size_t n;
  assert_int_equal(tg_read_status(t.data, t.size, false, &err, &n, NULL, NULL), 0);
  assert_int_equal(n, 5);
  mt_store_u16(t.data + q + 40, 16384);
  expect_malformed(&t, true, (int64_t)q + 40, "verification failed");
  free(t.data);
}

static void foreign_pid_packets_are_skipped_with_a_warning(void **state) {
  (void)state;
  base_trace t = make_base();
  mt_store_u64(t.data + at_packet(&t, t.second_events, 30), 999);
  mt_error err;
  size_t n;
  uint64_t warnings;
  bool truncated;
  assert_int_equal(tg_read_status(t.data, t.size, false, &err, &n, &warnings, &truncated), 0);
  assert_int_equal(n, 4); /* the last packet's allocation is skipped */
  assert_int_equal(warnings, 1);
  assert_false(truncated);
  free(t.data);
}

static void cut_traces_read_up_to_the_last_whole_packet(void **state) {
  (void)state;
  base_trace t = make_base();
  mt_error err;
  size_t n;
  uint64_t warnings;
  bool truncated;
  size_t last = t.packet[t.second_events];
  /* Inside the last packet's events, inside its header, and exactly at its start. */
  const size_t cuts[] = {t.size - 3, last + 30, last};
  const bool cut_expected[] = {true, true, false};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(tg_read_status(t.data, cuts[i], true, &err, &n, &warnings, &truncated), 0);
    assert_int_equal(n, 4);
    assert_int_equal(truncated, cut_expected[i]);
    assert_int_equal(warnings, cut_expected[i] ? 1 : 0);
  }
  /* A cut inside packet 0 (or an empty file) leaves no trace to read. */
  assert_int_equal(tg_read_status(t.data, 50, false, &err, NULL, NULL, NULL), MT_E_MALFORMED);
  assert_non_null(strstr(err.message, "trace-info packet is incomplete"));
  assert_int_equal(tg_read_status(t.data, 0, false, &err, NULL, NULL, NULL), MT_E_MALFORMED);
  assert_non_null(strstr(err.message, "empty"));
  assert_int_equal(tg_read_status((const uint8_t *)"hello, world: not a trace at all, no.......",
                                  44, false, &err, NULL, NULL, NULL),
                   MT_E_MALFORMED);
  free(t.data);
}

static void an_event_cut_inside_a_packet_is_an_error_not_a_crash(void **state) {
  (void)state;
  base_trace t = make_base();
  /* Shrink the first events packet's declared size by 1: its last event loses its last byte. */
  size_t p = at_packet(&t, t.first_events, 0);
  uint32_t bits = mt_load_u32(t.data + p + 4);
  mt_store_u32(t.data + p + 4, bits - 8);
  mt_error err;
  assert_int_equal(tg_read_status(t.data, t.size, true, &err, NULL, NULL, NULL), MT_E_MALFORMED);
  assert_non_null(strstr(err.message, "malformed trace at byte"));
  free(t.data);
}

static void zstd_compressed_traces_read_like_plain_ones(void **state) {
  (void)state;
  base_trace t = make_base();
  size_t bound = ZSTD_compressBound(t.size);
  uint8_t *z = malloc(bound);
  size_t zsize = ZSTD_compress(z, bound, t.data, t.size, 3);
  assert_false(ZSTD_isError(zsize));
  size_t n_plain, n_zstd;
  tg_event *plain = tg_read_all(t.data, t.size, true, &n_plain, NULL);
  tg_event *zstd = tg_read_all(z, zsize, true, &n_zstd, NULL);
  assert_int_equal(n_plain, n_zstd);
  for (size_t i = 0; i < n_plain; i++) {
    assert_int_equal(plain[i].ev.time, zstd[i].ev.time);
    assert_int_equal(plain[i].ev.obj_id, zstd[i].ev.obj_id);
    assert_int_equal(plain[i].ev.backtrace_length, zstd[i].ev.backtrace_length);
  }
  /* A compressed trace cut half-way reads as a cut trace: everything in the complete zstd blocks
   * before the cut is there. It needs to be larger than one zstd block (128 KiB). */
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t stack[4];
  for (uint64_t i = 0; i < 60000; i++) {
    stack[0] = i * 2654435761u % 1000003 + 1, stack[1] = i % 97 + 1, stack[2] = 5, stack[3] = 9;
    assert_int_equal(mt_writer_put_alloc(w, TG_START + (int64_t)i, 1, 1, MT_SOURCE_MINOR, stack, 4,
                                         tg_resolve, NULL, NULL, NULL),
                     MT_OK);
  }
  size_t big_size;
  uint8_t *big = tg_finish(w, fd, &big_size);
  uint8_t *bz = malloc(ZSTD_compressBound(big_size));
  size_t bz_size = ZSTD_compress(bz, ZSTD_compressBound(big_size), big, big_size, 1);
  assert_false(ZSTD_isError(bz_size));
  assert_true(bz_size > 3 * 131072);
  mt_error err;
  bool truncated;
  size_t n;
  int rc = tg_read_status(bz, bz_size / 2, false, &err, &n, NULL, &truncated);
  if (rc)
    fail_msg("cut zstd trace: %s", err.message);
  assert_true(truncated);
  assert_true(n > 1000 && n < 60000);
  free(bz);
  free(big);
  tg_free_events(plain, n_plain);
  tg_free_events(zstd, n_zstd);
  free(z);
  free(t.data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(header_fields_are_checked_with_their_offsets),
      cmocka_unit_test(events_are_checked_with_their_offsets),
      cmocka_unit_test(an_event_time_that_wraps_past_int64_max_is_out_of_bounds),
      cmocka_unit_test(cache_verifier_is_checked_only_when_decoding_backtraces),
      cmocka_unit_test(foreign_pid_packets_are_skipped_with_a_warning),
      cmocka_unit_test(cut_traces_read_up_to_the_last_whole_packet),
      cmocka_unit_test(an_event_cut_inside_a_packet_is_an_error_not_a_crash),
      cmocka_unit_test(zstd_compressed_traces_read_like_plain_ones),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
