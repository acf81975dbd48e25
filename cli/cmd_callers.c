/* memtap callers: for each function matching a regex, its callers and its callees with their
 * shares of the function's inclusive cost (pprof's -peek, speedscope's sandwich view), from
 * mt_peek_functions (src/analysis/views.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/views.h"
#include "analysis_cli.h"
#include "cli.h"

static const char usage[] =
    "usage: memtap callers [OPTIONS] REGEX TRACE\n"
    "\n"
    "For each function whose name matches REGEX (POSIX extended), what it costs inclusively (cum:\n"
    "the backtraces through it) and exclusively (flat: those where it allocated itself), then\n"
    "its callers and its callees, each with its share of the function's cum. A backtrace counts\n"
    "once: its caller is the frame just outside the function's outermost call, its callee the\n"
    "frame just inside its innermost call, so a recursive function is not counted twice and the\n"
    "callers add up to 100%, as do the callees with the function itself.\n"
    "\n"
    "  --by METRIC       bytes (allocated, the default), count (objects allocated), live (at the\n"
    "                    end), peak (live at the peak), temporary (needs a trace at rate 1)\n"
    "  -n N              show the N heaviest matching functions (default 5; 0 for all)\n"
    "  --lines N         show at most N callers and N callees of each (default 20; 0 for all)\n"
    "  --json            one JSON object (schema memtap.callers/1), every caller and "
    "callee\n" AN_USAGE_WINDOW AN_USAGE_STACKS "  -h, --help        show this help\n";

static void print_self(cli_out *o, mt_metric metric, const mt_peek *p, double flat, double cum) {
  char b[48];
  out_printf(o, "    %6.2f%% %12s  (itself: allocated in %s)\n", cum > 0 ? 100 * flat / cum : 0,
             an_metric_cell(metric, flat, b), p->key.function);
}

static void print_edges(cli_out *o, const mt_analysis *a, mt_metric metric, const mt_peek *p,
                        bool callees, size_t lines) {
  const mt_peek_edge *e = callees ? p->callees : p->callers;
  size_t n = callees ? p->ncallees : p->ncallers;
  double cum = mt_analysis_metric(a, &p->cum, metric),
         flat = mt_analysis_metric(a, &p->flat, metric);
  char b[48];
  out_printf(o, "  %s\n",
             callees ? "callees (inside its innermost call):"
                     : "callers (outside its outermost call):");
  size_t shown = lines && n > lines ? lines : n;
  bool self = callees && flat > 0;
  for (size_t i = 0; i < shown; i++) {
    double v = mt_analysis_metric(a, &e[i].stats, metric);
    if (self && flat >= v) { /* the function itself, in rank among its callees */
      print_self(o, metric, p, flat, cum);
      self = false;
    }
    out_printf(o, "    %6.2f%% %12s  ", cum > 0 ? 100 * v / cum : 0, an_metric_cell(metric, v, b));
    if (e[i].key.function[0])
      out_str(o, e[i].key.function);
    else
      out_str(o, "(none: it is the outermost frame)");
    out_str(o, "\n");
  }
  if (shown < n) {
    double rest = 0;
    for (size_t i = shown; i < n; i++)
      rest += mt_analysis_metric(a, &e[i].stats, metric);
    out_printf(o, "    %6.2f%% %12s  (%zu other %s%s)\n", cum > 0 ? 100 * rest / cum : 0,
               an_metric_cell(metric, rest, b), n - shown, callees ? "callee" : "caller",
               out_plural((double)(n - shown)));
  }
  if (self)
    print_self(o, metric, p, flat, cum);
}

static void json_edges(cli_out *o, const mt_analysis *a, mt_metric metric, const mt_peek_edge *e,
                       size_t n) {
  out_str(o, "[");
  for (size_t i = 0; i < n; i++) {
    out_str(o, i ? ",{\"function\":" : "{\"function\":");
    if (e[i].key.function[0])
      out_json_string(o, e[i].key.function);
    else
      out_str(o, "null");
    out_printf(o, ",\"value\":%.0f,\"backtraces\":%zu}", mt_analysis_metric(a, &e[i].stats, metric),
               e[i].stacks);
  }
  out_str(o, "]");
}

