/* memtap top: the heaviest allocation sites (or functions, or files) by a metric, each with its
 * heaviest backtrace, or with --inverted the tree of its callers: its backtraces merged from the
 * allocation point outward, each caller weighed by the metric of the backtraces through it (pprof's
 * peek, heaptrack's bottom-up view), built from the analysis's stacks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/views.h"
#include "analysis_cli.h"
#include "cli.h"
#include "common/grow.h"
#include "functions_view.h"

static const char usage[] =
    "usage: memtap top [OPTIONS] TRACE\n"
    "\n"
    "The heaviest allocation sites, with the heaviest backtrace of each. A site is the innermost\n"
    "frame (function, file, line) of a backtrace that has a source location.\n"
    "\n"
    "  --by METRIC       bytes (allocated, the default), count (objects allocated), live (at the\n"
    "                    end), peak (live at the peak), temporary (needs a trace at rate 1)\n"
    "  --group KEY       site (the default), function or file\n"
    "  --inverted        show the callers of each group's allocation points instead: its\n"
    "                    backtraces merged into a tree from the allocation point outward, with\n"
    "                    each caller's share of the group (under each frame the 5 largest\n"
    "                    callers with 5% or more, the others summed)\n"
    "  --inclusive       show each group's exclusive and inclusive cost instead, as pprof's\n"
    "                    flat and cum columns (the table of memtap functions, which see)\n"
    "  --focus REGEX     count only the backtraces through a function whose name matches the\n"
    "                    POSIX extended REGEX (pprof's -focus); shares stay of the whole trace\n"
    "  -n N              show N groups (default 10; 0 for all)\n"
    "  --depth N         show at most N frames of each backtrace or levels of callers (default\n"
    "                    12; 0 for all)\n"
    "  --json            one JSON object (schema memtap.top/1)\n" AN_USAGE_WINDOW AN_USAGE_STACKS
    "  -h, --help        show this help\n";

/* The text tree shows under each frame its largest callers, at most TOP_CALLERS of them and only
 * those with at least CALLER_MIN_SHARE of the group's value, and sums the others in one line: a
 * site of a real trace has hundreds of backtraces. The JSON tree has them all. */
#define TOP_CALLERS 5
#define CALLER_MIN_SHARE 0.05

/* A stack with its group key, for finding a group's stacks by binary search. */
typedef struct keyed_stack {
  mt_frame key;
  uint32_t stack;
} keyed_stack;

/* One frame of a caller tree: the backtraces that reach it from the allocation point. */
typedef struct caller_node {
  uint32_t frame; /* for mt_analysis_frame */
  double value;   /* the metric summed over those backtraces */
  uint32_t child; /* the first caller, UINT32_MAX for none */
  uint32_t next;  /* the next caller of the same frame, UINT32_MAX for none */
} caller_node;

typedef struct caller_tree {
  caller_node *nodes; /* nodes[0] is the root: the group itself */
  size_t count, cap;
} caller_tree;

static int compare_frames(mt_frame x, mt_frame y) {
  int c = strcmp(x.function, y.function);
  if (!c)
    c = strcmp(x.file, y.file);
  if (!c)
    c = (x.line > y.line) - (x.line < y.line);
  return c;
}

static int by_key(const void *p, const void *q) {
  const keyed_stack *x = p, *y = q;
  int c = compare_frames(x->key, y->key);
  return c ? c : (x->stack > y->stack) - (x->stack < y->stack);
}

/* Every stack with its group key (as mt_analysis_group makes them), sorted by key; NULL when
 * memory runs out. */
static keyed_stack *keyed_stacks(const mt_analysis *a, mt_group_by by, size_t *count) {
  size_t n = mt_analysis_stack_count(a);
  keyed_stack *ks = malloc((n ? n : 1) * sizeof *ks);
  if (!ks)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    mt_frame f = mt_analysis_frame(a, mt_analysis_stack_site(a, i));
    if (by == MT_GROUP_FUNCTION)
      f.file = "", f.line = 0;
    else if (by == MT_GROUP_FILE)
      f.function = "", f.line = 0;
    ks[i] = (keyed_stack){f, (uint32_t)i};
  }
  qsort(ks, n, sizeof *ks, by_key);
  *count = n;
  return ks;
}

static uint32_t caller_add(caller_tree *t, uint32_t parent, uint32_t frame) {
  if (t->count == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 64;
    caller_node *p = realloc(t->nodes, cap * sizeof *p);
    if (!p)
      return UINT32_MAX;
    t->nodes = p;
    t->cap = cap;
  }
  uint32_t i = (uint32_t)t->count++;
  t->nodes[i] = (caller_node){frame, 0, UINT32_MAX, UINT32_MAX};
  if (parent != UINT32_MAX) {
    t->nodes[i].next = t->nodes[parent].child;
    t->nodes[parent].child = i;
  }
  return i;
}

