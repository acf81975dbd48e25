/* Decoding per-M event batches and merging them by time (go_merge.h). */
#include "import/go_merge.h"

#include <stdlib.h>
#include <string.h>

void go_merge_free(go_merge *m) {
  free(m->order);
  free(m->streams);
  free(m->heap);
  memset(m, 0, sizeof *m);
}

static const go_generation *sort_gen; /* qsort has no user pointer; one merge sorts at a time */

static int by_m_then_position(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  uint64_t mx = sort_gen->batches[x].m, my = sort_gen->batches[y].m;
  if (mx != my)
    return mx < my ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* Rank of a type among events of one tick: frees (0), GC starts (1), snapshots (2), allocations
 * and everything else (3). */
const uint8_t go_merge_rank[256] = {
    [GO_EV_SPAN_FREE] = 0,
    [GO_EV_HEAP_OBJECT_FREE] = 0,
    [GO_EV_GOROUTINE_STACK_FREE] = 0,
    [GO_EV_GC_BEGIN] = 1,
    [GO_EV_SPAN] = 2,
    [GO_EV_HEAP_OBJECT] = 2,
    [GO_EV_GOROUTINE_STACK] = 2,
    [GO_EV_SPAN_ALLOC] = 3,
    [GO_EV_HEAP_OBJECT_ALLOC] = 3,
    [GO_EV_GOROUTINE_STACK_ALLOC] = 3,
};

/* Whether stream a's pending event comes before stream b's: by time (a stream's `time` is its
 * pending event's), then rank, then stream. */
static inline bool earlier(const go_merge *m, size_t a, size_t b) {
  const go_stream *x = &m->streams[a], *y = &m->streams[b];
  if (x->time != y->time)
    return x->time < y->time;
  if (x->rank != y->rank)
    return x->rank < y->rank;
  return a < b;
}

/* Notes the earlier of the heap's second and third streams (none: a bound nothing passes). */
__attribute__((noinline)) static void set_bound(go_merge *m) {
  size_t b = SIZE_MAX;
  if (m->heap_len > 1)
    b = m->heap_len > 2 && earlier(m, m->heap[2], m->heap[1]) ? m->heap[2] : m->heap[1];
  if (b == SIZE_MAX) {
    m->bound_time = UINT64_MAX;
    m->bound_rank = UINT8_MAX;
  } else {
    m->bound_time = m->streams[b].time;
    m->bound_rank = m->streams[b].rank;
  }
  m->bound_index = b;
}

/* Sifting and the bound change only when the merge moves to another stream: out of line. */
__attribute__((noinline)) static void sift_down(go_merge *m, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, s = i;
    if (l < m->heap_len && earlier(m, m->heap[l], m->heap[s]))
      s = l;
    if (r < m->heap_len && earlier(m, m->heap[r], m->heap[s]))
      s = r;
    if (s == i)
      return;
    size_t t = m->heap[i];
    m->heap[i] = m->heap[s];
    m->heap[s] = t;
    i = s;
  }
}

static void sift_up(go_merge *m, size_t i) {
  while (i) {
    size_t p = (i - 1) / 2;
    if (!earlier(m, m->heap[i], m->heap[p]))
      return;
    size_t t = m->heap[i];
    m->heap[i] = m->heap[p];
    m->heap[p] = t;
    i = p;
  }
}

/* Reads the arguments of an event of `spec` at s->c.p (after its type byte) into args. */
static int read_args(go_stream *s, const go_event_spec *spec, uint64_t *args, mt_error *err) {
  if (go_cursor_left(&s->c) >= 10 * GO_MAX_ARGS) { /* the usual case: no bound checks */
    const uint8_t *p = s->c.p;
    unsigned i = 0;
    for (; i < spec->nargs; i++)
      if (!(p = go_short_uvarint(p, &args[i])))
        break;
    if (i == spec->nargs) {
      s->c.p = p;
      return MT_OK;
    }
  }
  for (unsigned i = 0; i < spec->nargs; i++)
    if (!go_uvarint(&s->c, &args[i]))
      return go_fail(err, go_cursor_offset(&s->c), "%s in the arguments of event %s",
                     go_cursor_left(&s->c) < 10 ? "the batch ends" : "bad varint", spec->name);
  return MT_OK;
}

