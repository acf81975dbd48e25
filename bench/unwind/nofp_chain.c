/* The stack the unwinder benchmark (bench_unwind.c) walks as Debian's binaries look: a recursion
 * built -O2 -fomit-frame-pointer, so only .eh_frame describes its frames. */
#include "fp_chain.h"

volatile unsigned nofp_sink;

__attribute__((noinline)) unsigned nofp_recurse(int depth, void (*leaf)(void *), void *arg) {
  if (depth == 0) {
    leaf(arg);
    return 1;
  }
  unsigned r = nofp_recurse(depth - 1, leaf, arg);
  return r + nofp_sink;
}
