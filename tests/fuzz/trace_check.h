/* What the fuzz targets of the recorder (fuzz_record.c, fuzz_order.c) require of every trace it
 * writes, whatever its input: the trace reads back whole with backtraces, times never decrease,
 * every location code resolves, and every collect names an object allocated and not yet
 * collected (memtrace_viewer crashes on anything else). Aborts otherwise. */
#ifndef MEMTAP_FUZZ_TRACE_CHECK_H
#define MEMTAP_FUZZ_TRACE_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/hashmap.h"
#include "memtap/format.h"

static void check_trace(int fd) {
  off_t size = lseek(fd, 0, SEEK_END);
  if (size <= 0)
    abort(); /* finish always writes at least packet 0 */
  void *bytes = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (bytes == MAP_FAILED)
    abort();
  mt_reader_options o = {.backtraces = true};
  mt_reader *r;
  mt_error err;
  if (mt_reader_open_memory(&r, bytes, (size_t)size, &o, &err))
    abort();
  mt_event e;
  int rc;
  int64_t last = INT64_MIN;
  mt_hashmap live = {0}; /* ids allocated and not yet collected */
  while ((rc = mt_reader_next(r, &e, &err)) == 1) {
    if (e.time < last)
      abort();
    last = e.time;
    if (e.kind == MT_EVENT_ALLOC && !mt_hashmap_put(&live, e.obj_id, 1))
      abort();
    if (e.kind == MT_EVENT_COLLECT && !mt_hashmap_remove(&live, e.obj_id))
      abort(); /* a collect of an unknown or dead object: memtrace_viewer would crash */
    for (size_t i = 0; i < e.backtrace_length; i++) {
      const mt_location *l;
      size_t n;
      if (!mt_reader_lookup_location(r, e.backtrace[i], &l, &n))
        abort();
    }
  }
  if (rc != 0)
    abort(); /* the recorder wrote a trace its own reader rejects */
  mt_hashmap_free(&live);
  mt_reader_close(r);
  munmap(bytes, (size_t)size);
}

#endif
