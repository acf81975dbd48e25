/* memtap top: the heaviest allocation sites (or functions, or files) by a metric, each with its
 * heaviest backtrace. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis_cli.h"
#include "cli.h"

static const char usage[] =
    "usage: memtap top [OPTIONS] TRACE\n"
    "\n"
    "The heaviest allocation sites, with the heaviest backtrace of each. A site is the innermost\n"
    "frame (function, file, line) of a backtrace that has a source location.\n"
    "\n"
    "  --by METRIC       bytes (allocated, the default), count (objects allocated), live (at the\n"
    "                    end), peak (live at the peak), temporary (needs a trace at rate 1)\n"
    "  --group KEY       site (the default), function or file\n"
    "  --inverted        print backtraces from the allocation point outward (its callers)\n"
    "  -n N              show N groups (default 10; 0 for all)\n"
    "  --depth N         show at most N frames of each backtrace (default 12; 0 for all)\n"
    "  --json            one JSON object (schema memtap.top/1)\n" AN_USAGE_WINDOW AN_USAGE_STACKS
    "  -h, --help        show this help\n";

int mt_cmd_top(int argc, char **argv) {
  enum { OPT_BY = 1, OPT_GROUP, OPT_INVERTED, OPT_DEPTH };
  static const struct option options[] = {AN_LONG_OPTIONS,
                                          {"by", required_argument, NULL, OPT_BY},
                                          {"group", required_argument, NULL, OPT_GROUP},
                                          {"inverted", no_argument, NULL, OPT_INVERTED},
                                          {"depth", required_argument, NULL, OPT_DEPTH},
                                          {0}};
  an_options ao = {0};
  mt_metric metric = MT_METRIC_BYTES;
  mt_group_by by = MT_GROUP_SITE;
  bool inverted = false;
  long long limit = 10, depth = 12;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "hn:", options, NULL)) != -1) {
    if (an_option(&ao, c, optarg))
      continue;
    switch (c) {
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    case OPT_BY:
      if (!an_parse_metric(optarg, &metric))
        return cli_usage_error("top", "--by takes bytes, count, live, peak or temporary");
      break;
    case OPT_GROUP:
      if (!an_parse_group(optarg, &by))
        return cli_usage_error("top", "--group takes site, function or file");
      break;
    case OPT_INVERTED: inverted = true; break;
    case 'n':
      if (!cli_parse_int(optarg, 0, 1 << 30, &limit))
        return cli_usage_error("top", "-n takes a count");
      break;
    case OPT_DEPTH:
      if (!cli_parse_int(optarg, 0, 1 << 30, &depth))
        return cli_usage_error("top", "--depth takes a count");
      break;
    default: return cli_usage_error("top", "unknown option");
    }
  }
  if (optind != argc - 1)
    return cli_usage_error("top", "expected exactly one TRACE");
  const char *path = argv[optind];
  int status;
  mt_analysis *a = an_load("top", path, &ao, false, MT_TIME_UNBOUNDED, &status);
  if (!a)
    return status;
  mt_group *groups;
  size_t n;
  mt_error err;
  if (mt_analysis_group(a, by, metric, &groups, &n, &err)) {
    cli_report(path, &err);
    mt_analysis_free(a);
    return MT_EXIT_FAILURE;
  }
  const mt_summary *s = mt_analysis_summary(a);
  mt_stats total = {0};
  total.allocated = s->allocated;
  total.live = s->live_end;
  total.peak = s->at_peak;
  total.temporary = s->temporary;
  double whole = mt_analysis_metric(a, &total, metric);
  size_t shown = limit && (size_t)limit < n ? (size_t)limit : n;
  static const char *group_names[] = {"site", "function", "file"};
  cli_out o;
  out_init(&o, STDOUT_FILENO);
  if (ao.json) {
    out_printf(&o,
               "{\"schema\":\"memtap.top/1\",\"by\":\"%s\",\"group\":\"%s\",\"total\":%.17g,"
               "\"groups\":[",
               an_metric_name(metric), group_names[by], whole);
    for (size_t i = 0; i < shown; i++) {
      const mt_group *g = &groups[i];
      out_str(&o, i ? ",{\"key\":" : "{\"key\":");
      an_json_frame(&o, g->key);
      out_printf(&o, ",\"value\":%.17g,\"stacks\":%zu,\"allocated\":",
                 mt_analysis_metric(a, &g->stats, metric), g->stacks);
      an_json_amount(&o, a, &g->stats.allocated);
      out_str(&o, ",\"freed\":");
      an_json_amount(&o, a, &g->stats.freed);
      out_str(&o, ",\"live\":");
      an_json_amount(&o, a, &g->stats.live);
      out_str(&o, ",\"peak\":");
      an_json_amount(&o, a, &g->stats.peak);
      out_str(&o, ",\"temporary\":");
      if (s->temporary_defined)
        an_json_amount(&o, a, &g->stats.temporary);
      else
        out_str(&o, "null");
      out_str(&o, ",\"backtrace\":");
      an_json_stack(&o, a, g->top_stack, inverted);
      out_str(&o, "}");
    }
    out_str(&o, "]}\n");
  } else {
    char b1[32], b2[32];
    if (metric == MT_METRIC_COUNT)
      snprintf(b1, sizeof b1, "%.0f objects", whole);
    else
      an_size(whole, b1);
    out_printf(&o, "top %zu of %zu %ss by %s (total ~%s)\n\n", shown, n, group_names[by],
               an_metric_name(metric), b1);
    for (size_t i = 0; i < shown; i++) {
      const mt_group *g = &groups[i];
      double v = mt_analysis_metric(a, &g->stats, metric);
      if (metric == MT_METRIC_COUNT)
        snprintf(b1, sizeof b1, "%.0f objects", v);
      else
        an_size(v, b1);
      out_printf(&o, "%3zu. %-12s %5.1f%%  ", i + 1, b1, whole > 0 ? 100 * v / whole : 0);
      if (by == MT_GROUP_FILE)
        out_str(&o, g->key.file);
      else
        an_print_frame(&o, g->key);
      out_printf(&o,
                 "\n     allocated %llu sampled objects (~%s, ~%.0f objects), live at end "
                 "%llu, %zu backtrace%s\n",
                 (unsigned long long)g->stats.allocated.objects,
                 an_size(mt_analysis_bytes(a, g->stats.allocated.samples), b2),
                 g->stats.allocated.objects_estimated, (unsigned long long)g->stats.live.objects,
                 g->stacks, g->stacks == 1 ? "" : "s");
      out_str(&o,
              inverted ? "     from the allocation point out:\n" : "     heaviest backtrace:\n");
      an_print_stack(&o, a, g->top_stack, inverted, (size_t)depth, "       ");
      out_str(&o, "\n");
    }
  }
  status = out_flush(&o) ? MT_EXIT_OK : MT_EXIT_FAILURE;
  free(groups);
  mt_analysis_free(a);
  return status;
}
