/* Mapped regions (docs/record.md, "Regions"): the program's anonymous mappings, kept sorted by
 * address and non-overlapping, so that a munmap of part of one can be found in O(log n) and the
 * region split into what is still mapped. malloc blocks live in order.c's address map instead. */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "record/record_internal.h"

/* The first region whose end is above `addr`. */
static size_t lower_bound(const rec_regions *rs, uint64_t addr) {
  size_t lo = 0, hi = rs->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (rs->items[mid].end <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

void rec_regions_overlapping(const rec_regions *rs, uint64_t start, uint64_t end, size_t *first,
                             size_t *last) {
  size_t i = lower_bound(rs, start), j = i;
  while (j < rs->count && rs->items[j].start < end)
    j++;
  *first = i;
  *last = j;
}

bool rec_regions_insert(rec_regions *rs, const rec_region *r) {
  if (!MT_GROW(rs->items, rs->cap, rs->count + 1))
    return false;
  size_t i = lower_bound(rs, r->start);
  memmove(rs->items + i + 1, rs->items + i, (rs->count - i) * sizeof *rs->items);
  rs->items[i] = *r;
  rs->count++;
  return true;
}

void rec_regions_remove(rec_regions *rs, size_t index) {
  free(rs->items[index].codes);
  memmove(rs->items + index, rs->items + index + 1, (rs->count - index - 1) * sizeof *rs->items);
  rs->count--;
}

void rec_regions_free(rec_regions *rs) {
  for (size_t i = 0; i < rs->count; i++)
    free(rs->items[i].codes);
  free(rs->items);
  memset(rs, 0, sizeof *rs);
}
