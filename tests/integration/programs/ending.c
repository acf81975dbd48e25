/* ending: 40 allocations, 20 of them freed, then an end that runs no exit handler or replaces the
 * program's image: `ending HOW TRUE`, HOW one of _exit, _Exit, handler (a SIGTERM handler that
 * calls _exit), the exec functions execve, execv, execvp, execvpe, execl, execle, execlp,
 * fexecve, execveat (each running TRUE, the path of `true`, or `true` found on PATH; or a
 * directory, which they cannot run), not-elf (an exec of TRUE that fails: TRUE is then an
 * executable file the kernel cannot run), missing (an exec of a path that does not exist) or race
 * (exit(0) in the main thread and _exit(7) in another at once), or a signal's default action:
 * segv (a write through a null pointer), abort, term (SIGTERM sent to itself, after checking that
 * SIGTERM and SIGSEGV read as SIG_DFL and that setting SIG_DFL again, also through sysv_signal,
 * says so), pipe (a write to a pipe nobody reads), busy (allocates and frees without end, until a
 * signal from outside ends it), busy-exec (allocates for 100 ms, SIGTERM coming from another
 * thread after 50 ms, then execs TRUE: the signal must end it first). After an exec that failed the
 * program frees the other 20 and exits 5. In process (MEMTAP=), the trace must hold all 40
 * allocations either way. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_program.h"

extern char **environ;

static void *kept[40];

static int go[2];

static void *exit_at_once(void *arg) {
  (void)arg;
  char c;
  if (read(go[0], &c, 1) == 1)
    _exit(7);
  return NULL;
}

static void *free_later(void *arg) {
  (void)arg;
  struct timespec pause = {0, 200000000};
  nanosleep(&pause, NULL);
  for (int i = 20; i < 40; i++)
    free(kept[i]);
  return NULL;
}

/* Sends SIGTERM to the process 50 ms from now (this thread blocks it: the main thread gets it). */
static void *term_later(void *arg) {
  (void)arg;
  struct timespec pause = {0, 50000000};
  nanosleep(&pause, NULL);
  kill(getpid(), SIGTERM);
  return NULL;
}

/* Allocates and frees past glibc's per-thread caches, so that malloc and free take the arena's
 * lock (a signal lands there often), for `ms` milliseconds, or for ever when `ms` < 0. */
static void churn(long ms) {
  static void *slots[1024];
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (unsigned long i = 0;; i++) {
    unsigned k = (unsigned)((i * 2654435761u) % 1024);
    free(slots[k]);
    slots[k] = malloc(16 + (i * 7919) % 4000); // @expect top=no (any count)
    if (ms >= 0 && !(i & 1023)) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >= ms)
        return;
    }
  }
}

static void on_term(int sig) {
  (void)sig;
  _exit(9);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fputs("usage: ending HOW TRUE\n", stderr);
    return 2;
  }
  const char *how = argv[1], *truth = argv[2];
  for (int i = 0; i < 40; i++)
    kept[i] = malloc(200); // @expect allocs=40 words=1000 @line kept
  for (int i = 0; i < 20; i++)
    free(kept[i]);
  char *args[] = {"true", NULL};
  if (!strcmp(how, "_exit"))
    _exit(3);
  else if (!strcmp(how, "_Exit"))
    _Exit(4);
  else if (!strcmp(how, "handler")) {
    signal(SIGTERM, on_term);
    raise(SIGTERM);
  } else if (!strcmp(how, "execve") || !strcmp(how, "not-elf"))
    execve(truth, args, environ);
  else if (!strcmp(how, "execv"))
    execv(truth, args);
  else if (!strcmp(how, "execvp"))
    execvp("true", args);
  else if (!strcmp(how, "execvpe"))
    execvpe("true", args, environ);
  else if (!strcmp(how, "execl"))
    execl(truth, "true", (char *)NULL);
  else if (!strcmp(how, "execle"))
    execle(truth, "true", (char *)NULL, environ);
  else if (!strcmp(how, "execlp"))
    execlp("true", "true", (char *)NULL);
  else if (!strcmp(how, "fexecve"))
    fexecve(open(truth, O_RDONLY | O_CLOEXEC), args, environ);
  else if (!strcmp(how, "execveat"))
    execveat(AT_FDCWD, truth, args, environ, 0);
  else if (!strcmp(how, "quick_exit"))
    quick_exit(6);
  else if (!strcmp(how, "daemon")) {
    if (daemon(1, 1) != 0)
      return 2;
    return 0; /* the daemon: its parent has left already, by glibc's own _exit */
  } else if (!strcmp(how, "pthread-exit")) {
    pthread_t other;
    if (pthread_create(&other, NULL, free_later, NULL) != 0)
      return 2;
    pthread_exit(NULL); /* the process ends when the other thread does, with status 0 */
  } else if (!strcmp(how, "race")) {
    pthread_t other;
    if (pipe(go) != 0 || pthread_create(&other, NULL, exit_at_once, NULL) != 0)
      return 2;
    if (write(go[1], "x", 1) != 1)
      return 2;
    exit(0);
  } else if (!strcmp(how, "segv")) {
    *(volatile int *)(uintptr_t)(argc - 3) =
        1; /* argc is 3: a null pointer the compiler cannot see */
  } else if (!strcmp(how, "abort")) {
    abort();
  } else if (!strcmp(how, "term")) {
    struct sigaction term, segv;
    if (sigaction(SIGTERM, NULL, &term) != 0 || sigaction(SIGSEGV, NULL, &segv) != 0 ||
        term.sa_handler != SIG_DFL || segv.sa_handler != SIG_DFL ||
        signal(SIGTERM, SIG_DFL) != SIG_DFL || signal(SIGTERM, SIG_DFL) != SIG_DFL ||
        sysv_signal(SIGHUP, SIG_DFL) != SIG_DFL)
      return 2;
    kill(getpid(), SIGTERM);
    struct timespec pause = {5, 0};
    nanosleep(&pause, NULL);
  } else if (!strcmp(how, "pipe")) {
    int ends[2];
    if (pipe(ends) != 0)
      return 2;
    close(ends[0]);
    if (write(ends[1], "x", 1) != 1)
      return 8; /* EPIPE: SIGPIPE did not end the program */
  } else if (!strcmp(how, "busy")) {
    churn(-1);
  } else if (!strcmp(how, "busy-exec")) {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_t other;
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    if (pthread_create(&other, NULL, term_later, NULL) != 0)
      return 2;
    pthread_sigmask(SIG_UNBLOCK, &term, NULL);
    churn(100);
    execl(truth, "true", (char *)NULL);
  } else if (!strcmp(how, "missing"))
    execv("/nonexistent/memtap-test/true", args);
  else {
    fprintf(stderr, "ending: unknown HOW %s\n", how);
    return 2;
  }
  for (int i = 20; i < 40; i++)
    free(kept[i]);
  return 5;
}
