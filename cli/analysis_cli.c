/* The analysis subcommands' shared helpers (analysis_cli.h). */
#include "analysis_cli.h"

#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

bool an_option(an_options *o, int c, const char *arg) {
  switch (c) {
  case AN_OPT_FROM: o->from = arg; return true;
  case AN_OPT_TO: o->to = arg; return true;
  case AN_OPT_HIDE: o->hide = arg; return true;
  case AN_OPT_NO_FOLD: o->no_fold = true; return true;
  case AN_OPT_JSON: o->json = true; return true;
  case AN_OPT_INDEX: o->index = AN_INDEX_ON; return true;
  case AN_OPT_NO_INDEX: o->index = AN_INDEX_OFF; return true;
  default: return false;
  }
}

bool an_parse_time(const char *text, int64_t duration_us, int64_t *us) {
  char *end;
  double v = strtod(text, &end);
  if (end == text || !isfinite(v) || v < 0)
    return false;
  if (!strcmp(end, "%")) {
    if (v > 100)
      return false;
    *us = (int64_t)llround(v / 100 * (double)duration_us);
    return true;
  }
  if (*end && strcmp(end, "s"))
    return false;
  if (v > 9e12)
    return false;
  *us = (int64_t)llround(v * 1e6);
  return true;
}

/* TRACE.idx for a trace file (malloc'd); NULL for standard input or when memory runs out. */
static char *index_path_of(const char *path) {
  if (!strcmp(path, "-"))
    return NULL;
  size_t n = strlen(path) + 5;
  char *idx = malloc(n);
  if (idx)
    snprintf(idx, n, "%s.idx", path);
  return idx;
}

int64_t an_trace_duration(const char *path, bool use_index) {
  mt_reader *r = cli_open_trace(path, false);
  if (!r)
    return -1;
  /* A checkpoint index that saw the whole trace knows its duration: no pass needed. */
  char *idx = use_index ? index_path_of(path) : NULL;
  if (idx) {
    int64_t known = mt_index_trace_duration(idx, r);
    free(idx);
    if (known >= 0) {
      mt_reader_close(r);
      return known;
    }
  }
  int64_t start = mt_reader_info(r)->start_time, last = start;
  mt_event ev;
  mt_error err;
  int rc;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0)
    last = ev.time;
  mt_reader_close(r);
  if (rc < 0) {
    cli_report(path, &err);
    return -1;
  }
  return last - start;
}

typedef struct progress {
  int shown; /* last percentage drawn, -1 before the first */
} progress;

static void draw_progress(void *user, int64_t position, int64_t total) {
  progress *p = user;
  if (total <= 0)
    return;
  int pct = (int)(position * 100 / total);
  if (pct == p->shown)
    return;
  p->shown = pct;
  char bar[41];
  int filled = pct * 40 / 100;
  for (int i = 0; i < 40; i++)
    bar[i] = i < filled ? '#' : ' ';
  bar[40] = 0;
  fprintf(stderr, "\r[%s] %3d%%", bar, pct);
  fflush(stderr);
}

/* TRACE.idx (malloc'd) when this analysis should use the checkpoint index, else NULL. */
static char *index_for(const char *path, const an_options *o, int64_t from) {
  char *idx = o->index == AN_INDEX_OFF ? NULL : index_path_of(path);
  if (!idx)
    return NULL;
  struct stat st;
  bool exists = stat(idx, &st) == 0;
  bool large = stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= AN_INDEX_MIN_TRACE;
  if (o->index == AN_INDEX_ON || exists || (large && from > 0))
    return idx;
  free(idx);
  return NULL;
}

/* Says what the index did when the user should know: a new or grown index, or one not used. */
static void report_index(const mt_analysis *a, const an_options *o) {
  const mt_index_use *use = mt_analysis_index_use(a);
  if (use->problem[0] && (o->index == AN_INDEX_ON || !strstr(use->problem, "compressed or not")))
    fprintf(stderr, "memtap: %s\n", use->problem);
  else if (use->written)
    fprintf(stderr, "memtap: checkpoint index updated: %zu checkpoints (%zu new)\n",
            use->checkpoints, use->added);
}

mt_analysis *an_load(const char *cmd, const char *path, const an_options *o, bool cells,
                     int64_t to_override, int *status) {
  *status = MT_EXIT_USAGE;
  mt_analysis_options options = mt_analysis_default_options();
  options.hide = o->hide;
  options.no_fold = o->no_fold;
  options.cells = cells;
  bool percent = (o->from && strchr(o->from, '%')) || (o->to && strchr(o->to, '%'));
  int64_t duration = 0;
  if (percent) {
    if (!strcmp(path, "-")) {
      cli_usage_error(cmd, "a window in %% needs a trace file, not standard input");
      return NULL;
    }
    if ((duration = an_trace_duration(path, o->index != AN_INDEX_OFF)) < 0) {
      *status = MT_EXIT_FAILURE;
      return NULL;
    }
  }
  if (o->from && !an_parse_time(o->from, duration, &options.from)) {
    cli_usage_error(cmd, "--from takes seconds or a percentage, not '%s'", o->from);
    return NULL;
  }
  if (o->to && !an_parse_time(o->to, duration, &options.to)) {
    cli_usage_error(cmd, "--to takes seconds or a percentage, not '%s'", o->to);
    return NULL;
  }
  if (to_override != MT_TIME_UNBOUNDED)
    options.to = to_override;
  if (options.from != MT_TIME_UNBOUNDED && options.to != MT_TIME_UNBOUNDED &&
      options.to < options.from) {
    cli_usage_error(cmd, "the window ends at %.6f s, before it starts at %.6f s",
                    (double)options.to / 1e6, (double)options.from / 1e6);
    return NULL;
  }
  if (o->hide && *o->hide) { /* a bad regex is a bad command line, whatever the trace */
    regex_t re;
    int rc = regcomp(&re, o->hide, REG_EXTENDED | REG_NOSUB);
    if (rc) {
      char why[128];
      regerror(rc, &re, why, sizeof why);
      cli_usage_error(cmd, "bad --hide regular expression '%s': %s", o->hide, why);
      return NULL;
    }
    regfree(&re);
  }
  *status = MT_EXIT_FAILURE;
  mt_reader *r = cli_open_trace(path, true);
  if (!r)
    return NULL;
  progress p = {.shown = -1};
  bool bar = isatty(STDERR_FILENO) && mt_reader_size(r) > (64 << 20);
  if (bar) {
    options.progress = draw_progress;
    options.progress_user = &p;
  }
  char *idx = index_for(path, o, options.from);
  options.index_path = idx;
  mt_analysis *a;
  mt_error err;
  int rc = mt_analysis_run(&a, r, &options, &err);
  if (bar && p.shown >= 0)
    fprintf(stderr, "\r%50s\r", "");
  mt_reader_close(r);
  free(idx);
  if (rc) {
    cli_report(path, &err);
    return NULL;
  }
  if (idx)
    report_index(a, o);
  return a;
}

