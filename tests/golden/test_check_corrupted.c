/* memtap check on damaged copies of a real trace (demo_v3.ctf): flipped bytes in packet headers,
 * event headers, allocation fields and backtraces, and files cut inside a header, inside a packet
 * and at a packet boundary. Each must give the documented exit status (0 well-formed, 1 malformed,
 * 2 truncated) and name the byte offset of the damage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/buf.h"
#include "format/packet.h"
#include "memtap/format.h"
#include "testutil.h"
#include "tracegen.h"

typedef struct original {
  uint8_t *data;
  size_t size;
  size_t packets[512];
  size_t npackets;
} original;

static original load(void) {
  original o = {0};
  o.data = tu_read_file(tu_testdata("memtrace/demo_v3.ctf"), &o.size);
  tg_packets *p = malloc(sizeof *p);
  tg_walk_packets(o.data, o.size, p);
  o.npackets = p->count;
  memcpy(o.packets, p->offset, p->count * sizeof *o.packets);
  free(p);
  assert_true(o.npackets > 8);
  return o;
}

/* Writes `size` bytes of `data` to a temporary trace, runs check on it, and asserts the exit status
 * and that stderr contains every string of `expect` (NULL-terminated). */
static void check_expect(const uint8_t *data, size_t size, int status, const char *const *expect) {
  const char *path = tu_temp_path("damaged.ctf");
  tu_write_file(path, data, size);
  char *out = NULL, *err = NULL;
  int got = tu_run_cli(&out, NULL, &err, "check", path, NULL);
  if (got != status)
    fail_msg("check exited %d, expected %d; stderr: %s", got, status, err);
  for (; expect && *expect; expect++)
    if (!strstr(err, *expect))
      fail_msg("check's message lacks \"%s\": %s", *expect, err);
  free(out);
  free(err);
}

static const char *at_byte(size_t offset) {
  static char text[8][64];
  static int next;
  char *t = text[next++ % 8];
  snprintf(t, 64, "malformed trace at byte %zu:", offset);
  return t;
}

/* An events packet with a real cache verifier, far enough into the file. */
static size_t pick_events_packet(const original *o) {
  for (size_t i = 3; i < o->npackets; i++) {
    mt_packet_header h;
    mt_packet_header_decode(o->data + o->packets[i], o->size - o->packets[i], &h);
    if (h.verify_ix != MT_NO_VERIFY && h.alloc_id_end > h.alloc_id_begin)
      return i;
  }
  fail_msg("demo_v3 has no events packet with a verifier");
  return 0;
}

static void the_intact_trace_checks_clean(void **state) {
  (void)state;
  original o = load();
  check_expect(o.data, o.size, 0, NULL);
  free(o.data);
}

static void flipped_header_bytes_are_malformed_at_their_offset(void **state) {
  (void)state;
  original o = load();
  size_t k = pick_events_packet(&o), p = o.packets[k];
  uint8_t *d = malloc(o.size);
  struct {
    size_t offset;
    uint8_t value;
    const char *rule;
  } flips[] = {
      {p + 0, 0x00, "not a CTF packet"},
      {p + 28, 9, "trace format v009"},
      {p + 44, 0x5A, "backtrace cache verification failed"}, /* the verifier's code */
      {p + 63, 0x7F, "alloc id sync"},                       /* alloc_id_end's high byte */
  };
  for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
    memcpy(d, o.data, o.size);
    d[flips[i].offset] = flips[i].value;
    size_t where = flips[i].offset == p + 44   ? p + 40
                   : flips[i].offset == p + 63 ? p + 60
                                               : flips[i].offset;
    const char *expect[] = {at_byte(where), flips[i].rule, NULL};
    check_expect(d, o.size, 1, expect);
  }
  free(d);
  free(o.data);
}

/* Finds, in packets after the first few, the first allocation whose first codeword is a miss
 * (tag 3, followed by the code itself); stores the event's offset and the code's offset. */
