/* room_under_limit: lowers its own address-space limit to argv[1] MiB, as a test harness or a
 * sandboxing launcher does, then maps blocks of 1 MiB until the kernel refuses one, and prints
 * "N MiB mappable": how much room the limit left the program. A tracer's own mappings (its ring
 * file, its tables) take from that room whatever of them stays mapped after the setrlimit. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: room_under_limit MIB\n");
    return 2;
  }
  rlim_t limit = (rlim_t)atol(argv[1]) << 20;
  struct rlimit r = {limit, limit};
  if (setrlimit(RLIMIT_AS, &r) != 0) {
    perror("setrlimit");
    return 1;
  }
  int n = 0;
  while (mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) !=
         MAP_FAILED)
    n++;
  printf("%d MiB mappable\n", n);
  return 0;
}
