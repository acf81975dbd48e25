/* Turning the alloc/free experiment's events into memtrace allocations and collections
 * (docs/go.md): the live heap objects, spans and goroutine stacks, keyed by the trace's ids; the
 * span that contains an object, which gives its slot size; type names interned as location codes.
 * Memory follows what is live plus the distinct type names. */
#ifndef MEMTAP_SRC_IMPORT_GO_HEAP_H
#define MEMTAP_SRC_IMPORT_GO_HEAP_H

#include <stdint.h>

#include "common/hashmap.h"
#include "import/go_buffer.h"
#include "import/go_idmap.h"
#include "import/go_merge.h"
#include "import/go_tables.h"
#include "memtap/format.h"
#include "memtap/import.h"

typedef struct go_span {
  uint64_t id; /* first page */
  uint64_t npages;
  uint32_t size_class; /* 0: one large object; GO_SPAN_NOT_HEAP: not a heap span */
  int64_t obj;         /* its memtrace object id */
  uint32_t *slots;     /* per object slot: where its live object's memtrace id is (go_heap.c) */
  uint32_t nslots, used;
  int64_t slot_base;
} go_span;

#define GO_SPAN_NOT_HEAP UINT32_MAX

typedef struct go_heap {
  mt_writer *w;
  unsigned kinds;
  mt_go_import_stats *stats;
  const go_info *info;
  unsigned page_shift, align_shift, stack_shift; /* log2 of the info batch's sizes */
  uint64_t gc_epoch;                             /* GCBegin events seen */
  go_idmap objects; /* object id -> memtrace id, for objects not in a span's slots */
  uint64_t live_objects;
  go_idmap late;   /* object id -> gc epoch: a reused slot whose free may still arrive */
  go_idmap spans;  /* span id -> index in `span` */
  go_idmap pages;  /* page -> span id, every page of a small-object span, the first of others */
  go_idmap stacks; /* stack id -> memtrace id */
  go_span *span;
  size_t nspan, span_cap;
  uint64_t last_page, last_span_index; /* the last object's page, for its neighbours */
  /* That page's span when it is a small-object span with its slots (go_heap_locate_near): the
   * page's bytes (offsets near_page_start + [0, near_page_bytes); 0: no such span), the span, its
   * first byte's offset from the heap's start, slot size, and 2^40 / slot size rounded up, with
   * which a slot's index is a multiplication. */
  uint64_t near_page_start, near_page_bytes;
  go_span *near_span;
  uint64_t last_base, last_size, last_magic;
  uint64_t max_object_id; /* ids above are past the address space */
  size_t *free_spans;
  size_t nfree_spans, free_spans_cap;
  /* Type names: the location of code GO_CODE_TYPES + i is names[i]. */
  mt_hashmap name_codes; /* hash of a name -> index (probing on collisions) */
  char **names;
  size_t nnames, names_cap;
  go_idmap type_codes;                   /* this generation's type id -> code */
  uint64_t last_type_id, last_type_code; /* the last lookup (0: none) */
  uint64_t name_seed;
  mt_location resolved; /* the resolver's answer */
  char label[64];
} go_heap;

/* Location codes of what is not a type. */
enum {
  GO_CODE_NO_TYPE = 1,
  GO_CODE_STACK = 2,
  GO_CODE_SPAN_NOT_HEAP = 3,
  GO_CODE_SPAN_CLASS = 16, /* + size class (0: large) */
  GO_CODE_TYPES = 1024,
};

void go_heap_init(go_heap *h, mt_writer *w, unsigned kinds, const go_info *info,
                  mt_go_import_stats *stats);
void go_heap_free(go_heap *h);

/* A new generation's type table starts: type ids are per generation. */
void go_heap_new_generation(go_heap *h);

/* Where the memtrace id of a live object is kept (go_heap.c): a slot of its span, or the map. */
#define GO_SLOT_IN_MAP UINT32_MAX              /* a slot whose object is in the map */
#define GO_NEAR_SPAN_BYTES (UINT64_C(1) << 24) /* spans go_heap_locate_near serves are smaller */

typedef struct go_object_ref {
  go_span *span; /* NULL: the object is in the map */
  uint32_t *slot;
} go_object_ref;

/* go_heap.c locate for an object in the page of the last one, when that page's span is a
 * small-object span with its slots: false when locate must answer. Within such a span an offset is
 * below 2^24 and a slot size at most 32 KiB, so (offset * magic) >> 40 is exactly offset / size
 * (the error ceil(2^40 / size) * size - 2^40 is below size, 2^15, and offset * 2^15 stays below
 * 2^40). */
