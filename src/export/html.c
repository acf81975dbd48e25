/* The self-contained HTML report: report/report.html with its CSS and script inlined (embedded at
 * build time by embed.cmake) and the data as JSON. The data has a size cap whatever the trace
 * (docs/analysis.md, "Size cap"):
 *   - at most REPORT_STACKS backtraces: the heaviest are kept whole, the others merged into one
 *     per site, shown as "(other backtraces)" -> site, and when there are more such sites than
 *     room, the lightest sites into one "(other backtraces)" -> "(other sites)";
 *   - at most REPORT_NODES backtrace-trie nodes and REPORT_FRAMES frames, names cut to REPORT_NAME
 *     bytes of JSON;
 *   - at most REPORT_ROWS rows: the analysis' cells re-aggregated by report backtrace, and when
 *     that is still too many, by fewer whole backtraces and coarser time steps, size and lifetime
 *     classes (levels[]) until they fit.
 * Merging never drops anything: every cell's amount is in exactly one row. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/hashmap.h"
#include "export/export_internal.h"

#define REPORT_STACKS 5000
#define REPORT_NODES 100000
#define REPORT_FRAMES 10000
#define REPORT_NAME 256
#define REPORT_ROWS MT_CELL_LIMIT
#define REPORT_TITLE 256
/* So the file is at most about 15.3 MB, stated as 16 MB: rows 100 000 x 79 bytes ("[4999,255,255,
 * 9,9," two 20-digit counts, a 16-character estimate, "],\n"), frames 10 000 x 532 (two names of
 * 258 with their quotes, a line), nodes 100 000 x 13, the timeline 2 x 1 024 numbers of at most
 * 310 characters, backtraces 5 000 x 11, the page, its script and the title under 50 KB. */

extern const char mt_report_html[], mt_report_css[], mt_report_js[];

/* How much detail the rows keep, tried in order until the rows fit. The last level always fits:
 * every row is then (backtrace, allocated before the window or not, freed or not, one size class,
 * freed or not), at most REPORT_STACKS * 2 * 2 * 2 rows. */
typedef struct level {
  size_t keep;        /* backtraces kept whole, at most */
  unsigned time_step; /* time steps are 2^time_step of the analysis' */
  unsigned size_step; /* size classes merged by 2^size_step */
  unsigned life_step; /* lifetime classes of freed objects merged by 2^life_step */
} level;

static const level levels[] = {{5000, 0, 0, 0}, {2500, 0, 0, 0}, {1250, 0, 0, 0}, {1250, 1, 0, 0},
                               {1250, 2, 0, 0}, {1250, 2, 1, 1}, {500, 2, 1, 1},  {100, 2, 1, 1},
                               {0, 2, 1, 1},    {0, 4, 2, 2},    {0, 6, 4, 4}};

_Static_assert(REPORT_STACKS * 2 * 2 * 2 <= REPORT_ROWS, "the last level must always fit");
_Static_assert(REPORT_NODES > REPORT_STACKS + 1 && REPORT_FRAMES > REPORT_STACKS + 2,
               "room for the merged backtraces");

#define OTHER_FRAME (UINT32_MAX - 1)       /* "(other backtraces)" */
#define OTHER_SITES_FRAME (UINT32_MAX - 2) /* "(other sites)" */
#define NO_SITE UINT32_MAX

/* The report's frames and backtrace trie ------------------------------------------------------ */

typedef struct builder {
  mt_hashmap frame_ids; /* analysis frame + 1 -> report frame */
  uint32_t *frames;     /* report frame -> analysis frame (or OTHER_FRAME, OTHER_SITES_FRAME) */
  size_t nframes, frames_cap;
  mt_hashmap node_ids; /* (parent + 1) << 32 | report frame -> node */
  int64_t (*nodes)[2];
  size_t nnodes, nodes_cap;
  bool failed;
} builder;

static void builder_free(builder *b) {
  free(b->frames);
  free(b->nodes);
  mt_hashmap_free(&b->frame_ids);
  mt_hashmap_free(&b->node_ids);
  *b = (builder){0};
}

static uint32_t report_frame(builder *b, uint32_t frame) {
  uint64_t id;
  if (mt_hashmap_get(&b->frame_ids, (int64_t)frame + 1, &id))
    return (uint32_t)id;
  if (b->nframes == b->frames_cap) {
    size_t cap = b->frames_cap ? b->frames_cap * 2 : 1024;
    uint32_t *p = realloc(b->frames, cap * sizeof *p);
    if (!p)
      return b->failed = true, 0;
    b->frames = p;
    b->frames_cap = cap;
  }
  b->frames[b->nframes] = frame;
  if (!mt_hashmap_put(&b->frame_ids, (int64_t)frame + 1, b->nframes))
    b->failed = true;
  return (uint32_t)b->nframes++;
}

