/* Reports what its library's constructor did before main (tracer_prog_early_lib.c). */
#include <stdio.h>

extern int tracer_prog_early_done;

int main(void) {
  printf("early threads %d\n", tracer_prog_early_done);
  return tracer_prog_early_done == 4 ? 0 : 1;
}
