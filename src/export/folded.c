/* Folded stacks ("outer;...;inner VALUE", flamegraph.pl's input) and the flame tree that the SVG
 * flame graph draws from them. Frames are function names. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "export/export_internal.h"
#include "export/flame_tree.h"

static void folded_name(FILE *out, const char *s) {
  if (!strpbrk(s, ";\n\r")) {
    fputs(s, out);
    return;
  }
  for (; *s; s++)
    fputc(*s == ';' ? ':' : *s == '\n' || *s == '\r' ? ' ' : *s, out);
}

int mt_export_folded(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err) {
  int64_t *values = mt_export_stack_values(a, o->metric);
  if (!values)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  size_t n = mt_analysis_stack_count(a);
  for (size_t i = 0; i < n; i++) {
    if (values[i] <= 0)
      continue;
    size_t depth;
    const uint32_t *frames = mt_analysis_stack_frames(a, i, &depth, NULL);
    if (depth == 0)
      fputs("<no backtrace>", out);
    for (size_t j = 0; j < depth; j++) {
      if (j)
        fputc(';', out);
      folded_name(out, mt_analysis_frame(a, frames[o->inverted ? depth - 1 - j : j]).function);
    }
    fprintf(out, " %" PRId64 "\n", values[i]);
  }
  free(values);
  return MT_OK;
}

/* The flame tree ---------------------------------------------------------------------------- */

static uint32_t child_of(mt_flame_tree *t, uint32_t parent, const char *name) {
  for (uint32_t c = t->nodes[parent].first_child; c != UINT32_MAX; c = t->nodes[c].next_sibling)
    if (!strcmp(t->nodes[c].name, name))
      return c;
  if (t->count == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    mt_flame_node *p = realloc(t->nodes, cap * sizeof *p);
    if (!p)
      return UINT32_MAX;
    t->nodes = p;
    t->cap = cap;
  }
  uint32_t c = (uint32_t)t->count++;
  t->nodes[c] = (mt_flame_node){.name = name,
                                .parent = parent,
                                .first_child = UINT32_MAX,
                                .next_sibling = t->nodes[parent].first_child,
                                .depth = t->nodes[parent].depth + 1};
  t->nodes[parent].first_child = c;
  if (t->nodes[c].depth > t->max_depth)
    t->max_depth = t->nodes[c].depth;
  return c;
}

int mt_flame_tree_build(mt_flame_tree *t, const mt_analysis *a, const int64_t *values,
                        bool inverted) {
  *t = (mt_flame_tree){0};
  t->nodes = malloc(256 * sizeof *t->nodes);
  if (!t->nodes)
    return MT_E_NOMEM;
  t->cap = 256;
  t->count = 1;
  t->nodes[0] = (mt_flame_node){
      .name = "all", .parent = UINT32_MAX, .first_child = UINT32_MAX, .next_sibling = UINT32_MAX};
  size_t n = mt_analysis_stack_count(a);
  for (size_t i = 0; i < n; i++) {
    if (values[i] <= 0)
      continue;
    size_t depth;
    const uint32_t *frames = mt_analysis_stack_frames(a, i, &depth, NULL);
    uint32_t node = 0;
    t->nodes[0].value += values[i];
    if (depth == 0) {
      node = child_of(t, 0, "<no backtrace>");
      if (node == UINT32_MAX)
        return MT_E_NOMEM;
      t->nodes[node].value += values[i];
    }
    for (size_t j = 0; j < depth; j++) {
      const char *name = mt_analysis_frame(a, frames[inverted ? depth - 1 - j : j]).function;
      node = child_of(t, node, name);
      if (node == UINT32_MAX)
        return MT_E_NOMEM;
      t->nodes[node].value += values[i];
    }
  }
  return MT_OK;
}

void mt_flame_tree_free(mt_flame_tree *t) {
  free(t->nodes);
  *t = (mt_flame_tree){0};
}
