/* The reader's API around the event loop (format.h): callback iteration and stopping it early,
 * the warning callback's (offset, message) pairs for each recoverable problem, and the size the
 * reader reports for files, pipes and zstd input, and a mapped zstd trace read whole. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zstd.h>

#include "format/buf.h"
#include "testutil.h"
#include "tracegen.h"

#define NEVENTS 6

/* Packets: 0 info, 1 locations, 2 events [3 allocations], 3 locations, 4 events [alloc, promote,
 * collect]. The events are told apart by their times: TG_START + 1 .. TG_START + NEVENTS. */
static uint8_t *make_trace(size_t *size, tg_packets *packets) {
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t s1[] = {2, 1}, s2[] = {3, 2, 1};
  int64_t id[4];
  for (int i = 0; i < 3; i++)
    assert_int_equal(mt_writer_put_alloc(w, TG_START + 1 + i, 2, 1, MT_SOURCE_MINOR, s1, 2,
                                         tg_resolve, NULL, &id[i], NULL),
                     MT_OK);
  assert_int_equal(mt_writer_flush(w, NULL), MT_OK);
  assert_int_equal(mt_writer_put_alloc(w, TG_START + 4, 5, 1, MT_SOURCE_EXTERNAL, s2, 3, tg_resolve,
                                       NULL, &id[3], NULL),
                   MT_OK);
  assert_int_equal(mt_writer_put_promote(w, TG_START + 5, id[3], NULL), MT_OK);
  assert_int_equal(mt_writer_put_collect(w, TG_START + 6, id[0], NULL), MT_OK);
  uint8_t *data = tg_finish(w, fd, size);
  tg_walk_packets(data, *size, packets);
  assert_int_equal(packets->count, 5);
  return data;
}

static mt_reader *open_memory(const uint8_t *data, size_t size, const mt_reader_options *options) {
  mt_reader *r;
  mt_error err;
  if (mt_reader_open_memory(&r, data, size, options, &err))
    fail_msg("open: %s", err.message);
  return r;
}

typedef struct visits {
  int64_t times[NEVENTS + 1];
  int count;
  int stop_at; /* return stop_value from the callback at this (1-based) event; 0: never */
  int stop_value;
} visits;

static int visit(void *user, const mt_event *ev) {
  visits *v = user;
  assert_true(v->count < NEVENTS);
  v->times[v->count++] = ev->time;
  return v->count == v->stop_at ? v->stop_value : 0;
}

static void iter_calls_back_for_every_event_in_order(void **state) {
  (void)state;
  size_t size;
  tg_packets p;
  uint8_t *data = make_trace(&size, &p);
  mt_reader *r = open_memory(data, size, NULL);
  visits v = {0};
  mt_error err;
  assert_int_equal(mt_reader_iter(r, visit, &v, &err), MT_OK);
  assert_int_equal(v.count, NEVENTS);
  for (int i = 0; i < NEVENTS; i++)
    assert_int_equal(v.times[i], TG_START + 1 + i);
  /* At the end, iterating again calls nothing and says so. */
  assert_int_equal(mt_reader_iter(r, visit, &v, &err), MT_OK);
  assert_int_equal(v.count, NEVENTS);
  mt_event ev;
  assert_int_equal(mt_reader_next(r, &ev, &err), 0);
  mt_reader_close(r);
  free(data);
}

static void iter_stops_with_the_callbacks_value_and_next_resumes_after_that_event(void **state) {
  (void)state;
  size_t size;
  tg_packets p;
  uint8_t *data = make_trace(&size, &p);
  /* Stopping inside a packet (event 2 of 3) and at the end of one (event 3), both signs. */
  const int stops[] = {2, 3, 5};
  const int values[] = {42, -17, 1};
  for (int k = 0; k < 3; k++) {
    mt_reader *r = open_memory(data, size, &(mt_reader_options){.backtraces = true});
    visits v = {.stop_at = stops[k], .stop_value = values[k]};
    mt_error err;
    assert_int_equal(mt_reader_iter(r, visit, &v, &err), values[k]);
    assert_int_equal(v.count, stops[k]);
    mt_event ev;
    assert_int_equal(mt_reader_next(r, &ev, &err), 1);
    assert_int_equal(ev.time, TG_START + 1 + stops[k]);
    /* And iteration picks up after that one. */
    v = (visits){0};
    assert_int_equal(mt_reader_iter(r, visit, &v, &err), MT_OK);
    assert_int_equal(v.count, NEVENTS - stops[k] - 1);
    if (v.count)
      assert_int_equal(v.times[0], TG_START + 2 + stops[k]);
    mt_reader_close(r);
  }
  free(data);
}

