/* memtap diff: what grew and shrank between two traces, per site, function or file (sites match
 * across runs by function, file and line), each side estimated with its own sampling rate, with
 * a totals row, the change in percent, and changes smaller than the sampling noise marked
 * (src/analysis/diff.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/diff.h"
#include "analysis_cli.h"
#include "cli.h"

static const char usage[] =
    "usage: memtap diff [OPTIONS] A B\n"
    "\n"
    "Per allocation site, the metric in trace A and in trace B, the change (B - A) and the change\n"
    "in percent of A, largest change first, then the totals. Each trace's estimates use its own\n"
    "sampling rate, so traces sampled at different rates compare; a change smaller than twice\n"
    "the standard deviation that sampling alone gives it is marked '~' (sampling noise: sample\n"
    "counts are Poisson; docs/analysis.md). Sites are (function, file, line), so they match\n"
    "across runs; traces of different executables are compared with a warning.\n"
    "\n"
    "  --by METRIC       bytes (allocated, the default), count, live, peak\n"
    "  --group KEY       site (the default), function or file\n"
    "  --inclusive       compare each key's inclusive cost (cum: the backtraces through it, as\n"
    "                    memtap functions) instead of what it allocated itself\n"
    "  -n N              show N rows (default 20; 0 for all)\n"
    "  --json            one JSON object (schema memtap.diff/1)\n" AN_USAGE_WINDOW AN_USAGE_STACKS
    "  -h, --help        show this help\n";

static const char *group_names[] = {"site", "function", "file"};

/* "+144 B" / "-3" / "+0 B": a signed change. */
static const char *signed_text(mt_metric metric, double delta, char buf[48]) {
  char m[40];
  if (metric == MT_METRIC_COUNT)
    out_format_count(fabs(delta), m);
  else
    an_size(fabs(delta), m);
  snprintf(buf, 48, "%s%s", delta < 0 ? "-" : "+", m);
  return buf;
}

static const char *value_text(mt_metric metric, double v, char buf[48]) {
  return metric == MT_METRIC_COUNT ? out_format_count(v, buf) : an_size(v, buf);
}

/* The change in percent of A: "+81.8%", "new" when A is 0. */
static const char *percent_text(const mt_diff_row *r, char buf[32]) {
  if (r->a == 0)
    snprintf(buf, 32, "%s", r->b == 0 ? "0%" : "new");
  else
    snprintf(buf, 32, "%+.1f%%", 100 * (r->b - r->a) / r->a);
  return buf;
}

static void print_row(cli_out *o, mt_metric metric, mt_group_by by, const mt_diff_row *r,
                      bool total) {
  char d[48], x[48], y[48], p[32];
  out_printf(o, "%12s %8s %12s %12s %c ", signed_text(metric, r->b - r->a, d), percent_text(r, p),
             value_text(metric, r->a, x), value_text(metric, r->b, y), r->within_noise ? '~' : ' ');
  if (total)
    out_str(o, "total");
  else if (by == MT_GROUP_FILE)
    out_str(o, r->key.file[0] ? r->key.file : "(no file)");
  else
    an_print_frame(o, r->key);
  out_str(o, "\n");
}

static void json_row(cli_out *o, const mt_diff_row *r) {
  out_printf(o, ",\"a\":%.0f,\"b\":%.0f,\"change\":%.0f,\"change_percent\":", r->a, r->b,
             r->b - r->a);
  if (r->a == 0)
    out_str(o, "null");
  else
    out_printf(o, "%.2f", 100 * (r->b - r->a) / r->a);
  out_printf(o, ",\"noise\":%.0f,\"within_noise\":%s}", r->noise,
             r->within_noise ? "true" : "false");
}

static void json_side(cli_out *o, const char *name, const char *path, const mt_analysis *a) {
  const mt_summary *s = mt_analysis_summary(a);
  out_printf(o, ",\"%s\":", name);
  out_json_string(o, path);
  out_printf(o, ",\"%s_trace\":{\"executable\":", name);
  out_json_string(o, s->info.executable_name ? s->info.executable_name : "");
  out_printf(o, ",\"sample_rate\":%.17g,\"bytes_per_sample\":%.17g}", s->info.sample_rate,
             s->bytes_per_sample);
}

static void print_text(cli_out *o, const char *pa, const char *pb, const mt_analysis *a,
                       const mt_analysis *b, const an_options *ao, mt_metric metric, mt_group_by by,
                       bool inclusive, const mt_diff *d, size_t shown) {
  /* What the numbers are, in words: "bytes allocated per site". */
  static const char *measures[] = {"bytes allocated", "objects allocated (estimated)",
                                   "bytes live at the end", "bytes live at the peak"};
  const mt_summary *sa = mt_analysis_summary(a), *sb = mt_analysis_summary(b);
  char x[48], y[48];
  out_printf(o, "%s per %s%s: A = %s, B = %s\n", measures[metric], group_names[by],
             inclusive ? ", inclusive (by it or anything it called)" : "", pa, pb);
  char ra[40], rb[40];
  out_printf(
      o, "sampling: A at rate %s (%s B per sample), B at rate %s (%s B per sample)\n",
      out_format_decimal(sa->info.sample_rate, ra), out_format_count(sa->bytes_per_sample, x),
      out_format_decimal(sb->info.sample_rate, rb), out_format_count(sb->bytes_per_sample, y));
  an_print_window(o, ao, a);
  if (!d->changed && d->total.a == d->total.b) {
    out_printf(o, "\nno differences: every %s has the same %s in A and B (total %s)\n",
               group_names[by], measures[metric], value_text(metric, d->total.a, x));
    return;
  }
  out_printf(o, "\n%12s %8s %12s %12s   %s\n", "change", "change%", "A", "B", group_names[by]);
  bool noisy = d->total.within_noise;
  for (size_t k = 0; k < shown; k++) {
    print_row(o, metric, by, &d->rows[k], false);
    noisy |= d->rows[k].within_noise;
  }
  if (shown < d->count)
    out_printf(o, "%12s %8s %12s %12s   (%zu more %ss, -n 0 shows all)\n", "", "", "", "",
               d->count - shown, group_names[by]);
  print_row(o, metric, by, &d->total, true);
  if (!d->beyond_noise && d->changed)
    out_printf(o, "\nno change is larger than the sampling noise\n");
  if (noisy)
    out_printf(o,
               "\n~ within the sampling noise: |B - A| < %g standard deviations (sample counts "
               "are Poisson; docs/analysis.md)\n",
               MT_DIFF_NOISE_Z);
}

