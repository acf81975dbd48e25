/* Turning the alloc/free experiment's events into memtrace allocations and collections
 * (docs/go.md): the live heap objects, spans and goroutine stacks, keyed by the trace's ids; the
 * span that contains an object, which gives its slot size; type names interned as location codes.
 * Memory follows what is live plus the distinct type names. */
#ifndef MEMTAP_SRC_IMPORT_GO_HEAP_H
#define MEMTAP_SRC_IMPORT_GO_HEAP_H

#include <stdint.h>

#include "common/hashmap.h"
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
  /* That page's span when it is a small-object span with its slots (go_heap.c locate_near):
   * its first byte's offset from the heap's start, slot size, and 2^40 / slot size rounded up
   * (0: not such a span), with which a slot's index is a multiplication. */
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

/* Converts one event at `time` (µs since the epoch). */
int go_heap_event(go_heap *h, const go_event *ev, const go_tables *t, int64_t time, mt_error *err);

/* The resolver given to the writer (mt_resolve_fn). */
int go_heap_resolve(void *user, uint64_t code, const mt_location **entries, size_t *count);

#endif
