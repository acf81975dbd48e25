/* memtap ring-dump: one line per record and the lost total; errors in the house style; --follow
 * ends when the producer closes its file or its process is gone. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
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

/* Runs `memtap ARGS...` with its output in a file; SIGALRM ends it after `seconds` (exit status
 * 128 + SIGALRM), so that a command that never ends fails the test instead of hanging it. */
static int run_cli_bounded(char **out, unsigned seconds, const char *const *args) {
  const char *cli = getenv("MEMTAP_CLI");
  if (!cli || !*cli)
    fail_msg("MEMTAP_CLI is not set (run the tests through ctest)");
  const char *argv[16] = {cli};
  int argc = 1;
  for (; *args; args++)
    argv[argc++] = *args;
  argv[argc] = NULL;
  const char *path = tu_temp_path("bounded.out");
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fd, 1);
    alarm(seconds); /* kept across exec */
    execv(cli, (char *const *)argv);
    _exit(127);
  }
  close(fd);
  int status = rt_wait_child(pid);
  size_t size;
  *out = (char *)tu_read_file(path, &size);
  *out = realloc(*out, size + 1);
  (*out)[size] = 0;
  return status;
}

static size_t count_of(const char *text, const char *needle) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p++)
    n++;
  return n;
}

struct flood {
  mt_ring *ring;
  _Atomic uint64_t *written;
};

static void *flood(void *p) {
  struct flood *f = p;
  for (uint64_t i = 0;; i++) {
    mt_ring_write_counter(f->ring, 2, i);
    if (i % 1024 == 0)
      atomic_store(f->written, i);
  }
  return NULL;
}

/* A producer that never stops writing: ring-dump without --follow prints what was there when it
 * started (the 1000 quiet records of the main thread's ring, and at most a ring's worth of the
 * flooding thread's) and ends, with status 0. */
static void ring_dump_without_follow_ends_while_the_producer_keeps_writing(void **state) {
  (void)state;
  tu_temp_dir();
  _Atomic uint64_t *written =
      mmap(NULL, sizeof *written, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(written != MAP_FAILED);
  atomic_store(written, 0);
  rt_pipe ready;
  rt_pipe_open(&ready);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    mt_ring_options o;
    mt_ring_options_init(&o, NULL);
    o.dir = tu_temp_dir();
    o.preserve = true;
    o.ring_size = 1u << 20;
    o.max_rings = 4;
    mt_ring *r = NULL;
    if (mt_ring_open(&r, &o, NULL) != MT_OK)
      _exit(90);
    for (uint64_t i = 0; i < 1000; i++)
      mt_ring_write_counter(r, 1, i);
    struct flood f = {r, written};
    pthread_t t;
    if (pthread_create(&t, NULL, flood, &f) != 0)
      _exit(91);
    while (atomic_load(written) < (1u << 20)) /* lapped its ring several times */
      sched_yield();
    rt_signal(&ready);
    for (;;)
      pause();
  }
  rt_wait(&ready);
  char pid_text[16];
  snprintf(pid_text, sizeof pid_text, "%d", pid);
  const char *args[] = {"ring-dump", "--dir", tu_temp_dir(), pid_text, NULL};
  char *out = NULL;
  int status = run_cli_bounded(&out, 30, args);
  uint64_t flooded = atomic_load(written);
  kill(pid, SIGKILL);
  assert_int_equal(rt_wait_child(pid), 128 + SIGKILL);
  assert_int_equal(status, 0);
  for (int i = 0; i < 1000; i++) {
    char line[64];
    snprintf(line, sizeof line, "counter id=1 value=%d\n", i);
    expect_in(out, line);
  }
  /* The flooding thread's records present at the start were printed or, overwritten before
   * ring-dump reached them, counted lost; printed, they all lie in the ring's last lap before the
   * end, so there are at most a ring's worth of them (3-word records). */
  size_t flood_lines = count_of(out, "counter id=2 value=");
  const char *total = strstr(out, "lost records: ");
  unsigned long long lost = 0;
  assert_non_null(total);
  assert_int_equal(sscanf(total, "lost records: %llu", &lost), 1);
  assert_true(flood_lines > 0 || lost > 0);
  assert_true(flood_lines <= (1u << 20) / 24);
  assert_true(flooded > (1u << 20));
  free(out);
  munmap((void *)written, sizeof *written);
  unlink(path_of(pid));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ring_dump_prints_every_record_and_the_lost_total),
      cmocka_unit_test(ring_dump_reports_errors_as_memtap_file_message),
      cmocka_unit_test(ring_dump_follow_ends_when_producer_is_killed),
      cmocka_unit_test(ring_dump_follow_ends_when_producer_closes_its_file),
      cmocka_unit_test(ring_dump_without_follow_ends_while_the_producer_keeps_writing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
