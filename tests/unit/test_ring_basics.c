/* The ring transport seen by one thread: creating the file, settings, record round trips,
 * registry, pause, custom bytes, timestamps, argument checks. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

#include "ring/layout.h"
#include "ring/liveness.h"
#include "ring/producer.h"

static const char *own_path(void) {
  static char path[4096];
  assert_int_equal(mt_ring_file_path(path, sizeof path, tu_temp_dir(), getpid()), MT_OK);
  return path;
}

static size_t count_type(const rt_collector *c, uint32_t type, uint32_t id) {
  size_t n = 0;
  for (size_t i = 0; i < c->count; i++)
    n += c->records[i].type == type && c->records[i].id == id;
  return n;
}

static void open_creates_private_file_named_after_pid(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 4, false);
  assert_string_equal(mt_ring_path(r), own_path());
  struct stat st;
  assert_int_equal(lstat(own_path(), &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0600);
  mt_cursor *c = rt_cursor(-1);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(info.pid, getpid());
  assert_int_equal(info.ring_count, 4);
  assert_int_equal(info.ring_size, 1u << 20);
  assert_false(info.stopped);
  mt_cursor_close(c);
  assert_int_equal(mt_ring_close(r), MT_OK);
  assert_int_equal(lstat(own_path(), &st), -1);
}

static void second_open_fails_until_close(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  mt_ring *again = NULL;
  mt_error err = {0};
  assert_int_equal(mt_ring_open(&again, NULL, &err), MT_E_STATE);
  assert_non_null(strstr(err.message, "already"));
  assert_int_equal(mt_ring_close(r), MT_OK);
  assert_int_equal(mt_ring_close(r), MT_E_STATE);
  r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  assert_int_equal(mt_ring_close(r), MT_OK);
}

static void open_refuses_ring_smaller_than_largest_record_naming_minimum(void **state) {
  (void)state;
  mt_ring_options o;
  mt_ring_options_init(&o, NULL);
  o.dir = tu_temp_dir();
  o.ring_size = 4096;
  mt_ring *r = NULL;
  mt_error err = {0};
  assert_int_equal(mt_ring_open(&r, &o, &err), MT_E_INVALID);
  assert_non_null(strstr(err.message, "minimum ring size is 8192 bytes"));
  assert_int_equal(access(own_path(), F_OK), -1);
}

static void settings_come_from_environment(void **state) {
  (void)state;
  setenv("MEMTAP_RING_SIZE", "20K", 1);
  setenv("MEMTAP_RING_THREADS", "3", 1);
  setenv("MEMTAP_RING_DIR", tu_temp_dir(), 1);
  setenv("MEMTAP_RING_CLOCK", "monotonic", 1);
  setenv("MEMTAP_RING_PRESERVE", "1", 1);
  mt_ring *r = NULL;
  mt_error err = {0};
  int rc = mt_ring_open(&r, NULL, &err);
  unsetenv("MEMTAP_RING_SIZE");
  unsetenv("MEMTAP_RING_THREADS");
  unsetenv("MEMTAP_RING_CLOCK");
  unsetenv("MEMTAP_RING_PRESERVE");
  assert_int_equal(rc, MT_OK);
  mt_cursor *c = NULL;
  assert_int_equal(mt_cursor_open(&c, NULL, -1, &err), MT_OK);
  unsetenv("MEMTAP_RING_DIR");
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(info.ring_size, 32768); /* rounded up to a power of two */
  assert_int_equal(info.ring_count, 3);
  assert_int_equal(info.clock, MT_RING_CLOCK_MONOTONIC);
  mt_cursor_close(c);
  assert_int_equal(mt_ring_close(r), MT_OK);
  assert_int_equal(access(own_path(), F_OK), 0); /* preserved */
  unlink(own_path());

  /* Sizes out of range are refused with the variable, naming the bounds (memtap record refuses
   * them before the program runs); a size passed in the options, at the ring's creation. */
  setenv("MEMTAP_RING_SIZE", "4K", 1);
  mt_ring_options o;
  assert_int_equal(mt_ring_options_init(&o, &err), MT_E_INVALID);
  assert_non_null(strstr(err.message, "MEMTAP_RING_SIZE=4K is not a size from 8K to 1G"));
  setenv("MEMTAP_RING_SIZE", "2G", 1);
  assert_int_equal(mt_ring_options_init(&o, &err), MT_E_INVALID);
  unsetenv("MEMTAP_RING_SIZE");
  assert_int_equal(mt_ring_options_init(&o, &err), MT_OK);
  o.dir = tu_temp_dir();
  o.ring_size = 4096;
  assert_int_equal(mt_ring_open(&r, &o, &err), MT_E_INVALID);
  assert_non_null(strstr(err.message, "8192"));
  setenv("MEMTAP_RING_SIZE", "lots", 1);
  assert_int_equal(mt_ring_options_init(&o, &err), MT_E_INVALID);
  assert_non_null(strstr(err.message, "MEMTAP_RING_SIZE"));
  unsetenv("MEMTAP_RING_SIZE");
}

