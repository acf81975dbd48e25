/* self_replace: a program whose executable is gone from disk while it runs, as when it is rebuilt
 * or deleted under a long trace. It deletes its own file (no argument) or renames the file
 * argv[1] over it (another build: another build-id), then allocates. memtap must still name its
 * frames, read from the running process's mapping of the file it loaded. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "test_program.h"

NOINLINE static void *make(size_t n) {
  void *p = malloc(n); // @expect allocs=500 frees=500 words=3000
  KEEP(p);
  return p;
}

int main(int argc, char **argv) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return 1;
  self[n] = 0;
  if (argc > 1 ? rename(argv[1], self) != 0 : unlink(self) != 0)
    return 1;
  for (int i = 0; i < 500; i++)
    free(make(48));
  /* A short while alive, as a program rebuilt under a long trace is: memtap reads the mapping
   * while the process is there (a process that has exited has no mappings left to read). */
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  printf("%s\n", argc > 1 ? "replaced" : "deleted");
  return 0;
}
