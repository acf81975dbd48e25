/* The code trie of code_trie.h. */
#include "analysis/code_trie.h"

#include <stdlib.h>

#include "common/grow.h"

static uint32_t add(mt_code_trie *t, uint32_t parent, int64_t code, uint32_t count) {
  if (t->nodes >= UINT32_MAX - 1 || !MT_GROW(t->node, t->cap, t->nodes + 1))
    return UINT32_MAX;
  t->node[t->nodes] = (mt_code_node){.code = code, .count = count, .parent = parent};
  return (uint32_t)t->nodes++;
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
  free(t->node);
  mt_pairmap_free(&t->single);
  mt_pairmap_free(&t->runs);
  *t = (mt_code_trie){0};
}
