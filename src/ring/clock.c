/* Clock choice, sampling and TSC calibration (clock.h). */
#include "ring/clock.h"

#include <cpuid.h>

bool mt_clock_tsc_invariant(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
    return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  return (d >> 8) & 1;
}

mt_ring_clock mt_clock_resolve(mt_ring_clock wanted) {
  if (wanted == MT_RING_CLOCK_AUTO)
    return mt_clock_tsc_invariant() ? MT_RING_CLOCK_TSC : MT_RING_CLOCK_MONOTONIC;
  return wanted;
}

void mt_clock_sample(mt_ring_clock clock, mt_clock_pair *out) {
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 5; i++) {
    uint64_t before = mt_clock_ns(CLOCK_MONOTONIC);
    uint64_t raw = mt_clock_read(clock);
    uint64_t after = mt_clock_ns(CLOCK_MONOTONIC);
    if (after - before < best_gap) {
      best_gap = after - before;
      out->raw = raw;
      out->monotonic_ns = before + (after - before) / 2;
    }
  }
  out->realtime_ns = mt_clock_ns(CLOCK_REALTIME);
}

uint64_t mt_clock_hz(mt_ring_clock clock) {
  if (clock != MT_RING_CLOCK_TSC)
    return 1000000000u;
  mt_clock_pair a, b;
  mt_clock_sample(clock, &a);
  do
    mt_clock_sample(clock, &b);
  while (b.monotonic_ns - a.monotonic_ns < 1000000u);
  return (uint64_t)((unsigned __int128)(b.raw - a.raw) * 1000000000u /
                    (b.monotonic_ns - a.monotonic_ns));
}
