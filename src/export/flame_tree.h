/* A flame tree: backtraces merged by function name from the root (or from the allocation point
 * when inverted), each node with the total value of the stacks through it. The SVG flame graph is
 * drawn from it, and folded lines are spelled out from it. */
#ifndef MEMTAP_SRC_EXPORT_FLAME_TREE_H
#define MEMTAP_SRC_EXPORT_FLAME_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "memtap/analysis.h"

typedef struct mt_flame_node {
  const char *name; /* borrowed from the analysis */
  int64_t value;
  uint32_t parent, first_child, next_sibling;
  uint32_t depth;
} mt_flame_node;

typedef struct mt_flame_tree {
  mt_flame_node *nodes; /* nodes[0] is the root, "all" */
  size_t count, cap;
  uint32_t max_depth;
} mt_flame_tree;

/* Builds the tree of the stacks with values[i] > 0, storing in leaf[i] (when `leaf` is not NULL)
 * the node where stack i ends. MT_OK or MT_E_NOMEM (free the tree either way). */
int mt_flame_tree_build(mt_flame_tree *t, const mt_analysis *a, const int64_t *values,
                        bool inverted, uint32_t *leaf);
void mt_flame_tree_free(mt_flame_tree *t);

#endif