static int64_t report_node(builder *b, int64_t parent, uint32_t frame) {
  uint32_t f = report_frame(b, frame);
  int64_t key = (parent + 1) << 32 | f;
  uint64_t id;
  if (mt_hashmap_get(&b->node_ids, key, &id))
    return (int64_t)id;
  if (b->nnodes == b->nodes_cap) {
    size_t cap = b->nodes_cap ? b->nodes_cap * 2 : 1024;
    int64_t(*p)[2] = realloc(b->nodes, cap * sizeof *p);
    if (!p)
      return b->failed = true, -1;
    b->nodes = p;
    b->nodes_cap = cap;
  }
  b->nodes[b->nnodes][0] = parent;
  b->nodes[b->nnodes][1] = f;
  if (!mt_hashmap_put(&b->node_ids, key, b->nnodes))
    b->failed = true;
  return (int64_t)b->nnodes++;
}

static int64_t report_path(builder *b, const uint32_t *frames, size_t depth) {
  int64_t node = -1;
  for (size_t j = 0; j < depth; j++)
    node = report_node(b, node, frames[j]);
  return node;
}

/* The nodes and frames adding a path would create. `seen` is empty before and after. */
static void path_cost(builder *b, mt_hashmap *seen, const uint32_t *frames, size_t depth,
                      size_t *new_nodes, size_t *new_frames) {
  int64_t node = -1;
  size_t j = 0;
  for (; j < depth; j++) {
    uint64_t f, id;
    if (!mt_hashmap_get(&b->frame_ids, (int64_t)frames[j] + 1, &f) ||
        !mt_hashmap_get(&b->node_ids, (node + 1) << 32 | (int64_t)f, &id))
      break;
    node = (int64_t)id;
  }
  *new_nodes = depth - j;
  *new_frames = 0;
  for (size_t k = j; k < depth; k++) {
    int64_t key = (int64_t)frames[k] + 1;
    if (mt_hashmap_get(&b->frame_ids, key, NULL) || mt_hashmap_get(seen, key, NULL))
      continue;
    if (!mt_hashmap_put(seen, key, 0))
      b->failed = true;
    ++*new_frames;
  }
  for (size_t k = j; k < depth; k++)
    mt_hashmap_remove(seen, (int64_t)frames[k] + 1);
}

/* Which backtraces are kept whole ------------------------------------------------------------- */

typedef struct ranked {
  double weight;
  size_t stack;
} ranked;

static int by_weight(const void *p, const void *q) {
  const ranked *x = p, *y = q;
  if (x->weight != y->weight)
    return x->weight < y->weight ? 1 : -1;
  return (x->stack > y->stack) - (x->stack < y->stack);
}

typedef struct site_info {
  uint32_t frame; /* NO_SITE: "<no backtrace>" */
  size_t stacks;  /* non-empty stacks of the site */
  double weight;
  /* for one selection: */
  size_t rest;        /* its stacks not kept whole */
  double rest_weight; /* their weight */
  int64_t group;      /* its report stack */
} site_info;

typedef struct plan {
  const mt_analysis *a;
  size_t nstacks;
  double *weight;   /* per analysis stack; < 0: nothing allocated or live, no cells */
  size_t *site_of;  /* analysis stack -> sites[] */
  site_info *sites; /* distinct sites of non-empty stacks */
  size_t nsites;
  size_t *seq; /* candidates to keep whole, heaviest first, each fitting the budgets */
  size_t nseq;
  size_t *kept_at; /* analysis stack -> position in seq, SIZE_MAX if none */
  ranked *order;   /* scratch: sites (`stack`: index in sites) by rest_weight */
  /* one selection: */
  int64_t *map; /* analysis stack -> report stack, -1 for empty stacks */
  size_t nkept, nreport;
  bool other_sites; /* the last report stack is "(other sites)" */
} plan;

static void plan_free(plan *p) {
  free(p->weight);
  free(p->site_of);
  free(p->sites);
  free(p->seq);
  free(p->kept_at);
  free(p->order);
  free(p->map);
}

static double stack_weight(const mt_stats *s) {
  if (!s->allocated.objects && !s->live_start.objects)
    return -1;
  return (double)(s->allocated.samples > s->live_start.samples ? s->allocated.samples
                                                               : s->live_start.samples);
}

