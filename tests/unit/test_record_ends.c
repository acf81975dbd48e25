/* memtap record's end watcher (cli/record_ends.c): an end is stamped when the process ended, not
 * when the caller, busy meanwhile, next looked; a watch goes with its descriptor; stopping with
 * ends not taken loses nothing else; a process that started and ended while the caller was busy
 * is found in the ring directory and its end stamped too. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "record_ends.h"
#include "ring/process.h"
#include "testutil.h"

static int64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* A child that exits after `ms`; its pidfd in *pidfd. */
static pid_t child_exiting_after(long ms, int *pidfd) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    sleep_ms(ms);
    _exit(0);
  }
  *pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  assert_true(*pidfd >= 0);
  return pid;
}

typedef struct taken {
  uint64_t keys[8];
  int64_t ends[8];
  int count;
} taken;

static void collect(void *user, uint64_t key, int64_t ended_ns) {
  taken *t = user;
  assert_true(t->count < 8);
  t->keys[t->count] = key;
  t->ends[t->count++] = ended_ns;
}

static void end_is_stamped_while_the_caller_is_busy(void **state) {
  (void)state;
  record_ends *w = record_ends_start(NULL);
  assert_non_null(w);
  int fd_early, fd_late;
  int64_t forked = realtime_ns();
  pid_t early = child_exiting_after(50, &fd_early);
  pid_t late = child_exiting_after(800, &fd_late);
  assert_true(record_ends_watch(w, fd_early, 7));
  assert_true(record_ends_watch(w, fd_late, 8));
  /* The caller is busy for 600 ms (as memtap reading a large program's symbols) and does not
   * look; the early child ends 50 ms in. */
  sleep_ms(600);
  taken t = {0};
  record_ends_take(w, collect, &t);
  assert_int_equal(t.count, 1); /* the late child still runs */
  assert_int_equal(t.keys[0], 7);
  assert_true(t.ends[0] >= forked + 50 * 1000000LL);
  if (t.ends[0] >= forked + 450 * 1000000LL)
    fail_msg("a child that ended 50 ms in was stamped %.3f s in: when the caller looked, not "
             "when it ended",
             (double)(t.ends[0] - forked) / 1e9);
  /* Taken once: nothing again. */
  taken again = {0};
  record_ends_take(w, collect, &again);
  assert_int_equal(again.count, 0);
  /* A watch closed before its process ends says nothing. */
  close(fd_late);
  waitpid(late, NULL, 0);
  sleep_ms(50);
  record_ends_take(w, collect, &again);
  assert_int_equal(again.count, 0);
  waitpid(early, NULL, 0);
  close(fd_early);
  record_ends_stop(w);
}

static void process_already_ended_is_stamped_at_once(void **state) {
  (void)state;
  record_ends *w = record_ends_start(NULL);
  assert_non_null(w);
  int fd;
  pid_t pid = child_exiting_after(0, &fd);
  siginfo_t info;
  assert_int_equal(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT), 0); /* ended, not reaped */
  int64_t watched = realtime_ns();
  assert_true(record_ends_watch(w, fd, 1));
  taken t = {0};
  for (int i = 0; i < 200 && !t.count; i++) {
    sleep_ms(5);
    record_ends_take(w, collect, &t);
  }
  assert_int_equal(t.count, 1);
  assert_true(t.ends[0] >= watched);
  /* A key the watcher keeps for itself is refused; so are a bad descriptor and no watcher. */
  assert_false(record_ends_watch(w, fd, UINT64_MAX));
  assert_false(record_ends_watch(w, -1, 2));
  assert_false(record_ends_watch(NULL, fd, 2));
  record_ends_take(NULL, collect, &t);
  close(fd);
  waitpid(pid, NULL, 0);
  record_ends_stop(w);
  record_ends_stop(NULL);
}

/* A child that exits after `ms`, with a ring file `DIR/[SUB/]PID.memtap-ring` (what a tracer's
 * file holds does not matter to the watcher: its name does); its start time in *start. */
