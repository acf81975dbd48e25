/* The self-contained HTML report: report/report.html with its CSS and script inlined (embedded at
 * build time by embed.cmake) and the data as JSON. The data is bounded whatever the trace's
 * length (docs/analysis.md): at most MT_CELL_LIMIT cells, REPORT_STACKS backtraces and
 * REPORT_NODES backtrace-trie nodes; the other backtraces are merged into one per site, shown as
 * "(other backtraces)" above the site. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/hashmap.h"
#include "export/export_internal.h"

#define REPORT_STACKS 5000
#define REPORT_NODES 200000

extern const char mt_report_html[], mt_report_css[], mt_report_js[];

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

typedef struct builder {
  const mt_analysis *a;
  mt_hashmap frame_ids; /* analysis frame (+1, 0 for "other") -> report frame */
  uint32_t *frames;     /* report frame -> analysis frame (UINT32_MAX-1: "(other backtraces)") */
  size_t nframes, frames_cap;
  mt_hashmap node_ids; /* parent << 32 | report frame -> node */
  int64_t (*nodes)[2];
  size_t nnodes, nodes_cap;
  bool failed;
} builder;

#define OTHER_FRAME (UINT32_MAX - 1)

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

static void json_amount(FILE *out, const mt_amount *m) {
  fprintf(out, "{\"objects\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"objects_estimated\":%.3f}",
          m->objects, m->samples, m->objects_estimated);
}

static void write_data(FILE *out, const mt_analysis *a, builder *b, const int64_t *stack_map,
                       const int64_t *report_stacks, const int64_t *report_sites, size_t nreport) {
  const mt_summary *s = mt_analysis_summary(a);
  fputs("{\"summary\":{\"executable\":", out);
  mt_json_string(out, s->info.executable_name);
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
  fputs("},\"size_limits\":[", out);
  for (int i = 0; i < MT_SIZE_CLASSES; i++)
    if (i == MT_SIZE_CLASSES - 1)
      fputs(",null", out);
    else
      fprintf(out, "%s%" PRId64, i ? "," : "", mt_size_class_limit(i));
  fputs("],\"lifetime_limits\":[", out);
  for (int i = 0; i < MT_LIFETIME_CLASSES; i++)
    if (i >= MT_LIFETIME_CLASSES - 2)
      fputs(",null", out);
    else
      fprintf(out, "%s%" PRId64, i ? "," : "", mt_lifetime_class_limit(i));
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
    mt_frame f = b->frames[i] == OTHER_FRAME ? (mt_frame){"(other backtraces)", "", 0}
                                             : mt_analysis_frame(a, b->frames[i]);
    fputs(i ? ",[" : "[", out);
    mt_json_string(out, f.function);
    fputc(',', out);
    mt_json_string(out, f.file);
    fprintf(out, ",%d]", (int)f.line);
  }
  fputs("],\"nodes\":[", out);
  for (size_t i = 0; i < b->nnodes; i++)
    fprintf(out, "%s[%" PRId64 ",%" PRId64 "]", i ? "," : "", b->nodes[i][0], b->nodes[i][1]);
  fputs("],\"stacks\":[", out);
  for (size_t i = 0; i < nreport; i++)
    fprintf(out, "%s%" PRId64, i ? "," : "", report_stacks[i]);
  fputs("],\"stack_sites\":[", out);
  for (size_t i = 0; i < nreport; i++)
    fprintf(out, "%s%" PRId64, i ? "," : "", report_sites[i]);
  size_t nc;
  const mt_cell *cells = mt_analysis_cells(a, &nc, &width);
  fprintf(out, "],\"cells\":{\"width\":%" PRId64 ",\"buckets\":%d,\"rows\":[", width,
          MT_CELL_TIME_BUCKETS);
  for (size_t i = 0; i < nc; i++) {
    const mt_cell *c = &cells[i];
    fprintf(out, "%s[%" PRId64 ",%u,%u,%u,%u,%" PRIu64 ",%" PRIu64 ",%.3f]", i ? ",\n" : "",
            stack_map[c->stack], c->alloc_bucket, c->free_bucket, c->size_class, c->lifetime_class,
            c->amount.objects, c->amount.samples, c->amount.objects_estimated);
  }
  fputs("]}}", out);
}

