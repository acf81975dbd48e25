/* The raw backtraces of live objects, as location codes, independent of how the analysis shows
 * them (--hide, folding): a trie whose node i stands for the backtrace of its path from the root
 * (node 0). A node adds a run of `count` equal codes, since real recursive stacks repeat one code
 * hundreds of times. The checkpoint index (index.c) saves the backtraces of the objects live at
 * each checkpoint through it; the pass keeps it only while it may write checkpoints. */
#ifndef MEMTAP_SRC_ANALYSIS_CODE_TRIE_H
#define MEMTAP_SRC_ANALYSIS_CODE_TRIE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/pairmap.h"

typedef struct mt_code_node {
  int64_t code;    /* the code the node repeats (unused for the root) */
  uint32_t count;  /* how many times */
  uint32_t parent; /* < the node's own index */
} mt_code_node;

typedef struct mt_code_trie {
  mt_code_node *node;
  size_t nodes, cap;
  mt_pairmap single; /* (parent, code) -> the child with one code */
  mt_pairmap runs;   /* (that child, count) -> the child with `count` codes, count > 1 */
} mt_code_trie;

/* The child of `parent` adding `count` (>= 1) times `code`, made if new; UINT32_MAX when memory
 * runs out. */
uint32_t mt_code_trie_child(mt_code_trie *t, uint32_t parent, int64_t code, uint32_t count);

void mt_code_trie_free(mt_code_trie *t);

#endif
