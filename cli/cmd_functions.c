/* memtap functions: each function's (or file's, or site's) exclusive and inclusive cost, pprof's
 * flat and cum columns, optionally only over the backtraces through chosen functions (pprof's
 * -focus). The table is also `memtap top --inclusive` (functions_view.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/views.h"
#include "analysis_cli.h"
#include "cli.h"
#include "functions_view.h"

static const char usage[] =
    "usage: memtap functions [OPTIONS] TRACE\n"
    "\n"
    "Each function's cost, exclusive and inclusive, as pprof's flat and cum columns:\n"
    "  flat   what the function allocated itself: the backtraces whose innermost frame is in it\n"
    "  cum    what it and everything it called allocated: the backtraces that go through it,\n"
    "         each counted once however often the function recurs in it\n"
    "Percentages are of the whole trace (or window); sum% adds up flat% down the table.\n"
    "\n"
    "  --by METRIC       bytes (allocated, the default), count (objects allocated), live (at the\n"
    "                    end), peak (live at the peak), temporary (needs a trace at rate 1)\n"
    "  --group KEY       function (the default), file, or site (function file:line)\n"
    "  --sort COLUMN     cum (the default) or flat\n"
    "  --focus REGEX     count only the backtraces through a function whose name matches the\n"
    "                    POSIX extended REGEX (pprof's -focus)\n"
    "  -n N              show N rows (default 20; 0 for all)\n"
    "  --json            one JSON object (schema memtap.functions/1)\n" AN_USAGE_WINDOW
        AN_USAGE_STACKS "  -h, --help        show this help\n";

static const char *group_names[] = {"site", "function", "file"};

static void print_key(cli_out *o, mt_group_by by, mt_frame key) {
  if (by == MT_GROUP_FILE)
    out_str(o, key.file[0] ? key.file : "(no file)");
  else
    an_print_frame(o, key);
}

static void json_side(cli_out *o, const mt_analysis *a, const char *name, const mt_stats *s,
                      size_t stacks, mt_metric metric) {
  out_printf(o, ",\"%s\":{\"value\":%.0f,\"backtraces\":%zu,\"allocated\":", name,
             mt_analysis_metric(a, s, metric), stacks);
  an_json_amount(o, a, &s->allocated);
  out_str(o, ",\"live\":");
  an_json_amount(o, a, &s->live);
  out_str(o, ",\"peak\":");
  an_json_amount(o, a, &s->peak);
  out_str(o, "}");
}

static void print_table(cli_out *o, const mt_analysis *a, const an_options *ao,
                        const functions_view *v, const mt_cost *costs, size_t n, double whole,
                        size_t focused, double focused_value) {
  size_t shown = v->limit && v->limit < n ? v->limit : n;
  char b1[48], b2[48];
  out_printf(o, "%ss by %s%s, ranked by %s: %zu of %zu (total %s%s)\n", group_names[v->by],
             an_metric_name(v->metric), v->metric == MT_METRIC_COUNT ? " (objects)" : "",
             v->by_flat ? "flat" : "cum", shown, n, an_approx(a),
             an_metric_text(v->metric, whole, b1));
  an_print_window(o, ao, a);
  if (v->focus)
    out_printf(
        o, "focus: the %zu of %zu backtraces through a function matching '%s' (%s%s, %.2f%%)\n",
        focused, mt_analysis_stack_count(a), v->focus, an_approx(a),
        an_metric_text(v->metric, focused_value, b1), whole > 0 ? 100 * focused_value / whole : 0);
  out_printf(o, "\n%12s %7s %7s %12s %7s  %s\n", "flat", "flat%", "sum%", "cum", "cum%",
             group_names[v->by]);
  double sum = 0;
  for (size_t i = 0; i < shown; i++) {
    double flat = mt_analysis_metric(a, &costs[i].flat, v->metric);
    double cum = mt_analysis_metric(a, &costs[i].cum, v->metric);
    sum += flat;
    double pf = whole > 0 ? 100 * flat / whole : 0, pc = whole > 0 ? 100 * cum / whole : 0;
    double ps = whole > 0 ? 100 * sum / whole : 0;
    out_printf(o, "%12s %6.2f%% %6.2f%% %12s %6.2f%%  ", an_metric_cell(v->metric, flat, b1), pf,
               ps, an_metric_cell(v->metric, cum, b2), pc);
    print_key(o, v->by, costs[i].key);
    out_str(o, "\n");
  }
}

int functions_view_run(const char *cmd, const char *path, const an_options *ao,
                       const functions_view *v) {
  if (v->focus && !an_regex_valid(cmd, "--focus ", v->focus))
    return MT_EXIT_USAGE;
  int status;
  mt_analysis *a = an_load(cmd, path, ao, false, MT_TIME_UNBOUNDED, &status);
  if (!a)
    return status;
  mt_error err;
  bool *keep = NULL;
  size_t focused = 0, n = 0;
  mt_cost *costs = NULL;
  if ((v->focus && mt_stacks_through(a, v->focus, &keep, &focused, &err)) ||
      mt_costs(a, v->by, v->metric, v->by_flat, keep, &costs, &n, &err)) {
    cli_report(path, &err);
    free(keep);
    mt_analysis_free(a);
    return MT_EXIT_FAILURE;
  }
  mt_stats through = {0};
  for (size_t i = 0; keep && i < mt_analysis_stack_count(a); i++)
    if (keep[i])
      mt_stats_add(&through, mt_analysis_stack_stats(a, i));
  double whole = an_whole(a, v->metric);
  double focused_value = mt_analysis_metric(a, &through, v->metric);
  cli_out o;
  out_init(&o, STDOUT_FILENO);
  if (ao->json) {
    size_t shown = v->limit && v->limit < n ? v->limit : n;
    out_printf(&o,
               "{\"schema\":\"memtap.functions/1\",\"by\":\"%s\",\"group\":\"%s\",\"sort\":\"%s\","
               "\"total\":%.0f",
               an_metric_name(v->metric), group_names[v->by], v->by_flat ? "flat" : "cum", whole);
    an_json_window(&o, ao, a);
    out_str(&o, ",\"focus\":");
    if (v->focus) {
      out_str(&o, "{\"regex\":");
      out_json_string(&o, v->focus);
      out_printf(&o, ",\"backtraces\":%zu,\"value\":%.0f}", focused, focused_value);
    } else {
      out_str(&o, "null");
    }
    out_printf(&o, ",\"rows_total\":%zu,\"rows\":[", n);
    for (size_t i = 0; i < shown; i++) {
      out_str(&o, i ? ",{\"key\":" : "{\"key\":");
      an_json_frame(&o, costs[i].key);
      json_side(&o, a, "flat", &costs[i].flat, costs[i].flat_stacks, v->metric);
      json_side(&o, a, "cum", &costs[i].cum, costs[i].cum_stacks, v->metric);
      out_str(&o, "}");
    }
    out_str(&o, "]}\n");
  } else {
    print_table(&o, a, ao, v, costs, n, whole, focused, focused_value);
  }
  status = an_status(a, out_finish(&o) ? MT_EXIT_OK : MT_EXIT_FAILURE);
  free(costs);
  free(keep);
  mt_analysis_free(a);
  return status;
}

int mt_cmd_functions(int argc, char **argv) {
  enum { OPT_BY = 1, OPT_GROUP, OPT_SORT, OPT_FOCUS };
  static const struct option options[] = {AN_LONG_OPTIONS,
                                          {"by", required_argument, NULL, OPT_BY},
                                          {"group", required_argument, NULL, OPT_GROUP},
                                          {"sort", required_argument, NULL, OPT_SORT},
                                          {"focus", required_argument, NULL, OPT_FOCUS},
                                          {0}};
  an_options ao = {0};
  functions_view v = {.by = MT_GROUP_FUNCTION, .metric = MT_METRIC_BYTES, .limit = 20};
  long long limit = 20;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "hn:", options)) != -1) {
    if (an_option(&ao, c, optarg))
      continue;
    switch (c) {
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    case OPT_BY:
      if (!an_metric_arg("functions", optarg, &v.metric))
        return MT_EXIT_USAGE;
      break;
    case OPT_GROUP:
      if (!an_group_arg("functions", optarg, &v.by))
        return MT_EXIT_USAGE;
      break;
    case OPT_SORT:
      if (strcmp(optarg, "cum") && strcmp(optarg, "flat"))
        return cli_usage_error("functions", "--sort takes cum or flat");
      v.by_flat = !strcmp(optarg, "flat");
      break;
    case OPT_FOCUS: v.focus = optarg; break;
    case 'n':
      if (!an_count_arg("functions", "-n", optarg, &limit))
        return MT_EXIT_USAGE;
      v.limit = (size_t)limit;
      break;
    default: return cli_bad_option("functions");
    }
  }
  if (optind != argc - 1)
    return cli_one_trace_expected("functions", argc, argv);
  return functions_view_run("functions", argv[optind], &ao, &v);
}
