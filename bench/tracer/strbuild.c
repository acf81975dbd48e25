/* Tracer benchmark workload: a realloc-heavy string builder. Builds strings by appending short
 * pieces with a realloc to the exact new length on every append (as naive string code does), keeps
 * a window of recent strings alive and frees the oldest. Usage: strbuild [SCALE]. */
#include <string.h>

#include "workload.h"

#define KEEP 64u

int main(int argc, char **argv) {
  double scale = workload_scale(argc, argv);
  uint64_t strings = (uint64_t)(scale * 300000);
  static const char *pieces[] = {"a",     "bc",     "def",     "ghij",
                                 "klmno", "pqrstu", "vwxyz01", "23456789"};
  char *window[KEEP] = {0};
  uint64_t rng = 7, bytes = 0;
  for (uint64_t s = 0; s < strings; s++) {
    uint64_t r = workload_next(&rng);
    size_t appends = 16 + (size_t)(r % 96), len = 0;
    char *str = NULL;
    for (size_t a = 0; a < appends; a++) {
      const char *piece = pieces[(r >> (a % 48)) & 7];
      size_t n = strlen(piece);
      char *grown = realloc(str, len + n + 1);
      if (!grown)
        abort();
      str = grown;
      memcpy(str + len, piece, n + 1);
      len += n;
    }
    bytes += len;
    unsigned k = (unsigned)(s % KEEP);
    free(window[k]);
    window[k] = str;
  }
  for (unsigned k = 0; k < KEEP; k++)
    free(window[k]);
  printf("strbuild: %llu strings, %llu bytes\n", (unsigned long long)strings,
         (unsigned long long)bytes);
  return 0;
}
