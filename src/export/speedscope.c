/* speedscope's file format (https://www.speedscope.app/file-format-schema.json): shared frames and
 * two "sampled" profiles, bytes allocated and bytes live at the end, named with its time (or at
 * the peak, with inuse_at_peak), each sample a stack of frame indices from the root inward with
 * its weight. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "export/export_internal.h"

static void profile(FILE *out, const mt_analysis *a, const char *name, const int64_t *values) {
  int64_t total = 0;
  size_t n = mt_analysis_stack_count(a);
  for (size_t i = 0; i < n; i++)
    total += values[i] > 0 ? values[i] : 0;
  fputs("{\"type\":\"sampled\",\"name\":", out);
  mt_json_string(out, name);
  fprintf(out, ",\"unit\":\"bytes\",\"startValue\":0,\"endValue\":%" PRId64 ",\"samples\":[",
          total);
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    if (values[i] <= 0)
      continue;
    size_t depth;
    const uint32_t *frames = mt_analysis_stack_frames(a, i, &depth, NULL);
    fputs(first ? "[" : ",[", out);
    first = false;
    for (size_t j = 0; j < depth; j++)
      fprintf(out, "%s%u", j ? "," : "", frames[j]);
    fputs("]", out);
  }
  fputs("],\"weights\":[", out);
  first = true;
  for (size_t i = 0; i < n; i++)
    if (values[i] > 0) {
      fprintf(out, "%s%" PRId64, first ? "" : ",", values[i]);
      first = false;
    }
  fputs("]}", out);
}

int mt_export_speedscope(const mt_analysis *a, FILE *out, const mt_export_options *o,
                         mt_error *err) {
  int64_t *allocated, *live = NULL;
  int rc = mt_export_values(a, o, MT_METRIC_BYTES, &allocated, err);
  if (!rc)
    rc = mt_export_values(a, o, o->inuse_at_peak ? MT_METRIC_PEAK : MT_METRIC_LIVE, &live, err);
  if (rc) {
    free(allocated);
    return rc;
  }
  /* Frames are shared by index: the analysis' own frame numbering, listed up to the largest used.
   */
  uint32_t max_frame = 0;
  bool any = false;
  size_t n = mt_analysis_stack_count(a);
  for (size_t i = 0; i < n; i++) {
    size_t depth;
    const uint32_t *frames = mt_analysis_stack_frames(a, i, &depth, NULL);
    for (size_t j = 0; j < depth; j++)
      if (frames[j] >= max_frame)
        max_frame = frames[j], any = true;
  }
  const mt_summary *s = mt_analysis_summary(a);
  fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"name\":", out);
  mt_json_string(out, o->title ? o->title : s->info.executable_name);
  fputs(",\"exporter\":\"memtap\",\"activeProfileIndex\":0,\"shared\":{\"frames\":[", out);
  for (uint32_t f = 0; any && f <= max_frame; f++) {
    mt_frame fr = mt_analysis_frame(a, f);
    fputs(f ? ",{\"name\":" : "{\"name\":", out);
    mt_json_string(out, fr.function);
    if (fr.file[0]) {
      fputs(",\"file\":", out);
      mt_json_string(out, fr.file);
      fprintf(out, ",\"line\":%d", (int)fr.line);
    }
    fputs("}", out);
  }
  fputs("]},\"profiles\":[", out);
  profile(out, a, "bytes allocated", allocated);
  fputs(",", out);
  /* The end of the window analysed: the trace's, or --to's and --at's. */
  char live_name[64];
  snprintf(live_name, sizeof live_name, "bytes live at the end (%.6f s)", (double)s->to / 1e6);
  profile(out, a, o->inuse_at_peak ? "bytes live at the peak" : live_name, live);
  fputs("]}\n", out);
  free(allocated);
  free(live);
  return MT_OK;
}
