/* Chrome's trace event format (chrome://tracing, Perfetto's legacy JSON importer): a counter track
 * "live heap", stamped where each value holds: the live heap at the window's start, then at the
 * end of each timeline bucket (with the largest live heap inside the bucket that ends there); and
 * one instant event per largest allocation (MT_LARGEST_ALLOCATIONS of them) naming its site and
 * backtrace. Times are µs since the trace start. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>

#include "export/export_internal.h"

int mt_export_chrome(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err) {
  const mt_summary *s = mt_analysis_summary(a);
  fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"executable\":", out);
  mt_json_string(out, s->info.executable_name);
  fprintf(out, ",\"sample_rate\":%.17g},\"traceEvents\":[", s->info.sample_rate);
  fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":", out);
  mt_json_string(out, s->info.executable_name);
  fputs("}}", out);
  size_t nb;
  int64_t width;
  const mt_timeline_bucket *tl = mt_analysis_timeline(a, &nb, &width);
  /* A counter holds its value from its timestamp on: the live heap at the window's start, then
   * each bucket's value at the bucket's end (the window's end for the last). When the last
   * bucket's end is cut back onto the one before it, the later value is the one that holds. */
  int64_t t = s->from;
  double live = mt_analysis_bytes(a, s->live_start.samples), max = live;
  for (size_t i = 0; i <= nb; i++) {
    int64_t next = i < nb ? s->from + (int64_t)(i + 1) * width : INT64_MAX;
    if (next > s->to)
      next = s->to;
    if (i == nb || next > t)
      fprintf(out,
              ",\n{\"name\":\"live heap\",\"ph\":\"C\",\"ts\":%" PRId64
              ",\"pid\":1,\"tid\":1,\"args\":{\"bytes\":%.0f,\"max_bytes\":%.0f}}",
              t, live, max);
    if (i < nb) {
      t = next;
      live = tl[i].live_end;
      max = tl[i].live_max;
    }
  }
  size_t nl;
  const mt_allocation *largest = mt_analysis_largest(a, &nl);
  for (size_t i = 0; i < nl; i++) {
    const mt_allocation *x = &largest[i];
    mt_frame site = mt_analysis_frame(a, mt_analysis_stack_site(a, x->stack));
    double bytes = (double)x->words * s->info.word_size / 8;
    fprintf(out, ",\n{\"name\":");
    mt_json_string(out, site.function);
    fprintf(out,
            ",\"cat\":\"allocation\",\"ph\":\"i\",\"s\":\"p\",\"ts\":%" PRId64
            ",\"pid\":1,\"tid\":1,\"args\":{\"bytes\":%.0f,\"samples\":%" PRIu64
            ",\"source\":\"%s\",\"site\":",
            x->time, bytes, x->samples, mt_analysis_source_name(a, x->source));
    mt_json_string(out, site.function);
    fputs(",\"file\":", out);
    mt_json_string(out, site.file);
    fprintf(out, ",\"line\":%d,\"backtrace\":[", (int)site.line);
    size_t depth;
    const uint32_t *frames = mt_analysis_stack_frames(a, x->stack, &depth, NULL);
    for (size_t j = 0; j < depth; j++) {
      if (j)
        fputc(',', out);
      mt_json_string(out, mt_analysis_frame(a, frames[depth - 1 - j]).function);
    }
    fputs("]}}", out);
  }
  fputs("\n]}\n", out);
  (void)o;
  (void)err;
  return MT_OK;
}
