/* The reader's trace-global table of location codes (FORMAT.md §2.6): code -> location list, with
 * interned strings, so that every pointer it hands out stays valid until the table is freed. */
#ifndef MEMTAP_SRC_FORMAT_LOCATION_TABLE_H
#define MEMTAP_SRC_FORMAT_LOCATION_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/format.h"

typedef struct mt_location_table mt_location_table;

mt_location_table *mt_location_table_new(void);
void mt_location_table_free(mt_location_table *t);

/* A stable NUL-terminated copy of `len` bytes at `s`; equal strings get the same pointer. NULL when
 * memory runs out. */
const char *mt_location_table_intern(mt_location_table *t, const char *s, size_t len);

/* Adds `code` with its list (strings interned by this table). Returns 1 if added, 0 if the code was
 * known with an equal list, MT_E_MALFORMED if it was known with a different one, MT_E_NOMEM. */
int mt_location_table_add(mt_location_table *t, int64_t code, const mt_location *entries,
                          size_t count);

bool mt_location_table_lookup(const mt_location_table *t, int64_t code, const mt_location **entries,
                              size_t *count);

/* The i-th code added (0 <= i < count), in the order they were added: the reader's checkpoints
 * save the codes described since the previous one. */
void mt_location_table_entry(const mt_location_table *t, size_t i, int64_t *code,
                             const mt_location **entries, size_t *count);

/* Forgets every code added after the first `count` (a reader taken back to where it knew only
 * those: mt_reader_rewind). Interned strings stay. */
void mt_location_table_truncate(mt_location_table *t, size_t count);

/* Number of codes, and bytes of memory held. */
size_t mt_location_table_count(const mt_location_table *t);
size_t mt_location_table_memory(const mt_location_table *t);

/* The most slots one lookup of a code can probe (statistics, tests). */
size_t mt_location_table_longest_probe(const mt_location_table *t);

#endif
