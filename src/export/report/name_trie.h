/* The HTML report's tree of names (src/export/html.c prunes and writes it): the analysis'
 * backtraces as one trie of function names, as the page and `flame --folded` merge them (fewer
 * nodes than frames, and no merging in the page), with each node's weight (samples allocated plus
 * live at the window's start, below it included). */
#ifndef MEMTAP_SRC_EXPORT_REPORT_NAME_TRIE_H
#define MEMTAP_SRC_EXPORT_REPORT_NAME_TRIE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/analysis.h"

#define MT_NO_SITE UINT32_MAX /* a stack's site when it has no backtrace */

typedef struct mt_name_trie {
  int32_t *parent;  /* -1 for a child of the root */
  uint32_t *frame;  /* the first analysis frame seen with the node's function name */
  double *weight;   /* the node's and its descendants' */
  size_t n;         /* nodes, numbered as a walk of every stack (outer frames first) meets them:
                       a parent before its children */
  int64_t *leaf;    /* per analysis stack: its node, -1 for an empty backtrace */
  double *sw;       /* per analysis stack: its weight, < 0 when it has nothing allocated or live at
                       the window's start */
  uint32_t *site;   /* per analysis stack: its site frame (MT_NO_SITE: "<no backtrace>") */
  uint32_t nframes; /* the nodes' and sites' frames are below this */
  uint32_t *names;  /* the nodes' distinct frames (one per function name), as first met */
  size_t nnames;
  size_t weightless; /* nodes of weight 0 (only stacks with nothing allocated below them) */
  size_t *order;     /* nodes by weight, heaviest first, a parent before its children (NULL until
                        mt_name_trie_order) */
} mt_name_trie;

/* False when memory runs out. */
bool mt_name_trie_init(mt_name_trie *t, const mt_analysis *a);
/* Sorts t->order (once). False when memory runs out. */
bool mt_name_trie_order(mt_name_trie *t);
void mt_name_trie_free(mt_name_trie *t);

#endif
