/* address_space: a program that needs most of the room an address-space limit (`ulimit -v`)
 * leaves it: it holds argv[1] blocks of 1 MiB at once (each its own mapping in glibc), then frees
 * them, and prints "held N MiB" or, when a malloc fails, "out of memory after N MiB". */
#include <stdio.h>
#include <stdlib.h>

#include "test_program.h"

int main(int argc, char **argv) {
  int count = argc > 1 ? atoi(argv[1]) : 64;
  void **blocks = calloc((size_t)count, sizeof *blocks); // @expect allocs=1 frees=1
  if (blocks == NULL)
    return 1;
  int held = 0;
  while (held < count && (blocks[held] = malloc(1 << 20)) != NULL) // @expect frees=allocs
    held++;
  for (int i = 0; i < held; i++)
    free(blocks[i]);
  free(blocks);
  if (held < count)
    printf("out of memory after %d MiB\n", held);
  else
    printf("held %d MiB\n", held);
  return 0;
}
