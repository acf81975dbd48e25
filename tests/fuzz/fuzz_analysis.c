/* libFuzzer target for the analyses and exports over whatever a trace the reader accepts holds:
 * crafted lengths, sample counts and rates, times out of order, ids collected twice or never
 * allocated, deep or empty backtraces, damage part-way. The input is the trace; its length
 * chooses the options (partial reading, a window, hidden frames, unfolded recursion), so that any
 * trace is a seed as it is. It is analysed with the report's cells, grouped and costed every way by
 * every metric, peeked, compared with itself, and exported in every format (to /dev/null). Each may
 * refuse with a status; none may crash, hang, leak or do what the sanitizers see. One check of
 * meaning: the report's cells are whole estimates adding up, per backtrace, to its allocated
 * estimate. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/diff.h"
#include "analysis/views.h"
#include "memtap/analysis.h"
#include "memtap/export.h"
#include "memtap/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *dev_null;

static void views(const mt_analysis *a) {
  for (int m = MT_METRIC_BYTES; m <= MT_METRIC_TEMPORARY; m++) {
    for (int by = MT_GROUP_SITE; by <= MT_GROUP_FILE; by++) {
      mt_group *groups;
      size_t n;
      if (mt_analysis_group(a, (mt_group_by)by, (mt_metric)m, &groups, &n, NULL) == MT_OK)
        free(groups);
      mt_cost *costs;
      if (mt_costs(a, (mt_group_by)by, (mt_metric)m, m % 2 == 0, NULL, &costs, &n, NULL) == MT_OK)
        free(costs);
    }
    mt_peek *peeks;
    size_t n;
    if (mt_peek_functions(a, "^.?[a-m]", (mt_metric)m, &peeks, &n, NULL) == MT_OK)
      mt_peeks_free(peeks, n);
    mt_diff d;
    if (mt_diff_compute(a, a, MT_GROUP_FUNCTION, (mt_metric)m, m == MT_METRIC_LIVE, &d, NULL) ==
        MT_OK)
      mt_diff_free(&d);
  }
}

static void exports(const mt_analysis *a) {
  for (int f = MT_EXPORT_PPROF; f <= MT_EXPORT_HTML; f++) {
    mt_export_options o = {.metric = (mt_metric)(f % 4), .inverted = f % 2, .inuse_at_peak = f % 2};
    mt_export(a, (mt_export_format)f, dev_null, &o, NULL);
    o.focus = f == MT_EXPORT_HTML || f == MT_EXPORT_CHROME ? NULL : "[a-z]";
    o.baseline = f == MT_EXPORT_HTML ? a : NULL;
    mt_export(a, (mt_export_format)f, dev_null, &o, NULL);
  }
}

static void check_cells(const mt_analysis *a) {
  size_t n, nstacks = mt_analysis_stack_count(a);
  int64_t width;
  const mt_cell *cells = mt_analysis_cells(a, &n, &width);
  double *in = calloc(nstacks + 1, sizeof *in);
  if (!in)
    return;
  for (size_t i = 0; i < n; i++) {
    double v = cells[i].amount.objects_estimated;
    if (v != floor(v) || v < 0 || cells[i].stack >= nstacks)
      abort();
    if (cells[i].alloc_bucket != MT_CELL_BEFORE)
      in[cells[i].stack] += v;
  }
  /* Exact while the sums are whole numbers a double holds (a crafted rate can make estimates past
   * 2^53, where adding one to a sum changes nothing). */
  for (size_t i = 0; i < nstacks; i++) {
    double want = mt_analysis_stack_stats(a, i)->allocated.objects_estimated;
    if (want < 0x1p52 && in[i] != want)
      abort();
  }
  free(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dev_null && !(dev_null = fopen("/dev/null", "w")))
    abort();
  uint32_t pick = (uint32_t)size * 2654435761u;
  mt_analysis_options o = mt_analysis_default_options();
  o.cells = true;
  o.partial = pick >> 31;
  o.no_fold = (pick >> 30) & 1;
  o.hide = (pick >> 29) & 1 ? "^[n-z]" : NULL;
  if ((pick >> 28) & 1) {
    o.from = (int64_t)((pick >> 8) & 0xff) * 64;
    o.to = (pick & 0xff) == 0xff ? MT_TIME_UNBOUNDED : o.from + (int64_t)(pick & 0xff) * 256;
  }
  mt_reader_options ro = {.backtraces = true};
  mt_reader *r;
  if (mt_reader_open_memory(&r, data, size, &ro, NULL) != MT_OK)
    return 0;
  mt_analysis *a;
  if (mt_analysis_run(&a, r, &o, NULL) == MT_OK) {
    check_cells(a);
    views(a);
    exports(a);
    mt_analysis_free(a);
  }
  mt_reader_close(r);
  return 0;
}