int mt_cmd_diff(int argc, char **argv) {
  enum { OPT_BY = 1, OPT_GROUP, OPT_INCLUSIVE };
  static const struct option options[] = {AN_LONG_OPTIONS,
                                          {"by", required_argument, NULL, OPT_BY},
                                          {"group", required_argument, NULL, OPT_GROUP},
                                          {"inclusive", no_argument, NULL, OPT_INCLUSIVE},
                                          {0}};
  an_options ao = {0};
  mt_metric metric = MT_METRIC_BYTES;
  mt_group_by by = MT_GROUP_SITE;
  bool inclusive = false;
  long long limit = 20;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "hn:", options)) != -1) {
    if (an_option(&ao, c, optarg))
      continue;
    switch (c) {
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    case OPT_BY:
      if (!an_parse_metric(optarg, &metric) || metric == MT_METRIC_TEMPORARY)
        return cli_usage_error("diff", "--by takes bytes, count, live or peak");
      break;
    case OPT_INCLUSIVE: inclusive = true; break;
    case OPT_GROUP:
      if (!an_group_arg("diff", optarg, &by))
        return MT_EXIT_USAGE;
      break;
    case 'n':
      if (!an_count_arg("diff", "-n", optarg, &limit))
        return MT_EXIT_USAGE;
      break;
    default: return cli_bad_option("diff");
    }
  }
  if (optind != argc - 2)
    return cli_usage_error("diff", "expected two traces, A and B");
  const char *pa = argv[optind], *pb = argv[optind + 1];
  if (!strcmp(pa, "-") && !strcmp(pb, "-"))
    return cli_usage_error("diff", "A and B are both standard input: give at most one as -");
  int status;
  mt_analysis *a = an_load("diff", pa, &ao, false, MT_TIME_UNBOUNDED, &status);
  mt_analysis *b = a ? an_load("diff", pb, &ao, false, MT_TIME_UNBOUNDED, &status) : NULL;
  if (!a || !b) {
    mt_analysis_free(a);
    return status;
  }
  mt_diff d;
  mt_error err;
  if (mt_diff_compute(a, b, by, metric, inclusive, &d, &err)) {
    cli_report(NULL, &err);
    mt_analysis_free(a);
    mt_analysis_free(b);
    return MT_EXIT_FAILURE;
  }
  bool same = mt_diff_same_executable(a, b);
  if (!same) {
    const char *ea = mt_analysis_summary(a)->info.executable_name;
    const char *eb = mt_analysis_summary(b)->info.executable_name;
    fprintf(stderr,
            "memtap: warning: A and B come from different executables (A: %s, B: %s): their "
            "sites may not correspond\n",
            ea ? ea : "", eb ? eb : "");
  }
  size_t shown = limit && (size_t)limit < d.count ? (size_t)limit : d.count;
  cli_out o;
  out_init(&o, STDOUT_FILENO);
  if (ao.json) {
    out_printf(&o, "{\"schema\":\"memtap.diff/1\",\"by\":\"%s\",\"group\":\"%s\",\"inclusive\":%s",
               an_metric_name(metric), group_names[by], inclusive ? "true" : "false");
    json_side(&o, "a", pa, a);
    json_side(&o, "b", pb, b);
    out_printf(&o, ",\"same_executable\":%s", same ? "true" : "false");
    an_json_window(&o, &ao, a);
    out_printf(&o, ",\"noise_z\":%g,\"changed\":%zu,\"beyond_noise\":%zu,\"total\":{\"key\":null",
               MT_DIFF_NOISE_Z, d.changed, d.beyond_noise);
    json_row(&o, &d.total);
    out_printf(&o, ",\"rows_total\":%zu,\"rows\":[", d.count);
    for (size_t k = 0; k < shown; k++) {
      out_str(&o, k ? ",{\"key\":" : "{\"key\":");
      an_json_frame(&o, d.rows[k].key);
      json_row(&o, &d.rows[k]);
    }
    out_str(&o, "]}\n");
  } else {
    print_text(&o, pa, pb, a, b, &ao, metric, by, inclusive, &d, shown);
  }
  status = an_status(b, an_status(a, out_finish(&o) ? MT_EXIT_OK : MT_EXIT_FAILURE));
  mt_diff_free(&d);
  mt_analysis_free(a);
  mt_analysis_free(b);
  return status;
}
