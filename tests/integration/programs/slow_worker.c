/* slow_worker: a program the fault tests kill or starve. It allocates in rounds of 100 blocks
 * (freeing each round), printing "round N" after each, with a short pause between rounds, for
 * argv[1] rounds; then writes "finished" into the file argv[2] (when given) and exits 0. The
 * tests kill it, or kill memtap record under it, between rounds. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "test_program.h"

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 10;
  for (int r = 0; r < rounds; r++) {
    void *blocks[100];
    for (int i = 0; i < 100; i++)
      blocks[i] = malloc(40); // @expect frees=allocs
    for (int i = 0; i < 100; i++)
      free(blocks[i]);
    printf("round %d\n", r);
    fflush(stdout);
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  if (argc > 2) {
    FILE *f = fopen(argv[2], "w");
    if (f == NULL)
      return 1;
    fputs("finished\n", f);
    fclose(f);
  }
  printf("slow_worker done\n");
  return 0;
}
