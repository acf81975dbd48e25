/* memtap diff: what grew and shrank between two traces, per site (sites match across runs by
 * function, file and line), each side estimated with its own sampling rate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis_cli.h"
#include "cli.h"

static const char usage[] =
    "usage: memtap diff [OPTIONS] A B\n"
    "\n"
    "Per allocation site, the metric in trace A and in trace B and the change (B - A), largest\n"
    "change first. Each trace's estimates use its own sampling rate, so traces sampled at\n"
    "different rates compare. Sites are (function, file, line), so they match across runs.\n"
    "\n"
    "  --by METRIC       bytes (allocated, the default), count, live, peak\n"
    "  --group KEY       site (the default), function or file\n"
    "  -n N              show N rows (default 20; 0 for all)\n"
    "  --json            one JSON object (schema memtap.diff/1)\n" AN_USAGE_WINDOW AN_USAGE_STACKS
    "  -h, --help        show this help\n";

typedef struct row {
  mt_frame key;
  double a, b;
  const mt_group *ga, *gb;
} row;

static int compare_keys(const mt_frame *x, const mt_frame *y) {
  int c = strcmp(x->function, y->function);
  if (!c)
    c = strcmp(x->file, y->file);
  if (!c)
    c = (x->line > y->line) - (x->line < y->line);
  return c;
}

static int by_key(const void *p, const void *q) {
  return compare_keys(&((const mt_group *)p)->key, &((const mt_group *)q)->key);
}

static int by_change(const void *p, const void *q) {
  const row *x = p, *y = q;
  double dx = fabs(x->b - x->a), dy = fabs(y->b - y->a);
  if (dx != dy)
    return dx < dy ? 1 : -1;
  return compare_keys(&x->key, &y->key);
}

int mt_cmd_diff(int argc, char **argv) {
  enum { OPT_BY = 1, OPT_GROUP };
  static const struct option options[] = {AN_LONG_OPTIONS,
                                          {"by", required_argument, NULL, OPT_BY},
                                          {"group", required_argument, NULL, OPT_GROUP},
                                          {0}};
  an_options ao = {0};
  mt_metric metric = MT_METRIC_BYTES;
  mt_group_by by = MT_GROUP_SITE;
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
    case OPT_GROUP:
      if (!an_parse_group(optarg, &by))
        return cli_usage_error("diff", "--group takes site, function or file");
      break;
    case 'n':
      if (!cli_parse_int(optarg, 0, 1 << 30, &limit))
        return cli_usage_error("diff", "-n takes a count");
      break;
    default: return cli_bad_option("diff");
    }
  }
  if (optind != argc - 2)
    return cli_usage_error("diff", "expected two traces, A and B");
  const char *pa = argv[optind], *pb = argv[optind + 1];
  int status;
  mt_analysis *a = an_load("diff", pa, &ao, false, MT_TIME_UNBOUNDED, &status);
  mt_analysis *b = a ? an_load("diff", pb, &ao, false, MT_TIME_UNBOUNDED, &status) : NULL;
  mt_group *ga = NULL, *gb = NULL;
  size_t na = 0, nb = 0;
  mt_error err;
  row *rows = NULL;
  if (!a || !b)
    goto done;
  status = MT_EXIT_FAILURE;
  if (mt_analysis_group(a, by, metric, &ga, &na, &err)) {
    cli_report(pa, &err);
    goto done;
  }
  if (mt_analysis_group(b, by, metric, &gb, &nb, &err)) {
    cli_report(pb, &err);
    goto done;
  }
  qsort(ga, na, sizeof *ga, by_key);
  qsort(gb, nb, sizeof *gb, by_key);
  rows = calloc(na + nb + 1, sizeof *rows);
  if (!rows) {
    cli_error(NULL, "out of memory");
    goto done;
  }
  size_t n = 0, i = 0, j = 0;
  while (i < na || j < nb) {
    int cmp = i == na ? 1 : j == nb ? -1 : compare_keys(&ga[i].key, &gb[j].key);
    row *r = &rows[n++];
    if (cmp <= 0) {
      r->key = ga[i].key, r->ga = &ga[i], r->a = mt_analysis_metric(a, &ga[i].stats, metric);
      i++;
    }
    if (cmp >= 0) {
      r->key = gb[j].key, r->gb = &gb[j], r->b = mt_analysis_metric(b, &gb[j].stats, metric);
      j++;
    }
  }
  qsort(rows, n, sizeof *rows, by_change);
  size_t shown = limit && (size_t)limit < n ? (size_t)limit : n;
  bool count = metric == MT_METRIC_COUNT;
  cli_out o;
  out_init(&o, STDOUT_FILENO);
  if (ao.json) {
    out_printf(&o, "{\"schema\":\"memtap.diff/1\",\"by\":\"%s\",\"a\":", an_metric_name(metric));
    out_json_string(&o, pa);
    out_str(&o, ",\"b\":");
    out_json_string(&o, pb);
    out_printf(&o, ",\"rows_total\":%zu,\"rows\":[", n);
    for (size_t k = 0; k < shown; k++) {
      out_str(&o, k ? ",{\"key\":" : "{\"key\":");
      an_json_frame(&o, rows[k].key);
      out_printf(&o, ",\"a\":%.0f,\"b\":%.0f,\"change\":%.0f}", rows[k].a, rows[k].b,
                 rows[k].b - rows[k].a);
    }
    out_str(&o, "]}\n");
  } else {
    /* What the numbers are, in words: "bytes allocated per site". */
    static const char *measures[] = {"bytes allocated", "objects allocated (estimated)",
                                     "bytes live at the end", "bytes live at the peak"};
    static const char *group_names[] = {"site", "function", "file"};
    out_printf(&o, "%s per %s: A = %s, B = %s\n\n", measures[metric], group_names[by], pa, pb);
    out_printf(&o, "%12s %12s %12s  %s\n", "change", "A", "B", group_names[by]);
    for (size_t k = 0; k < shown; k++) {
      char d[40], x[32], y[32];
      double delta = rows[k].b - rows[k].a;
      if (count) {
        snprintf(d, sizeof d, "%+.0f", delta);
        snprintf(x, sizeof x, "%.0f", rows[k].a);
        snprintf(y, sizeof y, "%.0f", rows[k].b);
      } else {
        char m[32];
        snprintf(d, sizeof d, "%s%s", delta < 0 ? "-" : "+", an_size(fabs(delta), m));
        an_size(rows[k].a, x);
        an_size(rows[k].b, y);
      }
      out_printf(&o, "%12s %12s %12s  ", d, x, y);
      if (by == MT_GROUP_FILE)
        out_str(&o, rows[k].key.file);
      else
        an_print_frame(&o, rows[k].key);
      out_str(&o, "\n");
    }
  }
  status = out_finish(&o) ? MT_EXIT_OK : MT_EXIT_FAILURE;
done:
  free(rows);
  free(ga);
  free(gb);
  mt_analysis_free(a);
  mt_analysis_free(b);
  return status;
}
