/* Views over an analysis's backtraces as pprof and speedscope users know them (docs/analysis.md,
 * "Inclusive costs" and "Callers and callees"), for `memtap functions`, `top --inclusive`,
 * `memtap callers` and the HTML report:
 *   - functions.c: exclusive (flat) and inclusive (cum) costs per function, file or site;
 *   - callers.c: the backtraces through chosen functions, and those functions' callers and callees;
 *   - frame_keys.c: frames mapped to their function, file or site key.
 * They read the analysis through memtap/analysis.h only. What they return is malloc'd and owned
 * by the caller (free with the function named); nothing prints. Like mt_analysis_stack_frames,
 * they use the analysis's frame buffer, so one analysis serves one thread at a time. */
#ifndef MEMTAP_SRC_ANALYSIS_VIEWS_H
#define MEMTAP_SRC_ANALYSIS_VIEWS_H

#include <stdbool.h>
#include <stddef.h>

#include "memtap/analysis.h"

/* to += s, every amount and the sources. */
void mt_stats_add(mt_stats *to, const mt_stats *s);

/* The whole trace (or window) as stats: the summary's allocated, live at the end, at the peak and
 * temporary amounts, for totals rows and shares. */
mt_stats mt_analysis_totals(const mt_analysis *a);

/* MT_OK when `metric` can be computed on `a`; MT_E_UNSUPPORTED (the message says why) for
 * MT_METRIC_TEMPORARY when not every allocation is recorded. */
int mt_metric_check(const mt_analysis *a, mt_metric metric, mt_error *err);

/* What a function (or file, or site) costs. Both measures count a backtrace at most once, so a
 * recursive function (f -> g -> f, which folding keeps) is not counted twice:
 *   - flat: the backtraces whose innermost shown frame has the key (the function allocated
 *     itself); the empty backtrace is the key "<no backtrace>";
 *   - cum: the backtraces with a frame of the key anywhere (the function or what it called
 *     allocated). */
typedef struct mt_cost {
  mt_frame key; /* as mt_group keys: the unused parts are "" / 0 */
  mt_stats flat, cum;
  size_t flat_stacks, cum_stacks; /* how many backtraces each counts */
} mt_cost;

/* The costs of every key whose cum value of `metric` is not 0, ranked by that value (by the flat
 * value when `by_flat`), largest first, then by the other one, then by key. Only the stacks with
 * `keep[stack]` count when `keep` is not NULL (mt_stacks_through). `*costs` is malloc'd: the
 * caller frees. MT_E_UNSUPPORTED for MT_METRIC_TEMPORARY when the rate is not 1, MT_E_NOMEM when
 * memory runs out. */
int mt_costs(const mt_analysis *a, mt_group_by by, mt_metric metric, bool by_flat, const bool *keep,
             mt_cost **costs, size_t *count, mt_error *err);

/* Which stacks go through a function whose name matches `regex` (POSIX extended): `*keep`, malloc'd
 * (caller frees), has mt_analysis_stack_count entries; `*matched` (if non-NULL) receives how many
 * are true. MT_E_INVALID for a bad regex (the message says why). */
int mt_stacks_through(const mt_analysis *a, const char *regex, bool **keep, size_t *matched,
                      mt_error *err);

/* One caller or callee of a peeked function, keyed by function name. */
typedef struct mt_peek_edge {
  mt_frame key;   /* function only (file "" and line 0); function "" for none, see mt_peek */
  mt_stats stats; /* the backtraces that go through this edge */
  size_t stacks;
} mt_peek_edge;

/* A function and its neighbours in the backtraces through it, like pprof's -peek and speedscope's
 * sandwich view. Each backtrace through the function counts once:
 *   - its caller is the frame just outside the function's outermost call, or none (function "")
 *     when the function is the backtrace's outermost frame; the callers add up to `cum`;
 *   - its callee is the frame just inside the function's innermost call; the backtraces where the
 *     function is the innermost frame are its `flat` instead, so callees plus flat add up to `cum`.
 * Callers and callees are ranked by the metric, largest first, then by key; those whose value is
 * 0 are left out. */
typedef struct mt_peek {
  mt_frame key; /* function only */
  mt_stats flat, cum;
  size_t flat_stacks, cum_stacks;
  mt_peek_edge *callers, *callees;
  size_t ncallers, ncallees;
} mt_peek;

/* The functions whose name matches `regex` (POSIX extended) and whose cum value of `metric` is
 * not 0, ranked by it, largest first. `*peeks` is malloc'd: free with mt_peeks_free. No match is
 * not an error (`*count` is 0). MT_E_INVALID for a bad regex, MT_E_UNSUPPORTED as mt_costs. */
int mt_peek_functions(const mt_analysis *a, const char *regex, mt_metric metric, mt_peek **peeks,
                      size_t *count, mt_error *err);
void mt_peeks_free(mt_peek *peeks, size_t count);

#endif
