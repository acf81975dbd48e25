/* "<number>:<number>": two unsigned decimal numbers below 2^64 joined by a colon, nothing else
 * (no sign, no space), as memtap record hands values to the traced program in its environment
 * (MEMTAP_RING_TSC_ANCHOR, MEMTAP_RING_CONSUMER). Keeps errno; no allocation. */
#ifndef MEMTAP_COMMON_NUMBER_PAIR_H
#define MEMTAP_COMMON_NUMBER_PAIR_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Reads `text` into *first and *second; false (both untouched) when it is not such a pair. */
static inline bool mt_number_pair_parse(const char *text, uint64_t *first, uint64_t *second) {
  if (!text || *text < '0' || *text > '9')
    return false;
  char *end;
  int saved_errno = errno;
  errno = 0;
  uint64_t a = strtoull(text, &end, 10), b = 0;
  bool ok = *end == ':' && end[1] >= '0' && end[1] <= '9';
  if (ok) {
    b = strtoull(end + 1, &end, 10);
    ok = *end == 0 && errno == 0; /* errno: ERANGE, a number past 2^64 - 1 */
  }
  errno = saved_errno;
  if (ok) {
    *first = a;
    *second = b;
  }
  return ok;
}

#endif
