/* The fuzz targets' assertion: a failed property is a crash libFuzzer reports and keeps (abort),
 * named by file and line, in every build type (assert would vanish under NDEBUG). */
#ifndef MEMTAP_TESTS_FUZZ_CHECK_H
#define MEMTAP_TESTS_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

#endif
