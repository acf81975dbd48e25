/* memtap leaks: objects not freed by the end of the trace (or window), grouped by site, largest
 * first; with --fail-above, an exit status for CI when the estimate is above a limit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis_cli.h"
#include "cli.h"

static const char usage[] =
    "usage: memtap leaks [OPTIONS] TRACE\n"
    "\n"
    "Objects not freed by the end of the trace (or of the --to window), grouped by allocation\n"
    "site, largest first. 'Not freed by the end' is all a trace can tell: a program that exits\n"
    "without freeing what it still uses shows it here too.\n"
    "\n"
    "  --fail-above N    exit with status 3 when the estimated leaked bytes exceed N\n"
    "  --group KEY       site (the default), function or file\n"
    "  -n N              show N groups (default 20; 0 for all)\n"
    "  --depth N         show at most N frames of each backtrace (default 12; 0 for all)\n"
    "  --inverted        print backtraces from the allocation point outward\n"
    "  --json            one JSON object (schema memtap.leaks/1)\n" AN_USAGE_WINDOW AN_USAGE_STACKS
    "  -h, --help        show this help\n";

int mt_cmd_leaks(int argc, char **argv) {
  enum { OPT_FAIL = 1, OPT_GROUP, OPT_INVERTED, OPT_DEPTH };
  static const struct option options[] = {AN_LONG_OPTIONS,
                                          {"fail-above", required_argument, NULL, OPT_FAIL},
                                          {"group", required_argument, NULL, OPT_GROUP},
                                          {"inverted", no_argument, NULL, OPT_INVERTED},
                                          {"depth", required_argument, NULL, OPT_DEPTH},
                                          {0}};
  an_options ao = {0};
  mt_group_by by = MT_GROUP_SITE;
  bool inverted = false;
  long long limit = 20, depth = 12, fail_above = -1;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "hn:", options)) != -1) {
    if (an_option(&ao, c, optarg))
      continue;
    switch (c) {
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    case OPT_FAIL:
      if (!cli_parse_int(optarg, 0, INT64_MAX, &fail_above))
        return cli_usage_error("leaks", "--fail-above takes a number of bytes");
      break;
    case OPT_GROUP:
      if (!an_group_arg("leaks", optarg, &by))
        return MT_EXIT_USAGE;
      break;
    case OPT_INVERTED: inverted = true; break;
    case 'n':
      if (!an_count_arg("leaks", "-n", optarg, &limit))
        return MT_EXIT_USAGE;
      break;
    case OPT_DEPTH:
      if (!an_count_arg("leaks", "--depth", optarg, &depth))
        return MT_EXIT_USAGE;
      break;
    default: return cli_bad_option("leaks");
    }
  }
  if (optind != argc - 1)
    return cli_one_trace_expected("leaks", argc, argv);
  const char *path = argv[optind];
  int status;
  mt_analysis *a = an_load("leaks", path, &ao, false, MT_TIME_UNBOUNDED, &status);
  if (!a)
    return status;
  mt_group *groups;
  size_t n;
  mt_error err;
  if (mt_analysis_group(a, by, MT_METRIC_LIVE, &groups, &n, &err)) {
    return an_fail(path, &err, a);
  }
  const mt_summary *s = mt_analysis_summary(a);
  double leaked = mt_analysis_bytes(a, s->live_end.samples);
  bool windowed = s->to < mt_analysis_elapsed(s->end_time, s->info.start_time) || ao.to;
  const char *where = windowed ? "the window" : "the trace";
  size_t shown = limit && (size_t)limit < n ? (size_t)limit : n;
  cli_out o;
  out_init(&o, STDOUT_FILENO);
  if (ao.json) {
    static const char *group_names[] = {"site", "function", "file"};
    out_printf(&o,
               "{\"schema\":\"memtap.leaks/1\",\"definition\":\"not freed by the end of %s\","
               "\"end_s\":%.6f,\"group\":\"%s\",\"total\":",
               where, (double)s->to / 1e6, group_names[by]);
    an_json_amount(&o, a, &s->live_end);
    out_printf(&o, ",\"groups_total\":%zu,\"groups\":[", n);
    for (size_t i = 0; i < shown; i++) {
      const mt_group *g = &groups[i];
      out_str(&o, i ? ",{\"key\":" : "{\"key\":");
      an_json_frame(&o, g->key);
      out_str(&o, ",\"leaked\":");
      an_json_amount(&o, a, &g->stats.live);
      out_printf(&o, ",\"stacks\":%zu,\"backtrace\":", g->stacks);
      an_json_stack(&o, a, g->top_stack, inverted);
      out_str(&o, "}");
    }
    out_str(&o, "]}\n");
  } else {
    char b1[32], n1[32], n2[32], n3[32];
    const mt_amount *m = &s->live_end;
    if (an_exact(a))
      out_printf(&o, "not freed by the end of %s (%.6f s): %s object%s, %s, in %s group%s\n", where,
                 (double)s->to / 1e6, out_format_count((double)m->objects, n1),
                 out_plural((double)m->objects), an_size(leaked, b1),
                 out_format_count((double)n, n3), out_plural((double)n));
    else
      out_printf(&o,
                 "not freed by the end of %s (%.6f s): %s sampled object%s, %s sample%s, ~%s, in "
                 "%s group%s\n",
                 where, (double)s->to / 1e6, out_format_count((double)m->objects, n1),
                 out_plural((double)m->objects), out_format_count((double)m->samples, n2),
                 out_plural((double)m->samples), an_size(leaked, b1),
                 out_format_count((double)n, n3), out_plural((double)n));
    an_print_window(&o, &ao, a); /* issue 12: the window in the header */
    out_str(&o, "\n");
    an_unsymbolised unnamed = {0};
    for (size_t i = 0; i < shown; i++) {
      const mt_group *g = &groups[i];
      if (by != MT_GROUP_FILE)
        an_note_unsymbolised(&unnamed, g->key);
      m = &g->stats.live;
      if (an_exact(a))
        out_printf(&o, "%3zu. %s object%s, %s\n     ", i + 1,
                   out_format_count((double)m->objects, n1), out_plural((double)m->objects),
                   an_size(mt_analysis_bytes(a, m->samples), b1));
      else
        out_printf(&o, "%3zu. %s object%s, %s sample%s, ~%s (~%s object%s estimated)\n     ", i + 1,
                   out_format_count((double)m->objects, n1), out_plural((double)m->objects),
                   out_format_count((double)m->samples, n2), out_plural((double)m->samples),
                   an_size(mt_analysis_bytes(a, m->samples), b1),
                   out_format_count(m->objects_estimated, n3),
                   out_plural((double)llround(m->objects_estimated)));
      if (by == MT_GROUP_FILE)
        out_str(&o, g->key.file);
      else
        an_print_frame(&o, g->key);
      out_str(&o, "\n");
      an_print_stack(&o, a, g->top_stack, inverted, (size_t)depth, "       ");
      out_str(&o, "\n");
    }
    an_print_unsymbolised(&o, &unnamed);
  }
  status = an_status(a, out_finish(&o) ? MT_EXIT_OK : MT_EXIT_FAILURE);
  if ((status == MT_EXIT_OK || status == MT_EXIT_PARTIAL) && fail_above >= 0 &&
      leaked > (double)fail_above) {
    char b1[32];
    cli_error(path, "leaked %s%s, above --fail-above %lld", an_approx(a), an_size(leaked, b1),
              fail_above);
    status = MT_EXIT_THRESHOLD;
  }
  free(groups);
  mt_analysis_free(a);
  return status;
}
