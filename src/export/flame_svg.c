/* A standalone SVG flame graph (no script, no external resources): one rectangle per flame-tree
 * node, width proportional to its value, the root at the bottom; hovering shows a <title>. */
#include <inttypes.h>
#include <stdlib.h>

#include "common/error.h"
#include "export/export_internal.h"
#include "export/flame_tree.h"

#define WIDTH 1200.0
#define ROW 17.0
#define MIN_WIDTH 0.3

static unsigned hue_of(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* One node's rectangle and label; false (nothing drawn) when it is too narrow. */
static bool draw_node(FILE *out, const mt_flame_tree *t, uint32_t node, double x, double scale,
                      double height, const char *unit) {
  const mt_flame_node *n = &t->nodes[node];
  double w = (double)n->value * scale;
  if (w < MIN_WIDTH)
    return false;
  double y = height - ROW * (n->depth + 1) - 4;
  unsigned h = hue_of(n->name);
  fprintf(out, "<g><title>");
  mt_xml_text(out, n->name);
  fprintf(out, " (%" PRId64 " %s, %.2f%%)</title>", n->value, unit,
          t->nodes[0].value ? 100.0 * (double)n->value / (double)t->nodes[0].value : 0);
  fprintf(out,
          "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" rx=\"2\" "
          "fill=\"rgb(%u,%u,%u)\"/>",
          x + 10, y, w, ROW - 1, 205 + h % 50, 90 + (h >> 8) % 120, 40 + (h >> 16) % 50);
  if (w > 35) {
    size_t chars = (size_t)((w - 6) / 7);
    fprintf(out, "<text x=\"%.2f\" y=\"%.1f\">", x + 13, y + 12);
    /* Cut the label to what fits; cut only at ASCII characters to keep UTF-8 whole. */
    char label[512];
    size_t len = 0;
    for (const char *s = n->name; *s && len + 1 < sizeof label; s++) {
      if (len >= chars && !((unsigned char)*s & 0x80)) {
        if (len >= 2)
          label[len - 2] = '.', label[len - 1] = '.';
        break;
      }
      label[len++] = *s;
    }
    label[len] = 0;
    mt_xml_text(out, label);
    fputs("</text>", out);
  }
  fputs("</g>\n", out);
  return true;
}

/* The drawn nodes in depth-first order, children left to right. Not recursive: a trace's backtrace
 * can be hundreds of thousands of frames deep (a few bytes of the trace per 256 frames, FORMAT.md
 * §2.7), far more than the stack holds. `levels` bounds the depth of the drawn nodes, plus one. */
static bool draw(FILE *out, const mt_flame_tree *t, double scale, double height, const char *unit,
                 size_t levels) {
  struct level {
    uint32_t child; /* the next child to draw */
    double x;       /* where it starts */
  } *stack = malloc(levels * sizeof *stack);
  if (!stack)
    return false;
  size_t depth = 0;
  if (draw_node(out, t, 0, 0, scale, height, unit))
    stack[depth++] = (struct level){t->nodes[0].first_child, 0};
  while (depth) {
    struct level *l = &stack[depth - 1];
    uint32_t c = l->child;
    if (c == UINT32_MAX) {
      depth--;
      continue;
    }
    double x = l->x;
    l->child = t->nodes[c].next_sibling;
    l->x += (double)t->nodes[c].value * scale;
    if (draw_node(out, t, c, x, scale, height, unit) && depth < levels)
      stack[depth++] = (struct level){t->nodes[c].first_child, x};
  }
  free(stack);
  return true;
}

int mt_export_flame_svg(const mt_analysis *a, FILE *out, const mt_export_options *o,
                        mt_error *err) {
  int64_t *values;
  int rc = mt_export_values(a, o, o->metric, &values, err);
  if (rc)
    return rc;
  mt_flame_tree t = {0};
  if (mt_flame_tree_build(&t, a, values, o->inverted, NULL) != MT_OK) {
    free(values);
    mt_flame_tree_free(&t);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  const char *title = o->title ? o->title : mt_analysis_summary(a)->info.executable_name;
  const char *unit = o->metric == MT_METRIC_COUNT ? "objects" : "bytes";
  double scale = t.nodes[0].value ? (WIDTH - 20) / (double)t.nodes[0].value : 0;
  /* Rows only for the frames drawn: a node narrower than MIN_WIDTH is not (nor what is above it,
   * never wider), and deep stacks are mostly that narrow (ocamlopt_v1: 409 rows, 6959 px, its top
   * quarter blank). */
  uint32_t drawn_depth = 0;
  for (size_t i = 0; i < t.count; i++)
    if ((double)t.nodes[i].value * scale >= MIN_WIDTH && t.nodes[i].depth > drawn_depth)
      drawn_depth = t.nodes[i].depth;
  double height = ROW * (drawn_depth + 1) + 40;
  fprintf(out,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"monospace\" font-size=\"11\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"#fdfdf8\"/>\n"
          "<text x=\"10\" y=\"20\" font-size=\"14\">",
          WIDTH, height, WIDTH, height);
  mt_xml_text(out, title);
  fprintf(out, " &#8212; %s by %s",
          o->inverted ? "icicle (allocation points first)" : "flame graph",
          o->metric == MT_METRIC_COUNT  ? "objects"
          : o->metric == MT_METRIC_LIVE ? "live bytes"
          : o->metric == MT_METRIC_PEAK ? "bytes at peak"
                                        : "bytes");
  if (o->focus) {
    fputs(" through functions matching '", out);
    mt_xml_text(out, o->focus);
    fputs("'", out);
  }
  fputs("</text>\n", out);
  bool drawn = draw(out, &t, scale, height, unit, (size_t)drawn_depth + 2);
  if (drawn)
    fputs("</svg>\n", out);
  mt_flame_tree_free(&t);
  free(values);
  return drawn ? MT_OK : mt_fail(err, MT_E_NOMEM, -1, "out of memory");
}