/* Builds the caller tree of the group keyed `key`: each of its stacks with a nonzero metric,
 * read from the innermost frame outward, at most `levels` frames (0: all). False when memory runs
 * out. */
static bool callers_build(caller_tree *t, const mt_analysis *a, const keyed_stack *ks, size_t nks,
                          mt_frame key, mt_metric metric, size_t levels) {
  t->count = 0;
  if (caller_add(t, UINT32_MAX, UINT32_MAX) == UINT32_MAX)
    return false;
  size_t lo = 0, hi = nks;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (compare_frames(ks[mid].key, key) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo; i < nks && !compare_frames(ks[i].key, key); i++) {
    double v = mt_analysis_metric(a, mt_analysis_stack_stats(a, ks[i].stack), metric);
    if (v <= 0)
      continue;
    size_t depth;
    const uint32_t *frames = mt_analysis_stack_frames(a, ks[i].stack, &depth, NULL);
    size_t shown = levels && depth > levels ? levels : depth;
    uint32_t node = 0;
    t->nodes[0].value += v;
    for (size_t k = 0; k < shown; k++) {
      uint32_t frame = frames[depth - 1 - k], c = t->nodes[node].child;
      while (c != UINT32_MAX && t->nodes[c].frame != frame)
        c = t->nodes[c].next;
      if (c == UINT32_MAX && (c = caller_add(t, node, frame)) == UINT32_MAX)
        return false;
      t->nodes[c].value += v;
      node = c;
    }
  }
  return true;
}

static const caller_tree *sort_tree; /* qsort has no user pointer */
static const mt_analysis *sort_analysis;

static int by_value(const void *p, const void *q) {
  const caller_node *x = &sort_tree->nodes[*(const uint32_t *)p];
  const caller_node *y = &sort_tree->nodes[*(const uint32_t *)q];
  if (x->value != y->value)
    return x->value < y->value ? 1 : -1;
  return compare_frames(mt_analysis_frame(sort_analysis, x->frame),
                        mt_analysis_frame(sort_analysis, y->frame));
}

/* The callers of `node`, largest first, in a malloc'd array (NULL when there are none or memory
 * runs out; *count is 0 then). */
static uint32_t *callers_sorted(const mt_analysis *a, const caller_tree *t, uint32_t node,
                                size_t *count) {
  size_t n = 0;
  for (uint32_t c = t->nodes[node].child; c != UINT32_MAX; c = t->nodes[c].next)
    n++;
  uint32_t *kids = n ? malloc(n * sizeof *kids) : NULL;
  *count = kids ? n : 0;
  if (!kids)
    return NULL;
  n = 0;
  for (uint32_t c = t->nodes[node].child; c != UINT32_MAX; c = t->nodes[c].next)
    kids[n++] = c;
  sort_tree = t;
  sort_analysis = a;
  qsort(kids, n, sizeof *kids, by_value);
  return kids;
}

/* The callers of one node being listed: its sorted callers (callers_sorted), how many are shown,
 * the next one to list. The listings below walk the tree with a stack of these rather than by
 * recursion: a caller tree is as deep as the deepest backtrace, which can be hundreds of thousands
 * of frames (FORMAT.md §2.7: a few bytes of trace per 256 frames). */
typedef struct caller_level {
  uint32_t *kids;
  size_t count, shown, next;
} caller_level;

/* Pushes the callers of `node` on `*levels` (all of them shown, or those callers_print shows when
 * `print`); false when memory runs out (nothing pushed). */
static bool caller_push(caller_level **levels, size_t *depth, size_t *cap, const mt_analysis *a,
                        const caller_tree *t, uint32_t node, bool print) {
  if (!MT_GROW(*levels, *cap, *depth + 1))
    return false;
  caller_level *l = &(*levels)[(*depth)++];
  l->kids = callers_sorted(a, t, node, &l->count);
  l->shown = l->count;
  l->next = 0;
  if (print) {
    double whole = t->nodes[0].value;
    l->shown = 0;
    while (l->shown < l->count && l->shown < TOP_CALLERS &&
           t->nodes[l->kids[l->shown]].value >= CALLER_MIN_SHARE * whole)
      l->shown++;
  }
  return true;
}

