/* memtap timeline: the live heap over time, total and for the top sites (by their share of the
 * peak), drawn in the terminal, or as CSV or JSON. Rows are the report cells' time buckets (at most
 * 64): a row gives what is live at its end, and the largest live heap inside it. A row covers
 * [start, end); the last one ends at the window's end and includes it, so that what happens at that
 * moment is in the table and no two rows share an end time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis_cli.h"
#include "cli.h"

static const char usage[] =
    "usage: memtap timeline [OPTIONS] TRACE\n"
    "\n"
    "The estimated live heap over time: at the end of each step and the largest inside it, and\n"
    "for the top sites by their share of the peak, what of theirs is live at each step's end.\n"
    "The terminal chart stacks the top sites as letters A, B, ... and the rest as '#'.\n"
    "\n"
    "  --csv             CSV: time_s,live_bytes,max_bytes, then one column per top site\n"
    "  --json            one JSON object (schema memtap.timeline/1); not with --csv\n"
    "  -n N              how many top sites (default 5, at most 26)\n" AN_USAGE_WINDOW
        AN_USAGE_STACKS "  -h, --help        show this help\n";

static bool same_frame(mt_frame x, mt_frame y) {
  return x.line == y.line && !strcmp(x.function, y.function) && !strcmp(x.file, y.file);
}

/* Decimals that tell apart times `step_us` apart (at least 3, at most 6). */
static int time_decimals(int64_t step_us) {
  int d = 3;
  for (int64_t unit = 1000; d < 6 && step_us < unit; unit /= 10)
    d++;
  return d;
}

static void csv_field(cli_out *o, const char *s) {
  out_str(o, "\"");
  for (; *s; s++)
    out_bytes(o, *s == '"' ? "\"\"" : s, *s == '"' ? 2 : 1);
  out_str(o, "\"");
}

