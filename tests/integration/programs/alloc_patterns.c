/* alloc_patterns: every entry point of the malloc family once or in a known loop: fixed and mixed
 * sizes, malloc(0), a realloc chain, realloc(NULL, n), realloc(p, 0), an in-place shrink, failed
 * realloc and reallocarray, each aligned allocator, calloc and calloc overflow, free(NULL). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_program.h"

static void *blocks[256];
/* volatile: the compiler must not see the overflows coming (it warns, and may fold the calls) */
static volatile size_t huge = SIZE_MAX - 4096;
static volatile size_t half = SIZE_MAX / 2;

int main(void) {
  for (int i = 0; i < 100; i++)
    blocks[i] = malloc(24); // @expect allocs=100 frees=100 words=300
  for (int i = 0; i < 100; i++)
    free(blocks[i]);

  for (int i = 1; i <= 100; i++)
    blocks[i] = malloc((size_t)i); // @expect allocs=100 frees=100 words=676
  for (int i = 1; i <= 100; i++)
    free(blocks[i]);

  void *zero = malloc(0); // @expect allocs=1 frees=1 words=0
  KEEP(zero);
  /* None of it is usable under glibc's malloc checker (MALLOC_CHECK_): it must stay on, traced. */
  printf("malloc(0) usable: %zu\n", malloc_usable_size(zero));
  free(zero);

  char *chain = malloc(16); // @expect allocs=1 frees=1 words=2
  strcpy(chain, "x");
  for (int i = 1; i <= 20; i++)
    chain = realloc(chain, 16 * (size_t)(i + 1)); // @expect allocs=20 frees=20 words=460
  free(chain);

  void *fresh = realloc(NULL, 40); // @expect allocs=1 frees=1 words=5
  KEEP(fresh);
  void *gone = realloc(fresh, 0); /* glibc frees the block and returns NULL */
  printf("realloc(p, 0) returned %s\n", gone ? "a block" : "NULL");
  free(gone);

  void *shrink = malloc(800); // @expect allocs=1 frees=1 words=100
  KEEP(shrink);
  shrink = realloc(shrink, 400); // @expect allocs=1 frees=1 words=50
  KEEP(shrink);
  errno = 0;
  void *failed = realloc(shrink, huge); /* fails: nothing recorded, shrink still valid */
  printf("huge realloc: %s, errno %s\n", failed ? "a block" : "NULL",
         errno == ENOMEM ? "ENOMEM" : "other");
  free(failed ? failed : shrink);

  long *array = reallocarray(NULL, 10, sizeof(long)); // @expect allocs=1 frees=1 words=10
  KEEP(array);
  array = reallocarray(array, 20, sizeof(long)); // @expect allocs=1 frees=1 words=20
  KEEP(array);
  errno = 0;
  long *overflow = reallocarray(array, half, 4);
  printf("reallocarray overflow: %s, errno %s\n", overflow ? "a block" : "NULL",
         errno == ENOMEM ? "ENOMEM" : "other");
  free(overflow ? overflow : array);

  void *aligned = NULL;
  int rc = posix_memalign(&aligned, 64, 100); // @expect allocs=1 frees=1 words=13
  printf("posix_memalign: %d, aligned %d\n", rc, (int)((uintptr_t)aligned % 64 == 0));
  free(aligned);
  void *bad_alignment = NULL;
  rc = posix_memalign(&bad_alignment, 24, 100); /* EINVAL: nothing recorded */
  printf("posix_memalign(24): %s\n", rc == EINVAL ? "EINVAL" : "other");
  void *a2 = aligned_alloc(256, 512); // @expect allocs=1 frees=1 words=64
  KEEP(a2);
  free(a2);
  void *a3 = memalign(4096, 10); // @expect allocs=1 frees=1 words=2
  KEEP(a3);
  free(a3);
  void *a4 = valloc(5000); // @expect allocs=1 frees=1 words=625
  KEEP(a4);
  free(a4);
  void *a5 = pvalloc(8192); // @expect allocs=1 frees=1 words=1024
  KEEP(a5);
  free(a5);
  /* pvalloc rounds the size up to whole pages: which size a tracer reports is its choice, so
   * only the count is checked. */
  void *a6 = pvalloc(100); // @expect allocs=1 frees=1
  KEEP(a6);
  /* The blocks the program gets are the allocator's own: traced, glibc's pvalloc once got a size
   * already rounded and gave a page more (the output is compared with the untraced run's). */
  void *a7 = pvalloc(0); // @expect allocs=1 frees=1
  KEEP(a7);
  void *a8 = pvalloc(4097); // @expect allocs=1 frees=1
  KEEP(a8);
  printf("pvalloc usable: %zu %zu %zu\n", malloc_usable_size(a6), malloc_usable_size(a7),
         malloc_usable_size(a8));
  free(a8);
  free(a7);
  free(a6);

  void *zeroed = calloc(3, 40); // @expect allocs=1 frees=1 words=15
  KEEP(zeroed);
  free(zeroed);
  void *empty = calloc(0, 8); // @expect allocs=1 frees=1 words=0
  KEEP(empty);
  free(empty);
  errno = 0;
  void *too_big = calloc(half / 4, 16); /* overflows: NULL, nothing recorded */
  printf("calloc overflow: %s, errno %s\n", too_big ? "a block" : "NULL",
         errno == ENOMEM ? "ENOMEM" : "other");
  errno = 0;
  void *no_memory = malloc(huge); /* fails: nothing recorded */
  printf("huge malloc: %s, errno %s\n", no_memory ? "a block" : "NULL",
         errno == ENOMEM ? "ENOMEM" : "other");
  free(NULL);

  /* Kept to the end: live at exit, the trace shows them without a collect. */
  for (int i = 0; i < 5; i++)
    blocks[i] = malloc(1000); // @expect allocs=5 frees=0 words=625
  printf("alloc_patterns done\n");
  return 0;
}
