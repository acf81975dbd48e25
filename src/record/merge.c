/* The merge of many threads' records into one time order: decoded events wait in a min-heap on
 * (timestamp, arrival) until they are old enough that records stamped before them have been
 * published (docs/record.md, "Merging"); whatever arrives later still is repaired by order.c. */
#include <stdlib.h>
#include <string.h>

#include "record/record_internal.h"

rec_event *rec_event_new(uint32_t nframes) {
  rec_event *e = malloc(sizeof *e + (size_t)nframes * sizeof e->frames[0]);
  if (!e)
    return NULL;
  memset(e, 0, sizeof *e);
  e->nframes = nframes;
  return e;
}

rec_event *rec_event_copy(const rec_event *e) {
  rec_event *c = rec_event_new(e->nframes);
  if (!c)
    return NULL;
  memcpy(c, e, sizeof *e + (size_t)e->nframes * sizeof e->frames[0]);
  c->next = c->fifo_next = NULL;
  c->dead = false;
  return c;
}

static bool before(const rec_event *a, const rec_event *b) {
  return a->time_ns < b->time_ns || (a->time_ns == b->time_ns && a->order < b->order);
}

bool rec_heap_push(rec_heap *h, rec_event *e) {
  if (h->count == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 1024;
    rec_event **grown = realloc(h->items, cap * sizeof *grown);
    if (!grown)
      return false;
    h->items = grown;
    h->cap = cap;
  }
  size_t i = h->count++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(e, h->items[parent]))
      break;
    h->items[i] = h->items[parent];
    i = parent;
  }
  h->items[i] = e;
  return true;
}

rec_event *rec_heap_peek(const rec_heap *h) {
  return h->count ? h->items[0] : NULL;
}

rec_event *rec_heap_pop(rec_heap *h) {
  if (!h->count)
    return NULL;
  rec_event *top = h->items[0];
  rec_event *last = h->items[--h->count];
  size_t i = 0, n = h->count;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n)
      break;
    if (child + 1 < n && before(h->items[child + 1], h->items[child]))
      child++;
    if (!before(h->items[child], last))
      break;
    h->items[i] = h->items[child];
    i = child;
  }
  if (n)
    h->items[i] = last;
  return top;
}

void rec_heap_free(rec_heap *h) {
  for (size_t i = 0; i < h->count; i++)
    free(h->items[i]);
  free(h->items);
  memset(h, 0, sizeof *h);
}
