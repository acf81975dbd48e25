/* sampled: a fixed byte pattern for the sampling tests, with sizes a naive sampler gets wrong:
 * an adversarial periodic pattern (63 blocks of 8 bytes at one line, then one of 4096 at
 * another, repeated), blocks just above and below a typical sample gap, and a site of mixed
 * sizes. Every block is freed at once. The bytes per site are fixed: the tests compare the
 * sampled estimates of many seeds with them. */
#include <stdio.h>
#include <stdlib.h>

#include "test_program.h"

#define PERIODS 2000

int main(void) {
  for (int period = 0; period < PERIODS; period++) {
    for (int i = 0; i < 63; i++) {
      void *small = malloc(8); // @expect bytes=1008000
      KEEP(small);
      free(small);
    }
    void *big = malloc(4096); // @expect bytes=8192000
    KEEP(big);
    free(big);
  }
  for (int i = 0; i < 400; i++) {
    void *odd = malloc(4088 + 16 * (size_t)(i % 2)); // @expect bytes=1638400
    KEEP(odd);
    free(odd);
  }
  for (int i = 0; i < 20000; i++) {
    void *mixed = malloc(8 * (size_t)(1 + i % 37)); // @expect bytes=3038640
    KEEP(mixed);
    free(mixed);
  }
  printf("sampled done\n");
  return 0;
}
