/* The merge of many threads' records into one time order (docs/record.md, "Merging"). Each
 * writing thread (ring, generation) stamps its records in order, so its events queue up in
 * arrival order and a heap over the queues' heads (one entry per thread with events waiting, not
 * one per event) gives the oldest. A queue is a circular array of fixed-size slots and a circular
 * buffer of frames, where a stack equal to the thread's previous one is stored once: nothing is
 * allocated per event. Events wait until they are old enough that records stamped
 * before them have been read (recorder.c decides); whatever arrives later still is repaired by
 * order.c. A thread that released its ring (rec_merge_retire) leaves the merge once its queue is
 * empty, its arrays kept for the next threads as spares, so that a program whose threads come
 * and go by the thousand costs what its live threads do. */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "memtap/tracer.h"
#include "record/record_internal.h"

rec_event *rec_event_new(uint32_t nframes) {
  rec_event *e = malloc(sizeof *e + (size_t)nframes * sizeof e->own_frames[0]);
  if (!e)
    return NULL;
  memset(e, 0, sizeof *e);
  e->nframes = nframes;
  e->frames = e->own_frames;
  return e;
}

rec_event *rec_event_clone(const rec_event *e) {
  rec_event *c = malloc(sizeof *c + (size_t)e->nframes * sizeof c->own_frames[0]);
  if (!c)
    return NULL;
  *c = *e;
  if (e->nframes)
    memcpy(c->own_frames, e->frames, e->nframes * sizeof *e->frames);
  c->frames = c->own_frames;
  return c;
}

/* Whether the event gives an address back (a free, the old block of a realloc, an unmap). */
static inline bool slot_releases(const rec_slot *a) {
  return a->type == MT_TRACER_REC_FREE || a->type == MT_TRACER_REC_REALLOC ||
         a->type == MT_TRACER_REC_UNMAP;
}

/* Time order. Two threads' events stamped alike are common under the shared clock tick (it
 * stamps a polling period's allocations and frees alike, docs/ring.md §5): an allocation goes
 * before a release then, so that a block handed to another thread and freed there within one tick
 * is written in causal order without the repair (order.c). One thread's events keep their order
 * (a queue's events come out in order whatever this says). */
static inline bool slot_before(const rec_slot *a, const rec_slot *b) {
  if (a->time_ns != b->time_ns)
    return a->time_ns < b->time_ns;
  bool ra = slot_releases(a), rb = slot_releases(b);
  return ra != rb ? rb : a->order < b->order;
}

static inline const rec_slot *head_slot(const rec_source *s) {
  return &s->slots[s->head & s->slot_mask];
}

static inline bool source_before(const rec_merge *m, size_t a, size_t b) {
  return slot_before(head_slot(&m->sources[a]), head_slot(&m->sources[b]));
}

