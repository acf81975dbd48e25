/* The writer's packetisation and flush rules (FORMAT.md §2.9-2.10), checked on the bytes it writes
 * and through the reader: memtrace's own tiny trace rebuilt bit for bit, 25-bit time wrap inside a
 * packet, empty packets, the 30 s rule on a 45 s gap, interleaved domains with id chunks, fork, and
 * the arguments it refuses; and its inline fast path (format/writer_fast.h) writing the general
 * path's bytes. */
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "format/packet.h"
#include "format/writer_fast.h"
#include "testutil.h"
#include "tracegen.h"

static int tiny_resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  (void)user;
  static const mt_location run = {"main.ml", "Main.run", 3, 4, 20};
  static const mt_location alloc = {"main.ml", "Main.alloc", 7, 2, 9};
  *entries = code == 0x1000 ? &run : &alloc;
  *count = 1;
  return MT_OK;
}

static void rebuilds_memtraces_tiny_trace_bit_for_bit(void **state) {
  (void)state;
  int fd = memfd_create("tiny", 0);
  const int64_t start = 1700000000000000LL;
  mt_trace_info info = {.start_time = start,
                        .sample_rate = 1e-5,
                        .word_size = 64,
                        .executable_name = "tiny",
                        .host_name = "h",
                        .ocaml_runtime_params = "",
                        .pid = 7,
                        .context = "ctx"};
  mt_writer *w;
  assert_int_equal(mt_writer_create(&w, fd, &info, NULL, NULL), MT_OK);
  uint64_t s1[] = {0x2000, 0x1000}, s2[] = {0x2000, 0x2000, 0x1000};
  int64_t id0, id1;
  assert_int_equal(mt_writer_put_alloc(w, start + 10, 3, 1, MT_SOURCE_MINOR, s1, 2, tiny_resolve,
                                       NULL, &id0, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, start + 20, 300, 2, MT_SOURCE_MAJOR, s2, 3, tiny_resolve,
                                       NULL, &id1, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_put_promote(w, start + 30, id0, NULL), MT_OK);
  assert_int_equal(mt_writer_put_collect(w, start + 40, id1, NULL), MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  char hex[65];
  tu_sha256_hex(data, size, hex);
  assert_int_equal(size, 353);
  /* FORMAT.md §2.14 / testdata/memtrace/tiny_v3.ref: the file memtrace wrote for this stream. */
  assert_string_equal(hex, "bfd58816e2b5481b9877b3c63681aa0df00777bdbb23db28f9098402900b0d8d");
  free(data);
}

/* A trace-info string longer than the writer keeps (a long command line as the context) is cut
 * with "..." at its end, never in the middle of a UTF-8 character, and the rest reads whole. */
static void a_long_info_string_is_cut_with_dots(void **state) {
  (void)state;
  static char context[6000];
  memset(context, 'a', sizeof context - 1);
  for (size_t i = 3990; i + 1 < 4010; i += 2) { /* "é" (2 bytes) around the cut */
    context[i] = (char)0xC3;
    context[i + 1] = (char)0xA9;
  }
  int fd = memfd_create("long", 0);
  mt_trace_info info = {.start_time = 1700000000000000LL,
                        .sample_rate = 1,
                        .word_size = 64,
                        .executable_name = "prog",
                        .host_name = "h",
                        .ocaml_runtime_params = "",
                        .pid = 7,
                        .context = context};
  mt_writer *w;
  assert_int_equal(mt_writer_create(&w, fd, &info, NULL, NULL), MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  mt_reader *r;
  mt_error err;
  assert_int_equal(mt_reader_open_memory(&r, data, size, NULL, &err), MT_OK);
  const char *got = mt_reader_info(r)->context;
  size_t n = strlen(got);
  assert_true(n <= 4000 && n > 3990);
  assert_string_equal(got + n - 3, "...");
  assert_memory_equal(got, context, n - 3);
  assert_int_not_equal((unsigned char)got[n - 4], 0xC3); /* no half character before the dots */
  assert_string_equal(mt_reader_info(r)->executable_name, "prog");
  mt_reader_close(r);
  free(data);
}

static void event_times_wrap_the_25_bit_field_inside_a_packet(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  /* An event 5 µs before the low 25 bits of the time wrap, the next one 5 µs after: one packet,
   * so the reader must carry the wrap into the packet's high bits. */
  int64_t below = TG_START + ((1 << 25) - (TG_START & 0x1FFFFFF)) - 5;
  uint64_t stack[] = {11};
  int64_t id;
  assert_int_equal(
      mt_writer_put_alloc(w, below, 1, 1, MT_SOURCE_MINOR, stack, 1, tg_resolve, NULL, &id, NULL),
      MT_OK);
  assert_int_equal(mt_writer_put_collect(w, below + 10, id, NULL), MT_OK);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_packets p;
  tg_walk_packets(data, size, &p);
  /* The first event comes > 30 s after the start: the open (empty) packet is written first. */
  assert_int_equal(p.count, 4); /* info, empty events packet, locations, events */
  assert_int_equal(p.size[1], MT_HEADER_SIZE_V3);
  assert_int_equal(p.h[3].time_begin, below);
  assert_int_equal(p.h[3].time_end, below + 10);
  assert_true((below & 0x1FFFFFF) > ((below + 10) & 0x1FFFFFF)); /* the low bits wrapped */
  tg_event *ev = tg_read_all(data, size, false, &n, NULL);
  assert_int_equal(n, 2);
  assert_int_equal(ev[0].ev.time, below);
  assert_int_equal(ev[1].ev.time, below + 10);
  tg_free_events(ev, n);
  free(data);
}

static void explicit_flushes_write_empty_packets(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  assert_int_equal(mt_writer_flush(w, NULL), MT_OK);
  assert_int_equal(mt_writer_flush(w, NULL), MT_OK);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_packets p;
  tg_walk_packets(data, size, &p);
  assert_int_equal(p.count, 4); /* info + two flushes + close */
  for (size_t i = 1; i < 4; i++) {
    assert_int_equal(p.size[i], MT_HEADER_SIZE_V3);
    assert_int_equal(p.h[i].alloc_id_begin, p.h[i].alloc_id_end);
  }
  assert_int_equal(p.h[1].verify_ix, MT_NO_VERIFY); /* a writer's first events packet */
  assert_int_equal(p.h[2].verify_ix, 4242);
  assert_int_equal(p.h[3].verify_ix, (4242 + 5413) & 0x3FFF);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 0);
  tg_free_events(ev, n);
  free(data);
}

/* A trace that goes on past its last event (a sampled program that stops allocating, then runs on)
 * says so in its last packet's end: readers take the trace's end from there. */
static void an_extended_trace_ends_at_the_time_given_not_its_last_event(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t stack[] = {3, 2, 1};
  int64_t a;
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1000, 4, 1, MT_SOURCE_MINOR, stack, 3,
                                       tg_resolve, NULL, &a, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_extend(w, TG_START + 5000000, NULL), MT_OK);
  assert_int_equal(mt_writer_extend(w, TG_START + 2000, NULL), MT_OK); /* earlier: no change */
  mt_error err;
  assert_int_equal(mt_writer_put_collect(w, TG_START + 1500, a, &err), MT_E_INVALID);
  assert_int_equal(mt_writer_put_collect(w, TG_START + 5000000, a, NULL), MT_OK);
  assert_int_equal(mt_writer_extend(w, TG_START + 7000000, NULL), MT_OK);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_packets p;
  tg_walk_packets(data, size, &p);
  assert_int_equal(p.h[p.count - 1].time_end, TG_START + 7000000);
  mt_reader *r = tg_open_memory(data, size, false);
  assert_int_equal(mt_reader_end_time(r), TG_START); /* nothing read yet */
  mt_event ev;
  int64_t last = 0;
  int rc;
  while ((rc = mt_reader_next(r, &ev, NULL)) > 0)
    last = ev.time;
  assert_int_equal(rc, 0);
  assert_int_equal(last, TG_START + 5000000);
  assert_int_equal(mt_reader_end_time(r), TG_START + 7000000);
  mt_reader_close(r);
  free(data);
}

/* A program that ran on long after its last sampled allocation: no packet may span more than
 * 30 s (FORMAT.md 2.4, the 25-bit event times), so the time after the last event is covered by
 * empty packets of at most 30 s each, the last ending where the program did; events written after
 * an extension still read back. */
static void an_extension_past_30_seconds_keeps_every_packet_within_30_seconds(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t stack[] = {3, 2, 1};
  int64_t a, b;
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1000000, 4, 1, MT_SOURCE_MINOR, stack, 3,
                                       tg_resolve, NULL, &a, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_extend(w, TG_START + 76000000, NULL), MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 77000000, 4, 1, MT_SOURCE_MINOR, stack, 3,
                                       tg_resolve, NULL, &b, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_put_collect(w, TG_START + 77000000, a, NULL), MT_OK);
  assert_int_equal(mt_writer_extend(w, TG_START + 200000000, NULL), MT_OK);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_packets p;
  tg_walk_packets(data, size, &p);
  assert_true(p.count >= 8); /* info, locations, and at least 200 / 30 events packets */
  for (size_t i = 1; i < p.count; i++) {
    assert_true(p.h[i].time_end - p.h[i].time_begin <= MT_PACKET_MAX_SPAN);
    assert_true(p.h[i].time_begin >= p.h[i - 1].time_end || p.h[i].time_begin == TG_START);
  }
  assert_int_equal(p.h[p.count - 1].time_end, TG_START + 200000000);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 3);
  assert_int_equal(ev[0].ev.time, TG_START + 1000000);
  assert_int_equal(ev[1].ev.time, TG_START + 77000000);
  assert_int_equal(ev[2].ev.kind, MT_EVENT_COLLECT);
  assert_int_equal(ev[2].ev.obj_id, a);
  tg_free_events(ev, n);
  mt_reader *r = tg_open_memory(data, size, false);
  mt_event e;
  while (mt_reader_next(r, &e, NULL) > 0)
    ;
  assert_int_equal(mt_reader_end_time(r), TG_START + 200000000);
  mt_reader_close(r);
  free(data);
}

