/* A program for the control API tests (test_tracer_control.c): it traces itself with
 * mt_tracer_start/mt_tracer_stop, and prints what each call returned ("start 0", "stop -7: why").
 * Block sizes tell the phases apart in the traces (lengths in words):
 *   before the first start   100 x 1000 B (125 words), 50 of them freed inside the window
 *   inside the window        300 x 2000 B (250 words) from main, 150 freed
 *                            100 x 8000 B (1000 words) from a thread that existed before the
 *                            start, 50 freed
 *   after the stop           100 x 3000 B (375 words)
 *   a second session          40 x 5000 B (625 words)
 *
 *   tracer_control_prog window TRACE1 TRACE2   the above, full tracing
 *   tracer_control_prog rate TRACE RATE        one session at RATE (the environment may override):
 *                                              1000 x 4000 B (500 words), 1000 x 4 B (1 word)
 *   tracer_control_prog twice TRACE            start twice, stop twice: the second ones refused
 *   tracer_control_prog start TRACE            one start and its stop (errors printed) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtap/tracer.h"

static void *volatile keep[1000], *volatile small[1000];

static __attribute__((noinline)) void *block(size_t size) {
  return malloc(size);
}

static int say(const char *what, int rc, const mt_error *err) {
  if (rc == MT_OK)
    printf("%s 0\n", what);
  else
    printf("%s %d: %s\n", what, rc, err->message);
  fflush(stdout);
  return rc;
}

static int start(const char *path, double rate, bool full) {
  mt_tracer_options o = {.rate = rate, .full = full};
  mt_error err;
  return say("start", mt_tracer_start(path, &o, &err), &err);
}

static int stop(void) {
  mt_error err;
  return say("stop", mt_tracer_stop(&err), &err);
}

/* The thread that exists before the start: it allocates when told to. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;
static int told;

static void *worker(void *arg) {
  (void)arg;
  void *first = block(64); /* the thread has allocated before: its countdown is idle */
  free(first);
  pthread_mutex_lock(&lock);
  while (!told)
    pthread_cond_wait(&go, &lock);
  pthread_mutex_unlock(&lock);
  void *mine[100];
  for (int i = 0; i < 100; i++)
    mine[i] = block(8000);
  for (int i = 0; i < 100; i += 2)
    free(mine[i]);
  return NULL;
}

static int window(const char *trace1, const char *trace2) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, worker, NULL) != 0)
    return 2;
  void *before[100];
  for (int i = 0; i < 100; i++)
    before[i] = block(1000);
  if (start(trace1, 0, true) != MT_OK)
    return 1;
  pthread_mutex_lock(&lock);
  told = 1;
  pthread_cond_signal(&go);
  pthread_mutex_unlock(&lock);
  for (int i = 0; i < 300; i++)
    keep[i] = block(2000);
  for (int i = 0; i < 300; i += 2)
    free(keep[i]);
  for (int i = 0; i < 100; i += 2)
    free(before[i]);
  pthread_join(thread, NULL);
  if (stop() != MT_OK)
    return 1;
  for (int i = 0; i < 100; i++)
    keep[300 + i] = block(3000);
  if (start(trace2, 0, true) != MT_OK)
    return 1;
  for (int i = 0; i < 40; i++)
    keep[400 + i] = block(5000);
  return stop() != MT_OK;
}

int main(int argc, char **argv) {
  printf("running %d\n", mt_tracer_running());
  if (argc == 4 && !strcmp(argv[1], "window"))
    return window(argv[2], argv[3]);
  if (argc == 4 && !strcmp(argv[1], "rate")) {
    if (start(argv[2], strtod(argv[3], NULL), false) != MT_OK)
      return 1;
    for (int i = 0; i < 1000; i++)
      keep[i] = block(4000);
    for (int i = 0; i < 1000; i++)
      small[i] = block(4);
    printf("running %d\n", mt_tracer_running());
    return stop() != MT_OK;
  }
  if (argc == 3 && !strcmp(argv[1], "twice")) {
    int first = start(argv[2], 0, false), second = start(argv[2], 0, false);
    int third = stop(), fourth = stop();
    return !(first == MT_OK && second != MT_OK && third == MT_OK && fourth != MT_OK);
  }
  if (argc == 3 && !strcmp(argv[1], "start")) {
    if (start(argv[2], 0, false) != MT_OK)
      return 3;
    return stop() != MT_OK;
  }
  fprintf(stderr, "usage: tracer_control_prog window|rate|twice|start TRACE...\n");
  return 2;
}