/* A process in another pid namespace than its consumer's (opts->pid_namespace) names its file for
 * its own namespace, where a pid is another process's in the consumer's; the primary of such a
 * file holds the lock by which that producer judges it alive, and only of such a file. */
static void file_of_another_pid_namespace_is_named_for_it_and_its_primary_locks_it(void **state) {
  (void)state;
  mt_ring_options o;
  mt_error err = {0};
  setenv("MEMTAP_RING_PID_NS", "4026531836x", 1);
  assert_int_equal(mt_ring_options_init(&o, &err), MT_E_INVALID);
  assert_non_null(strstr(err.message, "MEMTAP_RING_PID_NS=4026531836x is not a pid namespace"));
  setenv("MEMTAP_RING_PID_NS", "0", 1);
  assert_int_equal(mt_ring_options_init(&o, &err), MT_E_INVALID);
  setenv("MEMTAP_RING_PID_NS", "4026531836", 1);
  assert_int_equal(mt_ring_options_init(&o, &err), MT_OK);
  assert_int_equal(o.pid_namespace, 4026531836u);
  unsetenv("MEMTAP_RING_PID_NS");

  struct stat ns;
  if (stat("/proc/self/ns/pid", &ns) != 0)
    skip(); /* no /proc: a producer cannot tell either */
  for (int other = 0; other < 2; other++) {
    assert_int_equal(mt_ring_options_init(&o, &err), MT_OK);
    o.dir = tu_temp_dir();
    o.mode = MT_RING_LOSSLESS;
    o.pid_namespace = (uint64_t)ns.st_ino + (uint64_t)other;
    mt_ring *r = NULL;
    assert_int_equal(mt_ring_open(&r, &o, &err), MT_OK);
    char want[4096];
    if (other)
      snprintf(want, sizeof want, "%s/%d-pidns%llu.memtap-ring", tu_temp_dir(), (int)getpid(),
               (unsigned long long)ns.st_ino);
    else
      snprintf(want, sizeof want, "%s", own_path());
    assert_string_equal(mt_ring_path(r), want);
    mt_cursor *c = NULL;
    assert_int_equal(mt_cursor_open_file(&c, want, &err), MT_OK);
    assert_int_equal(mt_ring_primary_lock_held(want), 0);
    assert_int_equal(mt_cursor_register_primary(c, &err), MT_OK);
    assert_int_equal(mt_ring_primary_lock_held(want), other == 1);
    mt_cursor_close(c);
    assert_int_equal(mt_ring_primary_lock_held(want), 0);
    assert_int_equal(mt_ring_close(r), MT_OK);
    assert_int_equal(access(want, F_OK), -1);
    assert_int_equal(mt_ring_primary_lock_held(want), -1); /* cannot tell */
  }

  /* A cleaner of ring directories (memtap record's, after a killed recorder) judges such a file
   * by its namespace: abandoned once no process is left in it. Here the file is a copy of a ring
   * file of ours under the names a producer of a namespace may take. */
  assert_int_equal(mt_ring_options_init(&o, &err), MT_OK);
  o.dir = tu_temp_dir();
  o.preserve = true;
  mt_ring *r = NULL;
  assert_int_equal(mt_ring_open(&r, &o, &err), MT_OK);
  int dir = open(tu_temp_dir(), O_RDONLY | O_DIRECTORY);
  assert_true(dir >= 0);
  char name[128];
  snprintf(name, sizeof name, "%d.memtap-ring", (int)getpid());
  assert_false(mt_ring_file_abandoned(dir, name)); /* ours, alive */
  const char *forms[] = {"%d-pidns%llu.memtap-ring", "%d-pidns%llu.3.memtap-ring"};
  for (int i = 0; i < 2; i++) {
    for (int alive = 0; alive < 2; alive++) {
      snprintf(name, sizeof name, forms[i], (int)getpid(),
               (unsigned long long)ns.st_ino + (alive ? 0 : 1));
      assert_int_equal(linkat(AT_FDCWD, mt_ring_path(r), dir, name, 0), 0);
      assert_int_equal(mt_ring_file_abandoned(dir, name), !alive);
      unlinkat(dir, name, 0);
    }
  }
  snprintf(name, sizeof name, "%d.7.memtap-ring", (int)getpid());
  assert_int_equal(linkat(AT_FDCWD, mt_ring_path(r), dir, name, 0), 0);
  assert_false(mt_ring_file_abandoned(dir, name)); /* ours, alive, under a varied name */
  unlinkat(dir, name, 0);
  for (size_t i = 0; i < 3; i++) { /* not names a producer makes */
    static const char *const bad[] = {"1-pidns.memtap-ring", "1.0.memtap-ring",
                                      "1-pidns7.x.memtap-ring"};
    assert_false(mt_ring_file_abandoned(dir, bad[i]));
  }
  close(dir);
  assert_int_equal(mt_ring_close(r), MT_OK);
  unlink(own_path());
}