/* An end time far past anything real (a damaged trace being copied: one flipped bit made it
 * 70,000 years, and the copy never ended): a day of 30 s packets at most, then one packet spanning
 * the rest, as memtrace's close leaves one after a quiet spell; the file stays small, the end where
 * it was said to be, and an event after it still reads back. */
static void an_extension_of_years_writes_at_most_a_day_of_packets(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t stack[] = {3, 2, 1};
  int64_t a, b;
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1000000, 4, 1, MT_SOURCE_MINOR, stack, 3,
                                       tg_resolve, NULL, &a, NULL),
                   MT_OK);
  const int64_t years = 10000000000000; /* µs: 116 days (without the bound, 333,000 packets) */
  assert_int_equal(mt_writer_extend(w, TG_START + years, NULL), MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + years + 5, 4, 1, MT_SOURCE_MINOR, stack, 3,
                                       tg_resolve, NULL, &b, NULL),
                   MT_OK);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  assert_true(size < 256 * 1024);
  static tg_packets p;
  tg_walk_packets(data, size, &p);
  assert_true(p.count > 2880 && p.count < TG_MAX_PACKETS);
  size_t longer = 0;
  for (size_t i = 1; i < p.count; i++)
    longer += p.h[i].time_end - p.h[i].time_begin > MT_PACKET_MAX_SPAN;
  assert_int_equal(longer, 1);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 2);
  assert_int_equal(ev[1].ev.time, TG_START + years + 5);
  tg_free_events(ev, n);
  free(data);
}

