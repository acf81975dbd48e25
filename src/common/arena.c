/* Bump allocator (arena.h): 64 KiB blocks, larger requests get a block of their own. */
#include "common/arena.h"

#include <stdlib.h>

struct mt_arena_block {
  mt_arena_block *next;
  size_t size;
  _Alignas(8) unsigned char data[];
};

#define ARENA_BLOCK 65536

void *mt_arena_alloc(mt_arena *a, size_t size) {
  size = (size + 7) & ~(size_t)7;
  if (!a->head || a->head->size - a->used < size) {
    size_t block = size > ARENA_BLOCK ? size : ARENA_BLOCK;
    mt_arena_block *b = malloc(sizeof *b + block);
    if (!b)
      return NULL;
    b->size = block;
    a->total += block;
    if (a->head && size > ARENA_BLOCK) {
      /* A large one-off block goes behind the current one, which keeps its free space. */
      b->next = a->head->next;
      a->head->next = b;
      return b->data;
    }
    b->next = a->head;
    a->head = b;
    a->used = 0;
  }
  void *p = a->head->data + a->used;
  a->used += size;
  return p;
}

void mt_arena_free(mt_arena *a) {
  for (mt_arena_block *b = a->head; b;) {
    mt_arena_block *next = b->next;
    free(b);
    b = next;
  }
  *a = (mt_arena){0};
}
