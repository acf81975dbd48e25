/* The reader's global location table (location_table.h). Lists and strings live in an arena; a
 * hash map takes codes to lists, a second one (keyed by string hash, chained through the arena)
 * interns strings. */
#include "format/location_table.h"

#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "common/hashmap.h"

typedef struct interned {
  struct interned *next_same_hash;
  size_t len;
  char text[];
} interned;

typedef struct stored_list {
  int64_t code;
  size_t count;
  mt_location entries[];
} stored_list;

struct mt_location_table {
  mt_arena arena;
  mt_hashmap codes;    /* code -> stored_list * */
  mt_hashmap strings;  /* hash -> interned * (chain) */
  stored_list **order; /* the lists in the order their codes were added */
  size_t norder, order_cap;
  uint64_t seed; /* codes and strings come from the trace: hash them with a secret seed */
};

mt_location_table *mt_location_table_new(void) {
  mt_location_table *t = calloc(1, sizeof *t);
  if (t) {
    t->seed = mt_hashmap_random_seed();
    t->codes.seed = t->strings.seed = t->seed;
  }
  return t;
}

void mt_location_table_free(mt_location_table *t) {
  if (!t)
    return;
  mt_arena_free(&t->arena);
  mt_hashmap_free(&t->codes);
  mt_hashmap_free(&t->strings);
  free(t->order);
  free(t);
}

const char *mt_location_table_intern(mt_location_table *t, const char *s, size_t len) {
  int64_t key = (int64_t)mt_hash_bytes(t->seed, s, len);
  uint64_t head = 0;
  mt_hashmap_get(&t->strings, key, &head);
  for (interned *i = (interned *)(uintptr_t)head; i; i = i->next_same_hash)
    if (i->len == len && !memcmp(i->text, s, len))
      return i->text;
  interned *n = mt_arena_alloc(&t->arena, sizeof *n + len + 1);
  if (!n)
    return NULL;
  n->next_same_hash = (interned *)(uintptr_t)head;
  n->len = len;
  memcpy(n->text, s, len);
  n->text[len] = 0;
  if (!mt_hashmap_put(&t->strings, key, (uint64_t)(uintptr_t)n))
    return NULL;
  return n->text;
}

static bool same_location(const mt_location *a, const mt_location *b) {
  /* Strings are interned by this table, so equal strings are equal pointers. */
  return a->filename == b->filename && a->defname == b->defname && a->line == b->line &&
         a->start_char == b->start_char && a->end_char == b->end_char;
}

int mt_location_table_add(mt_location_table *t, int64_t code, const mt_location *entries,
                          size_t count) {
  uint64_t found;
  if (mt_hashmap_get(&t->codes, code, &found)) {
    const stored_list *old = (const stored_list *)(uintptr_t)found;
    if (old->count != count)
      return MT_E_MALFORMED;
    for (size_t i = 0; i < count; i++)
      if (!same_location(&old->entries[i], &entries[i]))
        return MT_E_MALFORMED;
    return 0;
  }
  stored_list *list = mt_arena_alloc(&t->arena, sizeof *list + count * sizeof(mt_location));
  if (!list)
    return MT_E_NOMEM;
  list->code = code;
  list->count = count;
  if (count)
    memcpy(list->entries, entries, count * sizeof(mt_location));
  if (t->norder == t->order_cap) {
    size_t n = t->order_cap ? 2 * t->order_cap : 256;
    stored_list **grown = realloc(t->order, n * sizeof *grown);
    if (!grown)
      return MT_E_NOMEM;
    t->order = grown;
    t->order_cap = n;
  }
  if (!mt_hashmap_put(&t->codes, code, (uint64_t)(uintptr_t)list))
    return MT_E_NOMEM;
  t->order[t->norder++] = list;
  return 1;
}

bool mt_location_table_lookup(const mt_location_table *t, int64_t code, const mt_location **entries,
                              size_t *count) {
  uint64_t found;
  if (!mt_hashmap_get(&t->codes, code, &found))
    return false;
  const stored_list *list = (const stored_list *)(uintptr_t)found;
  *entries = list->entries;
  *count = list->count;
  return true;
}

void mt_location_table_entry(const mt_location_table *t, size_t i, int64_t *code,
                             const mt_location **entries, size_t *count) {
  const stored_list *list = t->order[i];
  *code = list->code;
  *entries = list->entries;
  *count = list->count;
}

void mt_location_table_truncate(mt_location_table *t, size_t count) {
  while (t->norder > count)
    mt_hashmap_remove(&t->codes, t->order[--t->norder]->code);
}

size_t mt_location_table_count(const mt_location_table *t) {
  return t->codes.count;
}

size_t mt_location_table_memory(const mt_location_table *t) {
  return t->arena.total + t->codes.cap * 17 + t->strings.cap * 17 + t->order_cap * sizeof(void *);
}

size_t mt_location_table_longest_probe(const mt_location_table *t) {
  return mt_hashmap_longest_run(&t->codes);
}
