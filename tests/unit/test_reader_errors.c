/* The reader's rules (FORMAT.md §2.11) on deliberately broken traces: every malformed field is
 * reported with its absolute byte offset and the rule, never a crash; foreign-pid packets and cut
 * ends are warnings that leave everything before them readable; zstd input reads the same. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

/* --- traces made by hand, byte by byte ---------------------------------------------------- */

#define HAND_PID 7
/* trace_info after its event word: rate 1.0, word size 64, "x", "h", "", pid 7, context "". */
static const uint8_t hand_info[] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 64, 'x', 0, 'h',
                                    0, 0, 0, 0, 0, 0, 0,    0,    0,  0,   0};

/* Packet 0 at `out`: its header, the event word `word`, hand_info, then `extra` zero bytes.
 * Returns its size. */
static size_t hand_info_packet(uint8_t *out, uint32_t word, size_t extra) {
  mt_packet_header h = {.magic = MT_CTF_MAGIC,
                        .version = 3,
                        .pid = HAND_PID,
                        .time_begin = TG_START,
                        .time_end = TG_START,
                        .verify_ix = MT_NO_VERIFY};
  size_t size = MT_HEADER_SIZE_V3 + 4 + sizeof hand_info + extra;
  h.packet_size_bits = (uint32_t)size * 8;
  mt_packet_header_encode(&h, out);
  mt_store_u32(out + MT_HEADER_SIZE_V3, word);
  memcpy(out + MT_HEADER_SIZE_V3 + 4, hand_info, sizeof hand_info);
  out[MT_HEADER_SIZE_V3 + 4 + 14] = HAND_PID;
  memset(out + MT_HEADER_SIZE_V3 + 4 + sizeof hand_info, 0, extra);
  return size;
}

/* A v3 events packet of `domain` at `out`, spanning [TG_START, TG_START + 100], holding `n` bytes
 * of events of which `allocs` are allocations. Returns its size. */
static size_t hand_events_packet(uint8_t *out, uint16_t domain, const uint8_t *events, size_t n,
                                 int64_t allocs) {
  mt_packet_header h = {.magic = MT_CTF_MAGIC,
                        .version = 3,
                        .pid = HAND_PID,
                        .time_begin = TG_START,
                        .time_end = TG_START + 100,
                        .domain = domain,
                        .verify_ix = MT_NO_VERIFY,
                        .alloc_id_end = allocs};
  h.packet_size_bits = (uint32_t)(MT_HEADER_SIZE_V3 + n) * 8;
  mt_packet_header_encode(&h, out);
  if (n)
    memcpy(out + MT_HEADER_SIZE_V3, events, n);
  return MT_HEADER_SIZE_V3 + n;
}

/* FORMAT.md §2.11 step 1: packet 0 holds trace_info, at the packet's start time, and nothing else.
 */
