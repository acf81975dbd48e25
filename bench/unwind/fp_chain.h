/* The stacks of the unwinder benchmark: a recursion with frame pointers and the rbp-chain walk
 * (fp_chain.c), and the same recursion without frame pointers (nofp_chain.c). */
#ifndef MEMTAP_BENCH_FP_CHAIN_H
#define MEMTAP_BENCH_FP_CHAIN_H

#include <stddef.h>
#include <stdint.h>

/* Recurses depth frames (each with a frame pointer), then calls leaf(arg). */
unsigned fp_recurse(int depth, void (*leaf)(void *), void *arg);

/* Recurses depth frames built without frame pointers, then calls leaf(arg). */
unsigned nofp_recurse(int depth, void (*leaf)(void *), void *arg);

/* Return addresses along the rbp chain, innermost first, reads bounded to [rbp, stack_hi). */
size_t fp_walk(uint64_t *pcs, size_t max, uintptr_t stack_hi);

#endif
