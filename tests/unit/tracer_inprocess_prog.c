/* A program for the in-process mode tests (test_tracer_inprocess.c): 1000 blocks of 4000 bytes
 * from one function, half of them freed, then what a child process sees of the tracing variables.
 *
 *   tracer_inprocess_prog          prints "done"
 *   tracer_inprocess_prog child    also runs sh, which prints "[$MEMTAP$MEMTRACE]" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile keep[1000];

static __attribute__((noinline)) void *make_block(void) {
  return malloc(4000);
}

int main(int argc, char **argv) {
  for (int i = 0; i < 1000; i++)
    keep[i] = make_block();
  for (int i = 0; i < 1000; i += 2)
    free(keep[i]);
  if (argc > 1 && !strcmp(argv[1], "child")) {
    fflush(stdout);
    if (system("echo \"[$MEMTAP$MEMTRACE]\"") != 0)
      return 1;
  }
  puts("done");
  return 0;
}
