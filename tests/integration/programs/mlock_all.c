/* mlock_all: a program that locks its memory, as real-time and security programs do:
 * mlockall(MCL_CURRENT | MCL_FUTURE), then allocations. Prints whether the call succeeded and
 * whether what it locked stays under 1 GiB (VmLck in /proc/self/status): the tracer's regions
 * (a ring file of 16 to 64 GiB of address space) must be neither locked nor counted against
 * RLIMIT_MEMLOCK, so the program behaves as it does untraced. Exit status 0, or 1 when mlockall
 * failed. `mlock_all report` also says on stderr how much it locked, for the test to compare with
 * the untraced run: what memtap's own objects would lock is the program's budget lost. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "test_program.h"

static long locked_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmLck:", 6) == 0)
      kib = atol(line + 6);
  if (f)
    fclose(f);
  return kib;
}

int main(int argc, char **argv) {
  int rc = mlockall(MCL_CURRENT | MCL_FUTURE);
  printf("mlockall: %s\n", rc == 0 ? "ok" : strerror(errno));
  for (int i = 0; i < 1000; i++) {
    char *p = malloc(100); // @expect allocs=1000 frees=1000 words=13000
    KEEP(p);
    free(p);
  }
  long kib = locked_kib();
  if (argc > 1 && strcmp(argv[1], "report") == 0)
    fprintf(stderr, "mlock_all: locked %ld KiB\n", kib);
  printf("locked under 1 GiB: %s\n", kib >= 0 && kib < (1l << 20) ? "yes" : "no");
  munlockall();
  return rc == 0 ? 0 : 1;
}