/* Text: one line per caller, "share  frame", indented by level under its callee. */
static void callers_print(cli_out *o, const mt_analysis *a, const caller_tree *t) {
  double whole = t->nodes[0].value;
  caller_level *levels = NULL;
  size_t depth = 0, cap = 0;
  caller_push(&levels, &depth, &cap, a, t, 0, true);
  while (depth) {
    caller_level *l = &levels[depth - 1];
    int level = (int)(depth - 1);
    if (l->next < l->shown) {
      uint32_t kid = l->kids[l->next++];
      out_printf(o, "       %5.1f%%  %*s", 100 * t->nodes[kid].value / whole, 2 * level, "");
      an_print_frame(o, mt_analysis_frame(a, t->nodes[kid].frame));
      out_str(o, "\n");
      caller_push(&levels, &depth, &cap, a, t, kid, true);
      continue;
    }
    if (l->count > l->shown) {
      double rest = 0;
      for (size_t k = l->shown; k < l->count; k++)
        rest += t->nodes[l->kids[k]].value;
      out_printf(o, "       %5.1f%%  %*s(%zu other caller%s)\n", 100 * rest / whole, 2 * level, "",
                 l->count - l->shown, l->count - l->shown == 1 ? "" : "s");
    }
    free(l->kids);
    depth--;
  }
  free(levels);
}

/* JSON: [{"frame", "value", "callers": [...]}], every caller. */
static void callers_json(cli_out *o, const mt_analysis *a, const caller_tree *t) {
  caller_level *levels = NULL;
  size_t depth = 0, cap = 0;
  out_str(o, "[");
  if (!caller_push(&levels, &depth, &cap, a, t, 0, false))
    out_str(o, "]");
  while (depth) {
    caller_level *l = &levels[depth - 1];
    if (l->next < l->count) {
      uint32_t kid = l->kids[l->next];
      out_str(o, l->next++ ? ",{\"frame\":" : "{\"frame\":");
      an_json_frame(o, mt_analysis_frame(a, t->nodes[kid].frame));
      out_printf(o, ",\"value\":%.0f,\"callers\":[", t->nodes[kid].value);
      if (!caller_push(&levels, &depth, &cap, a, t, kid, false))
        out_str(o, "]}");
      continue;
    }
    free(l->kids);
    out_str(o, --depth ? "]}" : "]");
  }
  free(levels);
}

/* keyed_stacks of only the stacks through a function matching `focus` (*matched of them); NULL
 * with `err` set on failure. */
