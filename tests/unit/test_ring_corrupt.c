/* Hostile and damaged files: a cursor rejects them with a clear error and never crashes; a
 * producer replaces only stale ring files at its path and never writes through a link. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

#include "ring/consumer.h"
#include "ring/layout.h"
#include "ring/process.h"

#define FIELD(name) offsetof(mt_ring_file_header, name)

static const char *own_path(void) {
  static char path[4096];
  assert_int_equal(mt_ring_file_path(path, sizeof path, tu_temp_dir(), getpid()), MT_OK);
  return path;
}

/* A valid, stopped, preserved ring file of this process, read into memory. */
static uint8_t *valid_file(size_t *size) {
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, MT_RING_MIN_SIZE, 2, true);
  mt_ring_register_name(r, 1, "an event");
  for (uint64_t i = 0; i < 10; i++)
    mt_ring_write_counter(r, 1, i);
  mt_ring_close(r);
  uint8_t *bytes = tu_read_file(own_path(), size);
  unlink(own_path());
  return bytes;
}

static void put64(uint8_t *file, size_t offset, uint64_t v) {
  memcpy(file + offset, &v, 8);
}
static void put32(uint8_t *file, size_t offset, uint32_t v) {
  memcpy(file + offset, &v, 4);
}
static uint64_t get64(const uint8_t *file, size_t offset) {
  uint64_t v;
  memcpy(&v, file + offset, 8);
  return v;
}

/* Opening `bytes` as a file (and as memory, the fuzzer's way) fails with `code`, saying `why`. */
static void expect_open_fails(const uint8_t *bytes, size_t size, int code, const char *why) {
  const char *path = tu_temp_path("bad.memtap-ring");
  tu_write_file(path, bytes, size);
  mt_cursor *c = NULL;
  mt_error err = {0};
  assert_int_equal(mt_cursor_open_file(&c, path, &err), code);
  assert_null(c);
  if (!strstr(err.message, why))
    fail_msg("expected \"%s\" in \"%s\"", why, err.message);
  void *copy = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  memcpy(copy, bytes, size);
  assert_int_equal(mt_cursor_open_memory(&c, copy, size, &err), code);
  free(copy);
  unlink(path);
}

/* Opening succeeds but the first poll reports `why` as malformed. */
static void expect_poll_fails(const uint8_t *bytes, size_t size, const char *why) {
  const char *path = tu_temp_path("bad.memtap-ring");
  tu_write_file(path, bytes, size);
  mt_cursor *c = NULL;
  mt_error err = {0};
  assert_int_equal(mt_cursor_open_file(&c, path, &err), MT_OK);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  int rc = mt_cursor_poll(c, 0, NULL, &err);
  if (rc != MT_E_MALFORMED)
    fail_msg("expected \"%s\", poll returned %d", why, rc);
  if (!strstr(err.message, why))
    fail_msg("expected \"%s\" in \"%s\"", why, err.message);
  assert_true(err.offset > 0);
  /* The broken ring is skipped from then on; polling again is harmless. */
  assert_int_equal(mt_cursor_poll(c, 0, NULL, &err), MT_OK);
  mt_cursor_close(c);
  rt_collector_free(&col);
  unlink(path);
}

