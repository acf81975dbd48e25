/* Analysis memory scales with what is live and with the distinct backtraces, never with the number
 * of events: `memtap summary` on generated traces of 5 M and 50 M events with the same live set and
 * the same backtraces (memtap-gentrace synthetic) must not grow its peak RSS by 5% or more, whether
 * the trace is read through a pipe (`memtap summary -`) or mapped from its path (the reader
 * releases the pages it has gone past; mapped pages it kept would count in RSS and follow the
 * file's size). Runs only in builds without sanitizers, whose shadow memory would blur the
 * figure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif

/* Runs argv with standard input from `input` through a pipe (when non-NULL); stores the child's
 * peak RSS. */
static void run(const char *const argv[], const char *input, long *max_rss_kb) {
  int fds[2] = {-1, -1};
  if (input)
    assert_int_equal(pipe(fds), 0);
  pid_t feeder = -1;
  if (input) {
    feeder = fork();
    assert_true(feeder >= 0);
    if (feeder == 0) {
      close(fds[0]);
      FILE *f = fopen(input, "rb");
      static char buf[1 << 16];
      size_t n;
      while (f && (n = fread(buf, 1, sizeof buf, f)) > 0)
        if (write(fds[1], buf, n) != (ssize_t)n)
          _exit(1);
      _exit(f ? 0 : 1);
    }
  }
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (input) {
      dup2(fds[0], 0);
      close(fds[0]);
      close(fds[1]);
    }
    if (!freopen("/dev/null", "w", stdout))
      _exit(126);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  if (input) {
    close(fds[0]);
    close(fds[1]);
  }
  int status;
  struct rusage ru;
  assert_int_equal(wait4(pid, &status, 0, &ru), pid);
  if (input)
    waitpid(feeder, NULL, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("%s %s exited with status %d", argv[0], argv[1], status);
  if (max_rss_kb)
    *max_rss_kb = ru.ru_maxrss;
}

static long summary_rss(const char *trace, bool piped) {
  const char *cli = getenv("MEMTAP_CLI");
  assert_non_null(cli);
  const char *argv[] = {cli, "summary", piped ? "-" : trace, NULL};
  long rss;
  run(argv, piped ? trace : NULL, &rss);
  return rss;
}

static void summary_memory_does_not_grow_with_events(void **state) {
  (void)state;
#ifdef SANITIZED
  skip();
#endif
  char small[4096], large[4096];
  snprintf(small, sizeof small, "%s", tu_temp_path("5M.ctf"));
  snprintf(large, sizeof large, "%s", tu_temp_path("50M.ctf"));
  const char *gen_small[] = {MEMTAP_GENTRACE, "synthetic", small, "5000000", NULL};
  const char *gen_large[] = {MEMTAP_GENTRACE, "synthetic", large, "50000000", NULL};
  run(gen_small, NULL, NULL);
  run(gen_large, NULL, NULL);
  for (int piped = 1; piped >= 0; piped--) {
    long rss_small = summary_rss(small, piped), rss_large = summary_rss(large, piped);
    print_message("peak RSS of summary %s: %ld KB at 5 M events, %ld KB at 50 M events\n",
                  piped ? "through a pipe" : "of a file", rss_small, rss_large);
    assert_true(rss_large * 100 < rss_small * 105);
  }
  unlink(small);
  unlink(large);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(summary_memory_does_not_grow_with_events),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
