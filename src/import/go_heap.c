/* The conversion of alloc/free events into memtrace events (go_heap.h). */
#include "import/go_heap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* Slot sizes of the Go runtime's small size classes (runtime/sizeclasses.go, unchanged from Go
 * 1.23 to 1.25); class 0 is "large": one object filling its span. */
#define GO_SIZE_CLASSES 68
static const uint16_t class_size[GO_SIZE_CLASSES] = {
    0,     8,     16,    24,    32,    48,    64,    80,    96,    112,   128,   144,  160,   176,
    192,   208,   224,   240,   256,   288,   320,   352,   384,   416,   448,   480,  512,   576,
    640,   704,   768,   896,   1024,  1152,  1280,  1408,  1536,  1792,  2048,  2304, 2688,  3072,
    3200,  3456,  4096,  4864,  5376,  6144,  6528,  6784,  6912,  8192,  9472,  9728, 10240, 10880,
    12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768};

/* Spans of at most this many pages have all their pages in the page map. */
#define SMALL_SPAN_PAGES 64

static unsigned log2_of(uint64_t v) {
  return (unsigned)__builtin_ctzll(v);
}

static mt_hashmap seeded(void) {
  return (mt_hashmap){.seed = mt_hashmap_random_seed()};
}

void go_heap_init(go_heap *h, mt_writer *w, unsigned kinds, const go_info *info,
                  mt_go_import_stats *stats) {
  memset(h, 0, sizeof *h);
  h->w = w;
  h->kinds = kinds;
  h->info = info;
  h->stats = stats;
  h->objects = go_idmap_make();
  h->late = go_idmap_make();
  h->spans = go_idmap_make();
  h->pages = go_idmap_make();
  h->stacks = go_idmap_make();
  h->name_codes = seeded();
  h->type_codes = go_idmap_make();
  h->last_page = UINT64_MAX;
  h->name_seed = mt_hashmap_random_seed();
}

void go_heap_free(go_heap *h) {
  go_idmap_free(&h->objects);
  go_idmap_free(&h->late);
  go_idmap_free(&h->spans);
  go_idmap_free(&h->pages);
  go_idmap_free(&h->stacks);
  mt_hashmap_free(&h->name_codes);
  go_idmap_free(&h->type_codes);
  for (size_t i = 0; i < h->nnames; i++)
    free(h->names[i]);
  free(h->names);
  for (size_t i = 0; i < h->nspan; i++)
    free(h->span[i].slots); /* NULL for freed spans */
  free(h->span);
  free(h->free_spans);
}

void go_heap_new_generation(go_heap *h) {
  go_idmap_clear(&h->type_codes);
  h->last_type_id = 0;
}

int go_heap_resolve(void *user, uint64_t code, const mt_location **entries, size_t *count) {
  go_heap *h = user;
  const char *name = h->label;
  if (code >= GO_CODE_TYPES && code - GO_CODE_TYPES < h->nnames)
    name = h->names[code - GO_CODE_TYPES];
  else if (code == GO_CODE_NO_TYPE)
    name = "[no type]";
  else if (code == GO_CODE_STACK)
    name = "[goroutine stack]";
  else if (code == GO_CODE_SPAN_NOT_HEAP)
    name = "[span not heap]";
  else if (code == GO_CODE_SPAN_CLASS)
    name = "[span large]";
  else if (code > GO_CODE_SPAN_CLASS && code < GO_CODE_SPAN_CLASS + GO_SIZE_CLASSES)
    snprintf(h->label, sizeof h->label, "[span class %u, %u B]",
             (unsigned)(code - GO_CODE_SPAN_CLASS), class_size[code - GO_CODE_SPAN_CLASS]);
  else
    return MT_E_INVALID;
  h->resolved = (mt_location){.filename = "", .defname = name};
  *entries = &h->resolved;
  *count = 1;
  return MT_OK;
}

