/* A library that tracer_prog dlopens (test_tracer_preload.c): its constructor allocates inside
 * the dlopen, and tracer_prog_lib_work allocates when called. */
#include <stdlib.h>

void *tracer_prog_lib_block;
void *tracer_prog_lib_work(void);

__attribute__((constructor)) static void allocate_at_load(void) {
  tracer_prog_lib_block = malloc(5555);
}

__attribute__((destructor)) static void free_at_unload(void) {
  free(tracer_prog_lib_block);
}

void *tracer_prog_lib_work(void) {
  void *p = malloc(6666);
  __asm__ volatile("" ::: "memory"); /* not a tail call: frame 0 stays in this library */
  return p;
}
