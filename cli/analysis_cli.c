/* The analysis subcommands' shared helpers (analysis_cli.h). */
#include "analysis_cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/views.h"
#include "common/regex_bound.h"
#include "cli.h"

bool an_option(an_options *o, int c, const char *arg) {
  switch (c) {
  case AN_OPT_FROM: o->from = arg; return true;
  case AN_OPT_TO: o->to = arg; return true;
  case AN_OPT_HIDE:
    if (o->nhide < AN_MAX_HIDE)
      o->hide[o->nhide] = arg;
    o->nhide++;
    return true;
  case AN_OPT_NO_FOLD: o->no_fold = true; return true;
  case AN_OPT_JSON: o->json = true; return true;
  case AN_OPT_INDEX:
    o->index_both |= o->index == AN_INDEX_OFF;
    o->index = AN_INDEX_ON;
    return true;
  case AN_OPT_NO_INDEX:
    o->index_both |= o->index == AN_INDEX_ON;
    o->index = AN_INDEX_OFF;
    return true;
  default: return false;
  }
}

/* A time's number and unit: -1 if malformed, else 1 for a percentage and 0 for seconds, its value
 * in *v (finite, 0 or more). */
static int time_form(const char *text, double *v) {
  /* Plain decimal only: strtod would also take "0x10" (16 s), "1e3", "inf" and leading spaces. */
  size_t digits = strspn(text, "0123456789");
  size_t length = digits;
  if (text[length] == '.')
    length += 1 + strspn(text + length + 1, "0123456789");
  if (digits == 0 && length <= 1) /* no digit at all */
    return -1;
  char *end;
  *v = strtod(text, &end);
  if (end != text + length || !isfinite(*v) || *v < 0)
    return -1;
  if (!strcmp(end, "%"))
    return 1;
  return *end && strcmp(end, "s") ? -1 : 0;
}

