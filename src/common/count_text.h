/* Counts as people read them: digits grouped by three with commas (12,345,678), the one style of
 * every count memtap prints, from the command line, the library's warnings and the preload shim
 * alike. Header-only and allocation-free, so that the shim can use it without libmemtap. */
#ifndef MEMTAP_SRC_COMMON_COUNT_TEXT_H
#define MEMTAP_SRC_COMMON_COUNT_TEXT_H

#include <stdint.h>

/* The room mt_count_text may need: 20 digits, 6 commas and the NUL. */
#define MT_COUNT_TEXT_SIZE 27

/* Writes `v` grouped into `buf` (MT_COUNT_TEXT_SIZE bytes at least) and returns buf. */
static inline const char *mt_count_text(uint64_t v, char *buf) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  int at = 0;
  for (int i = n - 1; i >= 0; i--) {
    buf[at++] = digits[i];
    if (i > 0 && i % 3 == 0)
      buf[at++] = ',';
  }
  buf[at] = 0;
  return buf;
}

#endif