int mt_cmd_callers(int argc, char **argv) {
  enum { OPT_BY = 1, OPT_LINES };
  static const struct option options[] = {AN_LONG_OPTIONS,
                                          {"by", required_argument, NULL, OPT_BY},
                                          {"lines", required_argument, NULL, OPT_LINES},
                                          {0}};
  an_options ao = {0};
  mt_metric metric = MT_METRIC_BYTES;
  long long limit = 5, lines = 20;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "hn:", options)) != -1) {
    if (an_option(&ao, c, optarg))
      continue;
    switch (c) {
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    case OPT_BY:
      if (!an_metric_arg("callers", optarg, &metric))
        return MT_EXIT_USAGE;
      break;
    case 'n':
      if (!an_count_arg("callers", "-n", optarg, &limit))
        return MT_EXIT_USAGE;
      break;
    case OPT_LINES:
      if (!an_count_arg("callers", "--lines", optarg, &lines))
        return MT_EXIT_USAGE;
      break;
    default: return cli_bad_option("callers");
    }
  }
  if (optind != argc - 2)
    return cli_usage_error("callers", "expected a REGEX and a TRACE");
  const char *regex = argv[optind], *path = argv[optind + 1];
  if (!an_regex_valid("callers", "", regex))
    return MT_EXIT_USAGE;
  int status;
  mt_analysis *a = an_load("callers", path, &ao, false, MT_TIME_UNBOUNDED, &status);
  if (!a)
    return status;
  mt_peek *peeks;
  size_t n;
  mt_error err;
  if (mt_peek_functions(a, regex, metric, &peeks, &n, &err)) {
    return an_fail(path, &err, a);
  }
  if (!n) {
    cli_error(path, "no function matching '%s' has any %s", regex, an_metric_name(metric));
    mt_peeks_free(peeks, n);
    mt_analysis_free(a);
    return MT_EXIT_FAILURE;
  }
  double whole = an_whole(a, metric);
  size_t shown = limit && (size_t)limit < n ? (size_t)limit : n;
  char b1[48], b2[48];
  cli_out o;
  out_init(&o, STDOUT_FILENO);
  if (ao.json) {
    out_printf(&o,
               "{\"schema\":\"memtap.callers/1\",\"by\":\"%s\",\"regex\":", an_metric_name(metric));
    out_json_string(&o, regex);
    out_printf(&o, ",\"total\":%.0f", whole);
    an_json_window(&o, &ao, a);
    out_printf(&o, ",\"functions_total\":%zu,\"functions\":[", n);
    for (size_t i = 0; i < shown; i++) {
      const mt_peek *p = &peeks[i];
      out_str(&o, i ? ",{\"function\":" : "{\"function\":");
      out_json_string(&o, p->key.function);
      out_printf(&o,
                 ",\"cum\":%.0f,\"flat\":%.0f,\"cum_backtraces\":%zu,\"flat_backtraces\":%zu,"
                 "\"callers\":",
                 mt_analysis_metric(a, &p->cum, metric), mt_analysis_metric(a, &p->flat, metric),
                 p->cum_stacks, p->flat_stacks);
      json_edges(&o, a, metric, p->callers, p->ncallers);
      out_str(&o, ",\"callees\":");
      json_edges(&o, a, metric, p->callees, p->ncallees);
      out_str(&o, "}");
    }
    out_str(&o, "]}\n");
  } else {
    out_printf(&o,
               "callers and callees of %zu of %zu function%s matching '%s', by %s (total %s%s)\n",
               shown, n, out_plural((double)n), regex, an_metric_name(metric), an_approx(a),
               an_metric_text(metric, whole, b1));
    an_print_window(&o, &ao, a);
    for (size_t i = 0; i < shown; i++) {
      const mt_peek *p = &peeks[i];
      double cum = mt_analysis_metric(a, &p->cum, metric);
      double flat = mt_analysis_metric(a, &p->flat, metric);
      out_printf(
          &o, "\n%s\n  cum %s%s (%.2f%% of the total) in %zu backtrace%s, flat %s%s (%.2f%%)\n",
          p->key.function, an_approx(a), an_metric_text(metric, cum, b1),
          whole > 0 ? 100 * cum / whole : 0, p->cum_stacks, out_plural((double)p->cum_stacks),
          an_approx(a), an_metric_text(metric, flat, b2), whole > 0 ? 100 * flat / whole : 0);
      print_edges(&o, a, metric, p, false, (size_t)lines);
      print_edges(&o, a, metric, p, true, (size_t)lines);
    }
  }
  status = an_status(a, out_finish(&o) ? MT_EXIT_OK : MT_EXIT_FAILURE);
  mt_peeks_free(peeks, n);
  mt_analysis_free(a);
  return status;
}
