/* The Poisson byte sampler (FORMAT.md §3.2, docs/tracer.md "Sampling"): a xoshiro256** generator,
 * geometric gaps between sample points counted in bytes, and the count of sample points inside a
 * block once a thread's countdown runs out. Pure functions on caller-owned state: the shim keeps
 * one generator and one countdown per thread; the unit tests drive them directly. */
#ifndef MEMTAP_SRC_TRACER_SAMPLER_H
#define MEMTAP_SRC_TRACER_SAMPLER_H

#include <stdint.h>

typedef struct mt_rng {
  uint64_t s[4];
} mt_rng;

/* Seeds the generator from one 64-bit value (through splitmix64, so any seed, 0 included, gives a
 * usable state). */
void mt_rng_seed(mt_rng *rng, uint64_t seed);
uint64_t mt_rng_next(mt_rng *rng);
/* Uniform in (0, 1), never 0 or 1. */
double mt_rng_uniform(mt_rng *rng);

typedef struct mt_sampler {
  double rate;        /* lambda: probability that an 8-byte word holds a sample point */
  double log_keep;    /* ln(1 - rate) (0 when rate >= 1) */
  uint64_t direct_at; /* bytes past the first point from which the count is drawn directly */
} mt_sampler;

/* Sets up a sampler for `rate` (0 < rate <= 1). */
void mt_sampler_init(mt_sampler *s, double rate);

/* One gap between sample points: 8 * d bytes, d >= 1 words geometric with mean 1 / rate. */
int64_t mt_sampler_gap(const mt_sampler *s, mt_rng *rng);

/* Binomial(n, p) draw: by counting geometric gaps when n * p is small, else by a normal
 * approximation (mean n p, variance n p (1 - p), rounded and clamped to [0, n]). */
uint64_t mt_sampler_binomial(const mt_sampler *s, mt_rng *rng, uint64_t n);

/* The slow path of the countdown: the caller subtracted a block's size from *countdown and it is
 * now <= 0, i.e. -*countdown bytes of the block lie past its first sample point. Returns the
 * number of sample points inside the block (>= 1) and leaves *countdown > 0, the distance from
 * the block's end to the next point. */
uint64_t mt_sampler_count(const mt_sampler *s, mt_rng *rng, int64_t *countdown);

#endif
