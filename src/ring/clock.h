/* Timestamps for ring records: the cheapest monotonic source (the invariant TSC, read behind a
 * fence), or a clock_gettime clock when asked or when the TSC cannot be trusted; and the
 * calibration that pairs it with CLOCK_MONOTONIC and CLOCK_REALTIME (docs/ring.md §5). */
#ifndef MEMTAP_SRC_RING_CLOCK_H
#define MEMTAP_SRC_RING_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "memtap/ring.h"

/* Whether the CPU's TSC runs at a constant rate through frequency changes and idle states
 * (CPUID 0x80000007 EDX bit 8). */
bool mt_clock_tsc_invariant(void);

/* Whether `text`, what /sys/devices/system/clocksource/clocksource0/current_clocksource reads,
 * names the TSC ("tsc", a newline after it or not). */
bool mt_clock_source_is_tsc(const char *text);

/* Whether the kernel keeps time with the TSC: 1 yes, 0 with another clock source (it found the
 * CPUs' TSCs apart or unstable, or was told so: kvm-clock, hyperv_clocksource, tsc=unstable on a
 * VM that may be snapshotted and resumed elsewhere...), -1 unknown (no /sys). Three system calls,
 * no malloc; errno kept. */
int mt_clock_kernel_uses_tsc(void);

/* AUTO resolved: the TSC when it is invariant and the kernel keeps time with it (or cannot be
 * asked), else CLOCK_MONOTONIC: whether every CPU's TSC reads alike, and keeps doing so (a VM
 * resumed on another host), is the kernel's to know; invariance is only each CPU's promise. */
mt_ring_clock mt_clock_resolve(mt_ring_clock wanted);

/* The TSC, read after every earlier instruction has completed (LFENCE first, as the kernel's
 * rdtsc_ordered; Linux makes LFENCE dispatch-serialising on AMD too). A bare RDTSC may execute
 * ahead of the load before it: a thread that frees a block another thread just handed it read the
 * TSC while the hand-off's cache line was still on its way, up to 90 ns before the other thread's
 * stamp of the realloc that came first (about once in 10,000 hand-offs on this project's 2-vCPU
 * VM; never with the fence). Stamps order records across threads, so they must follow the
 * program's order. About 9 ns more per reading among memory work (2.8 -> 11.5 ns there; a
 * clock_gettime 19 ns). */
static inline uint64_t mt_clock_rdtsc(void) {
  uint32_t lo, hi;
  __asm__ __volatile__("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
  return (uint64_t)hi << 32 | lo;
}

static inline uint64_t mt_clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One reading of `clock` (never AUTO). Async-signal-safe; no system call for the TSC and, through
 * the vDSO, none for the others either. */
static inline uint64_t mt_clock_read(mt_ring_clock clock) {
  if (clock == MT_RING_CLOCK_TSC)
    return mt_clock_rdtsc();
  return mt_clock_ns(clock == MT_RING_CLOCK_REALTIME ? CLOCK_REALTIME : CLOCK_MONOTONIC);
}

/* A simultaneous reading of `clock`, CLOCK_MONOTONIC and CLOCK_REALTIME (the raw value is read
 * between the two monotonic reads whose gap was the smallest of a few tries). */
typedef struct mt_clock_pair {
  uint64_t raw;
  uint64_t monotonic_ns;
  uint64_t realtime_ns;
} mt_clock_pair;

void mt_clock_sample(mt_ring_clock clock, mt_clock_pair *out);

/* Ticks per second of `clock`: 1e9 for the clock_gettime clocks; for the TSC, measured against
 * CLOCK_MONOTONIC over about a millisecond, waiting for it. */
uint64_t mt_clock_hz(mt_ring_clock clock);

/* The variable through which `memtap record` hands the traced program a TSC reading it took
 * before the exec, so that the program's calibration spans the exec and its start-up instead of a
 * millisecond of waiting (mt_clock_hz_anchored). */
#define MT_CLOCK_ANCHOR_ENV "MEMTAP_RING_TSC_ANCHOR"

/* The text of an anchor taken now ("<tsc>:<CLOCK_MONOTONIC ns>"). */
void mt_clock_anchor_format(char *out, size_t size);

/* Reads an anchor's text into out->raw and out->monotonic_ns: two decimal numbers below 2^64
 * separated by ':', nothing else. */
bool mt_clock_anchor_parse(const char *text, mt_clock_pair *out);

/* mt_clock_hz, measured from `anchor` (mt_clock_anchor_format's text, from any earlier moment of
 * this boot) to now, waiting only for what is left of a millisecond since the anchor, and checked
 * against 20 us of measurement here (within 2%). An anchor that is absent, malformed, not earlier
 * or inconsistent gives mt_clock_hz. */
uint64_t mt_clock_hz_anchored(mt_ring_clock clock, const char *anchor);

#endif
