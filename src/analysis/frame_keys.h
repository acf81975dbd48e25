/* Frames mapped to group keys (their function, file or whole frame), numbered in key order, for
 * the views of views.h that add up costs per key. Private to src/analysis. */
#ifndef MEMTAP_SRC_ANALYSIS_FRAME_KEYS_H
#define MEMTAP_SRC_ANALYSIS_FRAME_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/analysis.h"

typedef struct mt_frame_keys {
  uint32_t *of_frame; /* key id of each frame index; the last entry is "<no backtrace>"'s */
  mt_frame *keys;     /* the key of each id, ids in key order (function, file, line) */
  size_t nframes, nkeys;
} mt_frame_keys;

/* Compares keys by function, file, line. */
int mt_frame_key_compare(const mt_frame *x, const mt_frame *y);

/* The key of a frame under `by` (the unused parts "" / 0). */
mt_frame mt_frame_key(mt_frame f, mt_group_by by);

/* Numbers the keys of every frame of `a`. False when memory runs out (k is then empty). */
bool mt_frame_keys_build(mt_frame_keys *k, const mt_analysis *a, mt_group_by by);
void mt_frame_keys_free(mt_frame_keys *k);

/* The key id of a frame index, UINT32_MAX ("<no backtrace>") included. */
static inline uint32_t mt_frame_keys_of(const mt_frame_keys *k, uint32_t frame) {
  return k->of_frame[frame < k->nframes ? frame : k->nframes];
}

#endif
