/* libFuzzer target for MEMTAP_RING_TSC_ANCHOR (ring/clock.h, docs/ring.md §4), which the shim
 * reads from the traced program's environment: mt_clock_anchor_parse on the input as a string.
 *
 * It must accept exactly two decimal numbers below 2^64 separated by one ':' and nothing else,
 * giving their values (checked against a separate reading), and refuse everything else; an
 * accepted anchor's calibration (mt_clock_hz_anchored) must give a usable frequency whatever the
 * numbers are. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring/clock.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A decimal number at *p below 2^64 (at least one digit), *p moved past it. */
static bool number(const char **p, uint64_t *value) {
  const char *s = *p;
  uint64_t v = 0;
  if (*s < '0' || *s > '9')
    return false;
  for (; *s >= '0' && *s <= '9'; s++) {
    unsigned digit = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - digit) / 10)
      return false;
    v = v * 10 + digit;
  }
  *p = s;
  *value = v;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64)
    return 0; /* longer texts only repeat digits */
  char text[65];
  memcpy(text, data, size);
  text[size] = '\0';
  uint64_t raw = 0, ns = 0;
  const char *p = text;
  bool want = number(&p, &raw) && *p++ == ':' && number(&p, &ns) && *p == '\0';
  mt_clock_pair got = {0};
  bool ok = mt_clock_anchor_parse(text, &got);
  CHECK(ok == want);
  if (!ok)
    return 0;
  CHECK(got.raw == raw && got.monotonic_ns == ns);
  /* Rarely a plausible anchor; mostly one the calibration must refuse, falling back. */
  if (mt_clock_tsc_invariant())
    CHECK(mt_clock_hz_anchored(MT_RING_CLOCK_TSC, text) > 0);
  return 0;
}
