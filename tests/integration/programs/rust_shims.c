/* rust_shims: allocations through functions named as Rust's allocator shims are (the plain names,
 * and a v0-mangled one), which the symboliser drops from the top of a stack as it drops operator
 * new: the site is the line that called the shim, as it is Box::new's caller in a Rust program. */
#include <stdio.h>
#include <stdlib.h>

#include "test_program.h"

/* Each keeps its frame (KEEP after the call: no tail call), as Rust's do. */
NOINLINE void *__rdl_alloc(size_t size, size_t align) {
  (void)align;
  void *p = malloc(size);
  KEEP(p);
  return p;
}

NOINLINE void *__rust_alloc(size_t size, size_t align) {
  void *p = __rdl_alloc(size, align);
  KEEP(p);
  return p;
}

NOINLINE void *_RNvCs1a2b3c4d5e_7___rustc11___rdl_alloc(size_t size) {
  void *p = malloc(size);
  KEEP(p);
  return p;
}

int main(void) {
  for (int i = 0; i < 100; i++) {
    void *a = __rust_alloc(48, 8); // @expect allocs=100 frees=100 words=600
    void *b = _RNvCs1a2b3c4d5e_7___rustc11___rdl_alloc(24); // @expect allocs=100 frees=100
    KEEP(a);
    KEEP(b);
    free(a);
    free(b);
  }
  printf("rust shims done\n");
  return 0;
}
