/* The code trie of code_trie.h. */
#include "analysis/code_trie.h"

#include <stdlib.h>

static bool reserve(mt_code_trie *t, size_t need) {
  if (need <= t->cap)
    return true;
  size_t n = t->cap ? 2 * t->cap : 1024;
  while (n < need)
    n *= 2;
  int64_t *code = realloc(t->code, n * sizeof *code);
  if (code)
    t->code = code;
  uint32_t *count = code ? realloc(t->count, n * sizeof *count) : NULL;
  if (count)
    t->count = count;
  uint32_t *parent = count ? realloc(t->parent, n * sizeof *parent) : NULL;
  if (!parent)
    return false;
  t->parent = parent;
  t->cap = n;
  return true;
}

static uint32_t add(mt_code_trie *t, uint32_t parent, int64_t code, uint32_t count) {
  if (t->nodes >= UINT32_MAX - 1 || !reserve(t, t->nodes + 1))
    return UINT32_MAX;
  uint32_t node = (uint32_t)t->nodes++;
  t->code[node] = code;
  t->count[node] = count;
  t->parent[node] = parent;
  return node;
}

uint32_t mt_code_trie_child(mt_code_trie *t, uint32_t parent, int64_t code, uint32_t count) {
  if (t->nodes == 0 && add(t, 0, 0, 0) == UINT32_MAX) /* the root */
    return UINT32_MAX;
  uint32_t one = mt_pairmap_get(&t->single, parent, (uint64_t)code);
  if (one == UINT32_MAX) {
    if ((one = add(t, parent, code, 1)) == UINT32_MAX ||
        !mt_pairmap_put(&t->single, parent, (uint64_t)code, one))
      return UINT32_MAX;
  }
  if (count == 1)
    return one;
  uint32_t run = mt_pairmap_get(&t->runs, one, count);
  if (run == UINT32_MAX) {
    if ((run = add(t, parent, code, count)) == UINT32_MAX ||
        !mt_pairmap_put(&t->runs, one, count, run))
      return UINT32_MAX;
  }
  return run;
}

void mt_code_trie_free(mt_code_trie *t) {
  free(t->code);
  free(t->count);
  free(t->parent);
  mt_pairmap_free(&t->single);
  mt_pairmap_free(&t->runs);
  *t = (mt_code_trie){0};
}