/* Ranks the stacks, finds their sites, and picks the candidates to keep whole: heaviest first,
 * each while the nodes and frames so far, plus what merged backtraces may add for the report
 * stacks left, stay within the budgets. So any prefix of seq fits with its merged rest. */
static bool plan_init(plan *p, const mt_analysis *a) {
  size_t n = mt_analysis_stack_count(a);
  size_t m = n ? n : 1;
  *p = (plan){.a = a, .nstacks = n};
  p->weight = malloc(m * sizeof *p->weight);
  p->site_of = malloc(m * sizeof *p->site_of);
  p->sites = malloc(m * sizeof *p->sites);
  p->seq = malloc(m * sizeof *p->seq);
  p->kept_at = malloc(m * sizeof *p->kept_at);
  p->order = malloc(m * sizeof *p->order);
  p->map = malloc(m * sizeof *p->map);
  ranked *rank = malloc(m * sizeof *rank);
  mt_hashmap site_index = {0}, seen = {0};
  builder b = {0};
  bool ok =
      p->weight && p->site_of && p->sites && p->seq && p->kept_at && p->order && p->map && rank;
  size_t nrank = 0;
  for (size_t i = 0; ok && i < n; i++) {
    p->weight[i] = stack_weight(mt_analysis_stack_stats(a, i));
    p->kept_at[i] = SIZE_MAX;
    if (p->weight[i] < 0)
      continue;
    rank[nrank++] = (ranked){p->weight[i], i};
    uint32_t site = mt_analysis_stack_site(a, i);
    uint64_t k;
    if (!mt_hashmap_get(&site_index, (int64_t)site + 1, &k)) {
      k = p->nsites++;
      p->sites[k] = (site_info){.frame = site};
      ok = mt_hashmap_put(&site_index, (int64_t)site + 1, k);
    }
    p->site_of[i] = (size_t)k;
    p->sites[k].stacks++;
    p->sites[k].weight += p->weight[i];
  }
  if (ok)
    qsort(rank, nrank, sizeof *rank, by_weight);
  for (size_t r = 0; ok && r < nrank && p->nseq < REPORT_STACKS; r++) {
    size_t i = rank[r].stack, depth, dn, df;
    const uint32_t *frames = mt_analysis_stack_frames(a, i, &depth, NULL);
    path_cost(&b, &seen, frames, depth, &dn, &df);
    size_t left = REPORT_STACKS - (p->nseq + 1); /* merged backtraces: one node, one frame each */
    if (b.nnodes + dn + left + 1 > REPORT_NODES || b.nframes + df + left + 2 > REPORT_FRAMES)
      continue;
    report_path(&b, frames, depth);
    p->kept_at[i] = p->nseq;
    p->seq[p->nseq++] = i;
  }
  ok = ok && !b.failed;
  free(rank);
  mt_hashmap_free(&site_index);
  mt_hashmap_free(&seen);
  builder_free(&b);
  return ok;
}

/* Keeps at most `keep` backtraces whole (a prefix of seq) and merges the others by site, so that
 * there are at most REPORT_STACKS report stacks: the first nkept are the kept backtraces, then one
 * per site by weight, and "(other sites)" last if needed. */
static void plan_select(plan *p, size_t keep) {
  size_t kept = keep < p->nseq ? keep : p->nseq;
  for (size_t s = 0; s < p->nsites; s++) {
    p->sites[s].rest = p->sites[s].stacks;
    p->sites[s].rest_weight = p->sites[s].weight;
  }
  for (size_t k = 0; k < kept; k++) {
    site_info *s = &p->sites[p->site_of[p->seq[k]]];
    s->rest--;
    s->rest_weight -= p->weight[p->seq[k]];
  }
  size_t groups = 0;
  for (size_t s = 0; s < p->nsites; s++)
    groups += p->sites[s].rest > 0;
  /* Each backtrace given back to its site either joins a site already merged (one report stack
   * fewer) or starts one (as many). */
  while (kept > 0 && kept + groups > REPORT_STACKS) {
    size_t i = p->seq[--kept];
    site_info *s = &p->sites[p->site_of[i]];
    groups += s->rest++ == 0;
    s->rest_weight += p->weight[i];
  }
  size_t ngroups = 0;
  for (size_t s = 0; s < p->nsites; s++)
    if (p->sites[s].rest > 0)
      p->order[ngroups++] = (ranked){p->sites[s].rest_weight, s};
  qsort(p->order, ngroups, sizeof *p->order, by_weight);
  p->other_sites = kept + ngroups > REPORT_STACKS;
  size_t own = p->other_sites ? REPORT_STACKS - kept - 1 : ngroups;
  for (size_t g = 0; g < ngroups; g++)
    p->sites[p->order[g].stack].group = (int64_t)(kept + (g < own ? g : own));
  p->nkept = kept;
  p->nreport = kept + own + p->other_sites;
  for (size_t i = 0; i < p->nstacks; i++)
    p->map[i] = p->weight[i] < 0       ? -1
                : p->kept_at[i] < kept ? (int64_t)p->kept_at[i]
                                       : p->sites[p->site_of[i]].group;
}