static void iter_returns_a_reading_error_with_its_offset(void **state) {
  (void)state;
  size_t size;
  tg_packets p;
  uint8_t *data = make_trace(&size, &p);
  mt_store_u32(data + p.offset[4], 0x12345678); /* packet 4 is no CTF packet */
  mt_reader *r = open_memory(data, size, NULL);
  visits v = {0};
  mt_error err;
  assert_int_equal(mt_reader_iter(r, visit, &v, &err), MT_E_MALFORMED);
  assert_int_equal(v.count, 3);
  assert_int_equal(err.offset, (int64_t)p.offset[4]);
  assert_non_null(strstr(err.message, "not a CTF packet"));
  mt_reader_close(r);
  free(data);
}

/* --- warnings ----------------------------------------------------------------------------- */

typedef struct warnings {
  int count;
  int64_t offset[4];
  char message[4][256];
} warnings;

static void record_warning(void *user, int64_t offset, const char *message) {
  warnings *w = user;
  assert_true(w->count < 4);
  w->offset[w->count] = offset;
  snprintf(w->message[w->count], sizeof w->message[0], "%s", message);
  w->count++;
}

/* Reads `size` bytes of `data` to the end with a recording warning callback; returns the number
 * of events. */
static int read_warned(const uint8_t *data, size_t size, warnings *w) {
  *w = (warnings){0};
  mt_reader_options options = {.on_warning = record_warning, .warning_user = w};
  mt_reader *r = open_memory(data, size, &options);
  visits v = {0};
  mt_error err;
  int rc = mt_reader_iter(r, visit, &v, &err);
  if (rc)
    fail_msg("reading: %s", err.message);
  assert_int_equal(mt_reader_warning_count(r), (uint64_t)w->count);
  mt_reader_close(r);
  return v.count;
}

static void expect_warning(const warnings *w, int64_t offset, const char *message) {
  assert_int_equal(w->count, 1);
  if (w->offset[0] != offset || strcmp(w->message[0], message))
    fail_msg("expected warning at %lld \"%s\", got at %lld \"%s\"", (long long)offset, message,
             (long long)w->offset[0], w->message[0]);
}

static void a_foreign_pid_packet_is_a_warning_naming_the_packet(void **state) {
  (void)state;
  size_t size;
  tg_packets p;
  uint8_t *data = make_trace(&size, &p);
  mt_store_u64(data + p.offset[2] + 30, 999);
  warnings w;
  assert_int_equal(read_warned(data, size, &w), 3); /* packet 2's three allocations are skipped */
  char want[256];
  snprintf(want, sizeof want, "skipping packet at byte %zu: its pid 999 is not the trace's %d",
           p.offset[2], TG_PID);
  expect_warning(&w, (int64_t)p.offset[2], want);
  free(data);
}

/* Collects every warning's message, one line each. */
static void append_warning(void *user, int64_t offset, const char *message) {
  (void)offset;
  char *text = user;
  size_t at = strlen(text);
  assert_true(at + strlen(message) + 2 < 4096);
  sprintf(text + at, "%s\n", message);
}