static void packet_0_must_hold_exactly_trace_info_at_its_start_time(void **state) {
  (void)state;
  uint8_t data[256];
  const int64_t event = MT_HEADER_SIZE_V3;
  base_trace t = {.data = data};
  t.size = hand_info_packet(data, mt_event_header(MT_CODE_TRACE_INFO, TG_START), 0);
  mt_error err;
  assert_int_equal(tg_read_status(data, t.size, true, &err, NULL, NULL, NULL), 0);
  t.size = hand_info_packet(data, mt_event_header(MT_CODE_LOCATION, TG_START), 0);
  expect_malformed(&t, false, event, "the first event is not trace_info (event code 1)");
  t.size = hand_info_packet(data, mt_event_header(MT_CODE_ALLOC_SHORT_FIRST, TG_START), 0);
  expect_malformed(&t, false, event, "the first event is not trace_info (event code 101)");
  t.size = hand_info_packet(data, mt_event_header(MT_CODE_TRACE_INFO, TG_START + 1), 0);
  expect_malformed(&t, false, event, "the trace_info time differs from the packet's start time");
  t.size = hand_info_packet(data, mt_event_header(MT_CODE_TRACE_INFO, TG_START), 3);
  expect_malformed(&t, false, (int64_t)(t.size - 3), "3 unexpected bytes after trace_info");
  /* A packet 0 whose trace_info is cut names the field it ends in. */
  base_trace cut = {.data = data, .size = MT_HEADER_SIZE_V3 + 4 + 5};
  mt_store_u32(data + 4, (uint32_t)cut.size * 8);
  expect_malformed(&cut, false, event + 4, "trace_info ends inside its sample rate or word size");
  /* The sample rate is a probability (FORMAT.md §2: 0 < rate <= 1), said with every digit: a
   * flipped low bit of 1.0 once passed check and then failed every analysis as "rate 1". */
  t.size = hand_info_packet(data, mt_event_header(MT_CODE_TRACE_INFO, TG_START), 0);
  const double bad[] = {1.0000000000000002, 0, -0.5, 2, __builtin_nan("")};
  const char *said[] = {"1.0000000000000002 is outside (0, 1]", "0 is outside", "-0.5 is outside",
                        "2 is outside", "nan is outside"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t bits;
    memcpy(&bits, &bad[i], sizeof bits);
    uint64_t saved = mt_load_u64(data + event + 4);
    mt_store_u64(data + event + 4, bits);
    expect_malformed(&t, false, event + 4, said[i]);
    mt_store_u64(data + event + 4, saved);
  }
  /* A rate so small that a sample's bytes overflow a double, and a word size that is not whole
   * bytes: check passed them, and every analysis then refused the trace without saying where. */
  double denormal = 5e-324;
  uint64_t bits, saved = mt_load_u64(data + event + 4);
  memcpy(&bits, &denormal, sizeof bits);
  mt_store_u64(data + event + 4, bits);
  expect_malformed(&t, false, event + 4, "is too small: one sample would stand for more bytes");
  mt_store_u64(data + event + 4, saved);
  const uint8_t words[] = {0, 65, 7};
  const char *words_said[] = {"the word size is 0 bits", "the word size 65 bits",
                              "the word size 7 bits is not a whole number of bytes"};
  for (size_t i = 0; i < sizeof words; i++) {
    uint8_t kept = data[event + 12];
    data[event + 12] = words[i];
    expect_malformed(&t, false, event + 12, words_said[i]);
    data[event + 12] = kept;
  }
}

/* A one-packet trace after packet 0 holding `events`. */
static base_trace hand_trace(uint8_t *data, const uint8_t *events, size_t n, int64_t allocs) {
  base_trace t = {.data = data};
  t.size = hand_info_packet(data, mt_event_header(MT_CODE_TRACE_INFO, TG_START), 0);
  t.size += hand_events_packet(data + t.size, 0, events, n, allocs);
  return t;
}

static void promote_deltas_and_common_prefixes_must_not_be_negative(void **state) {
  (void)state;
  uint8_t data[512], ev[32];
  const size_t first = MT_HEADER_SIZE_V3 + 4 + sizeof hand_info + MT_HEADER_SIZE_V3;
  /* alloc01 at +1 µs, common prefix 0, no codewords; then a promote at +2 µs, delta -1
   * (vint 254: 32 bits sign-extended). */
  mt_store_u32(ev, mt_event_header(MT_CODE_ALLOC_SHORT_FIRST, TG_START + 1));
  ev[4] = 0, ev[5] = 0;
  mt_store_u32(ev + 6, mt_event_header(MT_CODE_PROMOTE, TG_START + 2));
  ev[10] = 254;
  mt_store_u32(ev + 11, (uint32_t)-1);
  base_trace t = hand_trace(data, ev, 15, 1);
  expect_malformed(&t, false, (int64_t)(first + 10), "promote id sync: negative delta -1");
  /* Delta 0 (vint 254 too) is the allocation itself: fine. */
  mt_store_u32(ev + 11, 0);
  t = hand_trace(data, ev, 15, 1);
  mt_error err;
  size_t n;
  assert_int_equal(tg_read_status(t.data, t.size, true, &err, &n, NULL, NULL), 0);
  assert_int_equal(n, 2);
  /* A collect may have a negative delta in v3 (another domain's object): only promotes are held
   * to it. */
  mt_store_u32(ev + 6, mt_event_header(MT_CODE_COLLECT, TG_START + 2));
  mt_store_u32(ev + 11, (uint32_t)-1);
  t = hand_trace(data, ev, 15, 1);
  assert_int_equal(tg_read_status(t.data, t.size, true, &err, &n, NULL, NULL), 0);

  /* The common prefix, in the short and the long form: the error names the prefix field. */
  ev[4] = 254;
  mt_store_u32(ev + 5, (uint32_t)-2);
  ev[9] = 0;
  t = hand_trace(data, ev, 10, 1);
  expect_malformed(&t, true, (int64_t)(first + 4), "negative common prefix -2");
  expect_malformed(&t, false, (int64_t)(first + 4), "negative common prefix -2");
  mt_store_u32(ev, mt_event_header(MT_CODE_ALLOC, TG_START + 1));
  ev[4] = 3;   /* length */
  ev[5] = 1;   /* nsamples */
  ev[6] = 2;   /* external */
  ev[7] = 254; /* common prefix, 32 bits */
  mt_store_u32(ev + 8, (uint32_t)INT32_MIN);
  mt_store_u16(ev + 12, 0); /* no codewords */
  t = hand_trace(data, ev, 14, 1);
  expect_malformed(&t, true, (int64_t)(first + 7), "negative common prefix -2147483648");
}