static void records_round_trip_with_thread_identity(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  uint64_t p[3] = {1, 2, 3};
  assert_int_equal(mt_ring_write(r, MT_RING_TYPE_OPAQUE_FIRST, 7, p, 3), MT_OK);
  assert_int_equal(mt_ring_write_counter(r, 5, 42), MT_OK);
  assert_int_equal(mt_ring_write_span(r, 9, true), MT_OK);
  assert_int_equal(mt_ring_write_span(r, 9, false), MT_OK);
  assert_int_equal(mt_ring_write_user_int(r, 11, 1234), MT_OK);
  rt_drain(c, false);
  assert_int_equal(col.lost, 0);
  size_t opaque = 0;
  uint64_t last_seq = 0;
  for (size_t i = 0; i < col.count; i++) {
    rt_record *rec = &col.records[i];
    assert_true(rec->generation >= 1);
    if (i)
      assert_int_equal(rec->seq, last_seq + 1);
    last_seq = rec->seq;
    if (rec->type == MT_RING_TYPE_OPAQUE_FIRST) {
      opaque++;
      assert_int_equal(rec->id, 7);
      assert_int_equal(rec->words, 3);
      assert_int_equal(rec->payload[2], 3);
    }
  }
  assert_int_equal(opaque, 1);
  assert_int_equal(count_type(&col, MT_RING_TYPE_LIFECYCLE, MT_RING_LIFECYCLE_START), 1);
  assert_int_equal(count_type(&col, MT_RING_TYPE_LIFECYCLE, MT_RING_LIFECYCLE_THREAD_START), 1);
  assert_true(count_type(&col, MT_RING_TYPE_CLOCK, MT_RING_CLOCK_TSC) +
                  count_type(&col, MT_RING_TYPE_CLOCK, MT_RING_CLOCK_MONOTONIC) >=
              1);
  assert_int_equal(count_type(&col, MT_RING_TYPE_COUNTER, 5), 1);
  assert_int_equal(count_type(&col, MT_RING_TYPE_SPAN_BEGIN, 9), 1);
  assert_int_equal(count_type(&col, MT_RING_TYPE_SPAN_END, 9), 1);
  assert_int_equal(count_type(&col, MT_RING_TYPE_USER_INT, 11), 1);
  mt_ring_close(r);
  rt_drain(c, true);
  assert_int_equal(count_type(&col, MT_RING_TYPE_LIFECYCLE, MT_RING_LIFECYCLE_STOP), 1);
  assert_int_equal(count_type(&col, MT_RING_TYPE_LIFECYCLE, MT_RING_LIFECYCLE_THREAD_EXIT), 1);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_true(info.stopped);
  assert_int_equal(info.rings_in_use, 0);
  mt_cursor_close(c);
  rt_collector_free(&col);
}