static void cursor_rejects_damaged_headers(void **state) {
  (void)state;
  size_t size;
  uint8_t *good = valid_file(&size);
  uint8_t *bad = malloc(size);

  struct {
    size_t offset;
    int width;
    uint64_t value;
    int code;
    const char *why;
  } cases[] = {
      {FIELD(magic), 64, 0x1234, MT_E_MALFORMED, "not a memtap ring file"},
      {FIELD(magic), 64, 0, MT_E_STATE, "still being created"},
      {FIELD(version), 32, 2, MT_E_UNSUPPORTED, "version 2 is not supported"},
      {FIELD(file_size), 64, 1ull << 40, MT_E_MALFORMED, "truncated"},
      {FIELD(header_size), 32, 8, MT_E_MALFORMED, "header size"},
      {FIELD(ring_count), 32, 0, MT_E_MALFORMED, "0 rings"},
      {FIELD(ring_count), 32, 1000000, MT_E_MALFORMED, "1000000 rings"},
      {FIELD(ring_count), 32, 3, MT_E_MALFORMED, "does not fit"},
      {FIELD(ring_block_size), 32, 512, MT_E_MALFORMED, "ring block size"},
      {FIELD(ring_words), 64, 1000, MT_E_MALFORMED, "not a power of two"},
      {FIELD(ring_words), 64, 1ull << 62, MT_E_MALFORMED, "not a power of two"},
      {FIELD(ring_words), 64, 2048, MT_E_MALFORMED, "does not fit"},
      {FIELD(blocks_offset), 64, 0, MT_E_MALFORMED, "ring blocks"},
      {FIELD(blocks_offset), 64, 4100, MT_E_MALFORMED, "ring blocks"},
      {FIELD(registry_offset), 64, 1ull << 63, MT_E_MALFORMED, "registry"},
      {FIELD(registry_words), 64, UINT64_MAX / 4, MT_E_MALFORMED, "registry"},
      {FIELD(data_offset), 64, 4096, MT_E_MALFORMED, "ring data"},
      {FIELD(data_offset), 64, UINT64_MAX - 63, MT_E_MALFORMED, "ring data"},
      {FIELD(max_record_words), 32, 5000, MT_E_MALFORMED, "largest record"},
      {FIELD(mode), 32, 7, MT_E_MALFORMED, "mode 7"},
      {FIELD(clock), 32, 9, MT_E_MALFORMED, "clock 9"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(bad, good, size);
    if (cases[i].width == 64)
      put64(bad, cases[i].offset, cases[i].value);
    else
      put32(bad, cases[i].offset, (uint32_t)cases[i].value);
    expect_open_fails(bad, size, cases[i].code, cases[i].why);
  }
  free(bad);
  free(good);
}

static void cursor_rejects_truncated_and_tiny_files(void **state) {
  (void)state;
  size_t size;
  uint8_t *good = valid_file(&size);
  expect_open_fails(good, size / 2, MT_E_MALFORMED, "truncated ring file");
  expect_open_fails(good, size - 8, MT_E_MALFORMED, "truncated ring file");
  expect_open_fails(good, 100, MT_E_MALFORMED, "too short");
  const char *path = tu_temp_path("empty.memtap-ring");
  tu_write_file(path, "", 0);
  mt_cursor *c = NULL;
  mt_error err = {0};
  assert_int_equal(mt_cursor_open_file(&c, path, &err), MT_E_STATE);
  assert_non_null(strstr(err.message, "empty"));
  free(good);
}

static void cursor_refuses_symlinks_directories_and_missing_files(void **state) {
  (void)state;
  size_t size;
  uint8_t *good = valid_file(&size);
  const char *real = tu_temp_path("real.memtap-ring");
  const char *link = tu_temp_path("link.memtap-ring");
  tu_write_file(real, good, size);
  assert_int_equal(symlink(real, link), 0);
  mt_cursor *c = NULL;
  mt_error err = {0};
  assert_int_equal(mt_cursor_open_file(&c, link, &err), MT_E_IO);
  assert_non_null(strstr(err.message, "symbolic link"));
  assert_int_equal(mt_cursor_open_file(&c, real, &err), MT_OK); /* the file itself is fine */
  mt_cursor_close(c);
  assert_int_equal(mt_cursor_open_file(&c, tu_temp_dir(), &err), MT_E_MALFORMED);
  assert_non_null(strstr(err.message, "not a regular file"));
  assert_int_equal(mt_cursor_open_file(&c, tu_temp_path("missing"), &err), MT_E_IO);
  assert_int_equal(err.sys_errno, ENOENT);
  assert_int_equal(mt_cursor_open(&c, tu_temp_dir(), 999999999, &err), MT_E_IO);
  /* The one link followed is the kernel's /proc/PID/map_files/START-END, exactly: not a planted
   * link whose path only looks like one (through /proc/self/cwd). */
  char dir[4096], planted[4096 + 64];
  snprintf(dir, sizeof dir, "%s/map_files", tu_temp_dir());
  mkdir(dir, 0700);
  snprintf(planted, sizeof planted, "%s/1000-2000", dir);
  assert_int_equal(symlink(real, planted), 0);
  char cwd[4096];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(tu_temp_dir()), 0);
  assert_int_equal(mt_cursor_open_file(&c, "/proc/self/cwd/map_files/1000-2000", &err), MT_E_IO);
  assert_non_null(strstr(err.message, "symbolic link"));
  assert_int_equal(chdir(cwd), 0);
  unlink(planted);
  rmdir(dir);
  unlink(link);
  unlink(real);
  free(good);
}