/* What the writer refuses, the reader refuses too, so that check, the analyses and copy agree (a
 * sweep of damaged traces found check saying ok where copy said malformed): an allocation of no
 * sample (FORMAT.md §2.7: nsamples >= 1), and a promote or collect counting back past object 0. */
static void allocations_without_samples_and_ids_before_0_are_malformed(void **state) {
  (void)state;
  uint8_t data[512], ev[32];
  const size_t first = MT_HEADER_SIZE_V3 + 4 + sizeof hand_info + MT_HEADER_SIZE_V3;
  mt_store_u32(ev, mt_event_header(MT_CODE_ALLOC, TG_START + 1));
  ev[4] = 3; /* length */
  ev[5] = 0; /* nsamples */
  ev[6] = 2; /* external */
  ev[7] = 0; /* common prefix */
  mt_store_u16(ev + 8, 0);
  base_trace t = hand_trace(data, ev, 10, 1);
  expect_malformed(&t, true, (int64_t)(first + 5), "allocation with 0 samples (at least 1)");
  expect_malformed(&t, false, (int64_t)(first + 5), "allocation with 0 samples (at least 1)");
  ev[5] = 1;
  /* Object 0 allocated, then a collect of delta 1: object -1. Delta 0 reads. */
  mt_store_u32(ev + 10, mt_event_header(MT_CODE_COLLECT, TG_START + 2));
  ev[14] = 1;
  t = hand_trace(data, ev, 15, 1);
  expect_malformed(&t, true, (int64_t)(first + 14), "collect of object -1: ids start at 0");
  expect_malformed(&t, false, (int64_t)(first + 14), "collect of object -1: ids start at 0");
  ev[14] = 0;
  t = hand_trace(data, ev, 15, 1);
  mt_error err;
  size_t n;
  assert_int_equal(tg_read_status(t.data, t.size, true, &err, &n, NULL, NULL), 0);
  assert_int_equal(n, 2);
  mt_store_u32(ev + 10, mt_event_header(MT_CODE_PROMOTE, TG_START + 2));
  ev[14] = 1;
  t = hand_trace(data, ev, 15, 1);
  expect_malformed(&t, false, (int64_t)(first + 14), "promote of object -1: ids start at 0");
}

/* A code may be described again (by each domain's own location packets, §2.6), but never
 * differently. */
static const mt_location other_place = {"elsewhere.ml", "Other.fn", 9, 1, 2};

static int resolve_elsewhere(void *user, uint64_t code, const mt_location **entries,
                             size_t *count) {
  (void)user, (void)code;
  *entries = &other_place;
  *count = 1;
  return MT_OK;
}

static void a_location_described_differently_twice_is_an_error(void **state) {
  (void)state;
  uint64_t stack[] = {7};
  for (int differ = 0; differ < 2; differ++) {
    int fd;
    mt_writer *w = tg_writer(3, 1.0, &fd);
    assert_int_equal(mt_writer_put_alloc_in(w, 0, TG_START + 1, 2, 1, MT_SOURCE_MINOR, stack, 1,
                                            tg_resolve, NULL, NULL, NULL),
                     MT_OK);
    assert_int_equal(mt_writer_put_alloc_in(w, 1, TG_START + 2, 2, 1, MT_SOURCE_MINOR, stack, 1,
                                            differ ? resolve_elsewhere : tg_resolve, NULL, NULL,
                                            NULL),
                     MT_OK);
    base_trace t = {0};
    t.data = tg_finish(w, fd, &t.size);
    tg_packets p;
    tg_walk_packets(t.data, t.size, &p);
    size_t second = 0; /* domain 1's location packet, its first packet */
    for (size_t i = p.count; i-- > 1;)
      if (p.h[i].domain == 1)
        second = i;
    assert_true(second > 0);
    assert_int_equal(p.h[second].alloc_id_begin, p.h[second].alloc_id_end);
    assert_int_equal(mt_load_u32(t.data + p.offset[second] + MT_HEADER_SIZE_V3) >> 25,
                     MT_CODE_LOCATION);
    if (differ) {
      expect_malformed(&t, false, (int64_t)(p.offset[second] + MT_HEADER_SIZE_V3),
                       "inconsistent location info: code 7 was described differently before");
    } else {
      mt_error err;
      size_t n;
      assert_int_equal(tg_read_status(t.data, t.size, true, &err, &n, NULL, NULL), 0);
      assert_int_equal(n, 2);
    }
    free(t.data);
  }
}

