/* memtap ring-dump: one line per record and the lost total; errors in the house style; --follow
 * ends when the producer closes its file or its process is gone. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

static const char *path_of(int pid) {
  static char path[4096];
  assert_int_equal(mt_ring_file_path(path, sizeof path, tu_temp_dir(), pid), MT_OK);
  return path;
}

static size_t count_lines(const char *text) {
  size_t n = 0;
  for (; *text; text++)
    n += *text == '\n';
  return n;
}

static void expect_in(const char *text, const char *needle) {
  if (!strstr(text, needle))
    fail_msg("expected \"%s\" in:\n%s", needle, text);
}

static void ring_dump_prints_every_record_and_the_lost_total(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, true);
  mt_ring_register_name(r, 3, "requests");
  mt_ring_write_counter(r, 1, 42);
  mt_ring_write_user_int(r, 3, (uint64_t)-5);
  mt_ring_write_user_custom(r, 3, "a\"b\n", 4);
  uint64_t words[2] = {0xabc, 7};
  mt_ring_write(r, 17, 9, words, 2);
  mt_ring_close(r);
  char *out = NULL, *err = NULL;
  int status = tu_run_cli(&out, NULL, &err, "ring-dump", path_of(getpid()), NULL);
  assert_int_equal(status, 0);
  assert_string_equal(err, "");
  expect_in(out, "registry kind=1 id=3 \"requests\"\n");
  expect_in(out, "counter id=1 value=42\n");
  expect_in(out, "user-int id=3 \"requests\" value=-5\n");
  expect_in(out, "user-custom id=3 \"requests\" bytes=\"a\\\"b\\x0a\"\n");
  expect_in(out, "type=17 id=9 words=2 0xabc 0x7\n");
  expect_in(out, "ring 0 gen 1 seq 0 t=");
  expect_in(out, " start pid=");
  expect_in(out, " stop\n");
  /* THREAD_START, CLOCK, START, the 4 records, STOP, THREAD_EXIT; a registry line; the total. */
  assert_int_equal(count_lines(out), 9 + 1 + 1);
  assert_non_null(strstr(out, "lost records: 0\n"));
  assert_string_equal(strstr(out, "lost records: 0\n"), "lost records: 0\n"); /* the last line */
  free(out);
  free(err);
  unlink(path_of(getpid()));
}

static void ring_dump_reports_errors_as_memtap_file_message(void **state) {
  (void)state;
  char *out = NULL, *err = NULL;
  const char *missing = tu_temp_path("missing.memtap-ring");
  assert_int_equal(tu_run_cli(&out, NULL, &err, "ring-dump", missing, NULL), 1);
  char expected[4200];
  snprintf(expected, sizeof expected, "memtap: %s: cannot open the ring file", missing);
  expect_in(err, expected);
  free(out);
  free(err);

  const char *junk = tu_temp_path("junk.memtap-ring");
  uint8_t bytes[4096];
  memset(bytes, 0x5a, sizeof bytes);
  tu_write_file(junk, bytes, sizeof bytes);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "ring-dump", junk, NULL), 1);
  snprintf(expected, sizeof expected, "memtap: %s: not a memtap ring file", junk);
  expect_in(err, expected);
  free(out);
  free(err);

  assert_int_equal(tu_run_cli(&out, NULL, &err, "ring-dump", NULL), 64);
  free(out);
  free(err);
  assert_int_equal(tu_run_cli(&out, NULL, &err, "ring-dump", "--help", NULL), 0);
  expect_in(out, "usage: memtap ring-dump");
  free(out);
  free(err);
}

/* A child that writes `records` counters and then waits to be killed, with or without closing
 * its file first. */
static pid_t start_producer(int records, bool close_first, rt_pipe *ready) {
  tu_temp_dir();
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    mt_ring_options o;
    mt_ring_options_init(&o, NULL);
    o.dir = tu_temp_dir();
    o.preserve = true;
    mt_ring *r = NULL;
    if (mt_ring_open(&r, &o, NULL) != MT_OK)
      _exit(90);
    for (int i = 0; i < records; i++)
      mt_ring_write_counter(r, 1, (uint64_t)i);
    if (close_first)
      mt_ring_close(r);
    rt_signal(ready);
    for (;;)
      pause();
  }
  rt_wait(ready);
  return pid;
}

struct killer {
  pid_t pid;
};

static void *kill_later(void *p) {
  struct timespec ts = {0, 300000000};
  nanosleep(&ts, NULL);
  kill(((struct killer *)p)->pid, SIGKILL);
  return NULL;
}

static void ring_dump_follow_ends_when_producer_is_killed(void **state) {
  (void)state;
  rt_pipe ready;
  rt_pipe_open(&ready);
  pid_t pid = start_producer(25, false, &ready);
  /* Whenever the kill lands (before or after ring-dump starts), ring-dump must end. */
  struct killer k = {pid};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, kill_later, &k), 0);
  char pid_text[16];
  snprintf(pid_text, sizeof pid_text, "%d", pid);
  char *out = NULL, *err = NULL;
  int status =
      tu_run_cli(&out, NULL, &err, "ring-dump", "--follow", "--dir", tu_temp_dir(), pid_text, NULL);
  pthread_join(t, NULL);
  assert_int_equal(rt_wait_child(pid), 128 + SIGKILL);
  assert_int_equal(status, 0);
  size_t counters = 0;
  for (const char *p = out; (p = strstr(p, "counter id=1 value=")); p++)
    counters++;
  assert_int_equal(counters, 25);
  expect_in(out, "lost records: 0\n");
  free(out);
  free(err);
  unlink(path_of(pid));
}

static void ring_dump_follow_ends_when_producer_closes_its_file(void **state) {
  (void)state;
  rt_pipe ready;
  rt_pipe_open(&ready);
  pid_t pid = start_producer(10, true, &ready);
  char pid_text[16];
  snprintf(pid_text, sizeof pid_text, "%d", pid);
  char *out = NULL, *err = NULL;
  int status = tu_run_cli(&out, NULL, &err, "ring-dump", "-f", "-d", tu_temp_dir(), pid_text, NULL);
  kill(pid, SIGKILL);
  rt_wait_child(pid);
  assert_int_equal(status, 0);
  expect_in(out, " stop\n");
  expect_in(out, "counter id=1 value=9\n");
  free(out);
  free(err);
  unlink(path_of(pid));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ring_dump_prints_every_record_and_the_lost_total),
      cmocka_unit_test(ring_dump_reports_errors_as_memtap_file_message),
      cmocka_unit_test(ring_dump_follow_ends_when_producer_is_killed),
      cmocka_unit_test(ring_dump_follow_ends_when_producer_closes_its_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
