/* Helpers shared by the ring tests (ring_testlib.h). */
#include "ring_testlib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "ring/consumer.h"
#include "ring/layout.h"

mt_ring *rt_open(mt_ring_mode mode, uint64_t ring_size, uint32_t max_rings, bool preserve) {
  mt_ring_options o;
  mt_error err = {0};
  assert_int_equal(mt_ring_options_init(&o, &err), MT_OK);
  o.dir = tu_temp_dir();
  o.mode = mode;
  if (ring_size)
    o.ring_size = ring_size;
  if (max_rings)
    o.max_rings = max_rings;
  o.preserve = preserve;
  o.registry_size = 64 * 1024;
  o.attach_timeout_ms = 60000;
  mt_ring *r = NULL;
  int rc = mt_ring_open(&r, &o, &err);
  if (rc != MT_OK)
    fail_msg("mt_ring_open: %s", err.message);
  return r;
}

mt_ring *rt_child_open(mt_ring_mode mode, uint64_t ring_size, uint32_t max_rings,
                       uint32_t attach_timeout_ms) {
  mt_ring_options o;
  mt_ring_options_init(&o, NULL);
  o.dir = tu_temp_dir();
  o.mode = mode;
  if (ring_size)
    o.ring_size = ring_size;
  if (max_rings)
    o.max_rings = max_rings;
  o.registry_size = 64 * 1024;
  o.attach_timeout_ms = attach_timeout_ms;
  mt_ring *r = NULL;
  if (mt_ring_open(&r, &o, NULL) != MT_OK)
    _exit(90);
  return r;
}

static int collect(void *user, const mt_ring_event *ev) {
  rt_collector *c = user;
  if (c->check && !c->check(ev, c->check_arg))
    fail_msg("record check failed: ring %u seq %llu type %u", ev->ring, (unsigned long long)ev->seq,
             ev->type);
  c->seen++;
  if (!c->keep)
    return MT_CURSOR_NEXT;
  if (c->count == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 1024;
    c->records = realloc(c->records, c->cap * sizeof *c->records);
    assert_non_null(c->records);
  }
  rt_record *r = &c->records[c->count++];
  memset(r, 0, sizeof *r);
  r->ring = ev->ring;
  r->generation = ev->generation;
  r->type = ev->type;
  r->id = ev->id;
  r->seq = ev->seq;
  r->timestamp = ev->timestamp;
  r->words = ev->words;
  memcpy(r->payload, ev->payload, (ev->words < 8 ? ev->words : 8) * 8);
  r->length = ev->length < sizeof r->bytes ? ev->length : sizeof r->bytes;
  memcpy(r->bytes, ev->bytes, r->length);
  return MT_CURSOR_NEXT;
}

static void collect_lost(void *user, uint32_t ring, uint64_t records) {
  rt_collector *c = user;
  c->lost += records;
  if (ring < 1024)
    c->lost_by_ring[ring] += records;
}

static void collect_registry(void *user, unsigned kind, uint64_t id, const void *bytes,
                             size_t length) {
  (void)kind, (void)id, (void)bytes, (void)length;
  ((rt_collector *)user)->registry_entries++;
}

size_t rt_collect_run(rt_collector *collector, uint32_t ring, uint32_t generation,
                      uint64_t first_seq, const uint64_t *rec, size_t words, size_t limit,
                      size_t *used) {
  const uint64_t *from = rec;
  size_t k = 0;
  for (; k < limit; k++) {
    uint32_t len =
        mt_cursor_run_record(rec, words - (size_t)(rec - from), (uint32_t)(first_seq + k));
    if (!len)
      break;
    assert_true(len >= 2);
    assert_true(mt_ring_header_type(rec[0]) >= MT_RING_TYPE_OPAQUE_FIRST);
    assert_int_equal(mt_ring_header_seq(rec[0]), (uint32_t)(first_seq + k));
    mt_ring_event ev = {.ring = ring,
                        .generation = generation,
                        .type = mt_ring_header_type(rec[0]),
                        .id = mt_ring_header_id(rec[0]),
                        .seq = first_seq + k,
                        .timestamp = rec[1],
                        .payload = rec + 2,
                        .words = len - 2,
                        .bytes = (const uint8_t *)(rec + 2),
                        .length = ((size_t)len - 2) * 8};
    collect(collector, &ev);
    rec += len;
  }
  *used = (size_t)(rec - from);
  return k;
}

void rt_collector_attach(mt_cursor *cursor, rt_collector *collector) {
  mt_cursor_callbacks cb = {0};
  cb.other = collect;
  cb.lost = collect_lost;
  cb.registry = collect_registry;
  mt_cursor_set_callbacks(cursor, &cb, collector);
}

void rt_collector_free(rt_collector *collector) {
  free(collector->records);
  memset(collector, 0, sizeof *collector);
}

void rt_drain(mt_cursor *cursor, bool until_stopped) {
  for (;;) {
    mt_ring_file_info info;
    mt_cursor_info(cursor, &info);
    bool stopped = info.stopped;
    mt_error err = {0};
    size_t got = 0;
    int rc = mt_cursor_poll(cursor, 0, &got, &err);
    if (rc != MT_OK)
      fail_msg("mt_cursor_poll: %s", err.message);
    if (got == 0 && mt_cursor_drained(cursor) && (stopped || !until_stopped))
      return;
    if (got == 0) {
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
  }
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ x >> 33;
}

void rt_fill(uint64_t *payload, size_t words, uint64_t stream, uint64_t index) {
  uint64_t sum = 0x5eed;
  for (size_t i = 0; i + 1 < words; i++) {
    payload[i] = i == 0 ? stream : i == 1 ? index : mix(stream * 31 + index + i);
    sum = mix(sum ^ payload[i]);
  }
  payload[words - 1] = sum ^ words;
}

bool rt_verify(const uint64_t *payload, size_t words, uint64_t *stream, uint64_t *index) {
  if (words < 3)
    return false;
  uint64_t sum = 0x5eed;
  for (size_t i = 0; i + 1 < words; i++) {
    if (i >= 2 && payload[i] != mix(payload[0] * 31 + payload[1] + i))
      return false;
    sum = mix(sum ^ payload[i]);
  }
  if (payload[words - 1] != (sum ^ words))
    return false;
  *stream = payload[0];
  *index = payload[1];
  return true;
}

void rt_pipe_open(rt_pipe *p) {
  assert_int_equal(pipe(p->fd), 0);
}

void rt_signal(rt_pipe *p) {
  char c = 1;
  while (write(p->fd[1], &c, 1) < 0 && errno == EINTR) {
  }
}

void rt_wait(rt_pipe *p) {
  char c;
  ssize_t n;
  while ((n = read(p->fd[0], &c, 1)) < 0 && errno == EINTR) {
  }
  assert_int_equal(n, 1);
}

int rt_wait_child(int pid) {
  int status;
  while (waitpid(pid, &status, 0) < 0)
    assert_int_equal(errno, EINTR);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

mt_cursor *rt_cursor(int pid) {
  for (int attempt = 0;; attempt++) {
    mt_cursor *c = NULL;
    mt_error err = {0};
    int rc = mt_cursor_open(&c, tu_temp_dir(), pid, &err);
    if (rc == MT_OK)
      return c;
    if (attempt > 5000)
      fail_msg("mt_cursor_open(%d): %s", pid, err.message);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}