static void a_45_second_gap_starts_a_new_packet(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t stack[] = {3, 2, 1};
  int64_t a, b;
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1000000, 4, 1, MT_SOURCE_MINOR, stack, 3,
                                       tg_resolve, NULL, &a, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 46000000, 4, 1, MT_SOURCE_MINOR, stack, 3,
                                       tg_resolve, NULL, &b, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_put_collect(w, TG_START + 46000001, a, NULL), MT_OK);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_packets p;
  tg_walk_packets(data, size, &p);
  assert_int_equal(p.count, 4); /* info, locations, [alloc a], [alloc b, collect a] */
  assert_int_equal(p.h[2].time_end, TG_START + 1000000);
  assert_int_equal(p.h[3].time_begin, TG_START + 46000000);
  assert_true(p.h[3].time_end - p.h[3].time_begin <= MT_PACKET_MAX_SPAN);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 3);
  assert_int_equal(ev[1].ev.time, TG_START + 46000000);
  assert_int_equal(ev[1].ev.common_prefix, 3);
  assert_int_equal(ev[2].ev.kind, MT_EVENT_COLLECT);
  assert_int_equal(ev[2].ev.obj_id, a);
  tg_free_events(ev, n);
  free(data);
}

static void interleaved_domains_flush_on_switch_and_take_id_chunks(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t stack[] = {7, 8};
  int64_t id[5];
  const uint16_t domains[] = {0, 1, 0, 2, 1};
  for (int i = 0; i < 5; i++)
    assert_int_equal(mt_writer_put_alloc_in(w, domains[i], TG_START + i + 1, 2, 1, MT_SOURCE_MINOR,
                                            stack, 2, tg_resolve, NULL, &id[i], NULL),
                     MT_OK);
  assert_int_equal(id[0], 0);
  assert_int_equal(id[1], 10000);
  assert_int_equal(id[2], 1);
  assert_int_equal(id[3], 20000);
  assert_int_equal(id[4], 10001);
  /* Domain 0 collects domain 1's object: the delta is negative (v3 only). */
  assert_int_equal(mt_writer_put_collect_in(w, 0, TG_START + 10, id[1], NULL), MT_OK);
  int64_t next;
  assert_int_equal(mt_writer_next_alloc_id(w, 2, &next, NULL), MT_OK);
  assert_int_equal(next, 20001);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_packets p;
  tg_walk_packets(data, size, &p);
  unsigned per_domain[3] = {0};
  for (size_t i = 1; i < p.count; i++)
    per_domain[p.h[i].domain]++;
  assert_true(per_domain[1] >= 2 && per_domain[2] >= 2);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 6);
  for (int i = 0; i < 5; i++) {
    assert_int_equal(ev[i].ev.obj_id, id[i]);
    assert_int_equal(ev[i].ev.domain, domains[i]);
    assert_int_equal(ev[i].ev.backtrace_length, 2);
    assert_int_equal(ev[i].backtrace[0], 8);
  }
  assert_int_equal(ev[5].ev.kind, MT_EVENT_COLLECT);
  assert_int_equal(ev[5].ev.obj_id, 10000);
  assert_int_equal(ev[5].ev.domain, 0);
  tg_free_events(ev, n);
  free(data);
}

