/* jemalloc_probe: run with libjemalloc.so.2 preloaded, allocates 16 MiB in 64 blocks and asks
 * jemalloc (mallctl "stats.allocated", after an "epoch" refresh) whether it holds those bytes:
 * it prints "jemalloc holds the blocks" only when the blocks came from jemalloc, i.e. when a
 * tracer in front of it passed the calls on to the next allocator instead of glibc's. Then it
 * prints errno after aligned allocations that fail: what jemalloc leaves there (its memalign with
 * an alignment that is no power of two sets none), a tracer must leave too. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_program.h"

#define BLOCKS 64
#define BLOCK_SIZE (256 * 1024)

typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);

static size_t jemalloc_allocated(mallctl_fn mallctl) {
  uint64_t epoch = 1;
  size_t size = sizeof epoch;
  mallctl("epoch", &epoch, &size, &epoch, size);
  size_t allocated = 0;
  size = sizeof allocated;
  if (mallctl("stats.allocated", &allocated, &size, NULL, 0) != 0)
    return 0;
  return allocated;
}

int main(void) {
  mallctl_fn mallctl = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  if (mallctl == NULL) {
    printf("no jemalloc in the process\n");
    return 1;
  }
  size_t before = jemalloc_allocated(mallctl);
  void *blocks[BLOCKS];
  for (int i = 0; i < BLOCKS; i++)
    blocks[i] = malloc(BLOCK_SIZE); // @expect allocs=64 frees=64 words=2097152
  size_t during = jemalloc_allocated(mallctl);
  for (int i = 0; i < BLOCKS; i++)
    free(blocks[i]);
  size_t after = jemalloc_allocated(mallctl);
  /* Not `during - before`: the process may free other blocks meanwhile. */
  int held = during >= (size_t)BLOCKS * BLOCK_SIZE;
  int released = during >= after && during - after >= (size_t)BLOCKS * BLOCK_SIZE;
  fprintf(stderr, "jemalloc stats.allocated: %zu before, %zu with the blocks, %zu after\n", before,
          during, after);
  printf("jemalloc %s the blocks\n", held ? "holds" : "does not hold");
  printf("jemalloc %s them\n", released ? "released" : "did not release");
  void *p;
  errno = 0;
  p = memalign(3, 16); // @expect frees=allocs
  printf("memalign(3, 16): %s, errno %d\n", p ? "a block" : "NULL", errno);
  free(p);
  errno = 0;
  p = aligned_alloc(3, 16); // @expect frees=allocs
  printf("aligned_alloc(3, 16): %s, errno %d\n", p ? "a block" : "NULL", errno);
  free(p);
  errno = 0;
  p = memalign(64, SIZE_MAX / 2); // @expect frees=allocs
  printf("memalign(64, SIZE_MAX / 2): %s, errno %d\n", p ? "a block" : "NULL", errno);
  free(p);
  errno = 0;
  p = valloc(SIZE_MAX / 2); // @expect frees=allocs
  printf("valloc(SIZE_MAX / 2): %s, errno %d\n", p ? "a block" : "NULL", errno);
  free(p);
  return held && released ? 0 : 1;
}
