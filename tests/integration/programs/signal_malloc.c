/* signal_malloc: a signal handler that mallocs.
 *   raise   the main thread mallocs, raises SIGUSR1 (whose handler mallocs and frees), then frees
 *   async   the main thread mallocs and frees until 300 handlers ran, while another thread signals
 *           it, waiting for each handler to finish before the next signal: handlers land inside
 *           the main thread's malloc and free, in the tracer's code too. The counts vary; they
 *           are printed on stderr ("async: N rounds, H handled"). Main and handler use sizes of
 *           different tcache bins, warmed up first, so glibc itself (not async-signal-safe) never
 *           re-enters the same state; the tracer must cope on its own. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_program.h"

#define RAISES 2000
#define ASYNC_HANDLED 300

static atomic_int handled;
static atomic_int stop;

static void handler(int sig) {
  (void)sig;
  void *p = malloc(1000); // @expect[raise] allocs=2000 frees=2000 @expect[async] frees=allocs
  KEEP(p);
  free(p);
  atomic_fetch_add(&handled, 1);
}

static pthread_t main_thread;

static void *signaller(void *arg) {
  (void)arg;
  for (int i = 0; !atomic_load(&stop); i++) {
    pthread_kill(main_thread, SIGUSR1);
    while (atomic_load(&handled) <= i && !atomic_load(&stop))
      sched_yield();
  }
  return NULL;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigaction(SIGUSR1, &sa, NULL);
  if (strcmp(mode, "raise") == 0) {
    for (int i = 0; i < RAISES; i++) {
      void *p = malloc(24); // @expect[raise] allocs=2000 frees=2000 words=6000
      KEEP(p);
      raise(SIGUSR1);
      free(p);
    }
  } else if (strcmp(mode, "async") == 0) {
    void *warm = malloc(1000); // @expect[async] allocs=1 frees=1 words=125
    KEEP(warm);
    free(warm);
    main_thread = pthread_self();
    pthread_t thread;
    pthread_create(&thread, NULL, signaller, NULL);
    long rounds = 0;
    for (; atomic_load(&handled) < ASYNC_HANDLED; rounds++) {
      void *p = malloc(24); // @expect[async] frees=allocs
      KEEP(p);
      for (volatile int spin = 0; spin < 200; spin++) {
      }
      free(p);
    }
    atomic_store(&stop, 1);
    pthread_join(thread, NULL);
    fprintf(stderr, "async: %ld rounds, %d handled\n", rounds, atomic_load(&handled));
  } else {
    fprintf(stderr, "usage: signal_malloc raise|async\n");
    return 64;
  }
  if (strcmp(mode, "raise") == 0)
    printf("signal_malloc raise: %d handled\n", atomic_load(&handled));
  printf("signal_malloc %s done\n", mode);
  return 0;
}
