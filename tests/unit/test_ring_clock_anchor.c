/* The TSC calibration from an anchor taken before the exec (clock.h): the rate it gives agrees
 * with a millisecond of measurement; anchors that are malformed, later than now or from another
 * clock are refused (the rate then comes from measuring here); other clocks ignore it. Skipped
 * where the TSC is not invariant. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

#include "ring/clock.h"

/* Two measurements of the TSC's rate agree to a few parts in 10^5 on an idle machine; 2% leaves a
 * loaded one room and still tells a refused anchor (a rate 10x off, ns taken for ticks) from a
 * used one. */
#define AGREE_PER_MILLE 20

static bool close_to(uint64_t a, uint64_t b, uint64_t per_mille) {
  uint64_t d = a > b ? a - b : b - a;
  return d <= b / 1000 * per_mille;
}

/* Busy for `ns`, so that the anchor is older than the calibration's millisecond. */
static void spin(uint64_t ns) {
  uint64_t start = mt_clock_ns(CLOCK_MONOTONIC);
  while (mt_clock_ns(CLOCK_MONOTONIC) - start < ns) {
  }
}

static void anchor_from_before_gives_the_measured_rate(void **state) {
  (void)state;
  if (!mt_clock_tsc_invariant())
    skip();
  char anchor[64];
  mt_clock_anchor_format(anchor, sizeof anchor);
  spin(3000000);
  uint64_t anchored = mt_clock_hz_anchored(MT_RING_CLOCK_TSC, anchor);
  uint64_t measured = mt_clock_hz(MT_RING_CLOCK_TSC);
  if (!close_to(anchored, measured, AGREE_PER_MILLE))
    fail_msg("anchored %" PRIu64 " Hz, measured %" PRIu64 " Hz", anchored, measured);
}

static void bad_anchors_fall_back_to_measuring(void **state) {
  (void)state;
  if (!mt_clock_tsc_invariant())
    skip();
  uint64_t measured = mt_clock_hz(MT_RING_CLOCK_TSC);
  mt_clock_pair now;
  mt_clock_sample(MT_RING_CLOCK_TSC, &now);
  char later[64], other_rate[64], other_clock[64];
  /* In the future of this clock. */
  snprintf(later, sizeof later, "%" PRIu64 ":%" PRIu64, now.raw + 1000000,
           now.monotonic_ns + 1000000000);
  /* A second ago by CLOCK_MONOTONIC but a tenth of a second's ticks: a rate ten times too low. */
  snprintf(other_rate, sizeof other_rate, "%" PRIu64 ":%" PRIu64, now.raw - measured / 10,
           now.monotonic_ns - 1000000000);
  /* Nanoseconds of CLOCK_MONOTONIC where ticks belong. */
  snprintf(other_clock, sizeof other_clock, "%" PRIu64 ":%" PRIu64, now.monotonic_ns - 5000000,
           now.monotonic_ns - 5000000);
  const char *const bad[] = {NULL,     "",     "12",  "12:",      ":34",
                             "12:34x", "-5:7", later, other_rate, other_clock};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    uint64_t hz = mt_clock_hz_anchored(MT_RING_CLOCK_TSC, bad[i]);
    if (!close_to(hz, measured, AGREE_PER_MILLE))
      fail_msg("anchor \"%s\": %" PRIu64 " Hz, measured %" PRIu64 " Hz", bad[i] ? bad[i] : "(null)",
               hz, measured);
  }
}

static void anchor_text_is_two_numbers_below_2_to_the_64(void **state) {
  (void)state;
  mt_clock_pair p;
  assert_true(mt_clock_anchor_parse("18446744073709551615:0", &p));
  assert_true(p.raw == UINT64_MAX && p.monotonic_ns == 0);
  char own[64];
  mt_clock_anchor_format(own, sizeof own);
  assert_true(mt_clock_anchor_parse(own, &p));
  /* strtoull would give 2^64 - 1 for these, and a reading that is not the one written */
  const char *const bad[] = {"18446744073709551616:1",
                             "1:18446744073709551616",
                             "99999999999999999999999:5",
                             "1:2:3",
                             "1: 2",
                             "+1:2"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (mt_clock_anchor_parse(bad[i], &p))
      fail_msg("\"%s\" was accepted", bad[i]);
}

static void other_clocks_tick_in_nanoseconds_whatever_the_anchor(void **state) {
  (void)state;
  char anchor[64];
  mt_clock_anchor_format(anchor, sizeof anchor);
  assert_int_equal(mt_clock_hz_anchored(MT_RING_CLOCK_MONOTONIC, anchor), 1000000000u);
  assert_int_equal(mt_clock_hz_anchored(MT_RING_CLOCK_REALTIME, anchor), 1000000000u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(anchor_from_before_gives_the_measured_rate),
      cmocka_unit_test(bad_anchors_fall_back_to_measuring),
      cmocka_unit_test(anchor_text_is_two_numbers_below_2_to_the_64),
      cmocka_unit_test(other_clocks_tick_in_nanoseconds_whatever_the_anchor),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
