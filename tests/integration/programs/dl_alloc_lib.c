/* dl_alloc_lib: the library dlopen_main loads and unloads; it allocates in its constructor, in a
 * function the program calls, and frees in its destructor. Opened with RTLD_DEEPBIND (mode
 * deep), its constructor runs before the tracer can point its malloc back at the interposer: those
 * two blocks are untraced, and their frees unknown. */
#include <stdlib.h>

#include "test_program.h"

static void *held;

__attribute__((constructor)) static void lib_init(void) {
  held = malloc(152); // @expect[all] allocs=2 frees=2 words=38 @expect[deep] allocs=0 frees=0
}

__attribute__((destructor)) static void lib_fini(void) {
  free(held);
}

void *dl_alloc(size_t n);
void *dl_alloc(size_t n) {
  void *p = malloc(n); // @expect allocs=20 frees=20 words=400
  KEEP(p);
  return p;
}
