/* memtap flame: folded stacks for flamegraph tools (the default), or a standalone SVG. */
#include <stdio.h>
#include <string.h>

#include "analysis_cli.h"
#include "cli.h"
#include "memtap/export.h"

static const char usage[] =
    "usage: memtap flame [OPTIONS] TRACE\n"
    "\n"
    "Backtraces as a flame graph: folded stacks ('outer;...;inner VALUE', one line per\n"
    "distinct stack of function names, backtraces differing only in lines summed, for\n"
    "flamegraph.pl, inferno or speedscope), or a standalone SVG. Direct recursion (f -> f) is\n"
    "folded unless --no-fold.\n"
    "\n"
    "  --folded          folded stacks (the default)\n"
    "  --svg             an SVG flame graph\n"
    "  --by METRIC       bytes (allocated, the default), count, live, peak, temporary\n"
    "  --inverted        start each stack at the allocation point (callers above it)\n"
    "  --focus REGEX     only the backtraces through a function whose name matches the POSIX\n"
    "                    extended REGEX (pprof's -focus); values add up to their own total\n"
    "  -o FILE           write to FILE instead of standard output\n" AN_USAGE_WINDOW AN_USAGE_STACKS
    "  -h, --help        show this help\n";

int mt_cmd_flame(int argc, char **argv) {
  enum { OPT_FOLDED = 1, OPT_SVG, OPT_BY, OPT_INVERTED, OPT_FOCUS };
  static const struct option options[] = {AN_LONG_OPTIONS,
                                          {"folded", no_argument, NULL, OPT_FOLDED},
                                          {"svg", no_argument, NULL, OPT_SVG},
                                          {"by", required_argument, NULL, OPT_BY},
                                          {"inverted", no_argument, NULL, OPT_INVERTED},
                                          {"focus", required_argument, NULL, OPT_FOCUS},
                                          {0}};
  an_options ao = {0};
  mt_export_options eo = {0};
  mt_export_format format = MT_EXPORT_FOLDED;
  bool folded = false, svg = false;
  const char *output = NULL;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "ho:", options)) != -1) {
    if (c != AN_OPT_JSON && an_option(&ao, c, optarg))
      continue;
    switch (c) {
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    case OPT_FOLDED: folded = true; break;
    case OPT_SVG: svg = true, format = MT_EXPORT_FLAME_SVG; break;
    case OPT_BY:
      if (!an_metric_arg("flame", optarg, &eo.metric))
        return MT_EXIT_USAGE;
      break;
    case OPT_INVERTED: eo.inverted = true; break;
    case OPT_FOCUS: eo.focus = optarg; break;
    case 'o': output = optarg; break;
    default: return cli_bad_option("flame");
    }
  }
  if (folded && svg)
    return cli_usage_error("flame", "--folded and --svg are two outputs: give one");
  if (optind != argc - 1)
    return cli_one_trace_expected("flame", argc, argv);
  if (eo.focus && !an_regex_valid("flame", "--focus ", eo.focus))
    return MT_EXIT_USAGE;
  const char *path = argv[optind];
  cli_output_file out; /* before the analysis: a bad output is found at once */
  if (!cli_output_file_open(&out, output, &path, 1))
    return MT_EXIT_FAILURE;
  int status;
  mt_analysis *a = an_load("flame", path, &ao, false, MT_TIME_UNBOUNDED, &status);
  if (!a) {
    cli_output_file_close(&out, false);
    return status;
  }
  status = an_status(a, an_export_to(a, format, &eo, &out, path));
  mt_analysis_free(a);
  return status;
}