static void poll_rejects_damaged_records_without_crashing(void **state) {
  (void)state;
  size_t size;
  uint8_t *good = valid_file(&size);
  uint8_t *bad = malloc(size);
  size_t data = get64(good, FIELD(data_offset));
  uint64_t first = get64(good, data); /* ring 0's first record: THREAD_START */
  assert_int_equal(mt_ring_header_type(first), MT_RING_TYPE_LIFECYCLE);
  assert_int_equal(mt_ring_header_id(first), MT_RING_LIFECYCLE_THREAD_START);

  memcpy(bad, good, size);
  put64(bad, data, first & ((1ull << 54) - 1)); /* length 0 */
  expect_poll_fails(bad, size, "impossible record length");

  memcpy(bad, good, size);
  put64(bad, data, (first & ((1ull << 54) - 1)) | (1023ull << 54)); /* past the tail */
  expect_poll_fails(bad, size, "past the published tail");

  memcpy(bad, good, size);
  put64(bad, data, mt_ring_header_word(2, MT_RING_TYPE_PADDING, 0, 0));
  expect_poll_fails(bad, size, "padding record that does not end the ring");

  memcpy(bad, good, size);
  put64(bad, data + 16, 0); /* THREAD_START of generation 0 */
  expect_poll_fails(bad, size, "impossible generation");

  memcpy(bad, good, size);
  put64(bad, data, mt_ring_header_word(mt_ring_header_length(first), 12, 0, 0));
  expect_poll_fails(bad, size, "unknown type");

  /* The second record's sequence number lower than the first's. */
  memcpy(bad, good, size);
  uint64_t second_at = data + 8 * mt_ring_header_length(first);
  uint64_t second = get64(good, second_at);
  put64(bad, data, (first & ~0xffffffffull) | 5);
  put64(bad, second_at, (second & ~0xffffffffull) | 4);
  expect_poll_fails(bad, size, "goes backwards");

  /* Found by the fuzzer: a tail far beyond the head made one poll lap the ring forever. */
  memcpy(bad, good, size);
  size_t blocks = get64(good, FIELD(blocks_offset));
  put64(bad, blocks + 8, get64(good, blocks) + 10 * get64(good, FIELD(ring_words)));
  expect_poll_fails(bad, size, "more than a ring apart");

  memcpy(bad, good, size);
  size_t registry = get64(good, FIELD(registry_offset));
  put64(bad, registry, mt_registry_header_word(1, 1u << 30));
  expect_poll_fails(bad, size, "registry entry");

  free(bad);
  free(good);
}

static void stale_file_of_dead_process_is_replaced(void **state) {
  (void)state;
  tu_temp_dir();
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    mt_ring *r = rt_child_open(MT_RING_FLIGHT_RECORDER, MT_RING_MIN_SIZE, 2, 1000);
    mt_ring_write_counter(r, 1, 1);
    _exit(0); /* no close: the file stays, as after a crash */
  }
  assert_int_equal(rt_wait_child(pid), 0);
  char dead[4096];
  assert_int_equal(mt_ring_file_path(dead, sizeof dead, tu_temp_dir(), pid), MT_OK);
  assert_int_equal(rename(dead, own_path()), 0); /* as if that pid were now ours */
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  mt_cursor *c = rt_cursor(-1);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(info.pid, getpid());
  mt_cursor_close(c);
  mt_ring_close(r);
}

/* A ring file at our path naming the (live) parent of this test as its creator. */
static void plant_file_of(int pid, uint64_t start_time) {
  unlink(own_path());
  size_t size;
  uint8_t *bytes = valid_file(&size);
  put32(bytes, FIELD(pid), (uint32_t)pid);
  put64(bytes, FIELD(start_time), start_time);
  tu_write_file(own_path(), bytes, size);
  free(bytes);
}

