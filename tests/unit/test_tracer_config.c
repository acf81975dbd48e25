/* The tracer's environment parser (src/tracer/config.c): defaults, each variable, precedence of
 * the rate, and malformed values refused with a message naming the variable. */
#include <string.h>

#include "testutil.h"
#include "tracer/config.h"

typedef struct env {
  const char *pairs[16][2];
} env;

static const char *lookup(void *user, const char *name) {
  env *e = user;
  for (int i = 0; i < 16 && e->pairs[i][0]; i++)
    if (!strcmp(e->pairs[i][0], name))
      return e->pairs[i][1];
  return NULL;
}

static int parse(mt_tracer_config *c, env *e, mt_error *err) {
  memset(err, 0, sizeof *err);
  return mt_tracer_config_parse(c, lookup, e, err);
}

static void empty_environment_gives_the_defaults(void **state) {
  (void)state;
  env e = {{{0}}};
  mt_tracer_config c;
  mt_error err;
  assert_int_equal(parse(&c, &e, &err), MT_OK);
  assert_false(c.record);
  assert_false(c.full);
  assert_false(c.follow_fork);
  assert_false(c.seeded);
  assert_int_equal(c.trace_pid, 0);
  assert_int_equal(c.interval, 512 * 1024);
  assert_true(c.rate == 8.0 / (512 * 1024));
  assert_int_equal(c.rate_source, MT_TRACER_RATE_DEFAULT);
  assert_int_equal(c.time_resolution_us, 0);
  assert_null(c.output);
}

static void every_variable_is_read(void **state) {
  (void)state;
  env e = {{{"MEMTAP_RECORD", "1"},
            {"MEMTAP_FOLLOW_FORK", "1"},
            {"MEMTAP_TRACE_PID", "4242"},
            {"MEMTAP_SEED", "18446744073709551615"},
            {"MEMTAP_SAMPLE_INTERVAL", "64K"},
            {"MEMTAP_TIME_RESOLUTION", "250us"},
            {"MEMTRACE", "trace.ctf"}}};
  mt_tracer_config c;
  mt_error err;
  assert_int_equal(parse(&c, &e, &err), MT_OK);
  assert_true(c.record);
  assert_true(c.follow_fork);
  assert_int_equal(c.trace_pid, 4242);
  assert_true(c.seeded);
  assert_true(c.seed == UINT64_MAX);
  assert_int_equal(c.interval, 65536);
  assert_true(c.rate == 8.0 / 65536);
  assert_int_equal(c.rate_source, MT_TRACER_RATE_SAMPLE_INTERVAL);
  assert_int_equal(c.time_resolution_us, 250);
  assert_string_equal(c.output, "trace.ctf");
}

static void
rate_precedence_is_full_then_interval_then_memtap_rate_then_memtrace_rate(void **state) {
  (void)state;
  mt_tracer_config c;
  mt_error err;
  env all = {{{"MEMTAP_FULL", "1"},
              {"MEMTAP_SAMPLE_INTERVAL", "1M"},
              {"MEMTAP_RATE", "0.5"},
              {"MEMTRACE_RATE", "0.25"}}};
  assert_int_equal(parse(&c, &all, &err), MT_OK);
  assert_true(c.full);
  assert_true(c.rate == 1.0);
  assert_int_equal(c.interval, 8);
  assert_int_equal(c.rate_source, MT_TRACER_RATE_FULL);
  all.pairs[0][1] = "0";
  assert_int_equal(parse(&c, &all, &err), MT_OK);
  assert_false(c.full);
  assert_int_equal(c.interval, 1 << 20);
  all.pairs[1][1] = "";
  assert_int_equal(parse(&c, &all, &err), MT_OK);
  assert_true(c.rate == 0.5);
  assert_int_equal(c.interval, 16);
  assert_int_equal(c.rate_source, MT_TRACER_RATE_MEMTAP_RATE);
  all.pairs[2][1] = NULL;
  assert_int_equal(parse(&c, &all, &err), MT_OK);
  assert_true(c.rate == 0.25);
  assert_int_equal(c.interval, 32);
  assert_int_equal(c.rate_source, MT_TRACER_RATE_MEMTRACE_RATE);
  /* Only the deciding variable is parsed: a bad one behind it is not read. */
  env shadowed = {{{"MEMTAP_SAMPLE_INTERVAL", "4096"}, {"MEMTRACE_RATE", "potato"}}};
  assert_int_equal(parse(&c, &shadowed, &err), MT_OK);
  assert_int_equal(c.interval, 4096);
}

/* Rate 1 is full tracing whichever variable asks for it: the byte sampler at rate 1 would miss
 * small blocks under a trace that says every allocation was recorded. */
static void rate_one_is_full_tracing(void **state) {
  (void)state;
  mt_tracer_config c;
  mt_error err;
  env ones[] = {
      {{{"MEMTAP_RATE", "1"}}}, {{{"MEMTRACE_RATE", "1.0"}}}, {{{"MEMTAP_SAMPLE_INTERVAL", "8"}}}};
  mt_tracer_rate_source sources[] = {MT_TRACER_RATE_MEMTAP_RATE, MT_TRACER_RATE_MEMTRACE_RATE,
                                     MT_TRACER_RATE_SAMPLE_INTERVAL};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(parse(&c, &ones[i], &err), MT_OK);
    assert_true(c.full);
    assert_true(c.rate == 1.0);
    assert_int_equal(c.interval, 8);
    assert_int_equal(c.rate_source, sources[i]);
  }
  env almost = {{{"MEMTAP_SAMPLE_INTERVAL", "16"}}};
  assert_int_equal(parse(&c, &almost, &err), MT_OK);
  assert_false(c.full);
}