static void write_rejects_transport_types_and_oversized_payloads(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  uint64_t big[MT_RING_MAX_PAYLOAD_WORDS + 1] = {0};
  assert_int_equal(mt_ring_write(r, MT_RING_TYPE_PADDING, 0, NULL, 0), MT_E_INVALID);
  assert_int_equal(mt_ring_write(r, MT_RING_TYPE_LIFECYCLE, 0, big, 1), MT_E_INVALID);
  assert_int_equal(mt_ring_write(r, MT_RING_TYPE_CLOCK, 0, big, 2), MT_E_INVALID);
  assert_int_equal(mt_ring_write(r, 12, 0, NULL, 0), MT_E_INVALID);
  assert_int_equal(mt_ring_write(r, 64, 0, NULL, 0), MT_E_INVALID);
  assert_int_equal(mt_ring_write(r, 16, MT_RING_MAX_ID + 1, NULL, 0), MT_E_INVALID);
  assert_int_equal(mt_ring_write(r, 16, 0, big, MT_RING_MAX_PAYLOAD_WORDS + 1), MT_E_INVALID);
  assert_int_equal(mt_ring_write(r, 16, 0, big, MT_RING_MAX_PAYLOAD_WORDS), MT_OK);
  assert_int_equal(mt_ring_write(NULL, 16, 0, NULL, 0), MT_E_INVALID);
  mt_ring_close(r);
  assert_int_equal(mt_ring_write(r, 16, 0, NULL, 0), MT_E_STATE);
}

static void largest_records_wrap_a_minimum_ring_intact(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, MT_RING_MIN_SIZE, 2, false);
  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  static uint64_t p[MT_RING_MAX_PAYLOAD_WORDS];
  for (uint64_t i = 0; i < 50; i++) {
    size_t words = i % 2 ? MT_RING_MAX_PAYLOAD_WORDS : 3 + i * 7;
    rt_fill(p, words, 1, i);
    assert_int_equal(mt_ring_write(r, 20, 0, p, words), MT_OK);
    rt_drain(c, false); /* keeps up: nothing lost */
  }
  assert_int_equal(col.lost, 0);
  uint64_t next = 0;
  for (size_t i = 0; i < col.count; i++) {
    if (col.records[i].type != 20)
      continue;
    assert_int_equal(col.records[i].payload[1], next);
    next++;
  }
  assert_int_equal(next, 50);
  mt_cursor_close(c);
  mt_ring_close(r);
  rt_collector_free(&col);
}

static void custom_bytes_keep_their_exact_length(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  const char text[] = "0123456789abcdefghij";
  for (size_t len = 0; len <= 20; len++)
    assert_int_equal(mt_ring_write_user_custom(r, (unsigned)len, text, len), MT_OK);
  rt_drain(c, false);
  size_t seen = 0;
  for (size_t i = 0; i < col.count; i++) {
    rt_record *rec = &col.records[i];
    if (rec->type != MT_RING_TYPE_USER_CUSTOM)
      continue;
    assert_int_equal(rec->length, rec->id);
    assert_memory_equal(rec->bytes, text, rec->length);
    seen++;
  }
  assert_int_equal(seen, 21);
  mt_cursor_close(c);
  mt_ring_close(r);
  rt_collector_free(&col);
}

