/* memtap report: one self-contained HTML file (summary, heap over time with a draggable time
 * range, flame graph, charts, tables, filters), or with --diff the same page comparing two
 * traces, written by the library's HTML exporter. */
#include <stdio.h>
#include <string.h>

#include "analysis_cli.h"
#include "cli.h"
#include "memtap/export.h"

static const char usage[] =
    "usage: memtap report [OPTIONS] TRACE -o report.html\n"
    "       memtap report [OPTIONS] A --diff B -o report.html\n"
    "\n"
    "One self-contained HTML file (no external scripts, styles or fetches): the summary, the\n"
    "live heap over time (drag a range on it to see what was allocated in it or live at its\n"
    "end), a flame graph, allocation rate, size and lifetime charts, sortable tables of sites\n"
    "and functions with their callers and callees, and filters kept in the page's address.\n"
    "The data is pre-aggregated into time steps and size and lifetime classes, and the\n"
    "flame graph's smallest branches merged, so the file is at most 16 MB whatever the trace\n"
    "(docs/analysis.md).\n"
    "\n"
    "  -o FILE           the HTML file to write (required; '-' for standard output)\n"
    "  --diff B          compare TRACE (A, the baseline) with B on one page\n"
    "  --title TEXT      the page title (default: the traced executable)\n" AN_USAGE_WINDOW
        AN_USAGE_STACKS "  -h, --help        show this help\n";

int mt_cmd_report(int argc, char **argv) {
  enum { OPT_TITLE = 1, OPT_DIFF };
  static const struct option options[] = {AN_LONG_OPTIONS,
                                          {"title", required_argument, NULL, OPT_TITLE},
                                          {"diff", required_argument, NULL, OPT_DIFF},
                                          {0}};
  an_options ao = {0};
  mt_export_options eo = {0};
  const char *output = NULL, *diff = NULL;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "ho:", options)) != -1) {
    if (c != AN_OPT_JSON && an_option(&ao, c, optarg))
      continue;
    switch (c) {
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    case OPT_TITLE: eo.title = optarg; break;
    case OPT_DIFF: diff = optarg; break;
    case 'o': output = optarg; break;
    default: return cli_bad_option("report");
    }
  }
  if (optind != argc - 1)
    return cli_one_trace_expected("report", argc, argv);
  if (!output)
    return cli_usage_error("report", "-o FILE is required");
  const char *paths[2] = {argv[optind], diff};
  if (diff && !strcmp(diff, "-") && !strcmp(paths[0], "-"))
    return cli_usage_error("report", "only one of the traces can be standard input");
  cli_output_file out; /* before the analysis: a bad output is found at once */
  if (!cli_output_file_open(&out, output, paths, diff ? 2 : 1))
    return MT_EXIT_FAILURE;
  int status;
  mt_analysis *a = an_load("report", paths[0], &ao, true, MT_TIME_UNBOUNDED, &status);
  if (!a) {
    cli_output_file_close(&out, false);
    return status;
  }
  if (!diff) {
    status = an_status(a, an_export_to(a, MT_EXPORT_HTML, &eo, &out, paths[0]));
    mt_analysis_free(a);
    return status;
  }
  mt_analysis *b = an_load("report", diff, &ao, true, MT_TIME_UNBOUNDED, &status);
  if (!b) {
    mt_analysis_free(a);
    cli_output_file_close(&out, false);
    return status;
  }
  eo.baseline = a;
  if (!eo.title)
    eo.title = "comparison";
  status = an_status(a, an_status(b, an_export_to(b, MT_EXPORT_HTML, &eo, &out, diff)));
  mt_analysis_free(a);
  mt_analysis_free(b);
  return status;
}