static inline void place(rec_merge *m, size_t at, size_t source) {
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

/* Keeps `array` (mask + 1 elements) in `sp` if it is among the largest, else frees it; returns
 * whether it was freed. */
static bool spare_put(rec_spares *sp, void *array, uint64_t mask) {
  if (sp->count < REC_MERGE_SPARES) {
    sp->array[sp->count] = array;
    sp->mask[sp->count++] = mask;
    return false;
  }
  size_t least = 0;
  for (size_t i = 1; i < sp->count; i++)
    if (sp->mask[i] < sp->mask[least])
      least = i;
  if (sp->mask[least] < mask) {
    void *old = sp->array[least];
    sp->array[least] = array;
    sp->mask[least] = mask;
    array = old;
  }
  free(array);
  return true;
}

/* The largest spare of `sp` (its mask in *mask), or NULL if there is none. */
static void *spare_take(rec_spares *sp, uint64_t *mask) {
  if (!sp->count)
    return NULL;
  size_t best = 0;
  for (size_t i = 1; i < sp->count; i++)
    if (sp->mask[i] > sp->mask[best])
      best = i;
  void *array = sp->array[best];
  *mask = sp->mask[best];
  sp->count--;
  sp->array[best] = sp->array[sp->count];
  sp->mask[best] = sp->mask[sp->count];
  return array;
}

static void spares_free(rec_spares *sp) {
  for (size_t i = 0; i < sp->count; i++)
    free(sp->array[i]);
  sp->count = 0;
}

/* Gives the slot array of `s`, just emptied, to the spares. */
static void release_slots(rec_merge *m, rec_source *s) {
  spare_put(&m->spare_slots, s->slots, s->slot_mask);
  s->slots = NULL;
  s->slot_mask = 0;
}

/* A slot array for `s`, which has none (its queue is empty): the largest spare, else a new one. */
static bool take_slots(rec_merge *m, rec_source *s) {
  s->slots = spare_take(&m->spare_slots, &s->slot_mask);
  if (s->slots)
    return true;
  s->slots = malloc(64 * sizeof *s->slots);
  s->slot_mask = 63;
  return s->slots != NULL;
}

/* Doubles the slot array, keeping every queued slot at its absolute position. */
static bool grow_slots(rec_source *s) {
  uint64_t size = s->slots ? (s->slot_mask + 1) * 2 : 64;
  rec_slot *slots = malloc(size * sizeof *slots);
  if (!slots)
    return false;
  for (uint64_t i = s->head; i < s->tail; i++)
    slots[i & (size - 1)] = s->slots[i & s->slot_mask];
  free(s->slots);
  s->slots = slots;
  s->slot_mask = size - 1;
  return true;
}

/* Makes room for a contiguous run of `n` words at frames_tail (skipping to the buffer's start
 * when the run would wrap); returns its position, or UINT64_MAX out of memory. The words from
 * frames_head on are kept: a larger buffer keeps every word at its absolute position, and since
 * its size is a multiple of the old one, a run that did not wrap does not wrap in it either. */
static uint64_t reserve_frames(rec_merge *m, rec_source *s, uint64_t n) {
  if (!s->frames)
    s->frames = spare_take(&m->spare_frames, &s->frame_mask);
  for (;;) {
    uint64_t size = s->frames ? s->frame_mask + 1 : 0, at = s->frames_tail;
    if (size && (at & s->frame_mask) + n > size)
      at += size - (at & s->frame_mask);
    if (size && at + n - s->frames_head <= size)
      return at;
    uint64_t grown = size ? size * 2 : 256;
    while (grown < n * 2)
      grown *= 2;
    uint64_t *frames = malloc(grown * sizeof *frames);
    if (!frames)
      return UINT64_MAX;
    for (uint64_t i = s->frames_head; i < s->frames_tail; i++)
      frames[i & (grown - 1)] = s->frames[i & s->frame_mask];
    if (s->frames)
      free(s->frames);
    else
      m->frame_buffers++;
    s->frames = frames;
    s->frame_mask = grown - 1;
  }
}

/* Releases source `si` (retired, its queue empty, so out of the heap and without a slot array):
 * its frame buffer to the spares, and the last source into its place. */
static void release_source(rec_merge *m, size_t si) {
  size_t last = m->count - 1;
  rec_source *s = &m->sources[si], *moved = &m->sources[last];
  /* The index first: the only step that can fail (a rebuild of the map), before any other. */
  if (si != last && !mt_hashmap_put(&m->by_key, (int64_t)moved->key, si + 1))
    return;
  mt_hashmap_remove(&m->by_key, (int64_t)s->key);
  if (s->frames && spare_put(&m->spare_frames, s->frames, s->frame_mask))
    m->frame_buffers--;
  if (s->slots) /* a first push that failed after taking them */
    release_slots(m, s);
  if (m->last_index == si + 1)
    m->last_index = 0;
  if (m->popped == si + 1)
    m->popped = 0;
  if (m->pending == si + 1)
    m->pending = 0;
  if (si != last) {
    *s = *moved;
    if (s->heap_index)
      m->heap[s->heap_index - 1] = si;
    if (m->last_index == last + 1)
      m->last_index = si + 1;
    if (m->popped == last + 1)
      m->popped = si + 1;
    if (m->pending == last + 1)
      m->pending = si + 1;
  }
  m->count = last;
}

/* At a push or a pop: the last popped event's frames are no longer in use, and the source they
 * belong to, if it waits to be released, goes now. */
static inline void settle(rec_merge *m) {
  m->popped = 0;
  if (m->pending) {
    size_t si = m->pending - 1;
    m->pending = 0;
    release_source(m, si);
  }
}

bool rec_merge_new_stack(rec_merge *m, rec_source *s, const uint64_t *frames, uint32_t n) {
  uint64_t at = reserve_frames(m, s, n);
  if (at == UINT64_MAX)
    return false;
  memcpy(&s->frames[at & s->frame_mask], frames, n * sizeof *frames);
  s->frames_tail = at + n;
  s->last_frames_at = at;
  s->last_hash = rec_stack_hash(frames, n);
  s->last_serial = rec_merge_new_serial(m);
  s->last_nframes = n;
  return true;
}

void rec_merge_retire(rec_merge *m, uint64_t key) {
  uint64_t index;
  if (!mt_hashmap_get(&m->by_key, (int64_t)key, &index))
    return;
  size_t si = (size_t)index - 1;
  m->sources[si].retired = true;
  if (m->sources[si].queued || m->pending == index)
    return; /* released by the pop that empties it, or after the next push or pop */
  if (m->popped == index)
    m->pending = (size_t)index; /* the last popped event's frames are its */
  else
    release_source(m, si);
}

bool rec_merge_push(rec_merge *m, const rec_event *e, int64_t now_ns) {
  uint64_t index;
  if (m->pending)
    settle(m);
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
  if (!s->slots ? !take_slots(m, s) : s->tail - s->head > s->slot_mask && !grow_slots(s))
    return false;
  rec_slot *slot = rec_merge_slot(s, e);
  uint32_t n = e->nframes;
  if (n) {
    /* A thread allocating again from where it last did (a loop) sends the same stack: keep one
     * copy, and its hash. */
    if (n == s->last_nframes && s->frames &&
        rec_same_frames(&s->frames[s->last_frames_at & s->frame_mask], e->frames, n)) {
      slot->frames_at = s->last_frames_at;
      slot->stack_hash = s->last_hash;
      slot->stack_serial = s->last_serial;
    } else {
      if (!rec_merge_new_stack(m, s, e->frames, n))
        return false;
      slot->frames_at = s->last_frames_at;
      slot->stack_hash = s->last_hash;
      slot->stack_serial = s->last_serial;
    }
  }
  rec_merge_enqueued(m, s, e, now_ns);
  if (s->queued == 1) {
    m->heap[m->heap_count++] = si;
    sift_up(m, m->heap_count - 1);
  }
  return true;
}

bool rec_merge_peek_time(const rec_merge *m, int64_t *time_ns) {
  if (!m->heap_count)
    return false;
  *time_ns = head_slot(&m->sources[m->heap[0]])->time_ns;
  return true;
}

bool rec_merge_pop(rec_merge *m, rec_event *out) {
  return rec_merge_pop_before(m, INT64_MAX, 0, out);
}

bool rec_merge_pop_before(rec_merge *m, int64_t limit_ns, size_t max_queued, rec_event *out) {
  return rec_merge_pop_many(m, limit_ns, max_queued, &out, 1) == 1;
}

/* The head of the source at heap position `at`, or NULL past the heap's end. */
static inline const rec_slot *heap_head(const rec_merge *m, size_t at) {
  return at < m->heap_count ? head_slot(&m->sources[m->heap[at]]) : NULL;
}

size_t rec_merge_pop_many(rec_merge *m, int64_t limit_ns, size_t max_queued, rec_event *const *out,
                          size_t n) {
  size_t k = 0;
  while (k < n) {
    settle(m);
    if (!m->heap_count)
      break;
    /* A run of the oldest source: its events go out while they stay before the heads of the
     * heap's top's children (the oldest of every other source is one of them), with the source's
     * fields in locals and no heap step per event. */
    size_t si = m->heap[0];
    rec_source *s = &m->sources[si];
    const rec_slot *a = heap_head(m, 1), *b = heap_head(m, 2);
    const rec_slot *next = !a ? b : !b ? a : slot_before(b, a) ? b : a;
    uint64_t head = s->head, mask = s->slot_mask, frames_head = s->frames_head;
    const rec_slot *slots = s->slots;
    size_t queued = s->queued, total = m->queued;
    bool framed = false, limited = false;
    do {
      const rec_slot *slot = &slots[head & mask];
      if (slot->time_ns > limit_ns && total <= max_queued) {
        limited = true;
        break;
      }
      if (next && !slot_before(slot, next))
        break;
      rec_event *o = out[k++];
      o->time_ns = slot->time_ns;
      o->order = slot->order;
      o->source = s->key;
      o->type = slot->type;
      o->kind = slot->kind;
      o->addr = slot->addr;
      o->addr2 = slot->addr2;
      o->size = slot->size;
      o->nsamples = slot->nsamples;
      o->nframes = slot->nframes;
      o->stack_hash = slot->stack_hash;
      o->stack_serial = slot->stack_serial;
      o->frames = NULL;
      if (slot->nframes) {
        /* Words before this stack are free; this one stays until the next push or pop (or a
         * push of the same stack, which shares it). */
        o->frames = &s->frames[slot->frames_at & s->frame_mask];
        frames_head = slot->frames_at;
        framed = true;
      }
      head++;
      queued--;
      total--;
    } while (k < n && queued);
    size_t took = s->queued - queued;
    s->head = head;
    s->frames_head = frames_head;
    s->queued = queued;
    m->queued = total;
    if (framed)
      m->popped = si + 1;
    if (!took)
      break; /* the oldest is past the limit */
    if (queued) {
      if (m->heap_count == 2) {
        /* Two threads, the usual case of merging: one comparison, no loop. */
        size_t other = m->heap[1];
        if (source_before(m, other, si)) {
          place(m, 1, si);
          place(m, 0, other);
        }
      } else if (m->heap_count > 2) {
        sift_down(m, 0);
      }
    } else {
      s->heap_index = 0;
      release_slots(m, s);
      if (--m->heap_count) {
        place(m, 0, m->heap[m->heap_count]);
        sift_down(m, 0);
      }
      if (s->retired) {
        /* The next pop would release the buffers its events' frames are in: the batch ends. */
        m->pending = si + 1;
        break;
      }
    }
    if (limited)
      break;
  }
  return k;
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
  for (size_t i = 0; i < m->count; i++) {
    free(m->sources[i].slots);
    free(m->sources[i].frames);
  }
  spares_free(&m->spare_slots);
  spares_free(&m->spare_frames);
  mt_hashmap_free(&m->by_key);
  free(m->sources);
  free(m->heap);
  memset(m, 0, sizeof *m);
}