static void registry_names_survive_wrap_around(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, MT_RING_MIN_SIZE, 2, false);
  assert_int_equal(mt_ring_register_name(r, 3, "gc.minor"), MT_OK);
  assert_int_equal(mt_ring_register(r, MT_RING_REGISTRY_FIRST_USER_KIND, 1ull << 40, "\0\1\2", 3),
                   MT_OK);
  for (int i = 0; i < 10000; i++)
    mt_ring_write_user_unit(r, 3);
  assert_int_equal(mt_ring_register_name(r, 3, "gc.minor.renamed"), MT_OK);
  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {0};
  rt_collector_attach(c, &col);
  rt_drain(c, false);
  assert_int_equal(col.registry_entries, 3);
  const void *bytes;
  size_t len;
  assert_int_equal(mt_cursor_lookup(c, MT_RING_REGISTRY_NAME, 3, &bytes, &len), MT_OK);
  assert_string_equal(bytes, "gc.minor.renamed");
  assert_int_equal(len, strlen("gc.minor.renamed"));
  assert_int_equal(mt_cursor_lookup(c, MT_RING_REGISTRY_FIRST_USER_KIND, 1ull << 40, &bytes, &len),
                   MT_OK);
  assert_int_equal(len, 3);
  assert_memory_equal(bytes, "\0\1\2", 3);
  assert_int_equal(mt_cursor_lookup(c, MT_RING_REGISTRY_NAME, 4, &bytes, &len), MT_E_INVALID);
  mt_cursor_close(c);
  mt_ring_close(r);
  rt_collector_free(&col);
}

static void registry_refuses_entries_once_full(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false); /* 64 KiB registry */
  static char name[4000];
  memset(name, 'x', sizeof name - 1);
  int ok = 0, rc;
  while ((rc = mt_ring_register_name(r, 1, name)) == MT_OK)
    ok++;
  assert_int_equal(rc, MT_E_NOMEM);
  assert_int_equal(ok, 8192 / (2 + 500)); /* whole entries of 2 + 500 words in 8192 words */
  assert_int_equal(mt_ring_register_name(r, 2, "fits"), MT_OK);
  mt_ring_close(r);
}

static void pause_drops_writes_until_resume(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  assert_int_equal(mt_ring_write_counter(r, 1, 1), MT_OK);
  assert_int_equal(mt_ring_pause(r), MT_OK);
  assert_int_equal(mt_ring_pause(r), MT_E_STATE);
  assert_int_equal(mt_ring_write_counter(r, 1, 2), MT_E_STATE);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_true(info.paused);
  assert_int_equal(mt_ring_resume(r), MT_OK);
  assert_int_equal(mt_ring_resume(r), MT_E_STATE);
  assert_int_equal(mt_ring_write_counter(r, 1, 3), MT_OK);
  rt_drain(c, false);
  uint64_t values[4];
  size_t n = 0;
  int order[3] = {-1, -1, -1};
  for (size_t i = 0; i < col.count; i++) {
    rt_record *rec = &col.records[i];
    if (rec->type == MT_RING_TYPE_COUNTER && n < 4)
      values[n++] = rec->payload[0];
    if (rec->type == MT_RING_TYPE_LIFECYCLE && rec->id == MT_RING_LIFECYCLE_PAUSE)
      order[0] = (int)i;
    if (rec->type == MT_RING_TYPE_LIFECYCLE && rec->id == MT_RING_LIFECYCLE_RESUME)
      order[1] = (int)i;
  }
  assert_int_equal(n, 2);
  assert_int_equal(values[0], 1);
  assert_int_equal(values[1], 3);
  assert_true(order[0] >= 0 && order[1] > order[0]);
  mt_cursor_close(c);
  mt_ring_close(r);
  rt_collector_free(&col);
}

