/* The tables of one Go trace generation (docs/go.md): strings, stacks, CPU samples, the timestamp
 * frequency (and, from Go 1.25, a wall-clock snapshot), and the alloc/free experiment's batches
 * (its type table, and the info batch that says how ids map to addresses). go_tables_read sorts
 * every batch of a generation into its kind, reads the table batches with all their checks (ids
 * unique, stack frames naming strings that exist, sizes within bounds) and leaves the per-M event
 * batches to go_merge. Tables live as long as their generation. */
#ifndef MEMTAP_SRC_IMPORT_GO_TABLES_H
#define MEMTAP_SRC_IMPORT_GO_TABLES_H

#include <stdbool.h>
#include <stdint.h>

#include "common/hashmap.h"
#include "import/go_batch.h"

/* How the alloc/free experiment's ids map to addresses (its info batch, written once when tracing
 * starts): object id = (address - min_heap) / heap_align, span id = (base - min_heap) / page_size,
 * goroutine stack id = (base - min_heap) / fixed_stack. */
typedef struct go_info {
  bool present;
  uint64_t min_heap, page_size, heap_align, fixed_stack;
} go_info;

/* A type of the experiment's type table. `name` points into the generation's buffer. */
typedef struct go_type {
  const char *name;
  uint32_t name_len;
  uint64_t size;
} go_type;

typedef struct go_tables {
  mt_hashmap strings; /* id -> 1 */
  mt_hashmap stacks;  /* id -> 1 */
  mt_hashmap types;   /* id -> index in `type` */
  go_type *type;
  size_t ntypes, types_cap;
  uint64_t frequency; /* ticks per second */
  bool have_clock;    /* Go 1.25: wall time `clock_sec`.`clock_nsec` at tick `clock_time` */
  uint64_t clock_time, clock_sec, clock_nsec;
  uint64_t records; /* table entries read: strings, stacks, samples, types, frequency, ... */
} go_tables;

/* Reads the table batches of `g` (replacing what `t` held) and marks every batch's kind; the
 * experiment's info batch goes to `info`, which lives across generations. A generation without a
 * frequency is malformed. */
int go_tables_read(go_tables *t, go_generation *g, int version, go_info *info, mt_error *err);

void go_tables_free(go_tables *t);

static inline bool go_tables_has_stack(const go_tables *t, uint64_t id) {
  return id == 0 || mt_hashmap_get(&t->stacks, (int64_t)id, NULL);
}

/* Id 0 is the empty stack and the empty string, defined without a table entry (as Go's reader
 * has it). */
static inline bool go_tables_has_string(const go_tables *t, uint64_t id) {
  return id == 0 || mt_hashmap_get(&t->strings, (int64_t)id, NULL);
}

/* The type with `id`, or NULL (id 0 is "no type"; other unknown ids are the caller's error). */
const go_type *go_tables_type(const go_tables *t, uint64_t id);

#endif
