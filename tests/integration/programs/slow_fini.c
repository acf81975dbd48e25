/* slow_fini: a program that allocates a little and returns from main; the library it is linked
 * with (slow_fini_lib.c) pauses 300 ms in its destructor, which glibc runs after the preloaded
 * tracer's own destructors. The program's run ends after that pause. */
#include <stdio.h>
#include <stdlib.h>

#include "test_program.h"

void slow_fini_linked(void);

int main(void) {
  slow_fini_linked();
  for (int i = 0; i < 100; i++) {
    void *p = malloc(64); // @expect allocs=100 frees=100
    KEEP(p);
    free(p);
  }
  printf("slow_fini done\n");
  return 0;
}