/* Rows ---------------------------------------------------------------------------------------- */

typedef struct row {
  uint32_t stack;
  uint8_t alloc_bucket, free_bucket, size_class, lifetime_class;
  mt_amount amount;
} row;

static unsigned coarser_time(unsigned bucket, unsigned step) {
  return bucket == MT_CELL_NEVER ? bucket : bucket >> step; /* MT_CELL_BEFORE is 255 too */
}

static unsigned freed_lifetime_classes(unsigned step) {
  return ((MT_LIFETIME_CLASSES - 2) >> step) + 1;
}

/* The cells re-aggregated by report stack at level `l` into rows[] (capacity REPORT_ROWS).
 * Returns their number, REPORT_ROWS + 1 when there are more, 0 with *failed when memory runs
 * out. */
static size_t aggregate(const plan *p, const level *l, row *rows, bool *failed) {
  size_t nc;
  int64_t width;
  const mt_cell *cells = mt_analysis_cells(p->a, &nc, &width);
  mt_hashmap index = {0};
  size_t n = 0;
  for (size_t i = 0; i < nc; i++) {
    const mt_cell *c = &cells[i];
    int64_t stack = p->map[c->stack];
    unsigned ab = coarser_time(c->alloc_bucket, l->time_step);
    unsigned fb = coarser_time(c->free_bucket, l->time_step);
    unsigned sc = (unsigned)c->size_class >> l->size_step;
    unsigned lc = c->lifetime_class == MT_LIFETIME_CLASSES - 1
                      ? freed_lifetime_classes(l->life_step)
                      : (unsigned)c->lifetime_class >> l->life_step;
    int64_t key = stack << 32 | (int64_t)(ab << 24 | fb << 16 | sc << 8 | lc);
    uint64_t at;
    if (!mt_hashmap_get(&index, key, &at)) {
      if (n == REPORT_ROWS) {
        n = REPORT_ROWS + 1;
        break;
      }
      at = n;
      rows[n++] = (row){(uint32_t)stack, (uint8_t)ab, (uint8_t)fb, (uint8_t)sc, (uint8_t)lc, {0}};
      if (!mt_hashmap_put(&index, key, at)) {
        *failed = true;
        n = 0;
        break;
      }
    }
    mt_amount *to = &rows[at].amount;
    to->objects += c->amount.objects;
    to->samples += c->amount.samples;
    to->objects_estimated += c->amount.objects_estimated;
  }
  mt_hashmap_free(&index);
  return n;
}

/* Output -------------------------------------------------------------------------------------- */

/* A non-negative estimate in at most 16 characters. */
static void json_estimate(FILE *out, double v) {
  fprintf(out, fabs(v) < 1e12 ? "%.3f" : "%.6e", v);
}

static void json_amount(FILE *out, const mt_amount *m) {
  fprintf(out,
          "{\"objects\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"objects_estimated\":", m->objects,
          m->samples);
  json_estimate(out, m->objects_estimated);
  fputc('}', out);
}

typedef struct report {
  const mt_analysis *a;
  const plan *p;
  const level *l;
  builder b;
  int64_t *stacks, *sites; /* per report stack: trie node, site frame (-1: none) */
  const row *rows;
  size_t nrows;
} report;

