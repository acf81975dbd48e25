/* The analysis's backtraces as the trie of frames they are stored as (model.h's frame nodes), read
 * only: for walks over every backtrace that would otherwise spell out each one's frames
 * (mt_analysis_stack_frames, a copy per backtrace) although consecutive ones share most of them.
 * Node 0 is the root (no frame); a node's parent has a smaller index. */
#ifndef MEMTAP_SRC_ANALYSIS_FRAME_TRIE_H
#define MEMTAP_SRC_ANALYSIS_FRAME_TRIE_H

#include <stddef.h>
#include <stdint.h>

#include "memtap/analysis.h"

/* How many nodes the trie has (the root included). */
size_t mt_frame_trie_count(const mt_analysis *a);

/* Node `node`'s parent and frame (a frame index for mt_analysis_frame); not for the root. */
uint32_t mt_frame_trie_parent(const mt_analysis *a, uint32_t node);
uint32_t mt_frame_trie_frame(const mt_analysis *a, uint32_t node);

/* Every node's parent and frame copied into `parent` and `frame` (mt_frame_trie_count entries
 * each; the root's are 0): for walks over all the nodes without a call per node. Returns one more
 * than the largest frame (0 without nodes below the root). */
uint32_t mt_frame_trie_nodes(const mt_analysis *a, uint32_t *parent, uint32_t *frame);

/* The node where stack `stack`'s backtrace ends (0 for an empty backtrace). */
uint32_t mt_frame_trie_of_stack(const mt_analysis *a, size_t stack);

#endif
