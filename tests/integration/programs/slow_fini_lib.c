/* libslow_fini.so, linked into slow_fini: slow_fini_linked allocates 7 blocks, and the library's
 * destructor frees them, then pauses 300 ms, as the program exits (glibc runs it after the
 * preloaded tracer's own destructors). */
#include <stdlib.h>
#include <time.h>

#include "test_program.h"

static void *blocks[7];

void slow_fini_linked(void) {
  for (int i = 0; i < 7; i++)
    blocks[i] = malloc(1000); // @expect allocs=7 frees=7 words=875
}

__attribute__((destructor)) static void pause_at_exit(void) {
  for (int i = 0; i < 7; i++)
    free(blocks[i]);
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
}
