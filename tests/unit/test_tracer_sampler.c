/* The Poisson byte sampler (src/tracer/sampler.c): nsamples / rate is an unbiased estimate of the
 * words allocated, for small blocks, for blocks around the mean gap and for huge blocks (whose
 * count is drawn directly), the gaps have the geometric mean, and a seed fixes the sequence. */
#include <math.h>

#include "testutil.h"
#include "tracer/sampler.h"

/* Allocates `blocks` blocks of `size` bytes through the countdown; returns the total samples. */
static uint64_t run(const mt_sampler *s, mt_rng *rng, uint64_t size, uint64_t blocks,
                    uint64_t *sampled_blocks) {
  int64_t countdown = mt_sampler_gap(s, rng);
  uint64_t total = 0, sampled = 0;
  for (uint64_t i = 0; i < blocks; i++) {
    countdown -= (int64_t)size;
    if (countdown > 0)
      continue;
    uint64_t n = mt_sampler_count(s, rng, &countdown);
    assert_true(n >= 1);
    assert_true(countdown > 0);
    total += n;
    sampled++;
  }
  if (sampled_blocks)
    *sampled_blocks = sampled;
  return total;
}

/* Checks total samples against the Poisson expectation bytes / 8 * rate within 5 sigma. */
static void check_unbiased(double rate, uint64_t size, uint64_t blocks, uint64_t seed) {
  mt_sampler s;
  mt_sampler_init(&s, rate);
  mt_rng rng;
  mt_rng_seed(&rng, seed);
  uint64_t total = run(&s, &rng, size, blocks, NULL);
  double expected = (double)size * (double)blocks / 8.0 * rate;
  double sigma = sqrt(expected);
  if (fabs((double)total - expected) > 5 * sigma + 1)
    fail_msg("rate %g size %llu: %llu samples, expected %.1f (sigma %.1f)", rate,
             (unsigned long long)size, (unsigned long long)total, expected, sigma);
}

static void small_blocks_are_estimated_without_bias(void **state) {
  (void)state;
  check_unbiased(8.0 / 4096, 24, 4000000, 1);
  check_unbiased(8.0 / 65536, 100, 4000000, 2);
  check_unbiased(0.01, 8, 1000000, 3);
}

static void blocks_near_the_mean_gap_are_estimated_without_bias(void **state) {
  (void)state;
  check_unbiased(8.0 / 4096, 4096, 200000, 4);
  check_unbiased(8.0 / 4096, 5000, 200000, 5);
  check_unbiased(8.0 / 4096, 1000, 500000, 6);
}

static void huge_blocks_draw_their_count_directly_and_stay_unbiased(void **state) {
  (void)state;
  /* 64 MiB blocks at a 4 KiB mean gap: ~16 000 samples each, far past the direct threshold. */
  check_unbiased(8.0 / 4096, 64u << 20, 2000, 7);
  /* Just past the threshold (32 expected samples after the first point). */
  check_unbiased(8.0 / 4096, 40 * 4096, 20000, 8);
}

static void huge_block_count_has_poisson_spread(void **state) {
  (void)state;
  mt_sampler s;
  mt_sampler_init(&s, 8.0 / 4096);
  mt_rng rng;
  mt_rng_seed(&rng, 9);
  const int trials = 4000;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < trials; i++) {
    int64_t countdown = 1; /* the first point is the block's first byte */
    countdown -= 16 << 20;
    double n = (double)mt_sampler_count(&s, &rng, &countdown);
    sum += n;
    sum2 += n * n;
  }
  double mean = sum / trials, var = sum2 / trials - mean * mean;
  double expected = (16 << 20) / 4096.0; /* 4096 */
  assert_true(fabs(mean - expected) < 5 * sqrt(expected / trials) + 1);
  /* Binomial variance n p (1 - p), close to the mean. */
  assert_true(var > 0.8 * expected && var < 1.2 * expected);
}

static void gaps_have_the_geometric_mean(void **state) {
  (void)state;
  mt_sampler s;
  mt_sampler_init(&s, 8.0 / 1024);
  mt_rng rng;
  mt_rng_seed(&rng, 10);
  const int n = 1000000;
  double sum = 0;
  for (int i = 0; i < n; i++) {
    int64_t g = mt_sampler_gap(&s, &rng);
    assert_true(g >= 8 && g % 8 == 0);
    sum += (double)g;
  }
  double mean = sum / n; /* 8 / rate = 1024 bytes; sd of a gap ~1020 */
  assert_true(fabs(mean - 1024.0) < 5 * 1024.0 / sqrt(n));
}

static void rate_one_samples_every_word(void **state) {
  (void)state;
  mt_sampler s;
  mt_sampler_init(&s, 1.0);
  mt_rng rng;
  mt_rng_seed(&rng, 11);
  int64_t countdown = mt_sampler_gap(&s, &rng);
  assert_int_equal(countdown, 8);
  countdown -= 80;
  assert_int_equal(mt_sampler_count(&s, &rng, &countdown), 10);
}

static void binomial_draws_have_the_right_mean(void **state) {
  (void)state;
  mt_sampler s;
  mt_sampler_init(&s, 0.001);
  mt_rng rng;
  mt_rng_seed(&rng, 12);
  double small = 0, large = 0;
  for (int i = 0; i < 20000; i++) {
    small += (double)mt_sampler_binomial(&s, &rng, 10000);   /* mean 10: counted */
    large += (double)mt_sampler_binomial(&s, &rng, 1000000); /* mean 1000: approximated */
  }
  assert_true(fabs(small / 20000 - 10.0) < 5 * sqrt(10.0 / 20000));
  assert_true(fabs(large / 20000 - 1000.0) < 5 * sqrt(1000.0 / 20000));
}

static void same_seed_gives_the_same_samples(void **state) {
  (void)state;
  mt_sampler s;
  mt_sampler_init(&s, 8.0 / 4096);
  mt_rng a, b, c;
  mt_rng_seed(&a, 99);
  mt_rng_seed(&b, 99);
  mt_rng_seed(&c, 100);
  uint64_t ra = run(&s, &a, 333, 100000, NULL), rb = run(&s, &b, 333, 100000, NULL);
  assert_int_equal(ra, rb);
  assert_int_equal(mt_rng_next(&a), mt_rng_next(&b));
  assert_int_not_equal(mt_rng_next(&a), mt_rng_next(&c));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(small_blocks_are_estimated_without_bias),
      cmocka_unit_test(blocks_near_the_mean_gap_are_estimated_without_bias),
      cmocka_unit_test(huge_blocks_draw_their_count_directly_and_stay_unbiased),
      cmocka_unit_test(huge_block_count_has_poisson_spread),
      cmocka_unit_test(gaps_have_the_geometric_mean),
      cmocka_unit_test(rate_one_samples_every_word),
      cmocka_unit_test(binomial_draws_have_the_right_mean),
      cmocka_unit_test(same_seed_gives_the_same_samples),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
