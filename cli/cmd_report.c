/* memtap report: one self-contained HTML file (summary, heap over time, flame graph, top sites,
 * filters), written by the library's HTML exporter. */
#include <stdio.h>
#include <string.h>

#include "analysis_cli.h"
#include "cli.h"
#include "memtap/export.h"

static const char usage[] =
    "usage: memtap report [OPTIONS] TRACE -o report.html\n"
    "\n"
    "One self-contained HTML file (no external scripts, styles or fetches): the summary, the\n"
    "live heap over time, an interactive flame/icicle graph, the top sites, and filters "
    "(allocated\n"
    "in / live during a time range, size range, lifetime range, function name contains / does not\n"
    "contain). The data is pre-aggregated into bounded buckets, merged further when a trace has\n"
    "many backtraces, so the file is at most 16 MB whatever the trace (docs/analysis.md).\n"
    "\n"
    "  -o FILE           the HTML file to write (required; '-' for standard output)\n"
    "  --title TEXT      the page title (default: the traced executable)\n" AN_USAGE_WINDOW
        AN_USAGE_STACKS "  -h, --help        show this help\n";

int mt_cmd_report(int argc, char **argv) {
  enum { OPT_TITLE = 1 };
  static const struct option options[] = {
      AN_LONG_OPTIONS, {"title", required_argument, NULL, OPT_TITLE}, {0}};
  an_options ao = {0};
  mt_export_options eo = {0};
  const char *output = NULL;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "ho:", options)) != -1) {
    if (c != AN_OPT_JSON && an_option(&ao, c, optarg))
      continue;
    switch (c) {
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    case OPT_TITLE: eo.title = optarg; break;
    case 'o': output = optarg; break;
    default: return cli_bad_option("report");
    }
  }
  if (optind != argc - 1)
    return cli_usage_error("report", "expected exactly one TRACE");
  if (!output)
    return cli_usage_error("report", "-o FILE is required");
  const char *path = argv[optind];
  cli_output_file out; /* before the analysis: a bad output is found at once */
  if (!cli_output_file_open(&out, output, &path, 1))
    return MT_EXIT_FAILURE;
  int status;
  mt_analysis *a = an_load("report", path, &ao, true, MT_TIME_UNBOUNDED, &status);
  if (!a) {
    cli_output_file_close(&out, false);
    return status;
  }
  status = an_export_to(a, MT_EXPORT_HTML, &eo, &out, path);
  mt_analysis_free(a);
  return status;
}