bool an_time_arg(const char *cmd, const char *option, const char *forms, const char *text,
                 int64_t duration_us, int64_t *us) {
  double v;
  int percent = time_form(text, &v);
  if (percent < 0) {
    cli_usage_error(cmd, "%s takes %s, not '%s'", option, forms, text);
  } else if (percent && v > 100) {
    cli_usage_error(cmd, "%s %s: a percentage of the trace is 0%% to 100%%", option, text);
  } else if (!percent && v > AN_MAX_SECONDS) {
    cli_usage_error(cmd, "%s %s: at most %.0f seconds", option, text, AN_MAX_SECONDS);
  } else {
    *us = percent ? (int64_t)llround(v / 100 * (double)duration_us) : (int64_t)llround(v * 1e6);
    return true;
  }
  return false;
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

/* The trace an_load read was a Go trace damaged part-way (converted up to the damage). */
static bool go_damaged;

int64_t an_trace_duration(const char *path, bool use_index) {
  /* Warnings, damage and skipped packets are the analysis pass's to say, which reads the trace
   * next. */
  bool damaged = false;
  mt_reader *r = cli_open_trace_unwarned(path, &damaged);
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
  if (mt_reader_end_time(r) > last) /* the trace went on after its last event */
    last = mt_reader_end_time(r);
  mt_reader_close(r);
  if (rc < 0 && err.code != MT_E_MALFORMED) { /* damage: the analysis warns of it */
    cli_report(path, &err);
    return -1;
  }
  /* Event times are the trace's to choose: counted as every analysis counts them. */
  return mt_analysis_elapsed(last, start);
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
    fprintf(stderr, "memtap: checkpoint index updated: %zu checkpoint%s (%zu new)\n",
            use->checkpoints, out_plural((double)use->checkpoints), use->added);
}

/* A window's bound for a message, in buf: "0.467352 s", and "(50% of the trace's 0.934705 s)"
 * after it when the command line gave a percentage (`text`) of `duration`: a damaged trace's
 * duration counts the packets read, which may go on past the last event read. */
static const char *window_time(char buf[96], int64_t us, const char *text, int64_t duration) {
  int n = snprintf(buf, 96, "%.6f s", (double)us / 1e6);
  if (text && strchr(text, '%'))
    snprintf(buf + n, (size_t)(96 - n), " (%s of the trace's %.6f s)", text,
             (double)duration / 1e6);
  return buf;
}

/* The warning for a trace damaged part-way: where, what the analysis covers, and why what comes
 * just before the damage is not to be trusted either. */
static void warn_damage(const char *path, const mt_analysis *a, const mt_error *damage,
                        int64_t trace_size) {
  const mt_summary *s = mt_analysis_summary(a);
  char where[sizeof damage->message + 64], read[32], share[32];
  cli_damage_text(damage, where, sizeof where);
  out_format_bytes((double)damage->offset, read);
  if (trace_size > 0)
    snprintf(share, sizeof share, " (%.0f%%)", 100.0 * (double)damage->offset / (double)trace_size);
  else
    share[0] = 0;
  fflush(stdout);
  fprintf(stderr,
          "memtap: %s: warning: %s; the analysis covers the %s%s read before it, events up to "
          "%.6f s. memtrace traces carry no checksums, so events just before the damage may "
          "already be wrong\n",
          path, where, read, share,
          (double)mt_analysis_elapsed(s->end_time, s->info.start_time) / 1e6);
}

bool an_regex_valid(const char *cmd, const char *option, const char *regex) {
  if (mt_regex_expansion(regex) > MT_REGEX_EXPANSION_MAX) {
    cli_usage_error(cmd,
                    "bad %sregular expression '%s': its repetitions expand to more than %u "
                    "atoms",
                    option, regex, MT_REGEX_EXPANSION_MAX);
    return false;
  }
  regex_t re;
  int rc = regcomp(&re, regex, REG_EXTENDED | REG_NOSUB);
  if (rc) {
    char why[128];
    regerror(rc, &re, why, sizeof why);
    cli_usage_error(cmd, "bad %sregular expression '%s': %s", option, regex, why);
    return false;
  }
  regfree(&re);
  return true;
}

/* Every --hide pattern, each checked alone (a bad one is a bad command line, whatever the trace),
 * as one extended regular expression "(p1)|(p2)|..." in *out (malloc'd; NULL when none); false
 * after printing a usage error or running out of memory. */
static bool hide_pattern(const char *cmd, const an_options *o, char **out) {
  size_t len = 1;
  for (int i = 0; i < o->nhide; i++) {
    if (!*o->hide[i]) { /* it would hide nothing: an option is honoured or refused */
      cli_usage_error(cmd, "--hide needs a pattern (a regular expression of function names)");
      return false;
    }
    if (!an_regex_valid(cmd, "--hide ", o->hide[i]))
      return false;
    len += strlen(o->hide[i]) + 3;
  }
  *out = NULL;
  if (len == 1)
    return true;
  char *joined = malloc(len);
  if (!joined) {
    cli_error(NULL, "out of memory");
    return false;
  }
  size_t at = 0;
  for (int i = 0; i < o->nhide; i++)
    at += (size_t)snprintf(joined + at, len - at, "%s(%s)", at ? "|" : "", o->hide[i]);
  *out = joined;
  return true;
}

mt_analysis *an_load(const char *cmd, const char *path, const an_options *o, bool cells,
                     int64_t to_override, int *status) {
  *status = MT_EXIT_USAGE;
  if (o->index_both) {
    cli_usage_error(cmd, "--index and --no-index exclude each other");
    return NULL;
  }
  mt_analysis_options options = mt_analysis_default_options();
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
  const char *forms = "seconds or a percentage";
  if (o->from && !an_time_arg(cmd, "--from", forms, o->from, duration, &options.from))
    return NULL;
  if (o->to && !an_time_arg(cmd, "--to", forms, o->to, duration, &options.to))
    return NULL;
  if (to_override != MT_TIME_UNBOUNDED)
    options.to = to_override;
  if (options.from != MT_TIME_UNBOUNDED && options.to != MT_TIME_UNBOUNDED &&
      options.to < options.from) {
    cli_usage_error(cmd, "the window ends at %.6f s, before it starts at %.6f s",
                    (double)options.to / 1e6, (double)options.from / 1e6);
    return NULL;
  }
  if (o->nhide > AN_MAX_HIDE) {
    cli_usage_error(cmd, "at most %d --hide patterns (%d given): join some with '|'", AN_MAX_HIDE,
                    o->nhide);
    return NULL;
  }
  char *hide = NULL;
  if (!hide_pattern(cmd, o, &hide))
    return NULL;
  options.hide = hide;
  options.partial = true;
  *status = MT_EXIT_FAILURE;
  go_damaged = false;
  mt_reader *r = cli_open_trace_partial(path, true, &go_damaged);
  if (!r) {
    free(hide);
    return NULL;
  }
  progress p = {.shown = -1};
  bool bar = isatty(STDERR_FILENO) && mt_reader_size(r) > (64 << 20);
  if (bar) {
    options.progress = draw_progress;
    options.progress_user = &p;
  }
  int64_t trace_size = mt_reader_size(r);
  char *idx = index_for(path, o, options.from);
  options.index_path = idx;
  mt_analysis *a;
  mt_error err;
  int rc = mt_analysis_run(&a, r, &options, &err);
  if (bar && p.shown >= 0)
    fprintf(stderr, "\r%50s\r", "");
  mt_reader_close(r);
  free(idx);
  free(hide);
  if (rc) {
    cli_report(path, &err);
    return NULL;
  }
  if (idx)
    report_index(a, o);
  const mt_summary *s = mt_analysis_summary(a);
  const mt_error *damage = mt_analysis_damage(a);
  if (damage)
    warn_damage(path, a, damage, trace_size);
  if (s->cut_backtraces) {
    char n[32], depth[32];
    cli_error(path,
              "warning: %s allocation%s a backtrace deeper than %s shown frames (after folding "
              "direct recursion): only the outermost %s are shown",
              out_format_count((double)s->cut_backtraces, n),
              s->cut_backtraces == 1 ? " has" : "s have",
              out_format_count(MT_ANALYSIS_SHOWN_DEPTH_MAX, depth), depth);
  }
  /* The last event read; a pass resumed from a checkpoint may have read none after it. */
  int64_t read_to = mt_analysis_elapsed(s->end_time, s->info.start_time);
  const mt_index_use *use = mt_analysis_index_use(a);
  if (use->resumed && use->resumed_time > read_to)
    read_to = use->resumed_time;
  /* A pass that stopped at the window's end (--to) read no further: the trace goes on past it,
   * and so past a start before it, however long ago the last event read was. (Not the window's
   * end alone: one that starts and ends past the trace's end, --from 5 --to 5, ends there too.) */
  bool stopped_at_to = s->stopped_at_to && !damage;
  char start[96], end[96];
  if (options.from != MT_TIME_UNBOUNDED && options.from > read_to && !stopped_at_to) {
    window_time(start, options.from, o->from, duration);
    if (damage) { /* the command line is fine: the trace cannot be read that far */
      cli_error(path,
                "nothing to analyse: the window starts at %s, after the last event read "
                "before the damage (%.6f s)",
                start, (double)read_to / 1e6);
      *status = MT_EXIT_PARTIAL;
    } else {
      *status = cli_usage_error(cmd, "the window starts at %s, after the trace's end (%.6f s)",
                                start, (double)read_to / 1e6);
    }
    mt_analysis_free(a);
    return NULL;
  }
  if (damage && options.to != MT_TIME_UNBOUNDED && options.to > read_to)
    cli_error(path,
              "warning: the window was to end at %s, past the damage: it ends at the last "
              "event read (%.6f s)",
              window_time(end, options.to, o->to, duration), (double)read_to / 1e6);
  return a;
}

int an_fail(const char *path, const mt_error *err, mt_analysis *a) {
  cli_report(path, err);
  mt_analysis_free(a);
  return MT_EXIT_FAILURE;
}

int an_status(const mt_analysis *a, int status) {
  bool partial = a && (mt_analysis_damage(a) || mt_analysis_summary(a)->truncated || go_damaged);
  return status == MT_EXIT_OK && partial ? MT_EXIT_PARTIAL : status;
}

const char *an_size(double bytes, char buf[32]) {
  return out_format_bytes(bytes, buf);
}

bool an_exact(const mt_analysis *a) {
  return mt_analysis_summary(a)->info.sample_rate >= 1;
}

const char *an_approx(const mt_analysis *a) {
  return an_exact(a) ? "" : "~";
}

const char *an_amount_text(const mt_analysis *a, const mt_amount *m, char buf[160]) {
  char objects[32], samples[32], size[32], estimated[32];
  out_format_count((double)m->objects, objects);
  an_size(mt_analysis_bytes(a, m->samples), size);
  if (an_exact(a)) {
    snprintf(buf, 160, "%s object%s, %s", objects, out_plural((double)m->objects), size);
    return buf;
  }
  snprintf(buf, 160, "%s sampled object%s, %s sample%s, ~%s, ~%s object%s", objects,
           out_plural((double)m->objects), out_format_count((double)m->samples, samples),
           out_plural((double)m->samples), size, out_format_count(m->objects_estimated, estimated),
           out_plural((double)llround(m->objects_estimated)));
  return buf;
}

const char *an_metric_text(mt_metric metric, double value, char buf[48]) {
  if (metric != MT_METRIC_COUNT)
    return out_format_bytes(value, buf);
  char count[32];
  snprintf(buf, 48, "%s object%s", out_format_count(value, count),
           out_plural((double)llround(value)));
  return buf;
}

double an_whole(const mt_analysis *a, mt_metric metric) {
  mt_stats total = mt_analysis_totals(a);
  return mt_analysis_metric(a, &total, metric);
}

const char *an_metric_cell(mt_metric metric, double value, char buf[48]) {
  return metric == MT_METRIC_COUNT ? out_format_count(value, buf)
                                   : an_metric_text(metric, value, buf);
}

void an_json_amount(cli_out *o, const mt_analysis *a, const mt_amount *m) {
  /* Whole numbers printed from the double: a crafted trace's sums may pass 2^63, where llround's
   * result is unspecified. */
  out_printf(o, "{\"objects\":%llu,\"samples\":%llu,\"bytes\":%.0f,\"objects_estimated\":%.0f}",
             (unsigned long long)m->objects, (unsigned long long)m->samples,
             round(mt_analysis_bytes(a, m->samples)), round(m->objects_estimated));
}

void an_print_frame(cli_out *o, mt_frame f) {
  out_str(o, f.function);
  if (f.file[0] && f.line > 0)
    out_printf(o, " %s:%d", f.file, (int)f.line);
  else if (f.file[0]) /* no line: a native frame without line tables names its module */
    out_printf(o, " %s", f.file);
}

/* Whether `f` is a native frame the recorder found no symbol for: "module+0x1234" in `module`. */
static bool frame_unsymbolised(mt_frame f) {
  const char *plus = strstr(f.function, "+0x");
  if (!plus || !f.file[0] || f.line > 0 || plus == f.function)
    return false;
  for (const char *p = plus + 3; *p; p++)
    if (!isxdigit((unsigned char)*p))
      return false;
  const char *slash = strrchr(f.file, '/'), *base = slash ? slash + 1 : f.file;
  size_t n = (size_t)(plus - f.function);
  return strlen(base) == n && !strncmp(base, f.function, n);
}

void an_note_unsymbolised(an_unsymbolised *u, mt_frame f) {
  if (!frame_unsymbolised(f) || u->count == AN_UNSYMBOLISED_MAX)
    return;
  for (size_t i = 0; i < u->count; i++)
    if (!strcmp(u->modules[i], f.file))
      return;
  u->modules[u->count++] = f.file;
}

void an_print_unsymbolised(cli_out *o, const an_unsymbolised *u) {
  for (size_t i = 0; i < u->count; i++) {
    const char *slash = strrchr(u->modules[i], '/');
    out_printf(o,
               "note: no symbols for %s (its frames read %s+0x...): install its debug symbols "
               "(Debian: its -dbgsym package) and record again, or record with --debuginfod\n",
               u->modules[i], slash ? slash + 1 : u->modules[i]);
  }
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

bool an_metric_arg(const char *cmd, const char *arg, mt_metric *metric) {
  if (an_parse_metric(arg, metric))
    return true;
  cli_usage_error(cmd, "--by takes bytes, count, live, peak or temporary");
  return false;
}

bool an_count_arg(const char *cmd, const char *option, const char *arg, long long *count) {
  if (cli_parse_int(arg, 0, LLONG_MAX, count))
    return true;
  if (*arg && strspn(arg, "0123456789") == strlen(arg)) /* digits, too many of them */
    cli_usage_error(cmd, "%s %s: at most %lld", option, arg, LLONG_MAX);
  else
    cli_usage_error(cmd, "%s takes a count (0 or more), not '%s'", option, arg);
  return false;
}

bool an_group_arg(const char *cmd, const char *arg, mt_group_by *by) {
  if (an_parse_group(arg, by))
    return true;
  cli_usage_error(cmd, "--group takes site, function or file");
  return false;
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
      out_printf(o, "%s... %zu outer frame%s\n", indent, depth - shown,
                 out_plural((double)(depth - shown)));
    out_str(o, indent);
    an_print_frame(o, mt_analysis_frame(a, frames[k]));
    out_str(o, "\n");
  }
  if (inverted && shown < depth)
    out_printf(o, "%s... %zu outer frame%s\n", indent, depth - shown,
               out_plural((double)(depth - shown)));
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
  /* A focus nothing goes through gives an empty profile: valid, but said. */
  bool *keep = NULL;
  size_t matched = 1;
  if (eo->focus && mt_stacks_through(a, eo->focus, &keep, &matched, &err) == MT_OK && !matched)
    cli_error(path,
              "warning: no backtrace goes through a function matching '%s' (--focus): the "
              "output is empty",
              eo->focus);
  free(keep);
  int rc = mt_export(a, format, f, eo, &err);
  if (rc)
    cli_report(rc == MT_E_IO ? out->name : path, &err);
  /* A failed export leaves a file that was there as it was. */
  return cli_output_file_close(out, rc == MT_OK) ? MT_EXIT_OK : MT_EXIT_FAILURE;
}

void an_print_window(cli_out *o, const an_options *ao, const mt_analysis *a) {
  if (!ao->from && !ao->to)
    return;
  const mt_summary *s = mt_analysis_summary(a);
  out_printf(o, "window: %.6f s to %.6f s (%.6f s)\n", (double)s->from / 1e6, (double)s->to / 1e6,
             (double)(s->to - s->from) / 1e6);
}

void an_json_window(cli_out *o, const an_options *ao, const mt_analysis *a) {
  const mt_summary *s = mt_analysis_summary(a);
  if (!ao->from && !ao->to)
    out_str(o, ",\"window\":null");
  else
    out_printf(o, ",\"window\":{\"from_s\":%.6f,\"to_s\":%.6f}", (double)s->from / 1e6,
               (double)s->to / 1e6);
}
