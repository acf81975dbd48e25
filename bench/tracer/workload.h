/* Shared helpers of the tracer benchmark's workload programs (bench/tracer/): the scale argument
 * and a deterministic generator, so that every run of a workload makes the same calls. */
#ifndef MEMTAP_BENCH_TRACER_WORKLOAD_H
#define MEMTAP_BENCH_TRACER_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* argv[1]: a positive multiplier of the default amount of work (default 1). */
static inline double workload_scale(int argc, char **argv) {
  if (argc < 2)
    return 1.0;
  char *end;
  double s = strtod(argv[1], &end);
  if (*end || !(s > 0 && s < 1e6)) {
    fprintf(stderr, "%s: SCALE must be a positive number, not '%s'\n", argv[0], argv[1]);
    exit(64);
  }
  return s;
}

/* xorshift64*: fixed seeds give the same call sequence on every run. */
static inline uint64_t workload_next(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

#endif