static void a_used_up_id_chunk_flushes_and_ids_stay_contiguous(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t stack[] = {1};
  for (int i = 0; i < 10001; i++) {
    int64_t id;
    assert_int_equal(mt_writer_put_alloc(w, TG_START + i, 1, 1, MT_SOURCE_MINOR, stack, 1,
                                         tg_resolve, NULL, &id, NULL),
                     MT_OK);
    assert_int_equal(id, i);
  }
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_packets p;
  tg_walk_packets(data, size, &p);
  bool boundary = false;
  for (size_t i = 1; i < p.count; i++)
    if (p.h[i].alloc_id_end == 10000 && p.h[i + 1].alloc_id_begin == 10000)
      boundary = true;
  assert_true(boundary);
  free(data);
}

static void a_forked_child_writes_nothing(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t stack[] = {1};
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 1, 1, MT_SOURCE_MINOR, stack, 1, tg_resolve,
                                       NULL, NULL, NULL),
                   MT_OK);
  off_t before = lseek(fd, 0, SEEK_END);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    mt_error err;
    int rc = mt_writer_flush(w, &err);
    _exit(rc == MT_E_FORKED && strstr(err.message, "fork") ? 0 : 1);
  }
  int status;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(lseek(fd, 0, SEEK_END), before);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size); /* the parent still writes */
  tg_event *ev = tg_read_all(data, size, false, &n, NULL);
  assert_int_equal(n, 1);
  tg_free_events(ev, n);
  free(data);
}

