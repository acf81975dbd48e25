/* Exclusive (flat) and inclusive (cum) costs per function, file or site (views.h): one walk over
 * each backtrace's frames, a key counted in cum once per backtrace however often it appears. */
#include <stdlib.h>

#include "analysis/frame_keys.h"
#include "analysis/model.h"
#include "analysis/views.h"
#include "common/error.h"

static inline void amount_add(mt_amount *to, const mt_amount *m) {
  to->objects += m->objects;
  to->samples += m->samples;
  to->objects_estimated += m->objects_estimated;
}

void mt_stats_add(mt_stats *to, const mt_stats *s) {
  amount_add(&to->allocated, &s->allocated);
  amount_add(&to->freed, &s->freed);
  amount_add(&to->live_start, &s->live_start);
  amount_add(&to->live, &s->live);
  amount_add(&to->peak, &s->peak);
  amount_add(&to->temporary, &s->temporary);
  to->sources |= s->sources;
}

typedef struct rank_ctx {
  const mt_analysis *a;
  mt_metric metric;
  bool by_flat;
} rank_ctx;
static rank_ctx rank; /* qsort has no user pointer */

static int compare_costs(const void *p, const void *q) {
  const mt_cost *x = p, *y = q;
  const mt_stats *x1 = rank.by_flat ? &x->flat : &x->cum, *x2 = rank.by_flat ? &x->cum : &x->flat;
  const mt_stats *y1 = rank.by_flat ? &y->flat : &y->cum, *y2 = rank.by_flat ? &y->cum : &y->flat;
  double vx = mt_analysis_metric(rank.a, x1, rank.metric);
  double vy = mt_analysis_metric(rank.a, y1, rank.metric);
  if (vx == vy)
    vx = mt_analysis_metric(rank.a, x2, rank.metric),
    vy = mt_analysis_metric(rank.a, y2, rank.metric);
  if (vx != vy)
    return vx < vy ? 1 : -1;
  return mt_frame_key_compare(&x->key, &y->key);
}

int mt_costs(const mt_analysis *a, mt_group_by by, mt_metric metric, bool by_flat, const bool *keep,
             mt_cost **costs, size_t *count, mt_error *err) {
  *costs = NULL;
  *count = 0;
  int rc = mt_metric_check(a, metric, err);
  if (rc)
    return rc;
  mt_frame_keys k;
  if (!mt_frame_keys_build(&k, a, by))
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  mt_cost *out = calloc(k.nkeys, sizeof *out);
  size_t *seen = calloc(k.nkeys, sizeof *seen); /* the last stack counted in cum, plus 1 */
  if (!out || !seen) {
    free(out);
    free(seen);
    mt_frame_keys_free(&k);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  size_t nstacks = mt_analysis_stack_count(a);
  for (size_t s = 0; s < nstacks; s++) {
    if (keep && !keep[s])
      continue;
    const mt_stats *st = mt_analysis_stack_stats(a, s);
    size_t depth;
    const uint32_t *frames = mt_analysis_stack_frames(a, s, &depth, NULL);
    if (!frames) {
      free(out);
      free(seen);
      mt_frame_keys_free(&k);
      return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
    }
    uint32_t leaf = mt_frame_keys_of(&k, depth ? frames[depth - 1] : UINT32_MAX);
    mt_stats_add(&out[leaf].flat, st);
    out[leaf].flat_stacks++;
    for (size_t i = 0; i < (depth ? depth : 1); i++) {
      uint32_t id = depth ? mt_frame_keys_of(&k, frames[i]) : leaf;
      if (seen[id] == s + 1)
        continue;
      seen[id] = s + 1;
      mt_stats_add(&out[id].cum, st);
      out[id].cum_stacks++;
    }
  }
  size_t kept = 0;
  for (size_t i = 0; i < k.nkeys; i++) {
    out[i].key = k.keys[i];
    if (mt_analysis_metric(a, &out[i].cum, metric) > 0)
      out[kept++] = out[i];
  }
  free(seen);
  mt_frame_keys_free(&k);
  rank = (rank_ctx){a, metric, by_flat};
  qsort(out, kept, sizeof *out, compare_costs);
  *costs = out;
  *count = kept;
  return MT_OK;
}
