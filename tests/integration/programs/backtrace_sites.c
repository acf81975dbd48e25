/* backtrace_sites: allocation sites whose backtraces are easy to resolve wrongly: a function
 * inlined into its caller, two calls on adjacent lines, and a call to a noreturn function that
 * allocates (the caller's return address is the first byte after its code, so it resolves right
 * only as return address - 1). Built by both gcc and clang at -O2 -g; the tests compare the three
 * innermost locations of each site with the "@line" marks. */
#include <stdio.h>
#include <stdlib.h>

#include "test_program.h"

static void *sink[8];

static inline __attribute__((always_inline)) void *inlined_alloc(size_t n) {
  void *p = malloc(n); // @expect allocs=1 frees=0 words=25 @line inlined_malloc
  KEEP(p);             /* sink is never read: without this, gcc deletes the allocation */
  return p;
}

NOINLINE static void *make_block(size_t n) {
  void *p = malloc(n); // @expect allocs=4 frees=0 words=20 @line make_block_malloc
  KEEP(p);
  return p;
}

__attribute__((noreturn)) NOINLINE static void finish(int code) {
  sink[4] = make_block(64); // @line finish_call
  fflush(stdout);
  exit(code);
}

NOINLINE static void run_then_finish(void) {
  sink[3] = make_block(48); // @line before_finish
  finish(0);                // @line call_finish
}

int main(int argc, char **argv) {
  (void)argv;
  sink[0] = inlined_alloc(200 + (size_t)argc - 1); // @line call_inlined
  sink[1] = make_block(16);                        // @line first_adjacent
  sink[2] = make_block(32);                        // @line second_adjacent
  printf("backtrace_sites done\n");
  run_then_finish(); // @line call_run
}