/* The location code of type `id` of the current generation. */
static int type_code(go_heap *h, const go_tables *t, uint64_t id, const go_event *ev,
                     uint64_t *code, mt_error *err) {
  if (id == 0) {
    *code = GO_CODE_NO_TYPE;
    return MT_OK;
  }
  if (id == h->last_type_id) { /* runs of one type are the common case */
    *code = h->last_type_code;
    return MT_OK;
  }
  if (go_idmap_get(&h->type_codes, id, code)) {
    h->last_type_id = id;
    h->last_type_code = *code;
    return MT_OK;
  }
  const go_type *ty = go_tables_type(t, id);
  if (!ty)
    return go_fail(err, ev->offset,
                   "heap object of type %llu, which the generation does not "
                   "define",
                   (unsigned long long)id);
  uint64_t key = mt_hash_bytes(h->name_seed, ty->name, ty->name_len), index;
  for (;; key++) { /* probe past other names with the same hash */
    if (!mt_hashmap_get(&h->name_codes, (int64_t)key, &index))
      break;
    if (strlen(h->names[index]) == ty->name_len && !memcmp(h->names[index], ty->name, ty->name_len))
      goto found;
  }
  if (h->nnames == h->names_cap) {
    size_t cap = h->names_cap ? h->names_cap * 2 : 64;
    char **n = realloc(h->names, cap * sizeof *n);
    if (!n)
      return go_nomem(err);
    h->names = n;
    h->names_cap = cap;
  }
  char *copy = malloc(ty->name_len + 1);
  if (!copy)
    return go_nomem(err);
  memcpy(copy, ty->name, ty->name_len);
  copy[ty->name_len] = 0;
  index = h->nnames;
  if (!mt_hashmap_put(&h->name_codes, (int64_t)key, index)) {
    free(copy);
    return go_nomem(err);
  }
  h->names[h->nnames++] = copy;
  h->stats->type_names = h->nnames;
found:
  *code = GO_CODE_TYPES + index;
  if (!go_idmap_put(&h->type_codes, id, *code))
    return go_nomem(err);
  return MT_OK;
}

static int put_alloc(go_heap *h, unsigned kind, int64_t time, uint64_t bytes, mt_source source,
                     uint64_t code, int64_t *obj, mt_error *err) {
  *obj = -1;
  if (!(h->kinds & kind))
    return MT_OK;
  int64_t words = (int64_t)((bytes + 7) / 8);
  if (words < 1)
    words = 1;
  return mt_writer_put_alloc(h->w, time, words, words, source, &code, 1, go_heap_resolve, h, obj,
                             err);
}

static int put_collect(go_heap *h, int64_t time, int64_t obj, mt_error *err) {
  if (obj < 0)
    return MT_OK;
  return mt_writer_put_collect(h->w, time, obj, err);
}

/* Where the memtrace ids of live objects are kept: in an array per span, one uint32 per slot
 * (0: free; v: the span's slot_base + v - 1), filled in address order as the runtime fills the
 * span, so that neighbours in memory are neighbours in memory here too; that is what keeps
 * millions of live objects fast. The array costs 4 bytes per slot of a live span. An object in no
 * known span, or whose id is too far from its span's base (UINT32_MAX in its slot), is in the
 * `objects` map under its id. */
#define IN_MAP GO_SLOT_IN_MAP
#define MAX_SLOTS 1024

typedef go_object_ref object_ref;