/* v1 and v2 headers have no domain field: the fields after it sit 2 bytes earlier, and errors name
 * them where they are. */
static void v2_header_errors_name_the_v2_field_offsets(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(2, 1.0, &fd);
  uint64_t s1[] = {2, 1};
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 5, 1, MT_SOURCE_EXTERNAL, s1, 2, tg_resolve,
                                       NULL, NULL, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_flush(w, NULL), MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 2, 5, 1, MT_SOURCE_EXTERNAL, s1, 2, tg_resolve,
                                       NULL, NULL, NULL),
                   MT_OK);
  base_trace t = {0};
  t.data = tg_finish(w, fd, &t.size);
  tg_packets p;
  tg_walk_packets(t.data, t.size, &p);
  assert_int_equal(p.h[0].version, 2);
  size_t q = p.offset[p.count - 1]; /* the last events packet: a real verifier, one allocation */
  assert_int_not_equal(p.h[p.count - 1].verify_ix, MT_NO_VERIFY);
  assert_int_equal(p.h[p.count - 1].alloc_id_end - p.h[p.count - 1].alloc_id_begin, 1);
  uint8_t *saved = malloc(t.size);
  memcpy(saved, t.data, t.size);
  /* alloc_id_begin at 50, alloc_id_end at 58 (v3: 52 and 60). */
  mt_store_u64(t.data + q + 50, mt_load_u64(t.data + q + 58) + 1);
  expect_malformed(&t, false, (int64_t)q + 58, "alloc ids are not monotone");
  RESTORE();
  mt_store_u64(t.data + q + 58, mt_load_u64(t.data + q + 58) + 1);
  expect_malformed(&t, false, (int64_t)q + 58, "alloc id sync");
  RESTORE();
  /* verify_ix at 38 (v3: 40). */
  mt_store_u64(t.data + q + 42, 12345);
  expect_malformed(&t, true, (int64_t)q + 38, "backtrace cache verification failed");
  RESTORE();
  /* Fields before the domain's place keep their offsets. */
  mt_store_u64(t.data + q + 8, mt_load_u64(t.data + q + 16) + 1);
  expect_malformed(&t, false, (int64_t)q + 16, "timestamps are not monotone");
  RESTORE();
  free(saved);
  free(t.data);
}

/* The reader keeps per-domain state only while its total stays within a bound proportional to the
 * input read (docs/format.md): a trace naming hundreds of domains in a few kilobytes breaks it. */
static void too_many_domains_for_the_input_size_is_a_malformed_trace(void **state) {
  (void)state;
  enum { PACKETS = 1000 };
  size_t cap = 256 + PACKETS * MT_HEADER_SIZE_V3;
  uint8_t *data = malloc(cap);
  size_t *offset = malloc(PACKETS * sizeof *offset);
  size_t size = hand_info_packet(data, mt_event_header(MT_CODE_TRACE_INFO, TG_START), 0);
  for (int i = 0; i < PACKETS; i++) {
    offset[i] = size;
    size += hand_events_packet(data + size, (uint16_t)(i + 1), NULL, 0, 0);
  }
  mt_error err;
  int rc = tg_read_status(data, size, false, &err, NULL, NULL, NULL);
  assert_int_equal(rc, MT_E_MALFORMED);
  size_t held;
  long long first;
  if (sscanf(strstr(err.message, ": more than ") ? strstr(err.message, ": more than ") : "",
             ": more than %zu domains in the first %lld bytes (", &held, &first) != 2)
    fail_msg("unexpected message: %s", err.message);
  /* The packet refused is the one after the `held` domains accepted: the error names its domain
   * field, and the bytes read are those before it. */
  assert_true(held > 100 && held < PACKETS);
  assert_int_equal(first, (long long)offset[held]);
  assert_int_equal(err.offset, (int64_t)offset[held] + 38);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "malformed trace at byte %lld: ", (long long)err.offset);
  assert_ptr_equal(strstr(err.message, prefix), err.message);
  assert_non_null(strstr(err.message, "KiB of decoder state"));
  /* Everything before the refused packet reads. */
  size_t n;
  assert_int_equal(tg_read_status(data, offset[held], false, &err, &n, NULL, NULL), 0);
  /* Revisiting known domains costs nothing. */
  for (int i = 0; i < PACKETS; i++)
    mt_store_u16(data + offset[i] + 38, (uint16_t)(i % 50 + 1));
  assert_int_equal(tg_read_status(data, size, false, &err, &n, NULL, NULL), 0);
  free(offset);
  free(data);
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

