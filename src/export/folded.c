/* Folded stacks ("outer;...;inner VALUE", flamegraph.pl's input) and the flame tree that the SVG
 * flame graph draws from them. Frames are function names, so backtraces that differ only in lines
 * are one folded line (values summed). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/hashmap.h"
#include "export/export_internal.h"
#include "export/flame_tree.h"

/* The folded lines, built in memory: backtraces that differ only in lines or files are the same
 * line of function names, and appear once with the sum of their values. */
typedef struct folded {
  char *text; /* the lines' stacks, each NUL-terminated */
  size_t len, cap;
  size_t *start; /* line -> offset in text */
  int64_t *value;
  size_t count, lines_cap;
  mt_hashmap index; /* hash of a stack (+ probe) -> line */
  bool failed;
} folded;

static void put(folded *f, const char *s, size_t n) {
  if (f->failed)
    return;
  if (f->len + n > f->cap) {
    size_t cap = f->cap ? f->cap : 4096;
    while (cap < f->len + n)
      cap *= 2;
    char *p = realloc(f->text, cap);
    if (!p) {
      f->failed = true;
      return;
    }
    f->text = p;
    f->cap = cap;
  }
  memcpy(f->text + f->len, s, n);
  f->len += n;
}

/* A function name as one folded frame: ';' separates frames and a newline ends the line. */
static void put_name(folded *f, const char *s) {
  for (size_t n; *s; s += n) {
    n = strcspn(s, ";\n\r");
    put(f, s, n);
    if (s[n])
      put(f, s[n] == ';' ? ":" : " ", 1), n++;
  }
}

static uint64_t hash_text(const char *s) {
  uint64_t h = 14695981039346656037u;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

/* Ends the stack being built at text + from: adds `value` to its line, new or not. */
static void end_stack(folded *f, size_t from, int64_t value) {
  put(f, "", 1);
  if (f->failed)
    return;
  const char *stack = f->text + from;
  uint64_t line;
  for (uint64_t h = hash_text(stack);; h++) {
    if (!mt_hashmap_get(&f->index, (int64_t)h, &line))
      break;
    if (!strcmp(f->text + f->start[line], stack)) {
      f->value[line] += value;
      f->len = from;
      return;
    }
  }
  if (f->count == f->lines_cap) {
    size_t cap = f->lines_cap ? f->lines_cap * 2 : 256;
    size_t *s = realloc(f->start, cap * sizeof *s);
    if (s)
      f->start = s;
    int64_t *v = realloc(f->value, cap * sizeof *v);
    if (v)
      f->value = v;
    if (!s || !v) {
      f->failed = true;
      return;
    }
    f->lines_cap = cap;
  }
  uint64_t h = hash_text(stack);
  while (mt_hashmap_get(&f->index, (int64_t)h, NULL))
    h++;
  if (!mt_hashmap_put(&f->index, (int64_t)h, f->count)) {
    f->failed = true;
    return;
  }
  f->start[f->count] = from;
  f->value[f->count++] = value;
}

int mt_export_folded(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err) {
  int64_t *values = mt_export_stack_values(a, o->metric);
  folded f = {.index = {.seed = mt_hashmap_random_seed()}};
  size_t n = mt_analysis_stack_count(a);
  for (size_t i = 0; values && i < n; i++) {
    if (values[i] <= 0)
      continue;
    size_t depth, from = f.len;
    const uint32_t *frames = mt_analysis_stack_frames(a, i, &depth, NULL);
    if (depth == 0)
      put(&f, "<no backtrace>", 14);
    for (size_t j = 0; j < depth; j++) {
      if (j)
        put(&f, ";", 1);
      put_name(&f, mt_analysis_frame(a, frames[o->inverted ? depth - 1 - j : j]).function);
    }
    end_stack(&f, from, values[i]);
  }
  int rc = MT_OK;
  if (!values || f.failed)
    rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  for (size_t l = 0; rc == MT_OK && l < f.count; l++)
    fprintf(out, "%s %" PRId64 "\n", f.text + f.start[l], f.value[l]);
  free(values);
  free(f.text);
  free(f.start);
  free(f.value);
  mt_hashmap_free(&f.index);
  return rc;
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
