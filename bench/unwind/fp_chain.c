/* The frame-pointer half of the unwinder benchmark (bench_unwind.c): a recursion built with
 * -fno-omit-frame-pointer, and the rbp-chain walk that only such code allows (the cheapest walk
 * there is, and wrong on Debian's binaries, which have no frame pointers). */
#include "fp_chain.h"

volatile unsigned fp_sink;

__attribute__((noinline)) unsigned fp_recurse(int depth, void (*leaf)(void *), void *arg) {
  if (depth == 0) {
    leaf(arg);
    return 1;
  }
  unsigned r = fp_recurse(depth - 1, leaf, arg);
  return r + fp_sink;
}

__attribute__((noinline)) size_t fp_walk(uint64_t *pcs, size_t max, uintptr_t stack_hi) {
  uintptr_t fp = (uintptr_t)__builtin_frame_address(0), lo = fp;
  size_t n = 0;
  while (n < max && fp >= lo && fp + 16 <= stack_hi) {
    const uintptr_t *frame = (const uintptr_t *)fp;
    if (!frame[1])
      break;
    pcs[n++] = frame[1];
    if (frame[0] <= fp)
      break;
    fp = frame[0];
  }
  return n;
}