static void many_packets_of_other_processes_are_counted_but_only_the_first_are_named(void **state) {
  /* Traces concatenated (`cat a.ctf b.ctf`) give a packet of another process per packet: a line
   * each, tens of thousands of lines, before the cap. */
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t stack[] = {2, 1};
  const int packets = 3 * MT_READER_FOREIGN_SAID;
  for (int i = 0; i < packets; i++) {
    assert_int_equal(mt_writer_put_alloc(w, TG_START + 1 + i, 2, 1, MT_SOURCE_MINOR, stack, 2,
                                         tg_resolve, NULL, NULL, NULL),
                     MT_OK);
    assert_int_equal(mt_writer_flush(w, NULL), MT_OK);
  }
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  tg_packets p;
  tg_walk_packets(data, size, &p);
  int foreign = 0, own = 0; /* events packets (one allocation each) given another pid, and not */
  for (size_t i = 1; i < p.count; i++) {
    if (p.h[i].packet_size_bits / 8 == mt_header_size(3))
      continue; /* empty */
    if (i % 4 == 0) {
      own++;
      continue;
    }
    mt_store_u64(data + p.offset[i] + 30, 900 + i);
    foreign++;
  }
  assert_true(foreign > MT_READER_FOREIGN_SAID + 2);
  char text[4096] = "";
  mt_reader_options options = {.on_warning = append_warning, .warning_user = text};
  mt_reader *r = open_memory(data, size, &options);
  visits v = {0};
  mt_error err;
  if (mt_reader_iter(r, visit, &v, &err))
    fail_msg("reading: %s", err.message);
  assert_int_equal(v.count, own);
  assert_int_equal(mt_reader_warning_count(r), (uint64_t)foreign); /* every one counted */
  mt_reader_close(r);
  /* The first ones by offset, each named; the last of them says the rest go unsaid. */
  int lines = 0;
  for (const char *c = text; *c; c++)
    lines += *c == '\n';
  assert_int_equal(lines, MT_READER_FOREIGN_SAID);
  char want[128];
  snprintf(want, sizeof want, "skipping packet at byte %zu: its pid %d is not", p.offset[1],
           900 + 1);
  assert_ptr_equal(strstr(text, want), text);
  const char *unsaid = "(further packets of other processes are skipped without a warning)\n";
  char *at = strstr(text, unsaid);
  assert_non_null(at);
  assert_int_equal(at[strlen(unsaid)], 0); /* on the last line, and only there */
  free(data);
}

static void a_trace_cut_inside_a_packet_is_a_warning_naming_the_packet(void **state) {
  (void)state;
  size_t size;
  tg_packets p;
  uint8_t *data = make_trace(&size, &p);
  size_t cut = size - 2;
  warnings w;
  assert_int_equal(read_warned(data, cut, &w), 3);
  char want[256];
  snprintf(want, sizeof want,
           "skipping truncated packet at byte %zu: %zu of its %zu bytes are present", p.offset[4],
           p.size[4] - 2, p.size[4]);
  expect_warning(&w, (int64_t)p.offset[4], want);
  free(data);
}

/* A compressed trace cut short (a copy stopped part-way): the warning says that the zstd stream
 * ended inside a frame, not only that a packet is short, which reads as a writer that stopped. */
static void a_compressed_trace_cut_short_says_so(void **state) {
  (void)state;
  size_t size;
  tg_packets p;
  uint8_t *data = make_trace(&size, &p);
  size_t keep = p.offset[4] + p.size[4] - 5; /* flushed there: what the cut file decompresses to */
  size_t bound = ZSTD_compressBound(size) + 64;
  uint8_t *z = malloc(bound);
  ZSTD_CCtx *c = ZSTD_createCCtx();
  ZSTD_outBuffer out = {z, bound, 0};
  ZSTD_inBuffer in = {data, keep, 0};
  assert_false(ZSTD_isError(ZSTD_compressStream2(c, &out, &in, ZSTD_e_flush)));
  size_t cut = out.pos;
  ZSTD_freeCCtx(c);
  warnings w;
  assert_int_equal(read_warned(z, cut, &w), 3);
  char want[256];
  snprintf(want, sizeof want,
           "skipping truncated packet at byte %zu: %zu of its %zu bytes are present; the zstd "
           "stream ends inside a frame: the compressed file was cut short",
           p.offset[4], p.size[4] - 5, p.size[4]);
  expect_warning(&w, (int64_t)p.offset[4], want);
  /* Cut before the first packet is whole: nothing to read, and why. */
  size_t whole = ZSTD_compress(z, bound, data, size, 3);
  assert_false(ZSTD_isError(whole));
  mt_reader *r;
  mt_error err;
  assert_int_equal(mt_reader_open_memory(&r, z, whole / 2, NULL, &err), MT_E_MALFORMED);
  assert_string_equal(err.message, "malformed trace at byte 0: the zstd stream ends inside a "
                                   "frame before the trace-info packet is whole (the compressed "
                                   "file was cut short)");
  free(z);
  free(data);
}

