/* memtap/export.h: writing an mt_analysis (memtap/analysis.h) in the formats other tools read.
 *
 *   - MT_EXPORT_PPROF: a gzipped pprof profile (profile.proto) with the sample types
 *     alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes, for `go tool
 *     pprof`, Pyroscope and Parca. In-use means live at the end of the window, or at the peak with
 *     `inuse_at_peak`. Functions, file names, lines and inlined frames are filled in and the one
 *     mapping is marked as symbolised. Values are integers whose totals equal the analysis'
 *     rounded totals exactly (largest-remainder rounding across backtraces);
 *   - MT_EXPORT_SPEEDSCOPE: speedscope's JSON file format, two sampled profiles (bytes allocated,
 *     bytes live at the end), root frames first;
 *   - MT_EXPORT_CHROME: Chrome's trace event JSON (chrome://tracing, Perfetto): a counter track of
 *     the live heap, each point stamped where its value holds (the window's start, then each
 *     timeline bucket's end), and instant events for the largest allocations;
 *   - MT_EXPORT_FOLDED: "outer;...;inner VALUE" for flamegraph.pl, inferno and speedscope; frames
 *     are function names, one line per distinct stack of names (backtraces that differ only in
 *     lines are summed);
 *   - MT_EXPORT_FLAME_SVG: a standalone SVG flame graph of the same stacks;
 *   - MT_EXPORT_HTML: the self-contained HTML report (docs/analysis.md): summary, heap over time,
 *     flame/icicle graph, top sites, filters; at most 16 MB whatever the trace (backtraces, cells
 *     and names merged or cut to fit). The analysis must have been run with `cells`.
 *
 * The exporters read the analysis only; they write to a stdio stream the caller owns. */
#ifndef MEMTAP_EXPORT_H
#define MEMTAP_EXPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "memtap/analysis.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mt_export_format {
  MT_EXPORT_PPROF = 0,
  MT_EXPORT_SPEEDSCOPE,
  MT_EXPORT_CHROME,
  MT_EXPORT_FOLDED,
  MT_EXPORT_FLAME_SVG,
  MT_EXPORT_HTML,
} mt_export_format;

typedef struct mt_export_options {
  mt_metric metric;   /* folded, SVG: the value of each backtrace (default bytes allocated) */
  bool inverted;      /* folded, SVG: the allocation point first (callers below it) */
  bool inuse_at_peak; /* pprof, speedscope: in use at the peak instead of the end */
  /* folded, SVG, pprof, speedscope: when not NULL, only the backtraces through a function whose
   * name matches this POSIX extended regex (pprof's -focus), their values apportioned to their own
   * rounded total; MT_E_INVALID for a bad regex, and for the Chrome trace and HTML formats */
  const char *focus;
  const char *title; /* SVG, HTML: shown at the top; NULL for the executable's name */
  /* HTML: when not NULL, the page compares this analysis (A, run with cells) with the exported
   * one (B), as `memtap report A --diff B` */
  const mt_analysis *baseline;
} mt_export_options;

/* Writes `a` to `out` in `format`. `options` may be NULL (the defaults). Returns MT_OK, MT_E_IO
 * when writing fails, MT_E_INVALID when the format needs what the analysis lacks (HTML without
 * cells), MT_E_UNSUPPORTED for MT_METRIC_TEMPORARY on a sampled trace. */
int mt_export(const mt_analysis *a, mt_export_format format, FILE *out,
              const mt_export_options *options, mt_error *err);

/* Splits `total` into integers out[i] close to values[i] (each is the floor or the ceiling of its
 * value, up to rounding error in the inputs) so that they add up to `total` exactly. */
void mt_apportion(const double *values, size_t count, int64_t total, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
