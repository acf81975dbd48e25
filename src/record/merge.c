/* The merge of many threads' records into one time order (docs/record.md, "Merging"). Each
 * writing thread (ring, generation) stamps its records in order, so its events queue up in
 * arrival order and a heap over the queues' heads (one entry per thread with events waiting, not
 * one per event) gives the oldest. Events wait until they are old enough that records stamped
 * before them have been read (recorder.c decides); whatever arrives later still is repaired by
 * order.c. */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "record/record_internal.h"

rec_event *rec_event_new(uint32_t nframes) {
  rec_event *e = malloc(sizeof *e + (size_t)nframes * sizeof e->frames[0]);
  if (!e)
    return NULL;
  memset(e, 0, sizeof *e);
  e->nframes = nframes;
  return e;
}

static bool before(const rec_event *a, const rec_event *b) {
  return a->time_ns < b->time_ns || (a->time_ns == b->time_ns && a->order < b->order);
}

static bool source_before(const rec_merge *m, size_t a, size_t b) {
  return before(m->sources[a].head, m->sources[b].head);
}

static void place(rec_merge *m, size_t at, size_t source) {
  m->heap[at] = source;
  m->sources[source].heap_index = at + 1;
}

static void sift_up(rec_merge *m, size_t i) {
  size_t s = m->heap[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!source_before(m, s, m->heap[parent]))
      break;
    place(m, i, m->heap[parent]);
    i = parent;
  }
  place(m, i, s);
}

static void sift_down(rec_merge *m, size_t i) {
  size_t s = m->heap[i], n = m->heap_count;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n)
      break;
    if (child + 1 < n && source_before(m, m->heap[child + 1], m->heap[child]))
      child++;
    if (!source_before(m, m->heap[child], s))
      break;
    place(m, i, m->heap[child]);
    i = child;
  }
  place(m, i, s);
}

bool rec_merge_push(rec_merge *m, rec_event *e, int64_t now_ns) {
  uint64_t index;
  /* The cursor delivers runs of one ring: most pushes are the previous one's source. */
  if (m->last_index && m->sources[m->last_index - 1].key == e->source) {
    index = m->last_index;
  } else if (!mt_hashmap_get(&m->by_key, (int64_t)e->source, &index)) {
    if (!MT_GROW(m->sources, m->cap, m->count + 1) ||
        !MT_GROW(m->heap, m->heap_cap, m->count + 1) ||
        !mt_hashmap_put(&m->by_key, (int64_t)e->source, m->count + 1))
      return false;
    m->sources[m->count] = (rec_source){.key = e->source};
    index = ++m->count;
  }
  m->last_index = (size_t)index;
  size_t si = (size_t)index - 1;
  rec_source *s = &m->sources[si];
  e->next = NULL;
  if (e->time_ns > s->newest_ns)
    s->newest_ns = e->time_ns;
  s->seen_at_ns = now_ns;
  s->queued++;
  m->queued++;
  if (s->tail) {
    s->tail->next = e;
    s->tail = e;
    return true;
  }
  s->head = s->tail = e;
  m->heap[m->heap_count++] = si;
  sift_up(m, m->heap_count - 1);
  return true;
}

rec_event *rec_merge_peek(const rec_merge *m) {
  return m->heap_count ? m->sources[m->heap[0]].head : NULL;
}

rec_event *rec_merge_pop(rec_merge *m) {
  if (!m->heap_count)
    return NULL;
  rec_source *s = &m->sources[m->heap[0]];
  rec_event *e = s->head;
  s->head = e->next;
  e->next = NULL;
  s->queued--;
  m->queued--;
  if (s->head) {
    sift_down(m, 0);
  } else {
    s->tail = NULL;
    s->heap_index = 0;
    if (--m->heap_count) {
      place(m, 0, m->heap[m->heap_count]);
      sift_down(m, 0);
    }
  }
  return e;
}

int64_t rec_merge_low_water(const rec_merge *m, int64_t since_ns, int64_t window_ns) {
  int64_t high = INT64_MIN, low = INT64_MAX;
  for (size_t i = 0; i < m->count; i++)
    if (m->sources[i].seen_at_ns >= since_ns && m->sources[i].newest_ns > high)
      high = m->sources[i].newest_ns;
  for (size_t i = 0; i < m->count; i++) {
    const rec_source *s = &m->sources[i];
    if (s->seen_at_ns >= since_ns && s->newest_ns >= high - window_ns && s->newest_ns < low)
      low = s->newest_ns;
  }
  return low;
}

void rec_merge_free(rec_merge *m) {
  for (size_t i = 0; i < m->count; i++)
    for (rec_event *e = m->sources[i].head, *next; e; e = next) {
      next = e->next;
      free(e);
    }
  mt_hashmap_free(&m->by_key);
  free(m->sources);
  free(m->heap);
  memset(m, 0, sizeof *m);
}