static void write_data(FILE *out, const report *r) {
  const mt_analysis *a = r->a;
  const builder *b = &r->b;
  const mt_summary *s = mt_analysis_summary(a);
  fputs("{\"summary\":{\"executable\":", out);
  mt_json_string_cut(out, s->info.executable_name, REPORT_NAME);
  fprintf(out,
          ",\"sample_rate\":%.17g,\"bytes_per_sample\":%.17g,\"duration_us\":%" PRId64
          ",\"from_us\":%" PRId64 ",\"to_us\":%" PRId64 ",\"peak_time_us\":%" PRId64
          ",\"allocated\":",
          s->info.sample_rate, s->bytes_per_sample, s->end_time - s->info.start_time, s->from,
          s->to, s->peak_time);
  json_amount(out, &s->allocated);
  fputs(",\"freed\":", out);
  json_amount(out, &s->freed);
  fputs(",\"peak\":", out);
  json_amount(out, &s->at_peak);
  fputs(",\"live_end\":", out);
  json_amount(out, &s->live_end);
  /* The classes as merged by the level: the upper bound of each, null when unbounded. */
  fputs("},\"size_limits\":[", out);
  unsigned nsize = ((MT_SIZE_CLASSES - 1) >> r->l->size_step) + 1;
  for (unsigned g = 0; g < nsize; g++) {
    unsigned last = ((g + 1) << r->l->size_step) - 1;
    if (last >= MT_SIZE_CLASSES - 1)
      fprintf(out, "%snull", g ? "," : "");
    else
      fprintf(out, "%s%" PRId64, g ? "," : "", mt_size_class_limit((int)last));
  }
  fputs("],\"lifetime_limits\":[", out);
  unsigned nfreed = freed_lifetime_classes(r->l->life_step);
  for (unsigned g = 0; g < nfreed; g++) {
    unsigned last = ((g + 1) << r->l->life_step) - 1;
    if (last >= MT_LIFETIME_CLASSES - 2)
      fprintf(out, "%snull", g ? "," : "");
    else
      fprintf(out, "%s%" PRId64, g ? "," : "", mt_lifetime_class_limit((int)last));
  }
  fputs(",null", out); /* not freed */
  size_t nb;
  int64_t width;
  const mt_timeline_bucket *tl = mt_analysis_timeline(a, &nb, &width);
  fprintf(out, "],\"timeline\":{\"width\":%" PRId64 ",\"live_max\":[", width);
  for (size_t i = 0; i < nb; i++)
    fprintf(out, "%s%.0f", i ? "," : "", tl[i].live_max);
  fputs("],\"live_end\":[", out);
  for (size_t i = 0; i < nb; i++)
    fprintf(out, "%s%.0f", i ? "," : "", tl[i].live_end);
  fputs("]},\"frames\":[", out);
  for (size_t i = 0; i < b->nframes; i++) {
    mt_frame f = b->frames[i] == OTHER_FRAME         ? (mt_frame){"(other backtraces)", "", 0}
                 : b->frames[i] == OTHER_SITES_FRAME ? (mt_frame){"(other sites)", "", 0}
                                                     : mt_analysis_frame(a, b->frames[i]);
    fputs(i ? ",[" : "[", out);
    mt_json_string_cut(out, f.function, REPORT_NAME);
    fputc(',', out);
    mt_json_string_cut(out, f.file, REPORT_NAME);
    fprintf(out, ",%d]", (int)f.line);
  }
  fputs("],\"nodes\":[", out);
  for (size_t i = 0; i < b->nnodes; i++)
    fprintf(out, "%s[%" PRId64 ",%" PRId64 "]", i ? "," : "", b->nodes[i][0], b->nodes[i][1]);
  fputs("],\"stacks\":[", out);
  for (size_t i = 0; i < r->p->nreport; i++)
    fprintf(out, "%s%" PRId64, i ? "," : "", r->stacks[i]);
  fputs("],\"stack_sites\":[", out);
  for (size_t i = 0; i < r->p->nreport; i++)
    fprintf(out, "%s%" PRId64, i ? "," : "", r->sites[i]);
  mt_analysis_cells(a, &nb, &width);
  fprintf(out, "],\"cells\":{\"width\":%" PRId64 ",\"buckets\":%d,\"rows\":[",
          width << r->l->time_step, MT_CELL_TIME_BUCKETS);
  for (size_t i = 0; i < r->nrows; i++) {
    const row *c = &r->rows[i];
    fprintf(out, "%s[%" PRIu32 ",%u,%u,%u,%u,%" PRIu64 ",%" PRIu64 ",", i ? ",\n" : "", c->stack,
            c->alloc_bucket, c->free_bucket, c->size_class, c->lifetime_class, c->amount.objects,
            c->amount.samples);
    json_estimate(out, c->amount.objects_estimated);
    fputc(']', out);
  }
  fputs("]}}", out);
}

