/* Frames mapped to group keys (frame_keys.h): the frames are sorted by key and each run of equal
 * keys gets the next id, so ids follow key order and equal keys share an id whatever their
 * frames. */
#include "analysis/frame_keys.h"

#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"

int mt_frame_key_compare(const mt_frame *x, const mt_frame *y) {
  int c = strcmp(x->function, y->function);
  if (!c)
    c = strcmp(x->file, y->file);
  if (!c)
    c = (x->line > y->line) - (x->line < y->line);
  return c;
}

mt_frame mt_frame_key(mt_frame f, mt_group_by by) {
  if (by == MT_GROUP_FUNCTION)
    f.file = "", f.line = 0;
  else if (by == MT_GROUP_FILE)
    f.function = "", f.line = 0;
  return f;
}

typedef struct keyed {
  mt_frame key;
  uint32_t frame;
} keyed;

static int by_key(const void *p, const void *q) {
  const keyed *x = p, *y = q;
  int c = mt_frame_key_compare(&x->key, &y->key);
  return c ? c : (x->frame > y->frame) - (x->frame < y->frame);
}

bool mt_frame_keys_build(mt_frame_keys *k, const mt_analysis *a, mt_group_by by) {
  *k = (mt_frame_keys){0};
  size_t n = a->nframes + 1; /* and "<no backtrace>" */
  keyed *sorted = malloc(n * sizeof *sorted);
  k->of_frame = malloc(n * sizeof *k->of_frame);
  k->keys = malloc(n * sizeof *k->keys);
  if (!sorted || !k->of_frame || !k->keys) {
    free(sorted);
    mt_frame_keys_free(k);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t f = i < a->nframes ? (uint32_t)i : UINT32_MAX;
    sorted[i] = (keyed){mt_frame_key(mt_analysis_frame(a, f), by), f};
  }
  qsort(sorted, n, sizeof *sorted, by_key);
  for (size_t i = 0; i < n; i++) {
    if (!k->nkeys || mt_frame_key_compare(&k->keys[k->nkeys - 1], &sorted[i].key))
      k->keys[k->nkeys++] = sorted[i].key;
    uint32_t f = sorted[i].frame;
    k->of_frame[f == UINT32_MAX ? a->nframes : f] = (uint32_t)(k->nkeys - 1);
  }
  k->nframes = a->nframes;
  free(sorted);
  return true;
}

void mt_frame_keys_free(mt_frame_keys *k) {
  free(k->of_frame);
  free(k->keys);
  *k = (mt_frame_keys){0};
}
