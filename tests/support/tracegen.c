/* Test trace construction and reading (tracegen.h). */
#include "tracegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"

mt_trace_info tg_info(double rate) {
  return (mt_trace_info){.start_time = TG_START,
                         .sample_rate = rate,
                         .word_size = 64,
                         .executable_name = "/usr/bin/test-program",
                         .host_name = "testhost",
                         .ocaml_runtime_params = "memtap-test",
                         .pid = TG_PID,
                         .context = "unit test"};
}

mt_writer *tg_writer(int version, double rate, int *fd) {
  *fd = memfd_create("trace", 0);
  assert_true(*fd >= 0);
  mt_trace_info info = tg_info(rate);
  mt_writer_options options = {.version = version};
  mt_writer *w;
  mt_error err;
  int rc = mt_writer_create(&w, *fd, &info, &options, &err);
  if (rc)
    fail_msg("mt_writer_create: %s", err.message);
  return w;
}

uint8_t *tg_fd_bytes(int fd, size_t *size) {
  off_t end = lseek(fd, 0, SEEK_END);
  assert_true(end >= 0);
  uint8_t *data = malloc((size_t)end + 1);
  assert_non_null(data);
  assert_int_equal(pread(fd, data, (size_t)end, 0), end);
  *size = (size_t)end;
  return data;
}

uint8_t *tg_finish(mt_writer *w, int fd, size_t *size) {
  mt_error err;
  int rc = mt_writer_close(w, &err);
  if (rc)
    fail_msg("mt_writer_close: %s", err.message);
  uint8_t *data = tg_fd_bytes(fd, size);
  close(fd);
  return data;
}

int tg_resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  (void)user;
  static _Thread_local char names[3][64], file[64]; /* one set per thread: writers may run */
  static _Thread_local mt_location locs[3];         /* on several threads */
  size_t n = code % 3 + 1;
  snprintf(file, sizeof file, "file_%llu.c", (unsigned long long)(code % 40));
  for (size_t i = 0; i < n; i++) {
    snprintf(names[i], sizeof names[i], "fn_%llu_%zu", (unsigned long long)code, i);
    locs[i] = (mt_location){.filename = file,
                            .defname = names[i],
                            .line = (int32_t)(code % 100000),
                            .start_char = (int32_t)(i + 1),
                            .end_char = (int32_t)(i + 10)};
  }
  *entries = locs;
  *count = n;
  return MT_OK;
}

mt_reader *tg_open_memory(const uint8_t *data, size_t size, bool runs_only) {
  mt_reader_options o = {.backtraces = true, .runs_only = runs_only};
  mt_reader *r;
  mt_error err;
  if (mt_reader_open_memory(&r, data, size, &o, &err))
    fail_msg("open: %s", err.message);
  return r;
}

tg_event *tg_read_all(const uint8_t *data, size_t size, bool backtraces, size_t *count,
                      mt_reader **reader) {
  mt_reader_options options = {.backtraces = backtraces};
  mt_reader *r;
  mt_error err;
  int rc = mt_reader_open_memory(&r, data, size, &options, &err);
  if (rc)
    fail_msg("open: %s", err.message);
  size_t n = 0, cap = 64;
  tg_event *events = malloc(cap * sizeof *events);
  mt_event ev;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
    if (n == cap)
      events = realloc(events, (cap *= 2) * sizeof *events);
    events[n].ev = ev;
    events[n].backtrace = malloc((ev.backtrace_length + 1) * sizeof(int64_t));
    if (ev.backtrace_length)
      memcpy(events[n].backtrace, ev.backtrace, ev.backtrace_length * sizeof(int64_t));
    n++;
  }
  if (rc < 0)
    fail_msg("read: %s", err.message);
  *count = n;
  if (reader)
    *reader = r;
  else
    mt_reader_close(r);
  return events;
}

void tg_free_events(tg_event *events, size_t count) {
  for (size_t i = 0; i < count; i++)
    free(events[i].backtrace);
  free(events);
}

int tg_read_status(const uint8_t *data, size_t size, bool backtraces, mt_error *err, size_t *events,
                   uint64_t *warnings, bool *truncated) {
  mt_reader_options options = {.backtraces = backtraces};
  mt_reader *r;
  memset(err, 0, sizeof *err);
  int rc = mt_reader_open_memory(&r, data, size, &options, err);
  if (rc)
    return rc;
  size_t n = 0;
  mt_event ev;
  while ((rc = mt_reader_next(r, &ev, err)) > 0)
    n++;
  if (events)
    *events = n;
  if (warnings)
    *warnings = mt_reader_warning_count(r);
  if (truncated)
    *truncated = mt_reader_truncated(r, NULL);
  mt_reader_close(r);
  return rc;
}

void tg_walk_packets(const uint8_t *data, size_t size, tg_packets *out) {
  out->count = 0;
  for (size_t at = 0; at < size && out->count < TG_MAX_PACKETS;) {
    mt_packet_header *h = &out->h[out->count];
    assert_true(mt_packet_header_decode(data + at, size - at, h) > 0);
    assert_int_equal(h->magic, MT_CTF_MAGIC);
    out->offset[out->count] = at;
    out->size[out->count] = h->packet_size_bits / 8;
    at += h->packet_size_bits / 8;
    out->count++;
  }
}
