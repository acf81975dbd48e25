/* memtap summary: the whole trace (or a window) in one screen: duration, allocations, frees, peak
 * live heap and when, live at the end, allocation rate over time, size and lifetime histograms,
 * sources. With --to, the events after the window are not read, so the trace's length is not known:
 * the text then says "last event read" instead of "duration". */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analysis_cli.h"
#include "cli.h"

static const char usage[] =
    "usage: memtap summary [OPTIONS] TRACE\n"
    "\n"
    "Duration, allocations and bytes (estimated from the sampling rate), frees, the peak live\n"
    "heap and when it happened, what is live at the end, the allocation rate over time, size and\n"
    "lifetime histograms, and allocations by source. docs/analysis.md defines every number.\n"
    "\n"
    "  --json            one JSON object (schema memtap.summary/1)\n" AN_USAGE_WINDOW
    "  -h, --help        show this help\n";

#define RATE_SEGMENTS 10

static void print_amount(cli_out *o, const mt_analysis *a, const char *label, const mt_amount *m) {
  char text[160];
  out_printf(o, "%-16s %s\n", label, an_amount_text(a, m, text));
}

static void lifetime_label(int i, char *buf, size_t size) {
  static const char *names[] = {"<= 10 us", "<= 100 us", "<= 1 ms",  "<= 10 ms", "<= 100 ms",
                                "<= 1 s",   "<= 10 s",   "<= 100 s", "> 100 s",  "not freed"};
  snprintf(buf, size, "%s", names[i]);
}

/* Decimals that tell apart times `step_us` apart (at least 3, at most 6). */
static int time_decimals(int64_t step_us) {
  int d = 3;
  for (int64_t unit = 1000; d < 6 && step_us < unit; unit /= 10)
    d++;
  return d;
}

static void size_label(int i, char *buf, size_t size) {
  char limit[32];
  if (i == MT_SIZE_CLASSES - 1)
    snprintf(buf, size, "> %s", out_format_exact_bytes(mt_size_class_limit(i - 1), limit));
  else
    snprintf(buf, size, "<= %s", out_format_exact_bytes(mt_size_class_limit(i), limit));
}