/* The trace-info packet's header and its trace_info event carry the writer's one pid: one of them
 * damaged would otherwise make every later packet another process's, an empty trace read as
 * whole. */
static void a_trace_info_pid_unlike_its_packets_is_malformed(void **state) {
  (void)state;
  base_trace t = make_base();
  mt_store_u64(t.data + t.packet[0] + 30, (uint64_t)TG_PID ^ 0x80);
  mt_error err;
  size_t n;
  assert_int_equal(tg_read_status(t.data, t.size, false, &err, &n, NULL, NULL), MT_E_MALFORMED);
  assert_non_null(strstr(err.message, "differs from its packet's pid"));
  assert_non_null(strstr(err.message, "(byte 30)"));
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

/* A trace of 60,000 allocations at varied stacks: compressed, larger than several zstd blocks
 * (128 KiB each). */
#define LARGE_TRACE_EVENTS 60000
static uint8_t *large_trace(size_t *size) {
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t stack[4];
  for (uint64_t i = 0; i < LARGE_TRACE_EVENTS; i++) {
    stack[0] = i * 2654435761u % 1000003 + 1, stack[1] = i % 97 + 1, stack[2] = 5, stack[3] = 9;
    assert_int_equal(mt_writer_put_alloc(w, TG_START + (int64_t)i, 1, 1, MT_SOURCE_MINOR, stack, 4,
                                         tg_resolve, NULL, NULL, NULL),
                     MT_OK);
  }
  return tg_finish(w, fd, size);
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
  size_t big_size;
  uint8_t *big = large_trace(&big_size);
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
  assert_true(n > 1000 && n < LARGE_TRACE_EVENTS);
  free(bz);
  free(big);
  tg_free_events(plain, n_plain);
  tg_free_events(zstd, n_zstd);
  free(z);
  free(t.data);
}

/* Writes `size` bytes to a pipe from a thread of its own, so that a reader of the other end streams
 * them (a pipe is never mapped). */
typedef struct pipe_feed {
  int fd;
  const uint8_t *data;
  size_t size;
} pipe_feed;

static void *feed_pipe(void *p) {
  pipe_feed *f = p;
  for (size_t at = 0; at < f->size;) {
    ssize_t n = write(f->fd, f->data + at, f->size - at);
    if (n <= 0)
      break;
    at += (size_t)n;
  }
  close(f->fd);
  return NULL;
}

/* A reader of bytes in memory, or of the same bytes fed through a pipe. */
typedef struct fed_reader {
  mt_reader *r;
  bool piped;
  int fd; /* the pipe's read end */
  pthread_t feeder;
  pipe_feed feed;
} fed_reader;

static void fed_open(fed_reader *f, const uint8_t *data, size_t size, bool through_pipe) {
  mt_reader_options o = {.backtraces = true};
  mt_error err;
  f->piped = through_pipe;
  if (through_pipe) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    signal(SIGPIPE, SIG_IGN); /* a reader that stops early closes the pipe on the feeder */
    f->fd = fds[0];
    f->feed = (pipe_feed){fds[1], data, size};
    assert_int_equal(pthread_create(&f->feeder, NULL, feed_pipe, &f->feed), 0);
    assert_int_equal(mt_reader_open_fd(&f->r, fds[0], &o, &err), MT_OK);
  } else {
    assert_int_equal(mt_reader_open_memory(&f->r, data, size, &o, &err), MT_OK);
  }
}

static void fed_close(fed_reader *f) {
  mt_reader_close(f->r);
  if (f->piped) {
    close(f->fd);
    pthread_join(f->feeder, NULL);
  }
}

/* Events read and whether the reader found the trace truncated, from memory or through a pipe. */
static size_t read_counting(const uint8_t *data, size_t size, bool through_pipe, bool *truncated) {
  fed_reader f;
  fed_open(&f, data, size, through_pipe);
  size_t n = 0;
  mt_event ev;
  mt_error err;
  int rc;
  while ((rc = mt_reader_next(f.r, &ev, &err)) > 0)
    n++;
  if (rc)
    fail_msg("%s", err.message);
  *truncated = mt_reader_truncated(f.r, NULL);
  fed_close(&f);
  return n;
}