int mt_cmd_timeline(int argc, char **argv) {
  enum { OPT_CSV = 1 };
  static const struct option options[] = {
      AN_LONG_OPTIONS, {"csv", no_argument, NULL, OPT_CSV}, {0}};
  an_options ao = {0};
  bool csv = false;
  long long top_n = 5;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "hn:", options)) != -1) {
    if (an_option(&ao, c, optarg))
      continue;
    switch (c) {
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    case OPT_CSV: csv = true; break;
    case 'n':
      if (!cli_parse_int(optarg, 0, 26, &top_n))
        return cli_usage_error("timeline", "-n takes a count from 0 to 26");
      break;
    default: return cli_bad_option("timeline");
    }
  }
  if (csv && ao.json)
    return cli_usage_error("timeline", "--csv and --json are alternatives: give one");
  if (optind != argc - 1)
    return cli_one_trace_expected("timeline", argc, argv);
  const char *path = argv[optind];
  int status;
  mt_analysis *a = an_load("timeline", path, &ao, true, MT_TIME_UNBOUNDED, &status);
  if (!a)
    return status;
  mt_group *groups;
  size_t ngroups;
  mt_error err;
  if (mt_analysis_group(a, MT_GROUP_SITE, MT_METRIC_PEAK, &groups, &ngroups, &err)) {
    return an_fail(path, &err, a);
  }
  size_t nsites = ngroups < (size_t)top_n ? ngroups : (size_t)top_n;
  const mt_summary *s = mt_analysis_summary(a);
  size_t ncells, nfine;
  int64_t cw, fw;
  const mt_cell *cells = mt_analysis_cells(a, &ncells, &cw);
  const mt_timeline_bucket *fine = mt_analysis_timeline(a, &nfine, &fw);
  /* Whole steps up to the window's end; the last one also takes the events at the end itself
   * (their cell bucket is the next one when the window is a whole number of steps). */
  size_t rows = (size_t)((s->to - s->from + cw - 1) / cw);
  if (rows < 1)
    rows = 1;
  if (rows > MT_CELL_TIME_BUCKETS)
    rows = MT_CELL_TIME_BUCKETS;
  /* Which top site (or nsites for "the rest") each stack belongs to. */
  size_t nstacks = mt_analysis_stack_count(a);
  uint8_t *site_of = malloc(nstacks + 1);
  double *live = calloc(rows * (nsites + 1), sizeof *live); /* row-major: [row][site|rest] */
  double *total = calloc(rows, sizeof *total), *max = calloc(rows, sizeof *max);
  if (!site_of || !live || !total || !max) {
    cli_error(path, "out of memory");
    free(site_of), free(live), free(total), free(max), free(groups);
    mt_analysis_free(a);
    return MT_EXIT_FAILURE;
  }
  for (size_t i = 0; i < nstacks; i++) {
    site_of[i] = (uint8_t)nsites;
    mt_frame f = mt_analysis_frame(a, mt_analysis_stack_site(a, i));
    for (size_t k = 0; k < nsites; k++)
      if (same_frame(f, groups[k].key))
        site_of[i] = (uint8_t)k;
  }
  for (size_t i = 0; i < ncells; i++) {
    const mt_cell *cell = &cells[i];
    size_t lo = cell->alloc_bucket == MT_CELL_BEFORE ? 0 : cell->alloc_bucket;
    size_t hi = cell->free_bucket == MT_CELL_NEVER ? rows : cell->free_bucket;
    if (lo > rows - 1)
      lo = rows - 1;
    if (cell->free_bucket != MT_CELL_NEVER && hi > rows - 1)
      hi = rows - 1; /* freed in the last row, or at its end: not live at its end */
    double bytes = mt_analysis_bytes(a, cell->amount.samples);
    for (size_t b = lo; b < hi; b++) {
      live[b * (nsites + 1) + site_of[cell->stack]] += bytes;
      total[b] += bytes;
    }
  }
  double chart_max = 1;
  size_t per_row = cw > fw ? (size_t)(cw / fw) : 1; /* both widths are powers of two */
  for (size_t b = 0; b < rows; b++) {
    size_t f0 = b * per_row, f1 = b == rows - 1 ? nfine : (b + 1) * per_row;
    for (size_t f = f0; f < f1 && f < nfine; f++)
      if (fine[f].live_max > max[b])
        max[b] = fine[f].live_max;
    if (max[b] < total[b])
      max[b] = total[b];
    if (max[b] > chart_max)
      chart_max = max[b];
  }
  /* Enough decimals to tell every row's end from the previous one: the last row may be short. */
  int64_t last_step = s->to - (s->from + (int64_t)(rows - 1) * cw);
  int decimals = time_decimals(last_step > 0 && last_step < cw ? last_step : cw);
  int time_width = decimals + 5;
  cli_out o;
  out_init(&o, STDOUT_FILENO);
  if (csv) {
    out_str(&o, "time_s,live_bytes,max_bytes");
    for (size_t k = 0; k < nsites; k++) {
      out_str(&o, ",");
      mt_frame f = groups[k].key;
      if (f.file[0]) {
        size_t len = strlen(f.function) + strlen(f.file) + 32;
        char *label = malloc(len);
        if (label) {
          snprintf(label, len, "%s %s:%d", f.function, f.file, (int)f.line);
          csv_field(&o, label);
          free(label);
        }
      } else {
        csv_field(&o, f.function);
      }
    }
    out_str(&o, ",other_bytes\n");
  } else if (ao.json) {
    out_printf(&o,
               "{\"schema\":\"memtap.timeline/1\",\"from_s\":%.6f,\"to_s\":%.6f,"
               "\"step_s\":%.6f,\"sites\":[",
               (double)s->from / 1e6, (double)s->to / 1e6, (double)cw / 1e6);
    for (size_t k = 0; k < nsites; k++) {
      if (k)
        out_str(&o, ",");
      an_json_frame(&o, groups[k].key);
    }
    out_str(&o, "],\"rows\":[");
  } else {
    char b1[32];
    out_printf(&o, "live heap over time (peak %s%s at %.6f s), one row per %.6f s\n", an_approx(a),
               an_size(mt_analysis_bytes(a, s->at_peak.samples), b1), (double)s->peak_time / 1e6,
               (double)cw / 1e6);
    an_print_window(&o, &ao, a); /* issue 12: the window in the header */
    for (size_t k = 0; k < nsites; k++) {
      out_printf(&o, "  %c  ", (char)('A' + k));
      an_print_frame(&o, groups[k].key);
      out_printf(&o, " (%s%s at the peak)\n", an_approx(a),
                 an_size(mt_analysis_bytes(a, groups[k].stats.peak.samples), b1));
    }
    out_printf(&o, "  #  other sites\n\n%*s %12s %12s\n", time_width + 2, "time (end)", "live",
               "max");
  }
  for (size_t b = 0; b < rows; b++) {
    int64_t t_end = s->from + (int64_t)(b + 1) * cw;
    if (t_end > s->to)
      t_end = s->to;
    const double *row = &live[b * (nsites + 1)];
    if (csv) {
      out_printf(&o, "%.6f,%.0f,%.0f", (double)t_end / 1e6, total[b], max[b]);
      for (size_t k = 0; k <= nsites; k++)
        out_printf(&o, ",%.0f", row[k]);
      out_str(&o, "\n");
    } else if (ao.json) {
      out_printf(&o, "%s{\"time_s\":%.6f,\"live_bytes\":%.0f,\"max_bytes\":%.0f,\"sites\":[",
                 b ? "," : "", (double)t_end / 1e6, total[b], max[b]);
      for (size_t k = 0; k < nsites; k++)
        out_printf(&o, "%s%.0f", k ? "," : "", row[k]);
      out_printf(&o, "],\"other_bytes\":%.0f}", row[nsites]);
    } else {
      char b1[32], b2[32];
      out_printf(&o, "%*.*f s %12s %12s |", time_width, decimals, (double)t_end / 1e6,
                 an_size(total[b], b1), an_size(max[b], b2));
      double acc = 0;
      int drawn = 0;
      for (size_t k = 0; k <= nsites; k++) {
        acc += row[k];
        int upto = (int)lround(acc / chart_max * 60);
        for (; drawn < upto; drawn++)
          out_bytes(&o, k < nsites ? &(char){(char)('A' + k)} : "#", 1);
      }
      out_str(&o, "\n");
    }
  }
  if (ao.json)
    out_str(&o, "]}\n");
  status = an_status(a, out_finish(&o) ? MT_EXIT_OK : MT_EXIT_FAILURE);
  free(site_of), free(live), free(total), free(max), free(groups);
  mt_analysis_free(a);
  return status;
}