static void a_trace_cut_inside_a_header_is_a_warning_naming_the_packet(void **state) {
  (void)state;
  size_t size;
  tg_packets p;
  uint8_t *data = make_trace(&size, &p);
  warnings w;
  /* Before the version field, and after it (the header's size is known then). */
  const size_t present[] = {20, 50};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(read_warned(data, p.offset[4] + present[i], &w), 3);
    char want[256];
    snprintf(want, sizeof want,
             "the trace ends inside a packet header at byte %zu (%zu bytes of it present); "
             "reading stops there",
             p.offset[4], present[i]);
    expect_warning(&w, (int64_t)p.offset[4], want);
  }
  free(data);
}

/* --- size --------------------------------------------------------------------------------- */

static int64_t size_after_reading(mt_reader *r) {
  int64_t before = mt_reader_size(r);
  visits v = {0};
  assert_int_equal(mt_reader_iter(r, visit, &v, NULL), MT_OK);
  assert_int_equal(v.count, NEVENTS);
  assert_int_equal(mt_reader_size(r), before); /* it does not change while reading */
  return before;
}

static void size_is_the_files_size_and_minus_one_for_pipes_and_zstd(void **state) {
  (void)state;
  size_t size;
  tg_packets p;
  uint8_t *data = make_trace(&size, &p);
  mt_reader *r;
  mt_error err;
  /* A file, by path and by descriptor, and bytes in memory: their size. */
  const char *path = tu_temp_path("size.ctf");
  tu_write_file(path, data, size);
  assert_int_equal(mt_reader_open(&r, path, NULL, &err), MT_OK);
  assert_int_equal(size_after_reading(r), (int64_t)size);
  assert_int_equal(mt_reader_position(r), (int64_t)size);
  mt_reader_close(r);
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  assert_int_equal(mt_reader_open_fd(&r, fd, NULL, &err), MT_OK);
  assert_int_equal(size_after_reading(r), (int64_t)size);
  mt_reader_close(r);
  close(fd);
  r = open_memory(data, size, NULL);
  assert_int_equal(size_after_reading(r), (int64_t)size);
  mt_reader_close(r);

  /* A pipe: unknown. */
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  assert_true(size < 65536); /* fits in the pipe's buffer */
  assert_int_equal(write(fds[1], data, size), (ssize_t)size);
  close(fds[1]);
  assert_int_equal(mt_reader_open_fd(&r, fds[0], NULL, &err), MT_OK);
  assert_int_equal(size_after_reading(r), -1);
  assert_int_equal(mt_reader_position(r), (int64_t)size);
  mt_reader_close(r);
  close(fds[0]);

  /* zstd, from a file and from memory: unknown, although the compressed size is known. */
  size_t bound = ZSTD_compressBound(size);
  uint8_t *z = malloc(bound);
  size_t zsize = ZSTD_compress(z, bound, data, size, 3);
  assert_false(ZSTD_isError(zsize));
  const char *zpath = tu_temp_path("size.ctf.zst");
  tu_write_file(zpath, z, zsize);
  assert_int_equal(mt_reader_open(&r, zpath, NULL, &err), MT_OK);
  assert_int_equal(size_after_reading(r), -1);
  assert_int_equal(mt_reader_position(r), (int64_t)size); /* positions are decompressed bytes */
  mt_reader_close(r);
  r = open_memory(z, zsize, NULL);
  assert_int_equal(size_after_reading(r), -1);
  mt_reader_close(r);
  free(z);
  free(data);
}

/* madvise, as the reader calls it (this definition interposes libc's): while `watched` names a
 * file, every MADV_DONTNEED range must lie inside a mapping of that file. */
