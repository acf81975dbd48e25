/* Growing an array by doubling: the one helper the arrays of the analysis layer share. */
#ifndef MEMTAP_SRC_COMMON_GROW_H
#define MEMTAP_SRC_COMMON_GROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

/* Makes room for `need` elements of `elem` bytes in *array (capacity *cap, doubled from `first`).
 * False when memory runs out: the array is then unchanged. */
static inline bool mt_grow_from(void **array, size_t *cap, size_t need, size_t elem, size_t first) {
  if (need <= *cap)
    return true;
  size_t n = *cap ? *cap : first;
  while (n < need)
    n *= 2;
  void *p = realloc(*array, n * elem);
  if (!p)
    return false;
  *array = p;
  *cap = n;
  return true;
}
static inline bool mt_grow(void **array, size_t *cap, size_t need, size_t elem) {
  return mt_grow_from(array, cap, need, elem, 64);
}
#define MT_GROW(a, cap, need) mt_grow((void **)&(a), &(cap), (need), sizeof *(a))
/* MT_GROW for arrays that are usually small and many (starting at `first` elements). */
#define MT_GROW_FROM(a, cap, need, first)                                                          \
  mt_grow_from((void **)&(a), &(cap), (need), sizeof *(a), (first))

#endif
