/* small_stack: allocations made with little stack left. A thread with a 64 KiB stack recurses
 * until no more than argv[1] bytes of its stack remain below the deepest frame, then calls every
 * function the shim records (malloc, calloc, realloc growing, shrinking and moving, posix_memalign,
 * aligned_alloc, free, mmap, munmap) 200 times, and forks a child that allocates and exits (and
 * must exit with 0: the tracer's fork handler runs in the child on that same stack). The
 * tracer runs on the thread's stack: whatever it needs beyond what the calls need untraced must
 * fit in that margin, or the program dies of a stack overflow it would not have untraced.
 * Prints "ok". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_program.h"

static uintptr_t stack_low;
static size_t margin;
static int child_failed; /* the forked child did not exit with 0 */

static NOINLINE void allocate_everything(void) {
  for (int i = 0; i < 200; i++) {
    char *p = malloc(24 + (size_t)i);
    KEEP(p);
    char *q = calloc(3, 40);
    KEEP(q);
    q = realloc(q, 4000 + (size_t)i); /* growing: moves */
    KEEP(q);
    q = realloc(q, 16); /* shrinking: stays */
    KEEP(q);
    void *a = NULL;
    if (posix_memalign(&a, 64, 200) == 0)
      KEEP(a);
    void *b = aligned_alloc(256, 512);
    KEEP(b);
    void *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED)
      munmap(m, 8192);
    free(b);
    free(a);
    free(q);
    free(p);
  }
  pid_t child = fork();
  if (child == 0) {
    char *p = malloc(100);
    KEEP(p);
    free(p);
    _exit(0);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    child_failed = 1;
}

/* Recurses in steps of about 256 bytes until the margin is reached. */
static NOINLINE int descend(int level) {
  volatile char pad[200];
  pad[0] = (char)level;
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  if (here - stack_low <= margin + 512) {
    allocate_everything();
    return pad[0];
  }
  return descend(level + 1) + pad[0];
}

static void *run(void *arg) {
  (void)arg;
  pthread_attr_t attr;
  void *low;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &attr) || pthread_attr_getstack(&attr, &low, &size))
    return NULL;
  pthread_attr_destroy(&attr);
  stack_low = (uintptr_t)low;
  descend(0);
  return (void *)1;
}

int main(int argc, char **argv) {
  margin = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 8192;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t thread;
  void *result = NULL;
  if (pthread_create(&thread, &attr, run, NULL) || pthread_join(thread, &result) || !result)
    return 1;
  if (child_failed) {
    puts("the child failed");
    return 1;
  }
  puts("ok");
  return 0;
}