static void find_miss(const original *o, size_t *event_at, size_t *code_at, size_t *source_at) {
  mt_reader *r;
  mt_reader_options opt = {.backtraces = true};
  assert_int_equal(mt_reader_open_memory(&r, o->data, o->size, &opt, NULL), MT_OK);
  mt_event ev;
  *code_at = *source_at = 0;
  while (mt_reader_next(r, &ev, NULL) > 0 && !(*code_at && *source_at)) {
    if (ev.kind != MT_EVENT_ALLOC || (size_t)ev.offset < o->packets[3])
      continue;
    mt_rbuf b;
    mt_rbuf_init(&b, o->data + ev.offset + 4, o->size - (size_t)ev.offset - 4, ev.offset + 4);
    int64_t v;
    uint8_t u8;
    uint16_t n = 0, word;
    size_t source = 0;
    /* Every read is checked: an event cut short by the end of the data is skipped. */
    if (!ev.short_form) {
      if (!mt_rbuf_vint(&b, &v) || !mt_rbuf_vint(&b, &v))
        continue;
      source = (size_t)mt_rbuf_offset(&b);
      if (!mt_rbuf_u8(&b, &u8) || !mt_rbuf_vint(&b, &v) || !mt_rbuf_u16(&b, &n))
        continue;
      if (!*source_at) {
        *source_at = source;
        *event_at = (size_t)ev.offset;
      }
    } else {
      if (!mt_rbuf_vint(&b, &v) || !mt_rbuf_u8(&b, &u8))
        continue;
      n = u8;
    }
    if (n && mt_rbuf_u16(&b, &word) && (word & 3) == 3 && !*code_at) {
      *code_at = (size_t)mt_rbuf_offset(&b);
      event_at[1] = (size_t)ev.offset;
    }
  }
  mt_reader_close(r);
  assert_true(*code_at && *source_at);
}

static void flipped_event_bytes_are_malformed_at_their_offset(void **state) {
  (void)state;
  original o = load();
  size_t events[2] = {0, 0}, code_at, source_at;
  find_miss(&o, events, &code_at, &source_at);
  uint8_t *d = malloc(o.size);

  memcpy(d, o.data, o.size);
  d[source_at] = 7;
  const char *source[] = {at_byte(source_at), "unknown allocation source 7", NULL};
  check_expect(d, o.size, 1, source);

  memcpy(d, o.data, o.size);
  uint32_t word = mt_load_u32(d + events[0]);
  mt_store_u32(d + events[0], (word & 0x1FFFFFF) | 0x7Fu << 25);
  const char *code[] = {at_byte(events[0]), "unknown event code 127", NULL};
  check_expect(d, o.size, 1, code);

  /* A backtrace byte: the cached code of a miss now names a location never described. */
  memcpy(d, o.data, o.size);
  d[code_at + 6] ^= 0x40;
  const char *bt[] = {at_byte(events[1]), "invalid location code", NULL};
  check_expect(d, o.size, 1, bt);
  free(d);
  free(o.data);
}

static void cut_traces_are_truncated_and_say_where(void **state) {
  (void)state;
  original o = load();
  size_t k = pick_events_packet(&o), p = o.packets[k];
  char where[64];
  snprintf(where, sizeof where, "truncated at byte %zu", p);
  const char *cut[] = {where, NULL};
  check_expect(o.data, p + 20, 2, cut);  /* inside the header */
  check_expect(o.data, p + 100, 2, cut); /* inside the packet */
  check_expect(o.data, p, 0, NULL);      /* at a packet boundary: a shorter, whole trace */
  const char *first[] = {"malformed trace at byte 0", "trace-info packet is incomplete", NULL};
  check_expect(o.data, 40, 1, first); /* inside packet 0: nothing to read */
  /* dump and copy say it too (both exited 0, so that a script could not tell the cut packet
   * was lost), copy keeping every whole packet before the cut. */
  const char *path = tu_temp_path("damaged.ctf"), *copy = tu_temp_path("cut-copy.ctf");
  tu_write_file(path, o.data, p + 100);
  char *out = NULL, *err = NULL;
  assert_int_equal(tu_run_cli(&out, NULL, &err, "dump", path, NULL), 2);
  assert_non_null(strstr(err, "skipping truncated packet"));
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "dump", "--json", path, NULL), 2);
  free(out);
  free(err);
  unlink(copy);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "copy", path, copy, NULL), 2);
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "check", copy, NULL), 0);
  free(out);
  free(err);
  unlink(copy);
  free(o.data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_intact_trace_checks_clean),
      cmocka_unit_test(flipped_header_bytes_are_malformed_at_their_offset),
      cmocka_unit_test(flipped_event_bytes_are_malformed_at_their_offset),
      cmocka_unit_test(cut_traces_are_truncated_and_say_where),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