static pid_t child_with_ring_file(const char *dir, const char *sub, long ms, uint64_t *start) {
  int fd;
  pid_t pid = child_exiting_after(ms, &fd);
  assert_true(mt_process_stat(pid, start, NULL));
  close(fd);
  char path[512];
  snprintf(path, sizeof path, "%s/%s%s%d.memtap-ring", dir, sub ? sub : "", sub ? "/" : "",
           (int)pid);
  int file = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true(file >= 0);
  close(file);
  return pid;
}

static void process_started_while_the_caller_is_busy_is_found(void **state) {
  (void)state;
  char dir[] = "/tmp/test_record_ends.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[64], path[600];
  snprintf(sub, sizeof sub, "uid-%u", (unsigned)getuid());
  snprintf(path, sizeof path, "%s/%s", dir, sub);
  assert_int_equal(mkdir(path, 0700), 0);
  record_ends *w = record_ends_start(dir);
  assert_non_null(w);
  record_ends_scanned(w); /* the caller has just listed the directory, then is busy */
  uint64_t start_short, start_long;
  int64_t forked = realtime_ns();
  pid_t lived_short = child_with_ring_file(dir, NULL, 100, &start_short);
  pid_t lived_long = child_with_ring_file(dir, sub, 900, &start_long);
  /* Another pid namespace's file: its pid is not one of ours to watch. */
  snprintf(path, sizeof path, "%s/%d-pidns4026531836.memtap-ring", dir, (int)lived_short);
  close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  sleep_ms(600);
  /* The caller finds the two files now: the one that ended 100 ms in was seen alive, and ended
   * when it did, not when the caller looked. */
  int pidfd = -1;
  uint64_t key = 0;
  int64_t ended = 0;
  assert_false(record_ends_adopt(w, lived_short, start_short + 1, &pidfd, &key, &ended));
  assert_true(record_ends_adopt(w, lived_short, start_short, &pidfd, &key, &ended));
  assert_int_equal(pidfd, -1);
  assert_true(ended >= forked + 100 * 1000000LL);
  if (ended >= forked + 450 * 1000000LL)
    fail_msg("a process found by the watcher, which ended 100 ms in, was stamped %.3f s in",
             (double)(ended - forked) / 1e9);
  assert_false(record_ends_adopt(w, lived_short, start_short, &pidfd, &key, &ended)); /* once */
  /* The one still running (its file in a user subdirectory): its watch is the caller's now. */
  ended = 1;
  assert_true(record_ends_adopt(w, lived_long, start_long, &pidfd, &key, &ended));
  assert_true(pidfd >= 0);
  assert_int_equal(ended, 0);
  waitpid(lived_long, NULL, 0);
  taken t = {0};
  for (int i = 0; i < 200 && !t.count; i++) {
    sleep_ms(5);
    record_ends_take(w, collect, &t);
  }
  assert_int_equal(t.count, 1);
  assert_int_equal(t.keys[0], key);
  assert_true(t.ends[0] >= forked + 900 * 1000000LL);
  close(pidfd);
  waitpid(lived_short, NULL, 0);
  /* A caller that keeps listing the directory itself: the watcher leaves it alone. */
  uint64_t start_busy;
  pid_t lived_busy = child_with_ring_file(dir, NULL, 200, &start_busy);
  for (int i = 0; i < 40; i++) {
    record_ends_scanned(w);
    sleep_ms(10);
  }
  assert_false(record_ends_adopt(w, lived_busy, start_busy, &pidfd, &key, &ended));
  waitpid(lived_busy, NULL, 0);
  record_ends_stop(w);
  char command[700];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  assert_int_equal(system(command), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(end_is_stamped_while_the_caller_is_busy),
      cmocka_unit_test(process_already_ended_is_stamped_at_once),
      cmocka_unit_test(process_started_while_the_caller_is_busy_is_found),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