static keyed_stack *focused_stacks(const mt_analysis *a, mt_group_by by, const char *focus,
                                   size_t *count, size_t *matched, mt_error *err) {
  bool *keep;
  if (mt_stacks_through(a, focus, &keep, matched, err))
    return NULL;
  size_t n;
  keyed_stack *ks = keyed_stacks(a, by, &n);
  if (!ks) {
    free(keep);
    snprintf(err->message, sizeof err->message, "out of memory");
    return NULL;
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (keep[ks[i].stack])
      ks[kept++] = ks[i];
  free(keep);
  *count = kept;
  return ks;
}

static const mt_analysis *rank_analysis; /* qsort has no user pointer */
static mt_metric rank_metric;

static int by_metric(const void *p, const void *q) {
  const mt_group *x = p, *y = q;
  double vx = mt_analysis_metric(rank_analysis, &x->stats, rank_metric);
  double vy = mt_analysis_metric(rank_analysis, &y->stats, rank_metric);
  if (vx != vy)
    return vx < vy ? 1 : -1;
  return compare_frames(x->key, y->key);
}

/* The groups of the stacks `ks` (sorted by key), as mt_analysis_group makes them of all stacks:
 * malloc'd, ranked by `metric`, those whose metric is 0 left out. NULL when memory runs out. */
static mt_group *focused_groups(const mt_analysis *a, mt_metric metric, const keyed_stack *ks,
                                size_t nks, size_t *count) {
  mt_group *g = calloc(nks + 1, sizeof *g);
  if (!g)
    return NULL;
  size_t n = 0;
  for (size_t i = 0; i < nks; i++) {
    if (!n || compare_frames(g[n - 1].key, ks[i].key))
      g[n++] = (mt_group){.key = ks[i].key, .top_stack = ks[i].stack};
    mt_group *grp = &g[n - 1];
    const mt_stats *st = mt_analysis_stack_stats(a, ks[i].stack);
    mt_stats_add(&grp->stats, st);
    grp->stacks++;
    if (mt_analysis_metric(a, st, metric) >
        mt_analysis_metric(a, mt_analysis_stack_stats(a, grp->top_stack), metric))
      grp->top_stack = ks[i].stack;
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (mt_analysis_metric(a, &g[i].stats, metric) > 0)
      g[kept++] = g[i];
  rank_analysis = a;
  rank_metric = metric;
  qsort(g, kept, sizeof *g, by_metric);
  *count = kept;
  return g;
}

int mt_cmd_top(int argc, char **argv) {
  enum { OPT_BY = 1, OPT_GROUP, OPT_INVERTED, OPT_DEPTH, OPT_INCLUSIVE, OPT_FOCUS };
  static const struct option options[] = {AN_LONG_OPTIONS,
                                          {"by", required_argument, NULL, OPT_BY},
                                          {"group", required_argument, NULL, OPT_GROUP},
                                          {"inverted", no_argument, NULL, OPT_INVERTED},
                                          {"depth", required_argument, NULL, OPT_DEPTH},
                                          {"inclusive", no_argument, NULL, OPT_INCLUSIVE},
                                          {"focus", required_argument, NULL, OPT_FOCUS},
                                          {0}};
  an_options ao = {0};
  mt_metric metric = MT_METRIC_BYTES;
  mt_group_by by = MT_GROUP_SITE;
  bool inverted = false, inclusive = false;
  const char *focus = NULL;
  long long limit = 10, depth = 12;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "hn:", options)) != -1) {
    if (an_option(&ao, c, optarg))
      continue;
    switch (c) {
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    case OPT_BY:
      if (!an_metric_arg("top", optarg, &metric))
        return MT_EXIT_USAGE;
      break;
    case OPT_GROUP:
      if (!an_group_arg("top", optarg, &by))
        return MT_EXIT_USAGE;
      break;
    case OPT_INVERTED: inverted = true; break;
    case OPT_INCLUSIVE: inclusive = true; break;
    case OPT_FOCUS: focus = optarg; break;
    case 'n':
      if (!an_count_arg("top", "-n", optarg, &limit))
        return MT_EXIT_USAGE;
      break;
    case OPT_DEPTH:
      if (!an_count_arg("top", "--depth", optarg, &depth))
        return MT_EXIT_USAGE;
      break;
    default: return cli_bad_option("top");
    }
  }
  if (optind != argc - 1)
    return cli_one_trace_expected("top", argc, argv);
  const char *path = argv[optind];
  if (inclusive && inverted)
    return cli_usage_error("top", "--inclusive and --inverted are different views: give one");
  if (inclusive) {
    functions_view v = {by, metric, false, focus, (size_t)limit};
    return functions_view_run("top", path, &ao, &v);
  }
  if (focus && !an_regex_valid("top", "--focus ", focus))
    return MT_EXIT_USAGE;
  int status;
  mt_analysis *a = an_load("top", path, &ao, false, MT_TIME_UNBOUNDED, &status);
  if (!a)
    return status;
  mt_group *groups;
  size_t n, nks = 0, focused = 0;
  mt_error err;
  keyed_stack *ks = NULL;
  /* Ranked over every stack first: that also refuses what cannot be ranked (temporary on a
   * sampled trace) the same way with or without a focus. */
  if (mt_analysis_group(a, by, metric, &groups, &n, &err)) {
    return an_fail(path, &err, a);
  }
  if (focus) {
    free(groups);
    if (!(ks = focused_stacks(a, by, focus, &nks, &focused, &err)) ||
        !(groups = focused_groups(a, metric, ks, nks, &n))) {
      if (ks)
        snprintf(err.message, sizeof err.message, "out of memory");
      cli_report(path, &err);
      free(ks);
      mt_analysis_free(a);
      return MT_EXIT_FAILURE;
    }
  }
  const mt_summary *s = mt_analysis_summary(a);
  double whole = an_whole(a, metric);
  size_t shown = limit && (size_t)limit < n ? (size_t)limit : n;
  static const char *group_names[] = {"site", "function", "file"};
  caller_tree tree = {0};
  if (inverted && !ks)
    ks = keyed_stacks(a, by, &nks);
  if (inverted && !ks) {
    cli_error(path, "out of memory");
    free(groups);
    mt_analysis_free(a);
    return MT_EXIT_FAILURE;
  }
  bool built = true;
  cli_out o;
  out_init(&o, STDOUT_FILENO);
  if (ao.json) {
    out_printf(&o, "{\"schema\":\"memtap.top/1\",\"by\":\"%s\",\"group\":\"%s\",\"total\":%.0f,",
               an_metric_name(metric), group_names[by], whole);
    if (focus) { /* only the backtraces through the focus: the groups say so */
      out_str(&o, "\"focus\":{\"regex\":");
      out_json_string(&o, focus);
      out_printf(&o, ",\"backtraces\":%zu},", focused);
    }
    out_str(&o, "\"groups\":[");
    for (size_t i = 0; i < shown; i++) {
      const mt_group *g = &groups[i];
      out_str(&o, i ? ",{\"key\":" : "{\"key\":");
      an_json_frame(&o, g->key);
      out_printf(&o, ",\"value\":%.0f,\"stacks\":%zu,\"allocated\":",
                 mt_analysis_metric(a, &g->stats, metric), g->stacks);
      an_json_amount(&o, a, &g->stats.allocated);
      out_str(&o, ",\"freed\":");
      an_json_amount(&o, a, &g->stats.freed);
      out_str(&o, ",\"live\":");
      an_json_amount(&o, a, &g->stats.live);
      out_str(&o, ",\"peak\":");
      an_json_amount(&o, a, &g->stats.peak);
      out_str(&o, ",\"temporary\":");
      if (s->temporary_defined)
        an_json_amount(&o, a, &g->stats.temporary);
      else
        out_str(&o, "null");
      out_str(&o, ",\"backtrace\":");
      an_json_stack(&o, a, g->top_stack, inverted);
      if (inverted && (built = callers_build(&tree, a, ks, nks, g->key, metric, (size_t)depth))) {
        out_str(&o, ",\"callers\":");
        callers_json(&o, a, &tree);
      }
      out_str(&o, "}");
    }
    out_str(&o, "]}\n");
  } else {
    char b1[48], b2[32], n1[32], n2[32];
    out_printf(&o, "top %zu of %zu %s%s by %s (total %s%s)\n", shown, n, group_names[by],
               out_plural((double)n), an_metric_name(metric), an_approx(a),
               an_metric_text(metric, whole, b1));
    an_print_window(&o, &ao, a);
    if (focus)
      out_printf(&o, "focus: the %zu of %zu backtraces through a function matching '%s'\n", focused,
                 mt_analysis_stack_count(a), focus);
    out_str(&o, "\n");
    an_unsymbolised unnamed = {0};
    for (size_t i = 0; i < shown; i++) {
      const mt_group *g = &groups[i];
      if (by != MT_GROUP_FILE)
        an_note_unsymbolised(&unnamed, g->key);
      double v = mt_analysis_metric(a, &g->stats, metric);
      an_metric_text(metric, v, b1);
      out_printf(&o, "%3zu. %-12s %5.1f%%  ", i + 1, b1, whole > 0 ? 100 * v / whole : 0);
      if (by == MT_GROUP_FILE)
        out_str(&o, g->key.file);
      else
        an_print_frame(&o, g->key);
      const mt_amount *m = &g->stats.allocated;
      if (an_exact(a))
        out_printf(&o, "\n     allocated %s object%s (%s), live at end %s, %zu backtrace%s\n",
                   out_format_count((double)m->objects, n1), out_plural((double)m->objects),
                   an_size(mt_analysis_bytes(a, m->samples), b2),
                   out_format_count((double)g->stats.live.objects, n2), g->stacks,
                   out_plural((double)g->stacks));
      else
        out_printf(
            &o,
            "\n     allocated %s sampled object%s (~%s, ~%s), live at end %s, %zu backtrace%s\n",
            out_format_count((double)m->objects, n1), out_plural((double)m->objects),
            an_size(mt_analysis_bytes(a, m->samples), b2),
            an_metric_text(MT_METRIC_COUNT, m->objects_estimated, b1),
            out_format_count((double)g->stats.live.objects, n2), g->stacks,
            out_plural((double)g->stacks));
      if (inverted) {
        out_printf(&o, "     callers, from the allocation point out (%% of this %s):\n",
                   group_names[by]);
        if ((built = callers_build(&tree, a, ks, nks, g->key, metric, (size_t)depth)))
          callers_print(&o, a, &tree);
      } else {
        out_str(&o, "     heaviest backtrace:\n");
        an_print_stack(&o, a, g->top_stack, false, (size_t)depth, "       ");
      }
      out_str(&o, "\n");
    }
    an_print_unsymbolised(&o, &unnamed);
  }
  status = an_status(a, out_finish(&o) ? MT_EXIT_OK : MT_EXIT_FAILURE);
  if (!built) {
    cli_error(path, "out of memory");
    status = MT_EXIT_FAILURE;
  }
  free(tree.nodes);
  free(ks);
  free(groups);
  mt_analysis_free(a);
  return status;
}
