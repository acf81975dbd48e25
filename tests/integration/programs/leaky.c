/* leaky: leaks exactly 7 blocks of 200 bytes at one line (remember), frees everything else;
 * `memtap leaks` must name that file and line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_program.h"

#define LEAKED 7

static char *remember(const char *word) {
  char *copy = malloc(200); // @expect allocs=7 frees=0 words=175
  strncpy(copy, word, 199);
  copy[199] = '\0';
  return copy;
}

int main(void) {
  char *kept[LEAKED];
  for (int i = 0; i < 100; i++) {
    char *scratch = malloc(64); // @expect allocs=100 frees=100 words=800
    snprintf(scratch, 64, "word %d", i);
    if (i % 15 == 0) /* i = 0, 15, ..., 90: 7 times */
      kept[i / 15] = remember(scratch);
    free(scratch);
  }
  /* The pointers are dropped, not freed: a real leak. */
  KEEP(kept[0]);
  printf("leaky: %d blocks leaked\n", LEAKED);
  return 0;
}
