/* An open-addressing map from a (uint32 parent, uint64 item) pair to a uint32 value: the child
 * index of the analysis' tries (code trie, frame trie). No removal. A slot is 16 bytes, so a
 * probe touches one cache line: the code trie is looked up for every new frame of every event. */
#ifndef MEMTAP_SRC_ANALYSIS_PAIRMAP_H
#define MEMTAP_SRC_ANALYSIS_PAIRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mt_pair_slot {
  uint64_t item;
  uint32_t parent;
  uint32_t value; /* UINT32_MAX marks an empty slot */
} mt_pair_slot;

typedef struct mt_pairmap {
  mt_pair_slot *slots;
  size_t cap, count;
} mt_pairmap;

/* The value of (parent, item), or UINT32_MAX when absent. */
uint32_t mt_pairmap_get(const mt_pairmap *m, uint32_t parent, uint64_t item);
/* Inserts (the pair must be absent); false when memory runs out. */
bool mt_pairmap_put(mt_pairmap *m, uint32_t parent, uint64_t item, uint32_t value);
void mt_pairmap_free(mt_pairmap *m);

#endif
