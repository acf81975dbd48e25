/* The Poisson byte sampler (sampler.h). A block's sample points are the points of a Bernoulli
 * process of rate lambda per 8-byte word, laid over the bytes the thread allocates one block
 * after another, so gaps carry across blocks. Counting points one gap at a time costs one draw
 * per sample; a block that holds many (more than MT_SAMPLER_DIRECT_SAMPLES expected) draws the
 * number of points in its remaining words directly, as Binomial(words, lambda), and starts a
 * fresh gap at its end, which the memorylessness of the geometric gap makes exact. */
#include <math.h>

#include "tracer/sampler.h"

/* Expected sample points past the first one above which a block's count is drawn directly. */
#define MT_SAMPLER_DIRECT_SAMPLES 32.0
/* Expected points below which a binomial draw counts gaps instead of approximating. */
#define MT_SAMPLER_EXACT_BINOMIAL 64.0

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void mt_rng_seed(mt_rng *rng, uint64_t seed) {
  for (int i = 0; i < 4; i++)
    rng->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

uint64_t mt_rng_next(mt_rng *rng) {
  uint64_t *s = rng->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double mt_rng_uniform(mt_rng *rng) {
  /* 52 random bits, centred in their interval: (2k + 1) / 2^53, never 0 or 1. */
  return (double)((mt_rng_next(rng) >> 12) * 2 + 1) * 0x1p-53;
}

void mt_sampler_init(mt_sampler *s, double rate) {
  if (!(rate > 0.0))
    rate = 1e-15;
  if (rate > 1.0)
    rate = 1.0;
  s->rate = rate;
  s->log_keep = rate < 1.0 ? log1p(-rate) : 0.0;
  double direct = MT_SAMPLER_DIRECT_SAMPLES * 8.0 / rate;
  s->direct_at = direct > 0x1p62 ? (1ull << 62) : (uint64_t)direct;
}

int64_t mt_sampler_gap(const mt_sampler *s, mt_rng *rng) {
  if (s->rate >= 1.0)
    return 8;
  double words = floor(log(mt_rng_uniform(rng)) / s->log_keep);
  if (words > 0x1p58)
    words = 0x1p58; /* keeps 8 * (1 + words) inside int64 */
  return 8 * (1 + (int64_t)words);
}

uint64_t mt_sampler_binomial(const mt_sampler *s, mt_rng *rng, uint64_t n) {
  double p = s->rate;
  double mean = (double)n * p;
  if (p >= 1.0)
    return n;
  if (mean < MT_SAMPLER_EXACT_BINOMIAL) {
    /* Gaps between successes are geometric: count the successes among n trials. */
    uint64_t k = 0;
    double at = 0.0;
    for (;;) {
      at += 1.0 + floor(log(mt_rng_uniform(rng)) / s->log_keep);
      if (at > (double)n)
        return k;
      k++;
    }
  }
  double u1 = mt_rng_uniform(rng), u2 = mt_rng_uniform(rng);
  double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  double x = floor(mean + z * sqrt(mean * (1.0 - p)) + 0.5);
  if (x < 0.0)
    return 0;
  if (x > (double)n)
    return n;
  return (uint64_t)x;
}

uint64_t mt_sampler_count(const mt_sampler *s, mt_rng *rng, int64_t *countdown) {
  uint64_t samples = 1;
  uint64_t past = (uint64_t) - *countdown; /* bytes of the block after its first sample point */
  if (past >= s->direct_at) {
    uint64_t words = past / 8;
    samples += mt_sampler_binomial(s, rng, words);
    *countdown = mt_sampler_gap(s, rng) - (int64_t)(past - words * 8);
    while (*countdown <= 0) { /* only when the gap is shorter than the leftover bytes */
      samples++;
      *countdown += mt_sampler_gap(s, rng);
    }
    return samples;
  }
  *countdown += mt_sampler_gap(s, rng);
  while (*countdown <= 0) {
    samples++;
    *countdown += mt_sampler_gap(s, rng);
  }
  return samples;
}