/* The title, cut to REPORT_TITLE bytes at a character boundary. */
static void write_title(FILE *out, const char *title) {
  char cut[REPORT_TITLE + 1];
  size_t n = strlen(title);
  if (n > REPORT_TITLE) {
    n = REPORT_TITLE;
    while (n > 0 && ((unsigned char)title[n] & 0xC0) == 0x80)
      n--;
  }
  memcpy(cut, title, n);
  cut[n] = 0;
  mt_xml_text(out, cut);
}

/* Builds the report's trie for the selection: kept backtraces whole, the others under "(other
 * backtraces)" and their site (or "(other sites)"). */
static bool build_stacks(report *r) {
  const plan *p = r->p;
  builder *b = &r->b;
  for (size_t k = 0; k < p->nkept; k++) {
    size_t i = p->seq[k], depth;
    const uint32_t *frames = mt_analysis_stack_frames(r->a, i, &depth, NULL);
    uint32_t site = mt_analysis_stack_site(r->a, i);
    r->stacks[k] = report_path(b, frames, depth);
    r->sites[k] = site == NO_SITE ? -1 : (int64_t)report_frame(b, site);
  }
  for (size_t s = 0; s < p->nsites; s++) {
    const site_info *si = &p->sites[s];
    if (!si->rest || (p->other_sites && (size_t)si->group == p->nreport - 1))
      continue;
    int64_t node = report_node(b, -1, OTHER_FRAME);
    r->sites[si->group] = -1;
    if (si->frame != NO_SITE) {
      node = report_node(b, node, si->frame);
      r->sites[si->group] = (int64_t)report_frame(b, si->frame);
    }
    r->stacks[si->group] = node;
  }
  if (p->other_sites) {
    int64_t node = report_node(b, -1, OTHER_FRAME);
    r->stacks[p->nreport - 1] = report_node(b, node, OTHER_SITES_FRAME);
    r->sites[p->nreport - 1] = (int64_t)report_frame(b, OTHER_SITES_FRAME);
  }
  return !b->failed;
}

int mt_export_html(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err) {
  size_t nc;
  int64_t width;
  if (!mt_analysis_cells(a, &nc, &width) && nc == 0 &&
      mt_analysis_summary(a)->allocated.objects + mt_analysis_summary(a)->live_start.objects > 0)
    return mt_fail(err, MT_E_INVALID, -1, "the report needs an analysis run with cells");
  plan p;
  report r = {.a = a, .p = &p};
  row *rows = malloc(REPORT_ROWS * sizeof *rows);
  bool ok = plan_init(&p, a) && rows;
  bool failed = false;
  size_t nrows = 0, li = 0;
  for (; ok && li < sizeof levels / sizeof levels[0]; li++) {
    if (li > 0 && levels[li].keep >= p.nkept && levels[li].time_step == levels[li - 1].time_step &&
        levels[li].size_step == levels[li - 1].size_step &&
        levels[li].life_step == levels[li - 1].life_step)
      continue; /* keeps as many whole: the same rows */
    plan_select(&p, levels[li].keep);
    nrows = aggregate(&p, &levels[li], rows, &failed);
    if (failed || nrows <= REPORT_ROWS)
      break;
  }
  ok = ok && !failed && li < sizeof levels / sizeof levels[0];
  if (ok) {
    r.l = &levels[li];
    r.rows = rows;
    r.nrows = nrows;
    r.stacks = malloc((p.nreport + 1) * sizeof *r.stacks);
    r.sites = malloc((p.nreport + 1) * sizeof *r.sites);
    ok = r.stacks && r.sites && build_stacks(&r);
  }
  int rc = ok ? MT_OK : mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  const char *title = o->title ? o->title : mt_analysis_summary(a)->info.executable_name;
  for (const char *t = mt_report_html; ok && *t;) {
    const char *at = strchr(t, '@');
    if (!at) {
      fputs(t, out);
      break;
    }
    fwrite(t, 1, (size_t)(at - t), out);
    if (!strncmp(at, "@TITLE@", 7)) {
      write_title(out, title);
      t = at + 7;
    } else if (!strncmp(at, "@CSS@", 5)) {
      fputs(mt_report_css, out);
      t = at + 5;
    } else if (!strncmp(at, "@JS@", 4)) {
      fputs(mt_report_js, out);
      t = at + 4;
    } else if (!strncmp(at, "@DATA@", 6)) {
      write_data(out, &r);
      t = at + 6;
    } else {
      fputc('@', out);
      t = at + 1;
    }
  }
  plan_free(&p);
  builder_free(&r.b);
  free(r.stacks);
  free(r.sites);
  free(rows);
  return rc;
}
