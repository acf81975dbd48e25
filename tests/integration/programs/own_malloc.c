/* own_malloc: a program that defines malloc itself, as programs with a built-in allocator do. The
 * loader binds every malloc call to it, before the preloaded tracer; it serves small blocks from
 * its own arena and passes blocks of BIG bytes or more on to the next malloc (dlsym RTLD_NEXT),
 * which is where the tracer stands. Prints "done". Built with -fno-builtin (tracer.cmake). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "test_program.h"

#define BIG 8192
#define HEADER 16 /* each block: its size, then whether the next malloc made it */

static char *arena, *arena_next;
static void *(*next_malloc)(size_t);
static void (*next_free)(void *);

void *malloc(size_t n) {
  if (n >= BIG) {
    if (!next_malloc) {
      next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
      next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    }
    char *p = next_malloc(n + HEADER); // @expect allocs=10 frees=10 words=12520
    if (!p)
      return NULL;
    memcpy(p, &n, sizeof n);
    p[8] = 1;
    return p + HEADER;
  }
  if (!arena)
    arena = arena_next =
        mmap(NULL, 1 << 26, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *p = arena_next;
  arena_next += (n + HEADER + 15) & ~(size_t)15;
  memcpy(p, &n, sizeof n);
  p[8] = 0;
  return p + HEADER;
}

void free(void *q) {
  char *p = q ? (char *)q - HEADER : NULL;
  if (p && p[8])
    next_free(p);
}

void *calloc(size_t count, size_t size) {
  void *p = malloc(count * size);
  if (p)
    memset(p, 0, count * size);
  return p;
}

void *realloc(void *q, size_t n) {
  void *p = malloc(n);
  if (p && q) {
    size_t old;
    memcpy(&old, (char *)q - HEADER, sizeof old);
    memcpy(p, q, old < n ? old : n);
    free(q);
  }
  return p;
}

int main(void) {
  for (int i = 0; i < 100; i++) {
    char *small = malloc(100);
    small[0] = 1;
    free(small);
  }
  for (int i = 0; i < 10; i++) {
    char *big = malloc(10000);
    big[0] = 1;
    free(big);
  }
  puts("done");
  return 0;
}