/* Every put in a forked child fails at once with MT_E_FORKED, on the initial writer and on a
 * domain writer of the same trace, however many are tried (the old check at flush let a child
 * buffer events and learn only at its first flush); the file gets no byte from the child. */
static void every_put_in_a_forked_child_fails_and_writes_nothing(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd), *d1;
  assert_int_equal(mt_writer_create_domain(w, 1, TG_START, &d1, NULL), MT_OK);
  uint64_t stack[] = {3, 2, 1};
  int64_t a, b;
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 1, 1, MT_SOURCE_MINOR, stack, 3, tg_resolve,
                                       NULL, &a, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_put_alloc(d1, TG_START + 1, 1, 1, MT_SOURCE_MINOR, stack, 3,
                                       tg_resolve, NULL, &b, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_flush(w, NULL), MT_OK);
  off_t before = lseek(fd, 0, SEEK_END);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    mt_error err;
    int failures = 0, rc;
    int64_t id;
#define FORKED(call, bit)                                                                          \
  do {                                                                                             \
    memset(&err, 0, sizeof err);                                                                   \
    rc = (call);                                                                                   \
    if (rc != MT_E_FORKED || err.code != MT_E_FORKED || !strstr(err.message, "fork"))              \
      failures |= 1 << (bit);                                                                      \
  } while (0)
    /* Enough allocations to fill several packets: none may be buffered or written. */
    for (int i = 0; i < 5000; i++)
      FORKED(mt_writer_put_alloc(w, TG_START + 2 + i, 1, 1, MT_SOURCE_MINOR, stack, 3, tg_resolve,
                                 NULL, &id, &err),
             0);
    FORKED(mt_writer_put_promote(w, TG_START + 9000, a, &err), 1);
    FORKED(mt_writer_put_collect(w, TG_START + 9000, a, &err), 2);
    FORKED(mt_writer_put_alloc_in(w, 2, TG_START + 9000, 1, 1, MT_SOURCE_MINOR, stack, 3,
                                  tg_resolve, NULL, &id, &err),
           3);
    FORKED(mt_writer_put_collect_in(w, 0, TG_START + 9000, a, &err), 4);
    FORKED(mt_writer_next_alloc_id(w, 0, &id, &err), 5);
    FORKED(mt_writer_put_alloc(d1, TG_START + 9000, 1, 1, MT_SOURCE_MINOR, stack, 3, tg_resolve,
                               NULL, &id, &err),
           6);
    FORKED(mt_writer_put_promote(d1, TG_START + 9000, b, &err), 7);
    FORKED(mt_writer_flush(w, &err), 8);
    FORKED(mt_writer_create_domain(w, 3, TG_START + 9000, &d1, &err), 9);
#undef FORKED
    if (mt_writer_close(w, NULL) == MT_OK)
      failures |= 1 << 10;
    _exit(failures);
  }
  int status;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status))
    fail_msg("in the child, calls %#x did not fail with MT_E_FORKED", WEXITSTATUS(status));
  assert_int_equal(lseek(fd, 0, SEEK_END), before);
  /* The parent goes on writing, through both writers. */
  assert_int_equal(mt_writer_put_collect(w, TG_START + 2, a, NULL), MT_OK);
  assert_int_equal(mt_writer_put_collect(d1, TG_START + 2, b, NULL), MT_OK);
  assert_int_equal(mt_writer_close(d1, NULL), MT_OK);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_event *ev = tg_read_all(data, size, false, &n, NULL);
  assert_int_equal(n, 4);
  tg_free_events(ev, n);
  free(data);
}

