/* altstack_malloc: a signal handler that allocates on an alternate signal stack of argv[1] bytes
 * (SIGSTKSZ is 8192 with glibc here, what crash handlers use), placed right above a guard page
 * so that overflowing it faults. SIGUSR1 is raised argv[2] times; each time the handler mallocs,
 * reallocs and frees. Prints "handled N". A tracer that needs more stack than the handler has
 * left kills the program with SIGSEGV. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "test_program.h"

static volatile int handled;

static void handler(int sig) {
  (void)sig;
  for (int i = 0; i < 8; i++) {
    char *p = malloc((size_t)i * 100 + 1); // @expect allocs=80 frees=80
    KEEP(p);
    free(p);
  }
  char *q = realloc(NULL, 5000); // @expect allocs=10 frees=10
  KEEP(q);
  q = realloc(q, 100000); // @expect allocs=10 frees=10
  KEEP(q);
  free(q);
  handled++;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: altstack_malloc STACK_BYTES TIMES\n");
    return 2;
  }
  size_t size = (size_t)atol(argv[1]);
  int times = atoi(argv[2]);
  int anonymous = MAP_PRIVATE | MAP_ANONYMOUS;
  char *m = mmap(NULL, size + 4096, PROT_READ | PROT_WRITE, anonymous, -1, 0); // @expect allocs=1
  if (m == MAP_FAILED || mprotect(m, 4096, PROT_NONE) != 0)
    return 1;
  stack_t ss = {.ss_sp = m + 4096, .ss_size = size, .ss_flags = 0};
  if (sigaltstack(&ss, NULL) != 0) {
    perror("sigaltstack");
    return 1;
  }
  struct sigaction sa = {.sa_handler = handler, .sa_flags = SA_ONSTACK};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  for (int i = 0; i < times; i++)
    raise(SIGUSR1);
  printf("handled %d\n", handled);
  return 0;
}
