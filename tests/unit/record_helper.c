/* Code for the symbolisation tests (record_helper.h), compiled -O2 -g. */
#include "record_helper.h"

__attribute__((noinline)) uint64_t record_helper_capture(void);
__attribute__((noinline)) uint64_t record_helper_capture(void) {
  __asm__ volatile("" ::: "memory");
  return (uint64_t)(uintptr_t)__builtin_return_address(0);
}

static inline __attribute__((always_inline)) uint64_t record_helper_inner(int *capture_line) {
  uint64_t pc = (*capture_line = __LINE__, record_helper_capture());
  __asm__ volatile("" ::: "memory"); /* no tail call: the return address stays in outer */
  return pc;
}

__attribute__((noinline)) uint64_t record_helper_outer(int *inner_line, int *capture_line) {
  uint64_t pc = (*inner_line = __LINE__, record_helper_inner(capture_line));
  __asm__ volatile("" ::: "memory");
  return pc;
}