/* Checks the stack and string ids among an event's arguments. */
static int check_ids(go_merge *m, go_stream *s, const go_event_spec *spec, const uint64_t *args,
                     const uint8_t *at, mt_error *err) {
  for (unsigned i = 1; i < spec->nargs; i++) {
    uint8_t bit = (uint8_t)(1u << i);
    bool bad = ((spec->stack_args & bit) && !go_tables_has_stack(m->t, args[i])) ||
               ((spec->string_args & bit) && !go_tables_has_string(m->t, args[i]));
    if (bad) {
      s->c.p = at;
      return go_fail(err, go_cursor_offset(&s->c),
                     "event %s names %s %llu, which the "
                     "generation does not define",
                     spec->name, (spec->stack_args & bit) ? "stack" : "string",
                     (unsigned long long)args[i]);
    }
  }
  return MT_OK;
}

/* Reads events of stream `s` until one memtap converts; 1 with it in the stream's pending slot
 * (the other slot, which holds the event handed out before, is left alone), 0 when the stream's
 * batches are done, or an error. */
static int advance(go_merge *m, go_stream *s, mt_error *err) {
  const go_event_spec *specs = m->specs;
  go_event *ev = &s->slot[s->pending ^ 1];
  for (;;) {
    while (s->c.p == s->c.end) {
      if (s->next == s->end)
        return 0;
      const go_batch *b = &m->g->batches[m->order[s->next++]];
      s->c = go_cursor_make(m->g->data.data + b->offset, b->size, b->file_offset);
      s->time = b->time;
    }
    const uint8_t *at = s->c.p;
    uint8_t type = *s->c.p++;
    const go_event_spec *spec = &specs[type];
    if (!spec->name) {
      char name[16];
      s->c.p = at;
      return go_fail(err, go_cursor_offset(&s->c),
                     "event %s cannot be in an event batch of "
                     "\"go 1.%d trace\"",
                     go_event_name(m->version, type, name), m->version);
    }
    int rc = read_args(s, spec, ev->args, err);
    if (rc)
      return rc;
    m->events++;
    if (ev->args[0] > UINT64_MAX - s->time) {
      s->c.p = at;
      return go_fail(err, go_cursor_offset(&s->c), "time of event %s overflows", spec->name);
    }
    s->time += ev->args[0];
    if ((spec->stack_args | spec->string_args) && (rc = check_ids(m, s, spec, ev->args, at, err)))
      return rc;
    if (go_converted(type)) {
      ev->type = type;
      ev->time = s->time;
      ev->offset = s->c.base + (at - s->c.start);
      s->rank = go_merge_rank[type];
      s->pending ^= 1;
      return 1;
    }
  }
}

int go_merge_start(go_merge *m, const go_generation *g, const go_tables *t, int version,
                   mt_error *err) {
  m->g = g;
  m->t = t;
  m->version = version;
  m->specs = go_event_specs(version);
  m->nstreams = m->heap_len = 0;
  size_t n = 0;
  if (g->nbatches > m->order_cap) {
    size_t *o = realloc(m->order, g->nbatches * sizeof *o);
    if (!o)
      return go_nomem(err);
    m->order = o;
    m->order_cap = g->nbatches;
  }
  for (size_t i = 0; i < g->nbatches; i++)
    if (g->batches[i].kind == GO_BATCH_EVENTS)
      m->order[n++] = i;
  sort_gen = g;
  qsort(m->order, n, sizeof *m->order, by_m_then_position);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && g->batches[m->order[j]].m == g->batches[m->order[i]].m)
      j++;
    if (m->nstreams == m->streams_cap) {
      size_t cap = m->streams_cap ? m->streams_cap * 2 : 16;
      go_stream *s = realloc(m->streams, cap * sizeof *s);
      size_t *h = realloc(m->heap, cap * sizeof *h);
      if (s)
        m->streams = s;
      if (h)
        m->heap = h;
      if (!s || !h)
        return go_nomem(err);
      m->streams_cap = cap;
    }
    go_stream *s = &m->streams[m->nstreams];
    memset(s, 0, sizeof *s);
    s->next = i;
    s->end = j;
    int rc = advance(m, s, err);
    if (rc < 0)
      return rc;
    if (rc > 0) {
      m->heap[m->heap_len++] = m->nstreams;
      sift_up(m, m->heap_len - 1);
    }
    m->nstreams++;
    i = j;
  }
  set_bound(m);
  return MT_OK;
}

int go_merge_next_slow(go_merge *m, size_t top, int got, mt_error *err) {
  int rc = got;
  if (!rc && (rc = advance(m, &m->streams[top], err)) < 0)
    return rc;
  if (rc == 0)
    m->heap[0] = m->heap[--m->heap_len];
  else if (go_merge_still_first(m, top))
    return 1; /* the heap is unchanged, and so is the bound */
  if (m->heap_len) {
    sift_down(m, 0);
    set_bound(m);
  }
  return 1;
}
