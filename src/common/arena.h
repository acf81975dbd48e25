/* A bump allocator for many small objects freed together (interned strings, location lists):
 * pointers it hands out stay valid until mt_arena_free. */
#ifndef MEMTAP_SRC_COMMON_ARENA_H
#define MEMTAP_SRC_COMMON_ARENA_H

#include <stddef.h>

typedef struct mt_arena_block mt_arena_block;
typedef struct mt_arena {
  mt_arena_block *head;
  size_t used;  /* bytes used in head */
  size_t total; /* bytes allocated from the system, all blocks */
} mt_arena;

/* `size` bytes aligned to 8, or NULL when memory runs out. A zeroed mt_arena is empty. */
void *mt_arena_alloc(mt_arena *a, size_t size);
void mt_arena_free(mt_arena *a);

#endif