static void timestamps_never_decrease_and_convert_to_monotonic_time(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t before = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  for (int i = 0; i < 1000; i++)
    mt_ring_write_user_unit(r, 1);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t after = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  rt_drain(c, false);
  uint64_t last = 0;
  size_t units = 0;
  for (size_t i = 0; i < col.count; i++) {
    assert_true(col.records[i].timestamp >= last);
    last = col.records[i].timestamp;
    if (col.records[i].type != MT_RING_TYPE_USER_UNIT)
      continue;
    units++;
    int64_t ns = mt_cursor_timestamp_ns(c, col.records[i].timestamp);
    /* Calibration error over this short run stays far below a millisecond. */
    assert_true(ns > before - 1000000 && ns < after + 1000000);
  }
  assert_int_equal(units, 1000);
  mt_cursor_close(c);
  mt_ring_close(r);
  rt_collector_free(&col);
}

static void full_disk_turns_tracing_off_for_the_thread_and_counts(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  /* The opening thread already has its ring; the next session's claim fails. */
  mt_ring_close(r);
  mt_ring_test_fail_reserve = 1;
  mt_ring_options o;
  mt_ring_options_init(&o, NULL);
  o.dir = tu_temp_dir();
  o.max_rings = 2;
  mt_error err = {0};
  assert_int_equal(mt_ring_open(&r, &o, &err), MT_OK);
  assert_int_equal(mt_ring_write_counter(r, 1, 1), MT_E_NOMEM);
  assert_int_equal(mt_ring_write_counter(r, 1, 2), MT_E_NOMEM);
  mt_ring_test_fail_reserve = 0;
  assert_int_equal(mt_ring_write_counter(r, 1, 3), MT_E_NOMEM); /* off for good */
  mt_cursor *c = rt_cursor(-1);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(info.claims_failed_space, 1);
  assert_int_equal(info.records_no_ring, 4); /* START and the three counters */
  assert_int_equal(info.rings_in_use, 0);
  mt_cursor_close(c);
  mt_ring_close(r);
}

static uint64_t reserved_words_of_ring(uint32_t ring) {
  struct mt_ring *s = &mt_ring_session;
  return mt_load_relaxed(&mt_ring_block_at(s->base, &s->geo, ring)->reserved_words);
}

static uint64_t bytes_on_disk(void) {
  struct stat st;
  assert_int_equal(stat(own_path(), &st), 0);
  return (uint64_t)st.st_blocks * 512;
}

/* A ring takes disk space as its thread writes: 64 KiB at the claim, doubling ahead of the
 * writes, the whole ring once it wraps; so a file planned for many threads costs on disk what
 * they wrote. A reservation that fails midway (a full disk) turns the thread off, counted, and
 * keeps what it wrote before. */