/* Finds where object `id` is kept and its slot size (0 when no span holds it). */
static int locate(go_heap *h, uint64_t id, object_ref *ref, uint64_t *size, mt_error *err) {
  uint64_t offset = id << h->align_shift, page = offset >> h->page_shift, span_id, index;
  ref->span = NULL;
  ref->slot = NULL;
  *size = 0;
  go_span *s;
  if (page == h->last_page) {
    s = &h->span[h->last_span_index];
  } else {
    h->near_page_bytes = 0;
    if (!go_idmap_get(&h->pages, page, &span_id) || !go_idmap_get(&h->spans, span_id, &index))
      return MT_OK;
    s = &h->span[index];
    if (s->size_class == GO_SPAN_NOT_HEAP || page - s->id >= s->npages)
      return MT_OK;
    h->last_page = page;
    h->last_span_index = index;
  }
  *size = s->size_class == 0 ? s->npages << h->page_shift : class_size[s->size_class];
  uint64_t within = offset - (s->id << h->page_shift), i;
  if (s->size_class == 0)
    i = within != 0; /* a large object starts its span */
  else
    i = (uint32_t)within / (uint32_t)*size; /* small spans: under 64 pages of at most 64 KiB */
  if (!s->slots) {
    /* Go's spans hold at most 1024 objects (8-byte ones in one 8 KiB page); others, which only
     * damaged input describes, keep theirs in the map, so memory stays bounded by the input. */
    uint64_t n = s->size_class == 0 ? 1 : (s->npages << h->page_shift) / *size;
    if (n > MAX_SLOTS)
      return MT_OK;
    if (!(s->slots = calloc(n, sizeof *s->slots)))
      return go_nomem(err);
    s->nslots = (uint32_t)n;
  }
  if (i < s->nslots) {
    ref->span = s;
    ref->slot = &s->slots[i];
  }
  if (s->size_class != 0 && (s->npages << h->page_shift) < GO_NEAR_SPAN_BYTES) {
    h->last_base = s->id << h->page_shift;
    h->last_size = *size;
    h->last_magic = ((UINT64_C(1) << 40) + *size - 1) / *size;
    h->near_span = s;
    h->near_page_start = page << h->page_shift;
    h->near_page_bytes = UINT64_C(1) << h->page_shift;
  }
  return MT_OK;
}

static bool ref_get(const go_heap *h, const object_ref *ref, uint64_t id, uint64_t *obj) {
  if (ref->slot && *ref->slot != IN_MAP) {
    if (*ref->slot) {
      *obj = (uint64_t)ref->span->slot_base + *ref->slot - 1;
      return true;
    }
    if (!h->objects.count)
      return false; /* allocated while no known span held it? */
  }
  return go_idmap_get(&h->objects, id, obj);
}

static void ref_clear(go_heap *h, const object_ref *ref, uint64_t id) {
  h->live_objects--;
  if (ref->slot && *ref->slot) {
    bool in_map = *ref->slot == IN_MAP;
    *ref->slot = 0;
    ref->span->used--;
    if (!in_map)
      return;
  }
  go_idmap_remove(&h->objects, id);
}

/* Span events change which page belongs to which span. */
static void forget_last_page(go_heap *h) {
  h->last_page = UINT64_MAX;
  h->near_page_bytes = 0;
}

static int object_event(go_heap *h, const go_event *ev, const go_tables *t, int64_t time,
                        mt_error *err) {
  uint64_t id = ev->args[1];
  mt_go_counts *n = &h->stats->objects;
  if (id > h->max_object_id)
    return go_fail(err, ev->offset, "heap object id %llu is past the address space",
                   (unsigned long long)id);
  object_ref ref;
  uint64_t size, obj = 0;
  int rc;
  if (!go_heap_locate_near(h, id, &ref, &size) && (rc = locate(h, id, &ref, &size, err)))
    return rc;
  bool live = ref_get(h, &ref, id, &obj);
  if (ev->type == GO_EV_HEAP_OBJECT_FREE) {
    n->frees++;
    uint64_t epoch;
    if (h->late.count && go_idmap_get(&h->late, id, &epoch)) {
      go_idmap_remove(&h->late, id);
      if (epoch == h->gc_epoch) { /* no GC since the reuse: the old occupant's free, written */
        h->stats->late_frees++;
        return MT_OK;
      }
    }
    if (!live) {
      n->unknown_frees++;
      return MT_OK;
    }
    ref_clear(h, &ref, id);
    n->freed++;
    return put_collect(h, time, (int64_t)obj, err);
  }
  if (ev->type == GO_EV_HEAP_OBJECT)
    n->snapshot++;
  else
    n->allocated++;
  if (live) {
    if (ev->type == GO_EV_HEAP_OBJECT) {
      n->duplicates++;
      return MT_OK;
    }
    /* Reused before its free arrived (another thread's sweep, stamped later): free it now. */
    n->replaced++;
    n->freed++;
    ref_clear(h, &ref, id);
    if (!go_idmap_put(&h->late, id, h->gc_epoch))
      return go_nomem(err);
    rc = put_collect(h, time, (int64_t)obj, err);
    if (rc)
      return rc;
  }
  uint64_t code = 0;
  rc = type_code(h, t, ev->args[2], ev, &code, err);
  if (rc)
    return rc;
  if (size == 0) {
    h->stats->objects_outside_spans++;
    const go_type *ty = go_tables_type(t, ev->args[2]);
    size = ty && ty->size ? ty->size : h->info->heap_align;
  }
  int64_t mobj;
  rc = put_alloc(h, MT_GO_OBJECTS, time, size, MT_SOURCE_EXTERNAL, code, &mobj, err);
  if (rc)
    return rc;
  if (!go_heap_ref_set(h, &ref, id, mobj))
    return go_nomem(err);
  return MT_OK;
}

