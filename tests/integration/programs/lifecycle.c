/* lifecycle: allocations outside main: in a constructor (before main), in atexit handlers and in
 * a destructor (after main returned), each at its own line with a known count. */
#include <stdio.h>
#include <stdlib.h>

#include "test_program.h"

static void *early[3];

__attribute__((constructor)) static void before_main(void) {
  for (int i = 0; i < 3; i++)
    early[i] = malloc(72); // @expect allocs=3 frees=3 words=27
}

static void at_exit_first(void) {
  for (int i = 0; i < 4; i++) {
    void *p = malloc(88); // @expect allocs=4 frees=4 words=44
    KEEP(p);
    free(p);
  }
}

static void at_exit_second(void) {
  for (int i = 0; i < 3; i++)
    free(early[i]);
}

__attribute__((destructor)) static void after_main(void) {
  for (int i = 0; i < 2; i++) {
    void *p = malloc(104); // @expect allocs=2 frees=2 words=26
    KEEP(p);
    free(p);
  }
}

int main(void) {
  atexit(at_exit_first);
  atexit(at_exit_second);
  void *p = calloc(7, 8); // @expect allocs=1 frees=1 words=7
  KEEP(p);
  free(p);
  printf("lifecycle main done\n");
  return 0;
}
