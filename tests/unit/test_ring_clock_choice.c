/* Which clock a ring file gets by default (clock.h, mt_clock_resolve): the TSC only where the
 * CPU says it is invariant and the kernel keeps time with it, since only the kernel knows whether
 * every CPU's TSC reads alike and goes on doing so; CLOCK_MONOTONIC elsewhere (a VM on kvm-clock
 * booted with tsc=unstable). A clock asked for by name is kept. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "ring/clock.h"

static void clock_source_names_are_read_exactly(void **state) {
  (void)state;
  assert_true(mt_clock_source_is_tsc("tsc\n"));
  assert_true(mt_clock_source_is_tsc("tsc"));
  assert_false(mt_clock_source_is_tsc("kvm-clock\n"));
  assert_false(mt_clock_source_is_tsc("hyperv_clocksource_tsc_page\n"));
  /* The boot-time one, replaced once the kernel has checked the TSCs. */
  assert_false(mt_clock_source_is_tsc("tsc-early\n"));
  assert_false(mt_clock_source_is_tsc("tsc\n\n"));
  assert_false(mt_clock_source_is_tsc("ts"));
  assert_false(mt_clock_source_is_tsc(""));
}

/* The kernel's own file, read here independently: 1 for "tsc", 0 for another, -1 without it. */
static int kernel_clock_is_tsc(void) {
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY);
  if (fd < 0)
    return -1;
  char text[64] = {0};
  ssize_t got = read(fd, text, sizeof text - 1);
  close(fd);
  if (got <= 0)
    return -1;
  return strcmp(text, "tsc\n") == 0;
}

static void auto_takes_the_tsc_only_where_the_kernel_does(void **state) {
  (void)state;
  int kernel = kernel_clock_is_tsc();
  assert_int_equal(mt_clock_kernel_uses_tsc(), kernel);
  mt_ring_clock expected =
      mt_clock_tsc_invariant() && kernel != 0 ? MT_RING_CLOCK_TSC : MT_RING_CLOCK_MONOTONIC;
  assert_int_equal(mt_clock_resolve(MT_RING_CLOCK_AUTO), expected);
}

static void named_clocks_are_kept(void **state) {
  (void)state;
  assert_int_equal(mt_clock_resolve(MT_RING_CLOCK_TSC), MT_RING_CLOCK_TSC);
  assert_int_equal(mt_clock_resolve(MT_RING_CLOCK_MONOTONIC), MT_RING_CLOCK_MONOTONIC);
  assert_int_equal(mt_clock_resolve(MT_RING_CLOCK_REALTIME), MT_RING_CLOCK_REALTIME);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(clock_source_names_are_read_exactly),
      cmocka_unit_test(auto_takes_the_tsc_only_where_the_kernel_does),
      cmocka_unit_test(named_clocks_are_kept),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
