/* An address whose records arrived out of causal order (docs/record.md, "Order"): a free while
 * nothing was live there, or an allocation while a block still was. Its allocations and frees
 * are kept until they explain each other: a pairing of frees to allocations (a free pairs with an
 * allocation of its own thread that came before it, or of another thread stamped no later than
 * the free plus the skew tolerance) that leaves no free alone and at most one allocation, the one
 * then live. The pairing is kept maximal as items come (each new item looks for an augmenting
 * path), so that a choice made early (which of two frees an allocation takes) is revised when a
 * later record shows it wrong: pairing greedily by stamp lost frees when two threads' clocks
 * disagreed by a few hundred nanoseconds around a block handed between threads. order.c writes
 * the result; nothing here writes. */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "record/record_internal.h"

static bool can_pair(const rec_unsettled_item *a, const rec_unsettled_item *f, int64_t skew_ns) {
  return a->source == f->source ? a->order < f->order : f->time_ns + skew_ns >= a->time_ns;
}

/* How far `c` is from being `x`'s partner, smaller first: its own thread's record, then one on
 * the causal side (the allocation before the free), then the nearest in time. */
static uint64_t preference(const rec_unsettled_item *x, const rec_unsettled_item *c) {
  const rec_unsettled_item *a = x->alloc ? x : c, *f = x->alloc ? c : x;
  uint64_t gap = f->time_ns >= a->time_ns ? (uint64_t)f->time_ns - (uint64_t)a->time_ns
                                          : (uint64_t)a->time_ns - (uint64_t)f->time_ns;
  if (gap > (UINT64_C(1) << 61))
    gap = UINT64_C(1) << 61;
  return (a->source == f->source ? 0 : UINT64_C(1) << 63) |
         (f->time_ns >= a->time_ns ? 0 : UINT64_C(1) << 62) | gap;
}

/* Kuhn's step: a partner for item `x`, taking one from its current partner when that one can be
 * paired again elsewhere. `visited` marks the items of the other kind already tried. */
static bool augment(rec_unsettled *u, uint32_t x, uint8_t *visited, int64_t skew_ns) {
  rec_unsettled_item *it = u->items;
  uint8_t cand[REC_UNSETTLED_MAX];
  uint64_t key[REC_UNSETTLED_MAX];
  uint32_t n = 0;
  for (uint32_t i = 0; i < u->count; i++) {
    if (visited[i] || it[i].alloc == it[x].alloc ||
        !(it[x].alloc ? can_pair(&it[x], &it[i], skew_ns) : can_pair(&it[i], &it[x], skew_ns)))
      continue;
    uint64_t k = preference(&it[x], &it[i]);
    uint32_t j = n++;
    for (; j > 0 && key[j - 1] > k; j--) { /* insertion: a handful of candidates */
      key[j] = key[j - 1];
      cand[j] = cand[j - 1];
    }
    key[j] = k;
    cand[j] = (uint8_t)i;
  }
  for (uint32_t k = 0; k < n; k++) {
    uint32_t c = cand[k];
    if (visited[c])
      continue; /* taken by a deeper step of this search */
    visited[c] = 1;
    if (it[c].match < 0 || augment(u, (uint32_t)it[c].match, visited, skew_ns)) {
      it[c].match = (int32_t)x;
      it[x].match = (int32_t)c;
      return true;
    }
  }
  return false;
}

bool rec_unsettled_add(rec_unsettled *u, const rec_unsettled_item *item, int64_t skew_ns) {
  if (u->count == REC_UNSETTLED_MAX)
    return false;
  if (!MT_GROW_FROM(u->items, u->cap, (size_t)u->count + 1, 4)) /* most hold a pair or two */
    return false;
  uint32_t x = u->count++;
  u->items[x] = *item;
  u->items[x].match = -1;
  uint8_t visited[REC_UNSETTLED_MAX] = {0};
  if (augment(u, x, visited, skew_ns)) {
    if (item->alloc)
      u->unmatched_frees--;
    else
      u->unmatched_allocs--;
  } else if (item->alloc) {
    u->unmatched_allocs++;
  } else {
    u->unmatched_frees++;
  }
  return true;
}

void rec_unsettled_clear(rec_unsettled *u) {
  for (uint32_t i = 0; i < u->count; i++)
    free(u->items[i].event);
  free(u->items);
  u->items = NULL;
  u->count = u->cap = u->unmatched_allocs = u->unmatched_frees = 0;
}
