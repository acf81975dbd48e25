/* Clock choice, sampling and TSC calibration (clock.h). */
#include "ring/clock.h"

#include <cpuid.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/number_pair.h"
#include "ring/process.h"

bool mt_clock_tsc_invariant(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
    return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  return (d >> 8) & 1;
}

bool mt_clock_source_is_tsc(const char *text) {
  return !strcmp(text, "tsc\n") || !strcmp(text, "tsc");
}

int mt_clock_kernel_uses_tsc(void) {
  int saved = errno; /* the shim may ask from inside the program's malloc */
  char text[64];
  bool read = mt_read_small_file("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                                 text, sizeof text);
  errno = saved;
  return read ? mt_clock_source_is_tsc(text) : -1;
}

mt_ring_clock mt_clock_resolve(mt_ring_clock wanted) {
  if (wanted != MT_RING_CLOCK_AUTO)
    return wanted;
  /* Invariance is one CPU's promise; that every CPU's TSC reads alike is the kernel's to check,
   * and it keeps the TSC as its clock only if they do. */
  return mt_clock_tsc_invariant() && mt_clock_kernel_uses_tsc() != 0 ? MT_RING_CLOCK_TSC
                                                                     : MT_RING_CLOCK_MONOTONIC;
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

static uint64_t ticks_per_second(const mt_clock_pair *a, const mt_clock_pair *b) {
  return (uint64_t)((unsigned __int128)(b->raw - a->raw) * 1000000000u /
                    (b->monotonic_ns - a->monotonic_ns));
}

/* Ticks per second from `a` to a pair taken at least `span_ns` later (waiting for it). */
static uint64_t measure(mt_ring_clock clock, const mt_clock_pair *a, uint64_t span_ns) {
  mt_clock_pair b;
  do
    mt_clock_sample(clock, &b);
  while (b.monotonic_ns - a->monotonic_ns < span_ns);
  return ticks_per_second(a, &b);
}

uint64_t mt_clock_hz(mt_ring_clock clock) {
  if (clock != MT_RING_CLOCK_TSC)
    return 1000000000u;
  mt_clock_pair a;
  mt_clock_sample(clock, &a);
  return measure(clock, &a, 1000000u);
}

void mt_clock_anchor_format(char *out, size_t size) {
  mt_clock_pair p;
  mt_clock_sample(MT_RING_CLOCK_TSC, &p);
  snprintf(out, size, "%" PRIu64 ":%" PRIu64, p.raw, p.monotonic_ns);
}

bool mt_clock_anchor_parse(const char *text, mt_clock_pair *out) {
  return mt_number_pair_parse(text, &out->raw, &out->monotonic_ns);
}

uint64_t mt_clock_hz_anchored(mt_ring_clock clock, const char *anchor) {
  mt_clock_pair a, now;
  if (clock != MT_RING_CLOCK_TSC || !mt_clock_anchor_parse(anchor, &a))
    return mt_clock_hz(clock);
  mt_clock_sample(clock, &now);
  /* From another boot or machine, or nonsense: not an earlier reading of this clock. */
  if (now.monotonic_ns <= a.monotonic_ns || now.raw <= a.raw ||
      now.monotonic_ns - a.monotonic_ns > 86400ull * 1000000000u)
    return mt_clock_hz(clock);
  uint64_t hz = measure(clock, &a, 1000000u); /* at once unless the anchor is under 1 ms old */
  /* The same rate over 20 us, within 2%: a clock that ran at another rate in between, or an
   * anchor read from another clock, would disagree. */
  uint64_t rough = measure(clock, &now, 20000u);
  if (hz < rough - rough / 50 || hz > rough + rough / 50)
    return mt_clock_hz(clock);
  return hz;
}