static const char *watched;
static bool released_other_memory;

static bool inside_mapping_of(uintptr_t low, uintptr_t high, const char *path) {
  FILE *maps = fopen("/proc/self/maps", "r");
  assert_non_null(maps);
  char line[4096];
  bool inside = false;
  while (!inside && fgets(line, sizeof line, maps)) {
    unsigned long from, to;
    char name[4096] = "";
    if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %4095s", &from, &to, name) >= 2)
      inside = low >= from && high <= to && !strcmp(name, path);
  }
  fclose(maps);
  return inside;
}

int madvise(void *addr, size_t length, int advice);
int madvise(void *addr, size_t length, int advice) {
  if (watched && advice == MADV_DONTNEED &&
      !inside_mapping_of((uintptr_t)addr, (uintptr_t)addr + length, watched))
    released_other_memory = true;
  return (int)syscall(SYS_madvise, addr, length, advice);
}

/* A mapped .ctf.zst whose decompressed bytes are many times its own size: the reader releases
 * the pages of a mapped plain trace as it goes, and once did so over a compressed mapping by the
 * decompressed position, past its end into other memory (memtap check of a 10 MB .ctf.zst from
 * memtap record --compress crashed). Every event must come back, in order. */
static void a_mapped_zstd_trace_much_larger_decompressed_reads_whole(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd);
  uint64_t stack[] = {3, 2, 1};
  const int64_t n = 3000000; /* about 30 MiB of events, compressing to a few MiB */
  for (int64_t i = 0; i < n; i++) {
    int64_t id;
    assert_int_equal(mt_writer_put_alloc(w, TG_START + i, 2, 1, MT_SOURCE_EXTERNAL, stack, 3,
                                         tg_resolve, NULL, &id, NULL),
                     MT_OK);
  }
  size_t size;
  uint8_t *data = tg_finish(w, fd, &size);
  size_t bound = ZSTD_compressBound(size);
  uint8_t *z = malloc(bound);
  size_t zsize = ZSTD_compress(z, bound, data, size, 3);
  assert_false(ZSTD_isError(zsize));
  /* The decompressed position runs several of the reader's 4 MiB release steps past the end of
   * the compressed mapping. */
  print_message("%zu bytes, %zu compressed\n", size, zsize);
  assert_true(zsize + 3 * ((size_t)4 << 20) < size);
  const char *zpath = tu_temp_path("large.ctf.zst");
  tu_write_file(zpath, z, zsize);
  free(z);
  free(data);
  mt_reader *r;
  mt_error err;
  char real[4096];
  assert_non_null(realpath(zpath, real));
  watched = real;
  released_other_memory = false;
  assert_int_equal(mt_reader_open(&r, zpath, NULL, &err), MT_OK);
  mt_event ev;
  int64_t seen = 0;
  int rc;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
    assert_int_equal(ev.time, TG_START + seen);
    seen++;
  }
  assert_int_equal(rc, 0);
  assert_int_equal(seen, n);
  assert_int_equal(mt_reader_position(r), (int64_t)size);
  mt_reader_close(r);
  watched = NULL;
  assert_false(released_other_memory);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(iter_calls_back_for_every_event_in_order),
      cmocka_unit_test(iter_stops_with_the_callbacks_value_and_next_resumes_after_that_event),
      cmocka_unit_test(iter_returns_a_reading_error_with_its_offset),
      cmocka_unit_test(a_foreign_pid_packet_is_a_warning_naming_the_packet),
      cmocka_unit_test(many_packets_of_other_processes_are_counted_but_only_the_first_are_named),
      cmocka_unit_test(a_trace_cut_inside_a_packet_is_a_warning_naming_the_packet),
      cmocka_unit_test(a_compressed_trace_cut_short_says_so),
      cmocka_unit_test(a_trace_cut_inside_a_header_is_a_warning_naming_the_packet),
      cmocka_unit_test(size_is_the_files_size_and_minus_one_for_pipes_and_zstd),
      cmocka_unit_test(a_mapped_zstd_trace_much_larger_decompressed_reads_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
