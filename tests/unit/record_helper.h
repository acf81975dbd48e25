/* Code for the symbolisation tests, compiled -O2 -g (record.cmake): a function whose callee is
 * inlined, so that one return address stands for two source functions. */
#ifndef MEMTAP_RECORD_HELPER_H
#define MEMTAP_RECORD_HELPER_H

#include <stdint.h>

/* Returns a return address inside record_helper_outer, in the inlined record_helper_inner, and
 * the lines of the two calls: *inner_line in outer (the call of inner), *capture_line in inner. */
uint64_t record_helper_outer(int *inner_line, int *capture_line);

#endif