int mt_cmd_summary(int argc, char **argv) {
  static const struct option options[] = {AN_LONG_OPTIONS, {0}};
  an_options ao = {0};
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "h", options)) != -1) {
    if (an_option(&ao, c, optarg) && c != AN_OPT_HIDE && c != AN_OPT_NO_FOLD)
      continue;
    if (c == 'h') {
      fputs(usage, stdout);
      return MT_EXIT_OK;
    }
    return cli_bad_option("summary");
  }
  if (optind != argc - 1)
    return cli_one_trace_expected("summary", argc, argv);
  const char *path = argv[optind];
  int status;
  mt_analysis *a = an_load("summary", path, &ao, false, MT_TIME_UNBOUNDED, &status);
  if (!a)
    return status;
  const mt_summary *s = mt_analysis_summary(a);
  size_t nb;
  int64_t width;
  const mt_timeline_bucket *tl = mt_analysis_timeline(a, &nb, &width);
  /* Allocation rate over time: the timeline cut into at most RATE_SEGMENTS equal segments. */
  size_t segments = nb < RATE_SEGMENTS ? nb : RATE_SEGMENTS;
  double seg_from[RATE_SEGMENTS], seg_to[RATE_SEGMENTS], seg_rate[RATE_SEGMENTS];
  for (size_t i = 0; i < segments; i++) {
    size_t b0 = i * nb / segments, b1 = (i + 1) * nb / segments;
    double bytes = 0;
    for (size_t b = b0; b < b1; b++)
      bytes += tl[b].allocated;
    int64_t t0 = s->from + (int64_t)b0 * width, t1 = s->from + (int64_t)b1 * width;
    if (t1 > s->to)
      t1 = s->to;
    if (t1 <= t0)
      t1 = t0 + 1;
    seg_from[i] = (double)t0 / 1e6;
    seg_to[i] = (double)t1 / 1e6;
    seg_rate[i] = bytes / ((double)(t1 - t0) / 1e6);
  }
  static const char *src_keys[] = {"minor", "major", "external"};
  /* The last event read: the trace's length, unless --to stopped the reading early. */
  double duration = (double)mt_analysis_elapsed(s->end_time, s->info.start_time) / 1e6;
  double from_s = (double)s->from / 1e6, to_s = (double)s->to / 1e6;
  cli_out o;
  out_init(&o, STDOUT_FILENO);
  if (ao.json) {
    out_str(&o, "{\"schema\":\"memtap.summary/1\",\"file\":");
    out_json_string(&o, path);
    out_str(&o, ",\"executable\":");
    out_json_string(&o, s->info.executable_name);
    out_printf(&o,
               ",\"sample_rate\":%.17g,\"word_size\":%d,\"bytes_per_sample\":%.17g,"
               "\"start_time\":%lld,\"duration_s\":%.6f,"
               "\"window\":{\"from_s\":%.6f,\"to_s\":%.6f,\"length_s\":%.6f},\"allocated\":",
               s->info.sample_rate, s->info.word_size, s->bytes_per_sample,
               (long long)s->info.start_time, duration, from_s, to_s, to_s - from_s);
    an_json_amount(&o, a, &s->allocated);
    out_str(&o, ",\"allocated_by_source\":{");
    for (int i = 0; i < 3; i++) {
      out_printf(&o, "%s\"%s\":", i ? "," : "", src_keys[i]);
      an_json_amount(&o, a, &s->allocated_by_source[i]);
    }
    out_str(&o, "},\"source_names\":{");
    for (int i = 0; i < 3; i++)
      out_printf(&o, "%s\"%s\":\"%s\"", i ? "," : "", src_keys[i],
                 mt_analysis_source_name(a, (mt_source)i));
    out_str(&o, "},\"freed\":");
    an_json_amount(&o, a, &s->freed);
    out_str(&o, ",\"live_start\":");
    an_json_amount(&o, a, &s->live_start);
    out_str(&o, ",\"live_end\":");
    an_json_amount(&o, a, &s->live_end);
    out_str(&o, ",\"live_end_by_source\":{");
    for (int i = 0; i < 3; i++) {
      out_printf(&o, "%s\"%s\":", i ? "," : "", src_keys[i]);
      an_json_amount(&o, a, &s->live_end_by_source[i]);
    }
    out_printf(&o, "},\"peak\":{\"time_s\":%.6f,\"live\":", (double)s->peak_time / 1e6);
    an_json_amount(&o, a, &s->at_peak);
    out_str(&o, "},\"temporary\":");
    if (s->temporary_defined)
      an_json_amount(&o, a, &s->temporary);
    else
      out_str(&o, "null");
    out_printf(&o, ",\"promotes\":%llu,\"collects\":%llu,\"unknown_collects\":%llu",
               (unsigned long long)s->promotes, (unsigned long long)s->collects,
               (unsigned long long)s->unknown_collects);
    out_str(&o, ",\"allocation_rate\":[");
    for (size_t i = 0; i < segments; i++)
      out_printf(&o, "%s{\"from_s\":%.6f,\"to_s\":%.6f,\"bytes_per_s\":%.1f}", i ? "," : "",
                 seg_from[i], seg_to[i], seg_rate[i]);
    out_str(&o, "],\"sizes\":[");
    for (int i = 0; i < MT_SIZE_CLASSES; i++) {
      if (i == MT_SIZE_CLASSES - 1)
        out_str(&o, ",{\"max_bytes\":null,\"allocated\":");
      else
        out_printf(&o, "%s{\"max_bytes\":%lld,\"allocated\":", i ? "," : "",
                   (long long)mt_size_class_limit(i));
      an_json_amount(&o, a, &s->sizes[i]);
      out_str(&o, "}");
    }
    out_str(&o, "],\"lifetimes\":[");
    for (int i = 0; i < MT_LIFETIME_CLASSES; i++) {
      if (i >= MT_LIFETIME_CLASSES - 2)
        out_printf(&o, ",{\"max_us\":null,\"freed\":%s,\"allocated\":",
                   i == MT_LIFETIME_CLASSES - 1 ? "false" : "true");
      else
        out_printf(&o, "%s{\"max_us\":%lld,\"freed\":true,\"allocated\":", i ? "," : "",
                   (long long)mt_lifetime_class_limit(i));
      an_json_amount(&o, a, &s->lifetimes[i]);
      out_str(&o, "}");
    }
    out_printf(&o, "],\"backtraces\":%llu}\n", (unsigned long long)s->distinct_backtraces);
  } else {
    char b1[32];
    out_printf(&o, "trace:           %s\n", path);
    out_line_field(&o, "executable:      ", s->info.executable_name);
    if (ao.to &&
        s->to != mt_analysis_elapsed(s->end_time, s->info.start_time)) /* not clamped to the end */
      out_printf(&o, "last event read: %.6f s (the trace after the window is not read)\n",
                 duration);
    else
      out_printf(&o, "duration:        %.6f s\n", duration);
    if (ao.from || ao.to)
      out_printf(&o, "window:          %.6f s to %.6f s (%.6f s)\n", from_s, to_s, to_s - from_s);
    char r1[40];
    if (an_exact(a))
      out_printf(&o, "sampling rate:   %s (every allocation recorded)\n",
                 out_format_decimal(s->info.sample_rate, r1));
    else
      out_printf(&o, "sampling rate:   %s (one sample stands for ~%s)\n",
                 out_format_decimal(s->info.sample_rate, r1), an_size(s->bytes_per_sample, b1));
    print_amount(&o, a, "allocated:", &s->allocated);
    for (int i = 0; i < 3; i++)
      if (s->allocated_by_source[i].objects) {
        char label[32];
        snprintf(label, sizeof label, "  %s:", mt_analysis_source_name(a, (mt_source)i));
        print_amount(&o, a, label, &s->allocated_by_source[i]);
      }
    print_amount(&o, a, "freed:", &s->freed);
    if (s->from > 0)
      print_amount(&o, a, "live at start:", &s->live_start);
    char n1[32];
    out_printf(&o, "peak live heap:  %s%s at %.6f s (%s %sobject%s)\n", an_approx(a),
               an_size(mt_analysis_bytes(a, s->at_peak.samples), b1), (double)s->peak_time / 1e6,
               out_format_count((double)s->at_peak.objects, n1), an_exact(a) ? "" : "sampled ",
               out_plural((double)s->at_peak.objects));
    print_amount(&o, a, "live at end:", &s->live_end);
    if (s->temporary_defined)
      print_amount(&o, a, "temporary:", &s->temporary);
    else
      out_str(&o, "temporary:       not known: the trace is sampled (rate < 1)\n");
    char n2[32];
    out_printf(&o, "promotions:      %s\ncollections:     %s\n",
               out_format_count((double)s->promotes, n1),
               out_format_count((double)s->collects, n2));
    if (s->unknown_collects)
      out_printf(&o, "unknown ids:     %s collects/promotes of objects not live (ignored)\n",
                 out_format_count((double)s->unknown_collects, n1));
    out_printf(&o, "backtraces:      %s distinct\n",
               out_format_count((double)s->distinct_backtraces, n1));
    out_str(&o, "\nallocation rate over time:\n");
    int decimals = time_decimals(segments ? (s->to - s->from) / (int64_t)segments : 0);
    for (size_t i = 0; i < segments; i++)
      out_printf(&o, "  %*.*f s - %*.*f s  %s/s\n", decimals + 7, decimals, seg_from[i],
                 decimals + 7, decimals, seg_to[i], an_size(seg_rate[i], b1));
    const char *columns = an_exact(a) ? "  objects   bytes\n" : "  sampled   estimated bytes\n";
    out_printf(&o, "\nsizes (one object):   %s", columns);
    for (int i = 0; i < MT_SIZE_CLASSES; i++) {
      char label[32];
      size_label(i, label, sizeof label);
      out_printf(&o, "  %-18s %9s   %s\n", label, out_format_count((double)s->sizes[i].objects, n1),
                 an_size(mt_analysis_bytes(a, s->sizes[i].samples), b1));
    }
    out_printf(&o, "\nlifetimes:            %s", columns);
    for (int i = 0; i < MT_LIFETIME_CLASSES; i++) {
      char label[32];
      lifetime_label(i, label, sizeof label);
      out_printf(&o, "  %-18s %9s   %s\n", label,
                 out_format_count((double)s->lifetimes[i].objects, n1),
                 an_size(mt_analysis_bytes(a, s->lifetimes[i].samples), b1));
    }
  }
  status = an_status(a, out_finish(&o) ? MT_EXIT_OK : MT_EXIT_FAILURE);
  mt_analysis_free(a);
  return status;
}