/* `data` compressed as one zstd frame with a checksum (and window log `window_log`, 0: zstd's
 * choice), in a buffer of its own (caller frees) of *zsize bytes and room for 64 more. */
static uint8_t *compress_with_checksum(const uint8_t *data, size_t size, int window_log,
                                       size_t *zsize) {
  ZSTD_CCtx *c = ZSTD_createCCtx();
  assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1)));
  if (window_log)
    assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, window_log)));
  size_t cap = ZSTD_compressBound(size) + 64;
  uint8_t *z = malloc(cap);
  *zsize = ZSTD_compress2(c, z, cap, data, size);
  ZSTD_freeCCtx(c);
  assert_false(ZSTD_isError(*zsize));
  return z;
}

/* A .zst trace whose last bytes are cut (its checksum, then the end of its last block) gives every
 * event the decompressor can still produce, the same from memory and through a pipe, and says it
 * was cut: the frame is incomplete even when every packet is whole. */
static void a_zstd_trace_cut_in_its_last_bytes_gives_all_it_holds_and_is_cut(void **state) {
  (void)state;
  size_t size;
  uint8_t *trace = large_trace(&size);
  size_t zsize;
  uint8_t *z = compress_with_checksum(trace, size, 0, &zsize);
  bool truncated;
  for (int pipe_it = 0; pipe_it < 2; pipe_it++) {
    size_t whole = read_counting(z, zsize, pipe_it, &truncated);
    assert_false(truncated);
    assert_int_equal(whole, LARGE_TRACE_EVENTS);
    for (size_t cut = 1; cut <= 4; cut++) { /* the checksum's 4 bytes: every event is there */
      assert_int_equal(read_counting(z, zsize - cut, pipe_it, &truncated), whole);
      assert_true(truncated);
    }
    size_t n = read_counting(z, zsize - 5, pipe_it, &truncated); /* into the last block */
    assert_true(truncated);
    assert_true(n > 50000 && n < whole);
  }
  free(z);
  free(trace);
}

/* Appends a zstd skippable frame (magic 0x184D2A50 + variant, then its length and content). */
static size_t put_skippable_frame(uint8_t *out, unsigned variant, size_t length) {
  mt_store_u32(out, ZSTD_MAGIC_SKIPPABLE_START + variant);
  mt_store_u32(out + 4, (uint32_t)length);
  memset(out + 8, 0xAB, length);
  return 8 + length;
}

/* Skippable frames carry nothing for the decompressor, which skips them: a .zst trace that starts
 * with one (as some tools and pipelines write), or has them between and after its frames, reads
 * whole, from memory and through a pipe. */
static void zstd_skippable_frames_are_skipped_wherever_they_are(void **state) {
  (void)state;
  size_t size;
  uint8_t *trace = large_trace(&size);
  size_t cap = 2 * ZSTD_compressBound(size) + 3 * (8 + 100000);
  uint8_t *z = malloc(cap);
  size_t zsize = put_skippable_frame(z, 0, 16);
  size_t n = ZSTD_compress(z + zsize, cap - zsize, trace, size / 2, 3);
  assert_false(ZSTD_isError(n));
  zsize += n;
  zsize += put_skippable_frame(z + zsize, 0xF, 100000); /* past a pipe's first chunk */
  n = ZSTD_compress(z + zsize, cap - zsize, trace + size / 2, size - size / 2, 3);
  assert_false(ZSTD_isError(n));
  zsize += n;
  zsize += put_skippable_frame(z + zsize, 7, 0);
  bool truncated;
  for (int pipe_it = 0; pipe_it < 2; pipe_it++) {
    assert_int_equal(read_counting(z, zsize, pipe_it, &truncated), LARGE_TRACE_EVENTS);
    assert_false(truncated);
  }
  free(z);
  free(trace);
}

/* A zstd frame of `size` bytes without content size, checksum or dictionary: its header is the
 * magic, a zero descriptor byte and the window byte, so its first block header is at byte 6. */
static size_t compress_plain_frame(const uint8_t *data, size_t size, uint8_t *out, size_t cap) {
  ZSTD_CCtx *c = ZSTD_createCCtx();
  assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0)));
  size_t n = ZSTD_compress2(c, out, cap, data, size);
  ZSTD_freeCCtx(c);
  assert_false(ZSTD_isError(n));
  assert_int_equal(out[4], 0); /* frame header descriptor: no size, checksum or dictionary */
  return n;
}