static void refuses_what_the_format_cannot_express(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t zero[] = {0}, ok[] = {1};
  mt_error err;
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 5, 1, 1, MT_SOURCE_MINOR, zero, 1, tg_resolve,
                                       NULL, NULL, &err),
                   MT_E_INVALID);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 5, 1, 0, MT_SOURCE_MINOR, ok, 1, tg_resolve,
                                       NULL, NULL, &err),
                   MT_E_INVALID);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 5, 1, 1, MT_SOURCE_MINOR, ok, 1, tg_resolve,
                                       NULL, NULL, &err),
                   MT_OK);
  assert_int_equal(mt_writer_put_collect(w, TG_START + 4, 0, &err), MT_E_INVALID); /* backwards */
  assert_non_null(strstr(err.message, "before"));
  assert_int_equal(mt_writer_put_promote(w, TG_START + 6, 1, &err), MT_E_INVALID); /* future id */
  assert_int_equal(mt_writer_close(w, NULL), MT_OK);
  close(fd);

  w = tg_writer(2, 1.0, &fd);
  assert_int_equal(mt_writer_put_alloc_in(w, 1, TG_START + 1, 1, 1, MT_SOURCE_MINOR, ok, 1,
                                          tg_resolve, NULL, NULL, &err),
                   MT_E_INVALID);
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_packets p;
  tg_walk_packets(data, size, &p);
  assert_int_equal(p.h[1].version, 2);
  assert_int_equal(p.size[1], MT_HEADER_SIZE_V2);
  free(data);

  fd = memfd_create("bad", 0);
  mt_trace_info info = tg_info(0.0);
  assert_int_equal(mt_writer_create(&w, fd, &info, NULL, &err), MT_E_INVALID);
  info = tg_info(1.5);
  assert_int_equal(mt_writer_create(&w, fd, &info, NULL, &err), MT_E_INVALID);
  /* A denormal rate, which the reader refuses (one sample's bytes overflow a double): the
   * recorder once wrote one from a damaged ring file (fuzz_record). */
  info = tg_info(5e-324);
  assert_int_equal(mt_writer_create(&w, fd, &info, NULL, &err), MT_E_INVALID);
  assert_non_null(strstr(err.message, "too small"));
  mt_writer_options v1 = {.version = 1};
  info = tg_info(0.5);
  assert_int_equal(mt_writer_create(&w, fd, &info, &v1, &err), MT_E_INVALID);
  close(fd);
}

/* FORMAT.md §2.8-2.9: a v2 trace has one id counter, so an id at or past the next one was never
 * allocated, and its collect delta would be negative, which memtrace 0.2.x rejects. */
static void a_v2_writer_refuses_to_collect_an_id_it_never_allocated(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(2, 1.0, &fd);
  uint64_t stack[] = {1};
  int64_t id;
  mt_error err;
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 1, 1, MT_SOURCE_EXTERNAL, stack, 1,
                                       tg_resolve, NULL, &id, NULL),
                   MT_OK);
  assert_int_equal(mt_writer_put_collect(w, TG_START + 2, id + 1, &err), MT_E_INVALID);
  assert_non_null(strstr(err.message, "not allocated"));
  assert_int_equal(mt_writer_put_collect(w, TG_START + 2, id, &err), MT_OK);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_event *ev = tg_read_all(data, size, false, &n, NULL);
  assert_int_equal(n, 2);
  assert_int_equal(ev[1].ev.obj_id, id);
  tg_free_events(ev, n);
  free(data);
}

/* FORMAT.md §2.12: readers keep 63 bits of a code, so a code whose bits 63 and 62 differ reads
 * back as another code (and may clash with that code's location list). Codes that are 63-bit
 * values sign-extended, as memtrace writes negative codes and mt_reader returns them, round-trip.
 */
static int two_entries(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  static const mt_location one = {"a.c", "one", 1, 0, 0},
                           two[] = {{"b.c", "two", 2, 0, 0}, {"b.c", "three", 3, 0, 0}};
  (void)user;
  *entries = code == 5 ? &one : two;
  *count = code == 5 ? 1 : 2;
  return MT_OK;
}