static void unmap_pages(go_heap *h, const go_span *s) {
  uint64_t n = s->size_class != 0 && s->npages <= SMALL_SPAN_PAGES ? s->npages : 1, owner;
  if (s->size_class == GO_SPAN_NOT_HEAP)
    return;
  for (uint64_t p = s->id; p < s->id + n; p++)
    if (go_idmap_get(&h->pages, p, &owner) && owner == s->id)
      go_idmap_remove(&h->pages, p);
}

static int drop_span(go_heap *h, uint64_t index, int64_t time, mt_error *err) {
  go_span *s = &h->span[index];
  unmap_pages(h, s);
  /* Objects still in it stay live in the memtrace trace (their frees would come first). */
  free(s->slots);
  s->slots = NULL;
  go_idmap_remove(&h->spans, s->id);
  if (h->nfree_spans == h->free_spans_cap) {
    size_t cap = h->free_spans_cap ? h->free_spans_cap * 2 : 64;
    size_t *f = realloc(h->free_spans, cap * sizeof *f);
    if (!f)
      return go_nomem(err);
    h->free_spans = f;
    h->free_spans_cap = cap;
  }
  h->free_spans[h->nfree_spans++] = index;
  h->stats->spans.freed++;
  return put_collect(h, time, s->obj, err);
}

/* Span and stack events are rare next to objects: out of line, they keep object_event's
 * frame small. */
__attribute__((noinline)) static int span_event(go_heap *h, const go_event *ev, int64_t time,
                                                mt_error *err) {
  forget_last_page(h);
  uint64_t id = ev->args[1], index;
  mt_go_counts *n = &h->stats->spans;
  bool live = go_idmap_get(&h->spans, id, &index);
  if (ev->type == GO_EV_SPAN_FREE) {
    n->frees++;
    if (!live) {
      n->unknown_frees++;
      return MT_OK;
    }
    return drop_span(h, index, time, err);
  }
  if (ev->type == GO_EV_SPAN)
    n->snapshot++;
  else
    n->allocated++;
  if (live) {
    if (ev->type == GO_EV_SPAN) {
      n->duplicates++;
      return MT_OK;
    }
    n->replaced++;
    int rc = drop_span(h, index, time, err);
    if (rc)
      return rc;
  }
  uint64_t npages = ev->args[2], kindclass = ev->args[3];
  uint32_t size_class = GO_SPAN_NOT_HEAP;
  if (!(kindclass & 1)) {
    if ((kindclass >> 2) >= GO_SIZE_CLASSES)
      return go_fail(err, ev->offset, "span of size class %llu; Go has %d",
                     (unsigned long long)(kindclass >> 2), GO_SIZE_CLASSES);
    size_class = (uint32_t)(kindclass >> 2);
  }
  if (npages == 0 || npages > (UINT64_MAX >> (h->page_shift + 1)) ||
      id > (UINT64_MAX >> 1) - npages)
    return go_fail(err, ev->offset, "span %llu of %llu pages", (unsigned long long)id,
                   (unsigned long long)npages);
  if (h->nfree_spans) {
    index = h->free_spans[--h->nfree_spans];
  } else {
    if (h->nspan == h->span_cap) {
      size_t cap = h->span_cap ? h->span_cap * 2 : 256;
      go_span *s = realloc(h->span, cap * sizeof *s);
      if (!s)
        return go_nomem(err);
      h->span = s;
      h->span_cap = cap;
    }
    index = h->nspan++;
  }
  go_span *s = &h->span[index];
  *s = (go_span){.id = id, .npages = npages, .size_class = size_class, .obj = -1};
  forget_last_page(h);
  if (!go_idmap_put(&h->spans, id, index))
    return go_nomem(err);
  if (size_class != GO_SPAN_NOT_HEAP) {
    uint64_t mapped = size_class != 0 && npages <= SMALL_SPAN_PAGES ? npages : 1;
    for (uint64_t p = id; p < id + mapped; p++)
      if (!go_idmap_put(&h->pages, p, id))
        return go_nomem(err);
  }
  uint64_t code =
      size_class == GO_SPAN_NOT_HEAP ? GO_CODE_SPAN_NOT_HEAP : GO_CODE_SPAN_CLASS + size_class;
  return put_alloc(h, MT_GO_SPANS, time, npages << h->page_shift, MT_SOURCE_MAJOR, code, &s->obj,
                   err);
}