static void ring_space_is_reserved_as_the_thread_writes(void **state) {
  (void)state;
  const uint64_t ring_bytes = 1u << 20, words = ring_bytes / 8;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, ring_bytes, 64, false);
  uint32_t ring = mt_ring_self.ring_index;
  uint64_t before = bytes_on_disk();
  assert_int_equal(mt_ring_write_counter(r, 1, 1), MT_OK);
  assert_int_equal(reserved_words_of_ring(ring), MT_RING_FIRST_RESERVE_WORDS);
  uint64_t payload[100] = {0};
  uint64_t written = mt_load_relaxed(&mt_ring_self.block->tail);
  while (written < 3 * MT_RING_FIRST_RESERVE_WORDS) {
    assert_int_equal(mt_ring_write(r, 20, 0, payload, 100), MT_OK);
    written = mt_load_relaxed(&mt_ring_self.block->tail);
    uint64_t reserved = reserved_words_of_ring(ring);
    assert_true(reserved >= written);
    assert_true(reserved == MT_RING_FIRST_RESERVE_WORDS || reserved <= 2 * written + 512);
  }
  /* 64 rings of 1 MiB: the file holds about what was reserved, not 64 MiB of rings. */
  assert_true(bytes_on_disk() - before <= 8 * reserved_words_of_ring(ring) + 65536);
  while (written < 2 * words) { /* wraps: the whole ring */
    assert_int_equal(mt_ring_write(r, 20, 0, payload, 100), MT_OK);
    written = mt_load_relaxed(&mt_ring_self.block->tail);
  }
  assert_int_equal(reserved_words_of_ring(ring), words);
  assert_int_equal(mt_ring_self.reserved_end, UINT64_MAX);
  mt_ring_close(r);

  /* Midway: the first 64 KiB went; the next reservation fails. */
  r = rt_open(MT_RING_LOSSLESS, ring_bytes, 64, false);
  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  assert_int_equal(mt_ring_write_counter(r, 1, 1), MT_OK);
  ring = mt_ring_self.ring_index;
  mt_ring_test_fail_reserve = 1;
  uint64_t ok = 1;
  int rc;
  while ((rc = mt_ring_write(r, 20, 0, payload, 100)) == MT_OK)
    ok++;
  assert_int_equal(rc, MT_E_NOMEM);
  if (!((ok - 1) * 102 <= MT_RING_FIRST_RESERVE_WORDS && ok > 10))
    fail_msg("%llu records went into the first reservation", (unsigned long long)ok);
  mt_ring_test_fail_reserve = 0;
  assert_int_equal(mt_ring_write_counter(r, 1, 2), MT_E_NOMEM); /* off for good */
  rt_drain(c, false);
  assert_int_equal(count_type(&col, MT_RING_TYPE_COUNTER, 1) + count_type(&col, 20, 0), ok);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(info.claims_failed_space, 1);
  assert_int_equal(info.records_no_ring, 2);
  assert_int_equal(reserved_words_of_ring(ring), MT_RING_FIRST_RESERVE_WORDS);
  mt_cursor_close(c);
  mt_ring_close(r);
  rt_collector_free(&col);
}

static void *write_mixed_sizes(void *p) {
  uint64_t payload[300] = {0};
  for (uint64_t i = 0; i < 20000; i++)
    mt_ring_write(p, 20, 0, payload, i % 50 == 0 ? 250 : (size_t)(i % 7));
  return NULL;
}

/* Overwritten records are counted exactly: whatever a late cursor still finds plus what the
 * producer dropped is everything written, through padding, reclaim marks, and a ring reused by
 * a second thread (whose first reclaims walk the first thread's records). */
static void producer_counts_exactly_what_it_overwrites(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, MT_RING_MIN_SIZE * 2, 2, false);
  for (int round = 0; round < 2; round++) {
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, write_mixed_sizes, r), 0);
    pthread_join(t, NULL);
  }
  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {0};
  rt_collector_attach(c, &col);
  rt_drain(c, false);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(col.lost, 0);
  assert_true(info.records_overwritten > 30000);
  assert_int_equal(col.seen + info.records_overwritten, info.records_written);
  mt_cursor_close(c);
  mt_ring_close(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(open_creates_private_file_named_after_pid),
      cmocka_unit_test(second_open_fails_until_close),
      cmocka_unit_test(open_refuses_ring_smaller_than_largest_record_naming_minimum),
      cmocka_unit_test(settings_come_from_environment),
      cmocka_unit_test(file_of_another_pid_namespace_is_named_for_it_and_its_primary_locks_it),
      cmocka_unit_test(records_round_trip_with_thread_identity),
      cmocka_unit_test(write_rejects_transport_types_and_oversized_payloads),
      cmocka_unit_test(largest_records_wrap_a_minimum_ring_intact),
      cmocka_unit_test(custom_bytes_keep_their_exact_length),
      cmocka_unit_test(registry_names_survive_wrap_around),
      cmocka_unit_test(registry_refuses_entries_once_full),
      cmocka_unit_test(pause_drops_writes_until_resume),
      cmocka_unit_test(timestamps_never_decrease_and_convert_to_monotonic_time),
      cmocka_unit_test(full_disk_turns_tracing_off_for_the_thread_and_counts),
      cmocka_unit_test(ring_space_is_reserved_as_the_thread_writes),
      cmocka_unit_test(producer_counts_exactly_what_it_overwrites),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
