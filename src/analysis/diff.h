/* Two analyses compared per site, function or file (docs/analysis.md, "memtap diff"): each side
 * estimated with its own rate, and each change weighed against the sampling noise. Private to the
 * library and the CLI; nothing prints. */
#ifndef MEMTAP_SRC_ANALYSIS_DIFF_H
#define MEMTAP_SRC_ANALYSIS_DIFF_H

#include <stdbool.h>
#include <stddef.h>

#include "memtap/analysis.h"

/* A change is within the sampling noise when |b - a| < MT_DIFF_NOISE_Z × noise. */
#define MT_DIFF_NOISE_Z 2.0

typedef struct mt_diff_row {
  mt_frame key;      /* as mt_group keys; the totals row's is ("", "", 0) */
  double a, b;       /* the metric in each trace (estimated bytes or objects) */
  double noise;      /* one standard deviation of b - a from sampling alone (mt_diff_noise) */
  bool within_noise; /* b != a, but by less than MT_DIFF_NOISE_Z × noise */
} mt_diff_row;

typedef struct mt_diff {
  mt_diff_row *rows; /* keys in either trace, largest |b - a| first, then by key */
  size_t count;
  mt_diff_row total;   /* the whole of each trace */
  size_t changed;      /* rows with b != a */
  size_t beyond_noise; /* rows with b != a and not within_noise */
} mt_diff;

/* One standard deviation of the estimate of `metric` from `s` due to sampling alone. Sample counts
 * are Poisson, thinned by the rate λ: a count of n samples has variance n(1 - λ), so an estimate of
 * n × bytes_per_sample bytes has standard deviation bytes_per_sample × sqrt(n(1 - λ)), 0 at λ = 1.
 * For estimated objects E from k sampled objects (E = Σ 1/p), the variance is E²/k - E (that of
 * Σ 1/p when the objects are alike), also 0 at λ = 1. */
double mt_diff_noise(const mt_analysis *a, const mt_stats *s, mt_metric metric);

/* Compares `a` and `b` by `metric` (not MT_METRIC_TEMPORARY: MT_E_INVALID) per `by` key: the
 * groups' values (mt_analysis_group), or with `inclusive` the keys' inclusive (cum) costs
 * (mt_costs), whose rows overlap and do not add up to the total. On success `d` holds malloc'd
 * rows: free with mt_diff_free. */
int mt_diff_compute(const mt_analysis *a, const mt_analysis *b, mt_group_by by, mt_metric metric,
                    bool inclusive, mt_diff *d, mt_error *err);
void mt_diff_free(mt_diff *d);

/* Whether the two traces come from the same executable: the same file name (the last component of
 * executable_name; different directories are different builds of one program). */
bool mt_diff_same_executable(const mt_analysis *a, const mt_analysis *b);

#endif