static void refuses_codes_that_63_bit_readers_would_read_as_other_codes(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t five[] = {5}, aliased[] = {UINT64_C(1) << 63 | 5}, positive[] = {UINT64_C(1) << 62 | 5},
           negative[] = {~UINT64_C(0) << 62 | 5};
  mt_error err;
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 1, 1, MT_SOURCE_EXTERNAL, five, 1,
                                       two_entries, NULL, NULL, &err),
                   MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 2, 1, 1, MT_SOURCE_EXTERNAL, aliased, 1,
                                       two_entries, NULL, NULL, &err),
                   MT_E_INVALID);
  assert_non_null(strstr(err.message, "63"));
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 3, 1, 1, MT_SOURCE_EXTERNAL, positive, 1,
                                       two_entries, NULL, NULL, &err),
                   MT_E_INVALID);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 4, 1, 1, MT_SOURCE_EXTERNAL, negative, 1,
                                       two_entries, NULL, NULL, &err),
                   MT_OK);
  size_t size, n;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 2);
  assert_int_equal(ev[0].backtrace[0], 5);
  assert_int_equal(ev[1].backtrace[0], (int64_t)negative[0]);
  tg_free_events(ev, n);
  free(data);
}

/* A resolver that fails on code 13, and resolves every other code as tg_resolve does. */
static int failing_resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  if (code == 13)
    return MT_E_NOMEM;
  return tg_resolve(user, code, entries, count);
}

/* The resolver failing half-way through a backtrace leaves the cache ahead of the file, so the
 * writer must stop; but the events before that allocation were whole, and are written. */
static void a_failing_resolver_stops_the_writer_after_the_events_before_it(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t good[] = {12, 11}, bad[] = {13, 12, 11}, later[] = {11};
  int64_t id;
  mt_error err;
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 1, 1, 1, MT_SOURCE_EXTERNAL, good, 2,
                                       failing_resolve, NULL, &id, &err),
                   MT_OK);
  assert_int_equal(mt_writer_put_collect(w, TG_START + 2, id, &err), MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 3, 1, 1, MT_SOURCE_EXTERNAL, bad, 3,
                                       failing_resolve, NULL, NULL, &err),
                   MT_E_NOMEM);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 4, 1, 1, MT_SOURCE_EXTERNAL, later, 1,
                                       failing_resolve, NULL, NULL, &err),
                   MT_E_NOMEM);
  assert_int_not_equal(mt_writer_close(w, NULL), MT_OK);
  size_t size, n;
  uint8_t *data = tg_fd_bytes(fd, &size);
  close(fd);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, 2);
  assert_int_equal(ev[0].ev.kind, MT_EVENT_ALLOC);
  assert_int_equal(ev[0].ev.backtrace_length, 2);
  assert_int_equal(ev[1].ev.kind, MT_EVENT_COLLECT);
  tg_free_events(ev, n);
  free(data);
}

static void a_write_error_stops_the_writer_with_an_io_error(void **state) {
  (void)state;
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  close(pipefd[0]); /* writes will fail with EPIPE */
  signal(SIGPIPE, SIG_IGN);
  mt_trace_info info = tg_info(1.0);
  mt_writer *w;
  mt_error err;
  assert_int_equal(mt_writer_create(&w, pipefd[1], &info, NULL, &err), MT_E_IO);
  assert_non_null(strstr(err.message, "writing the trace"));
  close(pipefd[1]);
}

static int any_resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  (void)user;
  (void)code;
  static const mt_location site = {"a.c", "f", 1, 0, 0};
  *entries = &site;
  *count = 1;
  return MT_OK;
}