const char *an_size(double bytes, char buf[32]) {
  static const char *units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  double v = bytes;
  while (fabs(v) >= 1000 && u < 5)
    v /= 1000, u++;
  if (u == 0)
    snprintf(buf, 32, "%.0f B", v);
  else
    snprintf(buf, 32, "%.*f %s", fabs(v) < 100 ? 1 : 0, v, units[u]);
  return buf;
}

void an_json_amount(cli_out *o, const mt_analysis *a, const mt_amount *m) {
  out_printf(o, "{\"objects\":%llu,\"samples\":%llu,\"bytes\":%lld,\"objects_estimated\":%lld}",
             (unsigned long long)m->objects, (unsigned long long)m->samples,
             (long long)llround(mt_analysis_bytes(a, m->samples)),
             (long long)llround(m->objects_estimated));
}

void an_print_frame(cli_out *o, mt_frame f) {
  out_str(o, f.function);
  if (f.file[0])
    out_printf(o, " %s:%d", f.file, (int)f.line);
}

void an_json_frame(cli_out *o, mt_frame f) {
  out_str(o, "{\"function\":");
  out_json_string(o, f.function);
  out_str(o, ",\"file\":");
  out_json_string(o, f.file);
  out_printf(o, ",\"line\":%d}", (int)f.line);
}

static const char *metric_names[] = {"bytes", "count", "live", "peak", "temporary"};

bool an_parse_metric(const char *text, mt_metric *metric) {
  for (int i = 0; i < 5; i++)
    if (!strcmp(text, metric_names[i])) {
      *metric = (mt_metric)i;
      return true;
    }
  return false;
}

const char *an_metric_name(mt_metric metric) {
  return (unsigned)metric < 5 ? metric_names[metric] : "?";
}

bool an_parse_group(const char *text, mt_group_by *by) {
  static const char *names[] = {"site", "function", "file"};
  for (int i = 0; i < 3; i++)
    if (!strcmp(text, names[i])) {
      *by = (mt_group_by)i;
      return true;
    }
  return false;
}

void an_print_stack(cli_out *o, const mt_analysis *a, size_t stack, bool inverted,
                    size_t max_frames, const char *indent) {
  size_t depth;
  const uint32_t *frames = mt_analysis_stack_frames(a, stack, &depth, NULL);
  if (depth == 0) {
    out_printf(o, "%s<no backtrace>\n", indent);
    return;
  }
  size_t shown = max_frames && depth > max_frames ? max_frames : depth;
  for (size_t i = 0; i < shown; i++) {
    /* Without --inverted the last frames shown are the innermost ones, the allocation point. */
    size_t k = inverted ? depth - 1 - i : depth - shown + i;
    if (!inverted && i == 0 && shown < depth)
      out_printf(o, "%s... %zu outer frames\n", indent, depth - shown);
    out_str(o, indent);
    an_print_frame(o, mt_analysis_frame(a, frames[k]));
    out_str(o, "\n");
  }
  if (inverted && shown < depth)
    out_printf(o, "%s... %zu outer frames\n", indent, depth - shown);
}

void an_json_stack(cli_out *o, const mt_analysis *a, size_t stack, bool inverted) {
  size_t depth;
  const uint32_t *frames = mt_analysis_stack_frames(a, stack, &depth, NULL);
  out_str(o, "[");
  for (size_t i = 0; i < depth; i++) {
    if (i)
      out_str(o, ",");
    an_json_frame(o, mt_analysis_frame(a, frames[inverted ? depth - 1 - i : i]));
  }
  out_str(o, "]");
}

int an_export_to(const mt_analysis *a, mt_export_format format, const mt_export_options *eo,
                 cli_output_file *out, const char *path) {
  FILE *f = cli_output_file_stream(out);
  if (!f) {
    cli_output_file_close(out, false);
    return MT_EXIT_FAILURE;
  }
  static char buffer[1 << 16];
  setvbuf(f, buffer, _IOFBF, sizeof buffer);
  mt_error err;
  int rc = mt_export(a, format, f, eo, &err);
  if (rc)
    cli_report(rc == MT_E_IO ? out->name : path, &err);
  /* A failed export leaves a file that was there as it was. */
  return cli_output_file_close(out, rc == MT_OK) ? MT_EXIT_OK : MT_EXIT_FAILURE;
}
