/* memtap export: the analysis in other tools' formats (pprof, speedscope, Chrome trace, folded). */
#include <stdio.h>
#include <string.h>

#include "analysis_cli.h"
#include "cli.h"
#include "memtap/export.h"

static const char usage[] =
    "usage: memtap export [OPTIONS] --format FORMAT -o OUT TRACE\n"
    "\n"
    "  --format FORMAT   pprof: a gzipped pprof profile for go tool pprof, Pyroscope, Parca,\n"
    "                    with alloc_objects, alloc_space, inuse_objects and inuse_space;\n"
    "                    speedscope: speedscope JSON, bytes allocated and bytes live at the end;\n"
    "                    chrome: Chrome trace JSON, the live heap and the largest allocations;\n"
    "                    folded: folded stacks (as memtap flame)\n"
    "  -o OUT            the output file ('-' for standard output)\n"
    "  --at T|peak       pprof, speedscope: what is in use at the peak, or at T (seconds or N%:\n"
    "                    the analysis then stops at T, allocations included); default: the end.\n"
    "                    T also applies to chrome and folded; 'peak' does not\n"
    "  --by METRIC       folded: bytes (the default), count, live, peak, temporary\n"
    "  --focus REGEX     pprof, speedscope, folded: only the backtraces through a function whose\n"
    "                    name matches the POSIX extended REGEX (pprof's -focus)\n" AN_USAGE_WINDOW
        AN_USAGE_STACKS "  -h, --help        show this help\n";

int mt_cmd_export(int argc, char **argv) {
  enum { OPT_FORMAT = 1, OPT_AT, OPT_BY, OPT_FOCUS };
  static const struct option options[] = {AN_LONG_OPTIONS,
                                          {"format", required_argument, NULL, OPT_FORMAT},
                                          {"at", required_argument, NULL, OPT_AT},
                                          {"by", required_argument, NULL, OPT_BY},
                                          {"focus", required_argument, NULL, OPT_FOCUS},
                                          {0}};
  an_options ao = {0};
  mt_export_options eo = {0};
  const char *format_name = NULL, *output = NULL, *at = NULL;
  bool by = false;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "ho:", options)) != -1) {
    if (c != AN_OPT_JSON && an_option(&ao, c, optarg))
      continue;
    switch (c) {
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    case OPT_FORMAT: format_name = optarg; break;
    case OPT_AT: at = optarg; break;
    case OPT_BY:
      if (!an_metric_arg("export", optarg, &eo.metric))
        return MT_EXIT_USAGE;
      by = true;
      break;
    case OPT_FOCUS: eo.focus = optarg; break;
    case 'o': output = optarg; break;
    default: return cli_bad_option("export");
    }
  }
  if (optind != argc - 1)
    return cli_one_trace_expected("export", argc, argv);
  if (!format_name || !output)
    return cli_usage_error("export", "--format and -o are required");
  static const struct {
    const char *name;
    mt_export_format format;
  } formats[] = {{"pprof", MT_EXPORT_PPROF},
                 {"speedscope", MT_EXPORT_SPEEDSCOPE},
                 {"chrome", MT_EXPORT_CHROME},
                 {"folded", MT_EXPORT_FOLDED}};
  int fi = -1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(format_name, formats[i].name))
      fi = i;
  if (fi < 0)
    return cli_usage_error("export", "--format takes pprof, speedscope, chrome or folded");
  /* An option a format cannot honour is refused, never dropped. */
  mt_export_format format = formats[fi].format;
  if (by && format != MT_EXPORT_FOLDED)
    return cli_usage_error("export", "--by is for --format folded: %s",
                           format == MT_EXPORT_PPROF
                               ? "pprof has every sample type (choose one in pprof with "
                                 "-sample_index)"
                               : "this format has fixed values");
  if (at && !strcmp(at, "peak") && format != MT_EXPORT_PPROF && format != MT_EXPORT_SPEEDSCOPE)
    return cli_usage_error("export", "--at peak is for pprof and speedscope%s",
                           format == MT_EXPORT_FOLDED ? " (folded: --by peak)" : "");
  if (at && strcmp(at, "peak") && ao.to) /* --at peak --to T: the peak inside the window */
    return cli_usage_error("export",
                           "--at %s and --to exclude each other: --at T ends the window "
                           "at T",
                           at);
  if (eo.focus && format == MT_EXPORT_CHROME)
    return cli_usage_error("export", "--focus is for pprof, speedscope and folded: the Chrome "
                                     "trace's heap counter is the whole heap's");
  if (eo.focus && !an_regex_valid("export", "--focus ", eo.focus))
    return MT_EXIT_USAGE;
  const char *path = argv[optind];
  cli_output_file out; /* before reading the trace: a bad output is found at once */
  if (!cli_output_file_open(&out, output, &path, 1))
    return MT_EXIT_FAILURE;
  if (format == MT_EXPORT_PPROF && !cli_output_file_binary(&out, "export", "a pprof profile"))
    return MT_EXIT_USAGE;
  int64_t to = MT_TIME_UNBOUNDED;
  if (at && !strcmp(at, "peak")) {
    eo.inuse_at_peak = true;
  } else if (at) {
    int64_t duration = strchr(at, '%') ? an_trace_duration(path, ao.index != AN_INDEX_OFF) : 0;
    int status = duration < 0 ? MT_EXIT_FAILURE : MT_EXIT_OK;
    if (duration >= 0 &&
        !an_time_arg("export", "--at", "'peak', seconds or a percentage", at, duration, &to))
      status = MT_EXIT_USAGE;
    if (status != MT_EXIT_OK) {
      cli_output_file_close(&out, false);
      return status;
    }
  }
  int status;
  mt_analysis *a = an_load("export", path, &ao, false, to, &status);
  if (!a) {
    cli_output_file_close(&out, false);
    return status;
  }
  status = an_status(a, an_export_to(a, format, &eo, &out, path));
  mt_analysis_free(a);
  return status;
}
