/* Read access to the analysis's frame trie (frame_trie.h). */
#include "analysis/frame_trie.h"

#include "analysis/model.h"

size_t mt_frame_trie_count(const mt_analysis *a) {
  return a->nfnodes;
}

uint32_t mt_frame_trie_parent(const mt_analysis *a, uint32_t node) {
  return a->fnodes[node].parent;
}

uint32_t mt_frame_trie_frame(const mt_analysis *a, uint32_t node) {
  return a->fnodes[node].frame;
}

uint32_t mt_frame_trie_nodes(const mt_analysis *a, uint32_t *parent, uint32_t *frame) {
  uint32_t most = 0;
  if (a->nfnodes)
    parent[0] = frame[0] = 0;
  for (size_t i = 1; i < a->nfnodes; i++) {
    parent[i] = a->fnodes[i].parent;
    frame[i] = a->fnodes[i].frame;
    if (frame[i] >= most)
      most = frame[i] + 1;
  }
  return most;
}

uint32_t mt_frame_trie_of_stack(const mt_analysis *a, size_t stack) {
  return a->stacks[stack].fnode;
}
