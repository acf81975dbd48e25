/* Grouping stacks by site, function or file, and ranking groups by a metric (analysis.h). */
#include <stdlib.h>
#include <string.h>

#include "analysis/frame_keys.h"
#include "analysis/model.h"
#include "analysis/views.h"
#include "common/error.h"

double mt_analysis_metric(const mt_analysis *a, const mt_stats *s, mt_metric metric) {
  switch (metric) {
  case MT_METRIC_COUNT: return s->allocated.objects_estimated;
  case MT_METRIC_LIVE: return mt_analysis_bytes(a, s->live.samples);
  case MT_METRIC_PEAK: return mt_analysis_bytes(a, s->peak.samples);
  case MT_METRIC_TEMPORARY: return mt_analysis_bytes(a, s->temporary.samples);
  case MT_METRIC_BYTES:
  default: return mt_analysis_bytes(a, s->allocated.samples);
  }
}

typedef struct sort_ctx {
  const mt_analysis *a;
  mt_metric metric;
} sort_ctx;
static sort_ctx ctx; /* qsort has no user pointer; the library is not re-entrant here anyway */

static int compare_groups(const void *p, const void *q) {
  const mt_group *x = p, *y = q;
  double vx = mt_analysis_metric(ctx.a, &x->stats, ctx.metric);
  double vy = mt_analysis_metric(ctx.a, &y->stats, ctx.metric);
  if (vx != vy)
    return vx < vy ? 1 : -1;
  return mt_frame_key_compare(&x->key, &y->key);
}

int mt_metric_check(const mt_analysis *a, mt_metric metric, mt_error *err) {
  if (metric == MT_METRIC_TEMPORARY && !a->summary.temporary_defined)
    return mt_fail(err, MT_E_UNSUPPORTED, -1,
                   "temporary allocations are only known when every allocation is recorded; "
                   "this trace samples at rate %g",
                   a->rate);
  return MT_OK;
}

mt_stats mt_analysis_totals(const mt_analysis *a) {
  const mt_summary *s = &a->summary;
  mt_stats t = {0};
  t.allocated = s->allocated;
  t.live = s->live_end;
  t.peak = s->at_peak;
  t.temporary = s->temporary;
  return t;
}

int mt_analysis_group(const mt_analysis *a, mt_group_by by, mt_metric metric, mt_group **groups,
                      size_t *count, mt_error *err) {
  *groups = NULL;
  *count = 0;
  int rc = mt_metric_check(a, metric, err);
  if (rc)
    return rc;
  /* Group keys are interned frames (or their function / file), found through a hash of the key
   * frame's content; a site frame index identifies a site group directly. */
  mt_group *out = calloc(a->nstacks + 1, sizeof *out);
  mt_hashmap index = {0};
  if (!out)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  size_t n = 0;
  for (size_t i = 0; i < a->nstacks; i++) {
    const stack_rec *s = &a->stacks[i];
    mt_frame key = mt_frame_key(mt_analysis_frame(a, s->site), by);
    uint64_t h = 1469598103934665603u;
    for (const char *c = key.function; *c; c++)
      h = (h ^ (uint8_t)*c) * 1099511628211u;
    h = (h ^ 0xFF) * 1099511628211u;
    for (const char *c = key.file; *c; c++)
      h = (h ^ (uint8_t)*c) * 1099511628211u;
    h ^= (uint64_t)(uint32_t)key.line * 0x9E3779B97F4A7C15u;
    uint64_t g;
    for (;; h++) {
      if (!mt_hashmap_get(&index, (int64_t)h, &g)) {
        g = n++;
        out[g].key = key;
        out[g].top_stack = i;
        if (!mt_hashmap_put(&index, (int64_t)h, g)) {
          free(out);
          mt_hashmap_free(&index);
          return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
        }
        break;
      }
      if (!mt_frame_key_compare(&out[g].key, &key))
        break;
    }
    mt_group *grp = &out[g];
    mt_stats_add(&grp->stats, &s->stats);
    grp->stacks++;
    if (mt_analysis_metric(a, &s->stats, metric) >
        mt_analysis_metric(a, &a->stacks[grp->top_stack].stats, metric))
      grp->top_stack = i;
  }
  mt_hashmap_free(&index);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (mt_analysis_metric(a, &out[i].stats, metric) > 0)
      out[kept++] = out[i];
  ctx = (sort_ctx){a, metric};
  qsort(out, kept, sizeof *out, compare_groups);
  *groups = out;
  *count = kept;
  return MT_OK;
}
