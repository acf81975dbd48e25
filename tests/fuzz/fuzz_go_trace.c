/* libFuzzer target for the Go execution-trace import (memtap/import.h): any bytes, read as a Go
 * trace (the "go 1.23 trace" header put in front when the input lacks one, so that mutations reach
 * the batches) and converted to /dev/null, once for every kind and once for heap objects only. It
 * must succeed or fail with a status; nothing may crash, hang or leak. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memtap/import.h"

static int dev_null = -1;

static void convert(const uint8_t *data, size_t size, unsigned kinds) {
  mt_go_import_options o = {.kinds = kinds, .start_time = 1};
  mt_go_import_stats stats;
  mt_error err;
  int rc = mt_go_import_memory(data, size, dev_null, &o, &stats, &err);
  if (rc && !err.message[0])
    abort(); /* every failure says why */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (dev_null < 0)
    dev_null = open("/dev/null", O_WRONLY);
  if (mt_go_trace_detect(data, size)) {
    convert(data, size, MT_GO_ALL);
    convert(data, size, MT_GO_OBJECTS);
    return 0;
  }
  /* Alternate headers by the first byte: both supported formats get mutated batches. */
  uint8_t *with = malloc(size + 16);
  if (!with)
    return 0;
  memcpy(with, (size && (data[0] & 1)) ? "go 1.25 trace\0\0\0" : "go 1.23 trace\0\0\0", 16);
  if (size)
    memcpy(with + 16, data, size);
  convert(with, size + 16, MT_GO_ALL);
  free(with);
  return 0;
}