int mt_export_html(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err) {
  size_t nc;
  int64_t width;
  if (!mt_analysis_cells(a, &nc, &width) && nc == 0 &&
      mt_analysis_summary(a)->allocated.objects + mt_analysis_summary(a)->live_start.objects > 0)
    return mt_fail(err, MT_E_INVALID, -1, "the report needs an analysis run with cells");
  size_t n = mt_analysis_stack_count(a);
  ranked *rank = malloc((n ? n : 1) * sizeof *rank);
  int64_t *stack_map = malloc((n ? n : 1) * sizeof *stack_map);
  int64_t *report_stacks = malloc((n + 1) * sizeof *report_stacks);
  int64_t *report_sites = malloc((n + 1) * sizeof *report_sites);
  builder b = {.a = a};
  mt_hashmap site_other = {0}; /* site frame + 1 -> report stack of its merged backtraces */
  int rc = MT_OK;
  if (!rank || !stack_map || !report_stacks || !report_sites) {
    rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    const mt_stats *s = mt_analysis_stack_stats(a, i);
    uint64_t w = s->allocated.samples;
    if (s->live_start.samples > w)
      w = s->live_start.samples;
    rank[i] = (ranked){(double)w, i};
  }
  qsort(rank, n, sizeof *rank, by_weight);
  size_t nreport = 0;
  for (size_t k = 0; k < n; k++) {
    size_t i = rank[k].stack;
    uint32_t site = mt_analysis_stack_site(a, i);
    size_t depth;
    const uint32_t *frames = mt_analysis_stack_frames(a, i, &depth, NULL);
    if (nreport < REPORT_STACKS && b.nnodes + depth <= REPORT_NODES) {
      int64_t node = -1;
      for (size_t j = 0; j < depth; j++)
        node = report_node(&b, node, frames[j]);
      report_sites[nreport] = site == UINT32_MAX ? -1 : (int64_t)report_frame(&b, site);
      report_stacks[nreport] = node;
      stack_map[i] = (int64_t)nreport++;
      continue;
    }
    uint64_t id;
    if (mt_hashmap_get(&site_other, (int64_t)site + 1, &id)) {
      stack_map[i] = (int64_t)id;
      continue;
    }
    int64_t node = report_node(&b, -1, OTHER_FRAME);
    if (site != UINT32_MAX)
      node = report_node(&b, node, site);
    report_sites[nreport] = site == UINT32_MAX ? -1 : (int64_t)report_frame(&b, site);
    report_stacks[nreport] = node;
    if (!mt_hashmap_put(&site_other, (int64_t)site + 1, nreport))
      b.failed = true;
    stack_map[i] = (int64_t)nreport++;
  }
  if (b.failed) {
    rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
    goto done;
  }
  const char *title = o->title ? o->title : mt_analysis_summary(a)->info.executable_name;
  for (const char *t = mt_report_html; *t;) {
    const char *at = strchr(t, '@');
    if (!at) {
      fputs(t, out);
      break;
    }
    fwrite(t, 1, (size_t)(at - t), out);
    if (!strncmp(at, "@TITLE@", 7)) {
      mt_xml_text(out, title);
      t = at + 7;
    } else if (!strncmp(at, "@CSS@", 5)) {
      fputs(mt_report_css, out);
      t = at + 5;
    } else if (!strncmp(at, "@JS@", 4)) {
      fputs(mt_report_js, out);
      t = at + 4;
    } else if (!strncmp(at, "@DATA@", 6)) {
      write_data(out, a, &b, stack_map, report_stacks, report_sites, nreport);
      t = at + 6;
    } else {
      fputc('@', out);
      t = at + 1;
    }
  }
done:
  free(rank);
  free(stack_map);
  free(report_stacks);
  free(report_sites);
  free(b.frames);
  free(b.nodes);
  mt_hashmap_free(&b.frame_ids);
  mt_hashmap_free(&b.node_ids);
  mt_hashmap_free(&site_other);
  return rc;
}
