/* nopie_malloc_address: a non-PIE program that takes malloc's and free's addresses in its code,
 * as Debian's python3 does. The linker then gives malloc a canonical PLT entry: an undefined
 * dynamic symbol with a value, which the loader binds every reference to, and which jumps to the
 * tracer's malloc like any PLT entry. Built with -no-pie -fno-pic (tracer.cmake). Prints "done". */
#include <stdio.h>
#include <stdlib.h>

#include "test_program.h"

void *(*volatile malloc_of_program)(size_t);
void (*volatile free_of_program)(void *);

int main(void) {
  malloc_of_program = malloc; /* an absolute address in the code: a canonical PLT entry */
  free_of_program = free;
  for (int i = 0; i < 100; i++) {
    void *p = malloc_of_program(100); // @expect allocs=100 frees=100 words=1300
    KEEP(p);
    free_of_program(p);
  }
  puts("done");
  return 0;
}