static void file_of_live_process_is_never_replaced(void **state) {
  (void)state;
  uint64_t start = 0;
  assert_true(mt_process_stat(getppid(), &start, NULL));
  plant_file_of(getppid(), start);
  mt_ring_options o;
  mt_ring_options_init(&o, NULL);
  o.dir = tu_temp_dir();
  mt_ring *r = NULL;
  mt_error err = {0};
  assert_int_equal(mt_ring_open(&r, &o, &err), MT_E_STATE);
  assert_non_null(strstr(err.message, "belongs to a live process"));
  /* Same pid, but another start time: that process is gone, its pid reused. */
  plant_file_of(getppid(), start + 12345);
  assert_int_equal(mt_ring_open(&r, &o, &err), MT_OK);
  mt_ring_close(r);
}

static void foreign_file_or_link_at_our_path_is_refused_and_left_alone(void **state) {
  (void)state;
  tu_write_file(own_path(), "precious", 8);
  mt_ring_options o;
  mt_ring_options_init(&o, NULL);
  o.dir = tu_temp_dir();
  mt_ring *r = NULL;
  mt_error err = {0};
  assert_int_equal(mt_ring_open(&r, &o, &err), MT_E_STATE);
  assert_non_null(strstr(err.message, "not a memtap ring file"));
  size_t size;
  uint8_t *kept = tu_read_file(own_path(), &size);
  assert_int_equal(size, 8);
  free(kept);
  unlink(own_path());

  const char *target = tu_temp_path("target");
  tu_write_file(target, "victim", 6);
  assert_int_equal(symlink(target, own_path()), 0);
  assert_int_equal(mt_ring_open(&r, &o, &err), MT_E_STATE);
  assert_non_null(strstr(err.message, "symbolic link"));
  kept = tu_read_file(target, &size);
  assert_int_equal(size, 6);
  assert_memory_equal(kept, "victim", 6);
  free(kept);
  unlink(own_path());
}

/* The image after exec: same pid, same start time, the old image's file still there. */
static int after_exec(void) {
  mt_ring_options o;
  mt_ring_options_init(&o, NULL);
  o.dir = getenv("RING_TEST_DIR");
  o.preserve = true;
  mt_ring *r = NULL;
  if (mt_ring_open(&r, &o, NULL) != MT_OK)
    return 1;
  mt_ring_write_counter(r, 77, 77);
  mt_ring_close(r);
  return 0;
}

static void file_left_before_exec_is_replaced_by_the_new_image(void **state) {
  (void)state;
  setenv("RING_TEST_DIR", tu_temp_dir(), 1);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    mt_ring *r = rt_child_open(MT_RING_FLIGHT_RECORDER, 0, 2, 1000);
    mt_ring_write_counter(r, 1, 1);
    execl("/proc/self/exe", "test_ring_corrupt", "--after-exec", (char *)NULL);
    _exit(97);
  }
  assert_int_equal(rt_wait_child(pid), 0);
  mt_cursor *c = rt_cursor(pid);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  rt_drain(c, true);
  size_t before = 0, after = 0;
  for (size_t i = 0; i < col.count; i++) {
    before += col.records[i].type == MT_RING_TYPE_COUNTER && col.records[i].id == 1;
    after += col.records[i].type == MT_RING_TYPE_COUNTER && col.records[i].id == 77;
  }
  assert_int_equal(before, 0);
  assert_int_equal(after, 1);
  mt_cursor_close(c);
  rt_collector_free(&col);
  char path[4096];
  mt_ring_file_path(path, sizeof path, tu_temp_dir(), pid);
  unlink(path);
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--after-exec"))
    return after_exec();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cursor_rejects_damaged_headers),
      cmocka_unit_test(cursor_rejects_truncated_and_tiny_files),
      cmocka_unit_test(cursor_refuses_symlinks_directories_and_missing_files),
      cmocka_unit_test(poll_rejects_damaged_records_without_crashing),
      cmocka_unit_test(stale_file_of_dead_process_is_replaced),
      cmocka_unit_test(file_of_live_process_is_never_replaced),
      cmocka_unit_test(foreign_file_or_link_at_our_path_is_refused_and_left_alone),
      cmocka_unit_test(file_left_before_exec_is_replaced_by_the_new_image),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
