/* An open-addressing map from a (uint32 parent, uint64 item) pair to a uint32 value: the child
 * index of the analysis' tries (code trie, frame trie) and the interning of frames. No removal. */
#ifndef MEMTAP_SRC_ANALYSIS_PAIRMAP_H
#define MEMTAP_SRC_ANALYSIS_PAIRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mt_pairmap {
  uint64_t *items;
  uint32_t *parents;
  uint32_t *values; /* UINT32_MAX marks an empty slot */
  size_t cap, count;
} mt_pairmap;

/* The value of (parent, item), or UINT32_MAX when absent. */
uint32_t mt_pairmap_get(const mt_pairmap *m, uint32_t parent, uint64_t item);
/* Inserts (the pair must be absent); false when memory runs out. */
bool mt_pairmap_put(mt_pairmap *m, uint32_t parent, uint64_t item, uint32_t value);
void mt_pairmap_free(mt_pairmap *m);

#endif
