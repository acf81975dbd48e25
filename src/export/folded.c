/* Folded stacks ("outer;...;inner VALUE", flamegraph.pl's input) and the flame tree that the SVG
 * flame graph draws from them. Frames are function names, so backtraces that differ only in lines
 * are one folded line (values summed). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "export/export_internal.h"
#include "export/flame_tree.h"

/* A function name as one folded frame: ';' separates frames and a newline ends the line. */
static void print_name(FILE *out, const char *s) {
  for (size_t n; *s; s += n) {
    n = strcspn(s, ";\n\r");
    fwrite(s, 1, n, out);
    if (s[n])
      fputc(s[n] == ';' ? ':' : ' ', out), n++;
  }
}

/* One line per node of the flame tree where stacks end: stacks that differ only in lines or files
 * end at the same node of function names, and their values are summed there. Lines come in the
 * order their first stack comes, and are spelled out from the tree as they are printed, so memory
 * follows the tree (shared prefixes stored once), not the text (75 MB for ocamlopt_v1). */
int mt_export_folded(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err) {
  size_t n = mt_analysis_stack_count(a);
  int64_t *values;
  int rc = mt_export_values(a, o, o->metric, &values, err);
  if (rc)
    return rc;
  uint32_t *leaf = malloc((n ? n : 1) * sizeof *leaf);
  mt_flame_tree t = {0};
  rc = leaf ? mt_flame_tree_build(&t, a, values, o->inverted, leaf) : MT_E_NOMEM;
  int64_t *self = rc ? NULL : calloc(t.count, sizeof *self);
  uint32_t *lines = self ? malloc((n ? n : 1) * sizeof *lines) : NULL;
  const char **path = lines ? malloc(((size_t)t.max_depth + 1) * sizeof *path) : NULL;
  if (!path)
    rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  size_t nlines = 0;
  for (size_t i = 0; rc == MT_OK && i < n; i++) {
    if (values[i] <= 0)
      continue;
    if (self[leaf[i]] == 0)
      lines[nlines++] = leaf[i];
    self[leaf[i]] += values[i];
  }
  for (size_t l = 0; rc == MT_OK && l < nlines; l++) {
    size_t depth = 0;
    for (uint32_t node = lines[l]; node != 0; node = t.nodes[node].parent)
      path[depth++] = t.nodes[node].name;
    for (size_t j = depth; j > 0; j--) {
      print_name(out, path[j - 1]);
      if (j > 1)
        fputc(';', out);
    }
    fprintf(out, " %" PRId64 "\n", self[lines[l]]);
  }
  free(values);
  free(leaf);
  free(self);
  free(lines);
  free(path);
  mt_flame_tree_free(&t);
  return rc;
}

/* The flame tree ---------------------------------------------------------------------------- */

static uint32_t child_of(mt_flame_tree *t, uint32_t parent, const char *name) {
  /* Names are interned by the analysis: equal names are mostly equal pointers. */
  for (uint32_t c = t->nodes[parent].first_child; c != UINT32_MAX; c = t->nodes[c].next_sibling)
    if (t->nodes[c].name == name || !strcmp(t->nodes[c].name, name))
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
                        bool inverted, uint32_t *leaf) {
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
    if (leaf)
      leaf[i] = node;
  }
  return MT_OK;
}

void mt_flame_tree_free(mt_flame_tree *t) {
  free(t->nodes);
  *t = (mt_flame_tree){0};
}
