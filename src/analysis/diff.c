/* Two analyses compared per key (diff.h): each side's groups (mt_analysis_group), merged by key,
 * and the sampling noise of each change. */
#include "analysis/diff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/frame_keys.h"
#include "analysis/views.h"
#include "common/error.h"

double mt_diff_noise(const mt_analysis *a, const mt_stats *s, mt_metric metric) {
  const mt_summary *sum = mt_analysis_summary(a);
  double rate = sum->info.sample_rate;
  if (metric == MT_METRIC_COUNT) {
    double e = s->allocated.objects_estimated, k = (double)s->allocated.objects;
    return k > 0 && e * e / k > e ? sqrt(e * e / k - e) : 0;
  }
  const mt_amount *m = metric == MT_METRIC_LIVE        ? &s->live
                       : metric == MT_METRIC_PEAK      ? &s->peak
                       : metric == MT_METRIC_TEMPORARY ? &s->temporary
                                                       : &s->allocated;
  double thinned = rate < 1 ? (double)m->samples * (1 - rate) : 0;
  return sum->bytes_per_sample * sqrt(thinned);
}

static int by_key(const void *p, const void *q) {
  return mt_frame_key_compare(&((const mt_group *)p)->key, &((const mt_group *)q)->key);
}

static int by_change(const void *p, const void *q) {
  const mt_diff_row *x = p, *y = q;
  double dx = fabs(x->b - x->a), dy = fabs(y->b - y->a);
  if (dx != dy)
    return dx < dy ? 1 : -1;
  return mt_frame_key_compare(&x->key, &y->key);
}

static void classify(mt_diff_row *r, double noise_a, double noise_b) {
  r->noise = sqrt(noise_a * noise_a + noise_b * noise_b);
  r->within_noise = r->b != r->a && fabs(r->b - r->a) < MT_DIFF_NOISE_Z * r->noise;
}

/* The keys of `a` with their stats: its groups, or with `inclusive` its keys' cum costs. */
static int keyed(const mt_analysis *a, mt_group_by by, mt_metric metric, bool inclusive,
                 mt_group **out, size_t *n, mt_error *err) {
  if (!inclusive)
    return mt_analysis_group(a, by, metric, out, n, err);
  mt_cost *c;
  int rc = mt_costs(a, by, metric, false, NULL, &c, n, err);
  if (rc)
    return rc;
  mt_group *g = calloc(*n + 1, sizeof *g);
  if (!g) {
    free(c);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  for (size_t i = 0; i < *n; i++)
    g[i] = (mt_group){.key = c[i].key, .stats = c[i].cum, .stacks = c[i].cum_stacks};
  free(c);
  *out = g;
  return MT_OK;
}

int mt_diff_compute(const mt_analysis *a, const mt_analysis *b, mt_group_by by, mt_metric metric,
                    bool inclusive, mt_diff *d, mt_error *err) {
  *d = (mt_diff){0};
  if (metric == MT_METRIC_TEMPORARY)
    return mt_fail(err, MT_E_INVALID, -1, "diff compares bytes, count, live or peak");
  mt_group *ga = NULL, *gb = NULL;
  size_t na = 0, nb = 0;
  int rc = keyed(a, by, metric, inclusive, &ga, &na, err);
  if (!rc)
    rc = keyed(b, by, metric, inclusive, &gb, &nb, err);
  mt_diff_row *rows = rc ? NULL : calloc(na + nb + 1, sizeof *rows);
  if (!rc && !rows)
    rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  if (rc) {
    free(ga);
    free(gb);
    return rc;
  }
  qsort(ga, na, sizeof *ga, by_key);
  qsort(gb, nb, sizeof *gb, by_key);
  size_t n = 0, i = 0, j = 0;
  while (i < na || j < nb) {
    int cmp = i == na ? 1 : j == nb ? -1 : mt_frame_key_compare(&ga[i].key, &gb[j].key);
    mt_diff_row *r = &rows[n++];
    double noise_a = 0, noise_b = 0;
    if (cmp <= 0) {
      r->key = ga[i].key;
      r->a = mt_analysis_metric(a, &ga[i].stats, metric);
      noise_a = mt_diff_noise(a, &ga[i].stats, metric);
      i++;
    }
    if (cmp >= 0) {
      r->key = gb[j].key;
      r->b = mt_analysis_metric(b, &gb[j].stats, metric);
      noise_b = mt_diff_noise(b, &gb[j].stats, metric);
      j++;
    }
    classify(r, noise_a, noise_b);
    d->changed += r->b != r->a;
    d->beyond_noise += r->b != r->a && !r->within_noise;
  }
  free(ga);
  free(gb);
  qsort(rows, n, sizeof *rows, by_change);
  mt_stats ta = mt_analysis_totals(a), tb = mt_analysis_totals(b);
  d->total = (mt_diff_row){{"", "", 0},
                           mt_analysis_metric(a, &ta, metric),
                           mt_analysis_metric(b, &tb, metric),
                           0,
                           false};
  classify(&d->total, mt_diff_noise(a, &ta, metric), mt_diff_noise(b, &tb, metric));
  d->rows = rows;
  d->count = n;
  return MT_OK;
}

void mt_diff_free(mt_diff *d) {
  free(d->rows);
  *d = (mt_diff){0};
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

bool mt_diff_same_executable(const mt_analysis *a, const mt_analysis *b) {
  const char *x = mt_analysis_summary(a)->info.executable_name;
  const char *y = mt_analysis_summary(b)->info.executable_name;
  return !strcmp(base_name(x ? x : ""), base_name(y ? y : ""));
}