/* Checks the error of a damaged zstd stream: malformed at decompressed byte `at` (err.offset),
 * its message placing the damage in the compressed input ("at byte C: WHAT (in bytes C to E; the
 * decompressed trace ends at byte AT)") with `what` in the file's words, not zstd's, and the byte
 * that was changed, `damage` (-1: not checked), in [C, E], which spans one block at most. */
static void expect_zstd_damage(const mt_error *err, int64_t at, long long damage,
                               const char *what) {
  assert_int_equal(err->code, MT_E_MALFORMED);
  assert_int_equal(err->offset, at);
  long long c = 0, c2 = 0, e = 0, end = 0;
  int used = 0;
  if (sscanf(err->message, "malformed compressed trace at byte %lld: %n", &c, &used) != 1 ||
      !used || strncmp(err->message + used, what, strlen(what)))
    fail_msg("expected \"malformed compressed trace at byte C: %s...\", got: %s", what,
             err->message);
  const char *where = strstr(err->message, " (in bytes ");
  if (!where || sscanf(where, " (in bytes %lld to %lld; the decompressed trace ends at byte %lld)",
                       &c2, &e, &end) != 3)
    fail_msg("no compressed range in: %s", err->message);
  assert_int_equal(c2, c);
  assert_int_equal(end, at);
  if (damage >= 0 && (damage < c || damage > e || e - c > 131072 + 16))
    fail_msg("byte %lld is not in a range of one block at most: %s", damage, err->message);
}

/* Reads a damaged zstd stream to its failure, from memory and through a pipe; expects `events`
 * events before it, then the failure expect_zstd_damage checks. */
static void expect_zstd_failure(const uint8_t *z, size_t zsize, size_t events, int64_t at,
                                long long damage, const char *what) {
  for (int pipe_it = 0; pipe_it < 2; pipe_it++) {
    fed_reader f;
    fed_open(&f, z, zsize, pipe_it);
    mt_event ev;
    mt_error err;
    size_t n = 0;
    int rc;
    while ((rc = mt_reader_next(f.r, &ev, &err)) > 0)
      n++;
    assert_int_equal(rc, MT_E_MALFORMED);
    assert_int_equal(n, events);
    expect_zstd_damage(&err, at, damage, what);
    fed_close(&f);
  }
}

static void a_corrupt_zstd_stream_is_malformed_at_the_decompressed_offset(void **state) {
  (void)state;
  base_trace t = make_base();
  /* Two frames: packets 0-2 intact, the rest in a frame whose first block has the reserved block
   * type 3. The reader returns packet 2's four events, then fails where the good data ends. */
  size_t split = t.packet[3];
  size_t cap = 2 * ZSTD_compressBound(t.size) + 64;
  uint8_t *z = malloc(cap);
  size_t first = compress_plain_frame(t.data, split, z, cap);
  size_t second = compress_plain_frame(t.data + split, t.size - split, z + first, cap - first);
  size_t zsize = first + second;
  z[first + 6] |= 0x06;
  expect_zstd_failure(z, zsize, 4, (int64_t)split, (long long)first + 6,
                      "the compressed data is corrupt");
  /* Damage in the first frame: nothing decompresses, and opening fails at byte 0. */
  z[6] |= 0x06;
  mt_reader *r;
  mt_error err;
  assert_int_equal(mt_reader_open_memory(&r, z, zsize, NULL, &err), MT_E_MALFORMED);
  expect_zstd_damage(&err, 0, 6, "the compressed data is corrupt");
  free(z);
  free(t.data);
}

/* The offset of block `index`'s header in a zstd frame that starts at `z` (zstd's format §3.1.1:
 * a 3-byte header, then the block's content: one byte for an RLE block, its size otherwise). */
static size_t zstd_block_at(const uint8_t *z, size_t index) {
  uint8_t descriptor = z[4];
  static const size_t fcs_sizes[4] = {0, 2, 4, 8};
  static const size_t dict_sizes[4] = {0, 1, 2, 4};
  bool single_segment = descriptor & 0x20;
  size_t at = 5 + !single_segment + dict_sizes[descriptor & 3] +
              (single_segment && !(descriptor >> 6) ? 1 : fcs_sizes[descriptor >> 6]);
  for (size_t i = 0; i < index; i++) {
    uint32_t header = z[at] | z[at + 1] << 8 | (uint32_t)z[at + 2] << 16;
    assert_false(header & 1); /* not the last block */
    at += 3 + ((header >> 1 & 3) == 1 ? 1 : header >> 3);
  }
  return at;
}

/* zstd's own messages ("Destination buffer is too small", "Data corruption detected") name what its
 * decoder met, not what is wrong with the file: each kind of damage is said in the file's words,
 * placed in the compressed input, from memory and through a pipe alike. */
