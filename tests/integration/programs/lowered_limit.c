/* lowered_limit: a program that lowers its own address-space limit once it runs, as a test harness
 * or a sandboxing launcher does: to argv[2] MiB (with setrlimit, or with prlimit when argv[1] is
 * "prlimit"; "A,B": to A MiB, then to B MiB), then holds argv[3] blocks of 1 MiB (each its own
 * mapping in glibc), and has argv[4] threads at once allocate and free 1000 small blocks each.
 * Prints "held N MiB, T threads" or "out of memory after N MiB". One malloc arena and small thread
 * stacks keep its own use of the room the same from run to run. With argv[5], it first closes its
 * standard error and opens that file in its place (descriptor 2), writing "data" into it, as a
 * program reusing descriptor numbers for files of its own does. */
#define _GNU_SOURCE /* prlimit */
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "test_program.h"

static pthread_barrier_t together;

static NOINLINE void *worker(void *arg) {
  (void)arg;
  pthread_barrier_wait(&together); /* every thread holds its ring at once */
  for (int i = 0; i < 1000; i++) {
    char *p = malloc(40); // @expect[lowered_limit] frees=allocs
    KEEP(p);
    free(p);
  }
  pthread_barrier_wait(&together);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: lowered_limit setrlimit|prlimit LIMIT_MIB[,LIMIT_MIB] HOLD_MIB THREADS "
                    "[DATA_FILE]\n");
    return 2;
  }
  if (argc == 6) {
    close(2);
    if (open(argv[5], O_WRONLY | O_CREAT | O_TRUNC, 0600) != 2 || write(2, "data\n", 5) != 5)
      return 1;
  }
  mallopt(M_ARENA_MAX, 1);
  char *rest;
  long limit_mib = strtol(argv[2], &rest, 10), then_mib = *rest == ',' ? atol(rest + 1) : 0;
  int count = atoi(argv[3]), threads = atoi(argv[4]), held = 0, rc = 0;
  if (limit_mib <= 0 || then_mib < 0 || count < 0 || threads < 0 || threads > 64)
    return 2;
  long steps[2] = {limit_mib, then_mib};
  for (int i = 0; i < 2 && steps[i] > 0 && rc == 0; i++) {
    struct rlimit limit = {(rlim_t)steps[i] << 20, (rlim_t)steps[i] << 20};
    rc = strcmp(argv[1], "prlimit") == 0 ? prlimit(0, RLIMIT_AS, &limit, NULL)
                                         : setrlimit(RLIMIT_AS, &limit);
  }
  if (rc != 0) {
    perror("lowering RLIMIT_AS");
    return 1;
  }
  void **blocks = calloc((size_t)count, sizeof *blocks); // @expect[lowered_limit] allocs=1 frees=1
  if (blocks == NULL)
    return 1;
  while (held < count &&
         (blocks[held] = malloc(1 << 20)) != NULL) // @expect[lowered_limit] frees=allocs
    held++;
  pthread_t t[64];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 << 10);
  pthread_barrier_init(&together, NULL, (unsigned)threads + 1);
  int started = 0;
  while (started < threads && pthread_create(&t[started], &attr, worker, NULL) == 0)
    started++;
  if (started == threads) {
    pthread_barrier_wait(&together);
    pthread_barrier_wait(&together);
  }
  for (int i = 0; i < started && started == threads; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < held; i++)
    free(blocks[i]);
  free(blocks);
  if (held < count)
    printf("out of memory after %d MiB\n", held);
  else if (started < threads)
    printf("held %d MiB, but could start only %d of %d threads\n", held, started, threads);
  else
    printf("held %d MiB, %d threads\n", held, threads);
  return 0;
}