static inline bool go_heap_locate_near(go_heap *h, uint64_t id, go_object_ref *ref,
                                       uint64_t *size) {
  uint64_t offset = id << h->align_shift;
  if (offset - h->near_page_start >= h->near_page_bytes)
    return false;
  go_span *s = h->near_span;
  uint64_t i = ((offset - h->last_base) * h->last_magic) >> 40;
  if (i >= s->nslots)
    return false;
  ref->span = s;
  ref->slot = &s->slots[i];
  *size = h->last_size;
  return true;
}

/* Notes that object `id` is live as memtrace object `obj`; false when memory runs out. */
static inline bool go_heap_ref_set(go_heap *h, const go_object_ref *ref, uint64_t id, int64_t obj) {
  h->live_objects++;
  if (ref->slot) {
    if (!ref->span->used++)
      ref->span->slot_base = obj;
    uint64_t v = (uint64_t)(obj - ref->span->slot_base) + 1;
    if (obj >= ref->span->slot_base && v < GO_SLOT_IN_MAP) {
      *ref->slot = (uint32_t)v;
      return true;
    }
    *ref->slot = GO_SLOT_IN_MAP;
  }
  return go_idmap_put(&h->objects, id, (uint64_t)obj);
}

/* The resolver given to the writer (mt_resolve_fn). */
int go_heap_resolve(void *user, uint64_t code, const mt_location **entries, size_t *count);

/* Converts any event (go_heap_event takes the usual ones inline). */
int go_heap_any_event(go_heap *h, const go_event *ev, const go_tables *t, int64_t time,
                      mt_error *err);

/* The usual events, inline in the import's loop. */
#define GO_NOT_NEAR 1 /* statuses are 0 or negative */

/* The usual free, as go_heap_any_event does it: an object live in a slot of the last
 * object's span, no reused slot awaiting its free. GO_NOT_NEAR when go_heap_any_event must take it.
 */
static inline int go_heap_free_near(go_heap *h, const go_event *ev, int64_t time, mt_error *err) {
  uint64_t id = ev->args[1], size;
  go_object_ref ref;
  if (!h->page_shift || id > h->max_object_id || h->late.count ||
      !go_heap_locate_near(h, id, &ref, &size))
    return GO_NOT_NEAR;
  uint32_t v = *ref.slot;
  if (v == 0 || v == GO_SLOT_IN_MAP)
    return GO_NOT_NEAR;
  mt_go_import_stats *st = h->stats;
  st->alloc_free_events++;
  st->experiment = true;
  st->objects.frees++;
  st->objects.freed++;
  h->live_objects--;
  *ref.slot = 0;
  ref.span->used--;
  int64_t obj = ref.span->slot_base + v - 1;
  return obj < 0 ? MT_OK : mt_writer_put_collect(h->w, time, obj, err);
}

/* The usual allocation: a free slot of the last object's span, no object kept in the map, the
 * type of the previous allocation (or none), objects converted. GO_NOT_NEAR when go_heap_any_event
 * must take it. */
static inline int go_heap_alloc_near(go_heap *h, const go_event *ev, int64_t time, mt_error *err) {
  uint64_t id = ev->args[1], type = ev->args[2], size, code;
  go_object_ref ref;
  if (!h->page_shift || id > h->max_object_id || h->objects.count || !(h->kinds & MT_GO_OBJECTS) ||
      !go_heap_locate_near(h, id, &ref, &size) || *ref.slot)
    return GO_NOT_NEAR;
  if (type == 0)
    code = GO_CODE_NO_TYPE;
  else if (type == h->last_type_id)
    code = h->last_type_code;
  else
    return GO_NOT_NEAR;
  mt_go_import_stats *st = h->stats;
  st->alloc_free_events++;
  st->experiment = true;
  st->objects.allocated++;
  int64_t words = (int64_t)((size + 7) / 8), obj;
  int rc = mt_writer_put_alloc(h->w, time, words, words, MT_SOURCE_EXTERNAL, &code, 1,
                               go_heap_resolve, h, &obj, err);
  if (rc)
    return rc;
  if (!go_heap_ref_set(h, &ref, id, obj))
    return go_nomem(err);
  return MT_OK;
}

/* Converts one event at `time` (µs since the epoch). */
static inline int go_heap_event(go_heap *h, const go_event *ev, const go_tables *t, int64_t time,
                                mt_error *err) {
  int rc = GO_NOT_NEAR;
  if (ev->type == GO_EV_HEAP_OBJECT_FREE)
    rc = go_heap_free_near(h, ev, time, err);
  else if (ev->type == GO_EV_HEAP_OBJECT_ALLOC)
    rc = go_heap_alloc_near(h, ev, time, err);
  return rc != GO_NOT_NEAR ? rc : go_heap_any_event(h, ev, t, time, err);
}

#endif
