/* coroutine_malloc: coroutines (makecontext/swapcontext) on stacks of argv[1] bytes, each right
 * above a guard page so that overflowing it faults, allocate between switches: malloc, realloc,
 * free, 100 rounds each of argv[2] coroutines (the @expect counts are for 2). Prints "coroutines N
 * rounds M". A tracer that needs more of the coroutine's stack than the program does (libunwind
 * walking there) kills the program with SIGSEGV, or, on a heap stack with no guard, corrupts the
 * heap. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "test_program.h"

#define ROUNDS 100
#define MAX_COROUTINES 8

static ucontext_t scheduler, coroutine[MAX_COROUTINES];
static int rounds_done;

static NOINLINE void work(int id) {
  char *p = malloc(16 + (size_t)id * 8); // @expect allocs=200 frees=200
  KEEP(p);
  p = realloc(p, 300); // @expect allocs=200 frees=200
  KEEP(p);
  free(p);
}

static void body(int id) {
  for (int i = 0; i < ROUNDS; i++) {
    work(id);
    __atomic_add_fetch(&rounds_done, 1, __ATOMIC_RELAXED);
    swapcontext(&coroutine[id], &scheduler);
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: coroutine_malloc STACK_BYTES COROUTINES\n");
    return 2;
  }
  size_t size = (size_t)atol(argv[1]), page = 4096;
  int count = atoi(argv[2]);
  if (size % page || count < 1 || count > MAX_COROUTINES)
    return 2;
  for (int id = 0; id < count; id++) {
    int anonymous = MAP_PRIVATE | MAP_ANONYMOUS;
    char *m = mmap(NULL, size + page, PROT_READ | PROT_WRITE, anonymous, -1, 0); // @expect allocs=2
    if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0)
      return 1;
    getcontext(&coroutine[id]);
    coroutine[id].uc_stack.ss_sp = m + page;
    coroutine[id].uc_stack.ss_size = size;
    coroutine[id].uc_link = &scheduler;
    makecontext(&coroutine[id], (void (*)(void))body, 1, id);
  }
  for (int i = 0; i < ROUNDS; i++)
    for (int id = 0; id < count; id++)
      swapcontext(&scheduler, &coroutine[id]);
  printf("coroutines %d rounds %d\n", count, rounds_done);
  return 0;
}