/* The next pseudo-random number of `state` (xorshift64). */
static uint64_t next_random(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

/* One stream of allocations and collects written twice: through mt_writer_put_alloc (its fast path
 * takes every allocation whose stack shares all but a few frames with the last one, those frames
 * in the backtrace cache) and through the general path alone. 60,000 distinct codes keep the
 * cache's 16,384 buckets evicting, so that the buckets' dates decide where misses go; stacks
 * change by a few frames at a time, mostly from a hot set, as a program's do. The files must be
 * the same bytes. */
static void fast_path_writes_the_general_paths_bytes_under_cache_pressure(void **state) {
  (void)state;
  uint8_t *bytes[2];
  size_t sizes[2];
  for (int general = 0; general < 2; general++) {
    int fd;
    mt_writer *w = tg_writer(3, 1.0, &fd);
    uint64_t rng = 0x9E3779B97F4A7C15ull, stack[64]; /* innermost first */
    size_t depth = 0;
    int64_t ids[256] = {0};
    size_t live = 0;
    for (int64_t i = 0; i < 200000; i++) {
      /* Keep an outer part of the stack, then push 0 to 5 frames: hot ones mostly. */
      size_t keep = depth ? (size_t)(next_random(&rng) % (depth + 1)) : 0;
      size_t push = (size_t)(next_random(&rng) % 6);
      if (keep + push == 0)
        push = 1;
      if (keep + push > 60)
        keep = 60 - push;
      memmove(stack + push, stack + depth - keep, keep * sizeof *stack);
      for (size_t k = 0; k < push; k++) {
        uint64_t r = next_random(&rng);
        uint64_t pick = r % 10 < 8 ? r % 200 : 200 + r % 60000;
        stack[k] = 0x10000 + pick * 0x40;
      }
      depth = keep + push;
      uint64_t r = next_random(&rng);
      int64_t length = 1 + (int64_t)(r % 24), nsamples = r % 7 == 0 ? 2 : 1;
      mt_source source = r % 11 == 0 ? MT_SOURCE_MAJOR : MT_SOURCE_MINOR;
      int64_t t = TG_START + i, id;
      int rc = general ? mt_writer_put_alloc_general(w, t, length, nsamples, source, stack, depth,
                                                     any_resolve, NULL, &id, NULL)
                       : mt_writer_put_alloc(w, t, length, nsamples, source, stack, depth,
                                             any_resolve, NULL, &id, NULL);
      assert_int_equal(rc, MT_OK);
      if (live == 256) {
        size_t victim = (size_t)(r >> 32) % live;
        assert_int_equal(mt_writer_put_collect(w, t, ids[victim], NULL), MT_OK);
        ids[victim] = ids[--live];
      }
      ids[live++] = id;
    }
    bytes[general] = tg_finish(w, fd, &sizes[general]);
  }
  assert_int_equal(sizes[0], sizes[1]);
  assert_memory_equal(bytes[0], bytes[1], sizes[0]);
  free(bytes[0]);
  free(bytes[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rebuilds_memtraces_tiny_trace_bit_for_bit),
      cmocka_unit_test(a_long_info_string_is_cut_with_dots),
      cmocka_unit_test(event_times_wrap_the_25_bit_field_inside_a_packet),
      cmocka_unit_test(explicit_flushes_write_empty_packets),
      cmocka_unit_test(an_extended_trace_ends_at_the_time_given_not_its_last_event),
      cmocka_unit_test(an_extension_past_30_seconds_keeps_every_packet_within_30_seconds),
      cmocka_unit_test(an_extension_of_years_writes_at_most_a_day_of_packets),
      cmocka_unit_test(a_45_second_gap_starts_a_new_packet),
      cmocka_unit_test(interleaved_domains_flush_on_switch_and_take_id_chunks),
      cmocka_unit_test(a_used_up_id_chunk_flushes_and_ids_stay_contiguous),
      cmocka_unit_test(a_forked_child_writes_nothing),
      cmocka_unit_test(every_put_in_a_forked_child_fails_and_writes_nothing),
      cmocka_unit_test(refuses_what_the_format_cannot_express),
      cmocka_unit_test(a_v2_writer_refuses_to_collect_an_id_it_never_allocated),
      cmocka_unit_test(refuses_codes_that_63_bit_readers_would_read_as_other_codes),
      cmocka_unit_test(a_failing_resolver_stops_the_writer_after_the_events_before_it),
      cmocka_unit_test(a_write_error_stops_the_writer_with_an_io_error),
      cmocka_unit_test(fast_path_writes_the_general_paths_bytes_under_cache_pressure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
