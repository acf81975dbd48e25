/* memtap record's end watcher (cli/record_ends.c): an end is stamped when the process ended, not
 * when the caller, busy meanwhile, next looked; a watch goes with its descriptor; stopping with
 * ends not taken loses nothing else. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "record_ends.h"
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
  record_ends *w = record_ends_start();
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
  record_ends *w = record_ends_start();
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(end_is_stamped_while_the_caller_is_busy),
      cmocka_unit_test(process_already_ended_is_stamped_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
