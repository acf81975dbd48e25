/* The Go trace reader's error message and byte buffer (go_buffer.h). */
#include "import/go_buffer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"

int go_fail(mt_error *err, int64_t offset, const char *fmt, ...) {
  if (err) {
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    mt_fail(err, MT_E_MALFORMED, offset, "malformed Go trace at byte %lld: %s", (long long)offset,
            what);
  }
  return MT_E_MALFORMED;
}

int go_nomem(mt_error *err) {
  return mt_fail(err, MT_E_NOMEM, -1, "out of memory reading the Go trace");
}

bool go_bytes_reserve(go_bytes *b, size_t extra) {
  if (b->data && b->cap - b->len >= extra)
    return true; /* never NULL once reserved: memcpy of 0 bytes from it stays defined */
  size_t want = b->len + extra;
  if (want < b->len)
    return false;
  size_t cap = b->cap ? b->cap : 1 << 16;
  while (cap < want) {
    if (cap > SIZE_MAX / 2)
      return false;
    cap *= 2;
  }
  uint8_t *data = realloc(b->data, cap);
  if (!data)
    return false;
  b->data = data;
  b->cap = cap;
  return true;
}

void go_bytes_free(go_bytes *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}