__attribute__((noinline)) static int stack_event(go_heap *h, const go_event *ev, int64_t time,
                                                 mt_error *err) {
  uint64_t id = ev->args[1], obj;
  mt_go_counts *n = &h->stats->stacks;
  bool live = go_idmap_get(&h->stacks, id, &obj);
  if (ev->type == GO_EV_GOROUTINE_STACK_FREE) {
    n->frees++;
    if (!live) {
      n->unknown_frees++;
      return MT_OK;
    }
    go_idmap_remove(&h->stacks, id);
    n->freed++;
    return put_collect(h, time, (int64_t)obj, err);
  }
  /* The runtime writes a stack's size as its bit length: size = 2^(order-1). */
  uint64_t order = ev->args[2];
  if (ev->type == GO_EV_GOROUTINE_STACK) {
    n->snapshot++;
    if (order == 0) { /* a dead goroutine's record, its stack freed: no memory, and no id */
      n->empty++;
      return MT_OK;
    }
  } else {
    n->allocated++;
  }
  if (live) {
    if (ev->type == GO_EV_GOROUTINE_STACK) {
      n->duplicates++;
      return MT_OK;
    }
    n->replaced++;
    n->freed++;
    go_idmap_remove(&h->stacks, id);
    int rc = put_collect(h, time, (int64_t)obj, err);
    if (rc)
      return rc;
  }
  if (order == 0 || order > 48)
    return go_fail(err, ev->offset, "goroutine stack of order %llu", (unsigned long long)order);
  int64_t mobj;
  int rc = put_alloc(h, MT_GO_STACKS, time, UINT64_C(1) << (order - 1), MT_SOURCE_MINOR,
                     GO_CODE_STACK, &mobj, err);
  if (rc)
    return rc;
  if (!go_idmap_put(&h->stacks, id, (uint64_t)mobj))
    return go_nomem(err);
  return MT_OK;
}

int go_heap_any_event(go_heap *h, const go_event *ev, const go_tables *t, int64_t time,
                      mt_error *err) {
  if (ev->type == GO_EV_GC_BEGIN) {
    h->gc_epoch++;
    go_idmap_clear(&h->late);
    return MT_OK;
  }
  h->stats->alloc_free_events++;
  h->stats->experiment = true;
  if (!h->info->present)
    return go_fail(err, ev->offset, "alloc/free event before the experiment's info batch");
  if (!h->page_shift) {
    h->page_shift = log2_of(h->info->page_size);
    h->align_shift = log2_of(h->info->heap_align);
    h->stack_shift = log2_of(h->info->fixed_stack);
    h->max_object_id = UINT64_MAX >> (h->align_shift + 1);
  }
  switch (ev->type) {
  case GO_EV_HEAP_OBJECT:
  case GO_EV_HEAP_OBJECT_ALLOC:
  case GO_EV_HEAP_OBJECT_FREE: return object_event(h, ev, t, time, err);
  case GO_EV_SPAN:
  case GO_EV_SPAN_ALLOC:
  case GO_EV_SPAN_FREE: return span_event(h, ev, time, err);
  default: return stack_event(h, ev, time, err);
  }
}