static void a_damaged_zstd_stream_says_what_is_wrong_and_where(void **state) {
  (void)state;
  size_t size;
  uint8_t *trace = large_trace(&size);
  size_t zsize;
  uint8_t *good = compress_with_checksum(trace, size, 23, &zsize);
  uint8_t *z = malloc(zsize + 64);
  /* One segment (a window as large as the trace): a 4-byte content size right after the
   * descriptor, which sizes what the decoder writes into. */
  assert_int_equal(good[4] & 0xE3, 0xA0);
  /* A reserved block type in the third block's header: found with the second block, the trace
   * read up to the first at most. */
  memcpy(z, good, zsize);
  size_t block = zstd_block_at(z, 2);
  z[block] |= 0x06;
  fed_reader f;
  for (int pipe_it = 0; pipe_it < 2; pipe_it++) {
    fed_open(&f, z, zsize, pipe_it);
    mt_event ev;
    mt_error err;
    int rc;
    while ((rc = mt_reader_next(f.r, &ev, &err)) > 0)
      ;
    assert_int_equal(rc, MT_E_MALFORMED);
    assert_true(err.offset > 0 && err.offset <= 2 * 131072);
    expect_zstd_damage(&err, err.offset, (long long)block, "the compressed data is corrupt");
    fed_close(&f);
  }
  /* A content size one byte short of the data: zstd's "Destination buffer is too small". */
  memcpy(z, good, zsize);
  mt_store_u32(z + 5, (uint32_t)size - 1);
  for (int pipe_it = 0; pipe_it < 2; pipe_it++) {
    fed_open(&f, z, zsize, pipe_it);
    mt_event ev;
    mt_error err;
    int rc;
    while ((rc = mt_reader_next(f.r, &ev, &err)) > 0)
      ;
    assert_int_equal(rc, MT_E_MALFORMED);
    expect_zstd_damage(&err, err.offset, -1,
                       "the zstd frame holds more data than its header declares");
    fed_close(&f);
  }
  /* A checksum that does not match: every block decompressed, the trace whole before it. */
  memcpy(z, good, zsize);
  z[zsize - 1] ^= 0x5a;
  expect_zstd_failure(z, zsize, LARGE_TRACE_EVENTS, (int64_t)size, (long long)zsize - 1,
                      "the zstd frame's checksum does not match its data");
  /* Bytes after the frame that are not a zstd frame. */
  memcpy(z, good, zsize);
  memcpy(z + zsize, "hello world", 11);
  expect_zstd_failure(
      z, zsize + 11, LARGE_TRACE_EVENTS, (int64_t)size, (long long)zsize,
      "what follows a zstd frame is not one: magic 0x6c6c6568, expected 0xfd2fb528");
  free(z);
  free(good);
  free(trace);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(header_fields_are_checked_with_their_offsets),
      cmocka_unit_test(events_are_checked_with_their_offsets),
      cmocka_unit_test(an_event_time_that_wraps_past_int64_max_is_out_of_bounds),
      cmocka_unit_test(packet_0_must_hold_exactly_trace_info_at_its_start_time),
      cmocka_unit_test(promote_deltas_and_common_prefixes_must_not_be_negative),
      cmocka_unit_test(allocations_without_samples_and_ids_before_0_are_malformed),
      cmocka_unit_test(a_location_described_differently_twice_is_an_error),
      cmocka_unit_test(v2_header_errors_name_the_v2_field_offsets),
      cmocka_unit_test(too_many_domains_for_the_input_size_is_a_malformed_trace),
      cmocka_unit_test(cache_verifier_is_checked_only_when_decoding_backtraces),
      cmocka_unit_test(foreign_pid_packets_are_skipped_with_a_warning),
      cmocka_unit_test(cut_traces_read_up_to_the_last_whole_packet),
      cmocka_unit_test(an_event_cut_inside_a_packet_is_an_error_not_a_crash),
      cmocka_unit_test(zstd_compressed_traces_read_like_plain_ones),
      cmocka_unit_test(a_zstd_trace_cut_in_its_last_bytes_gives_all_it_holds_and_is_cut),
      cmocka_unit_test(zstd_skippable_frames_are_skipped_wherever_they_are),
      cmocka_unit_test(a_trace_info_pid_unlike_its_packets_is_malformed),
      cmocka_unit_test(a_corrupt_zstd_stream_is_malformed_at_the_decompressed_offset),
      cmocka_unit_test(a_damaged_zstd_stream_says_what_is_wrong_and_where),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