static void rates_parse_as_decimal_numbers(void **state) {
  (void)state;
  double r;
  assert_true(mt_tracer_parse_rate("1", &r) && r == 1.0);
  assert_true(mt_tracer_parse_rate("1.0", &r) && r == 1.0);
  assert_true(mt_tracer_parse_rate("1e-6", &r) && r > 0.99e-6 && r < 1.01e-6);
  assert_true(mt_tracer_parse_rate(".5", &r) && r == 0.5);
  assert_true(mt_tracer_parse_rate("1.5e-1", &r) && r > 0.1499 && r < 0.1501);
  assert_true(mt_tracer_parse_rate("0.0000152587890625", &r) && r > 1.5258e-5 && r < 1.5259e-5);
  const char *bad[] = {"",     "0",   "0.0", "1.01",  "42",     "potato", "-0.5", "+0.5", "1e",
                       "0.5x", "nan", "inf", "0x0.1", "1e-400", ".",      "1..2", " 0.5"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_false(mt_tracer_parse_rate(bad[i], &r));
}

static void malformed_values_are_refused_with_the_variable_named(void **state) {
  (void)state;
  static const char *const cases[][2] = {
      {"MEMTAP_RECORD", "yes"},
      {"MEMTAP_FULL", "2"},
      {"MEMTAP_FOLLOW_FORK", "true"},
      {"MEMTAP_SAMPLE_INTERVAL", "7"},
      {"MEMTAP_SAMPLE_INTERVAL", "12X"},
      {"MEMTAP_SAMPLE_INTERVAL", "99999999999999999999"},
      {"MEMTAP_RATE", "potato"},
      {"MEMTRACE_RATE", "42"},
      {"MEMTAP_TRACE_PID", "0"},
      {"MEMTAP_TRACE_PID", "12K"},
      {"MEMTAP_TRACE_PID", "4294967296"},
      {"MEMTAP_SEED", "-1"},
      {"MEMTAP_SEED", "18446744073709551616"},
      {"MEMTAP_TIME_RESOLUTION", "1000"},   /* a unit is needed */
      {"MEMTAP_TIME_RESOLUTION", "0ms"},    /* below 1 µs */
      {"MEMTAP_TIME_RESOLUTION", "1001ms"}, /* above 1 s */
      {"MEMTAP_TIME_RESOLUTION", "1ns"},
      {"MEMTAP_TIME_RESOLUTION", "1 ms"},
      {"MEMTAP_TIME_RESOLUTION", "99999999999999999999us"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    env e = {{{cases[i][0], cases[i][1]}}};
    mt_tracer_config c;
    mt_error err;
    assert_int_equal(parse(&c, &e, &err), MT_E_INVALID);
    assert_int_equal(err.code, MT_E_INVALID);
    assert_non_null(strstr(err.message, cases[i][0]));
  }
}

static void durations_take_a_unit(void **state) {
  (void)state;
  static const struct {
    const char *text;
    uint64_t us;
  } good[] = {{"1us", 1},      {"10us", 10},    {"1ms", 1000},
              {"15ms", 15000}, {"1s", 1000000}, {"007ms", 7000}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    uint64_t us = 0;
    assert_true(mt_tracer_parse_duration_us(good[i].text, &us));
    assert_int_equal(us, good[i].us);
  }
  static const char *const bad[] = {"",      "ms",   "1",    "1m",   "1MS",
                                    "1.5ms", "-1ms", "1ms ", "1sec", "9223372036854775808us"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t us = 42;
    assert_false(mt_tracer_parse_duration_us(bad[i], &us));
    assert_int_equal(us, 42);
  }
}

static void sizes_take_binary_suffixes(void **state) {
  (void)state;
  uint64_t v;
  assert_true(mt_tracer_parse_size("512K", &v) && v == 512 * 1024);
  assert_true(mt_tracer_parse_size("1MiB", &v) && v == 1 << 20);
  assert_true(mt_tracer_parse_size("2g", &v) && v == 2ull << 30);
  assert_true(mt_tracer_parse_size("1T", &v) && v == 1ull << 40);
  assert_true(mt_tracer_parse_size("1PiB", &v) && v == 1ull << 50);
  assert_false(mt_tracer_parse_size("16384P", &v));
  assert_true(mt_tracer_parse_size("18446744073709551615", &v) && v == UINT64_MAX);
  assert_false(mt_tracer_parse_size("18446744073709551616", &v));
  assert_false(mt_tracer_parse_size("17179869184G", &v));
  assert_false(mt_tracer_parse_size("1KK", &v));
  assert_false(mt_tracer_parse_size("K", &v));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(empty_environment_gives_the_defaults),
      cmocka_unit_test(every_variable_is_read),
      cmocka_unit_test(rate_precedence_is_full_then_interval_then_memtap_rate_then_memtrace_rate),
      cmocka_unit_test(rate_one_is_full_tracing),
      cmocka_unit_test(rates_parse_as_decimal_numbers),
      cmocka_unit_test(malformed_values_are_refused_with_the_variable_named),
      cmocka_unit_test(durations_take_a_unit),
      cmocka_unit_test(sizes_take_binary_suffixes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
