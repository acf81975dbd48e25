/* libFuzzer target for the consumer of the tracer's rings (src/record): any bytes are opened as a
 * ring file in memory; if the ring layer accepts it, its records (allocations, frees, reallocs,
 * regions, module loads and unloads, in any order, with any payload) go through a recorder to a
 * trace in memory, which must then read back whole with backtraces, times never decreasing and
 * every collect naming a live object: every trace the recorder writes is valid, whatever the rings
 * held. Symbolisation is off (module paths come from the
 * input). Nothing may crash, hang, leak or read outside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/hashmap.h"
#include "memtap/format.h"
#include "memtap/record.h"
#include "record/record_internal.h"
#include "ring/consumer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 22))
    return 0;
  /* The cursor reads the file as 64-bit words: give it the alignment a mapping has. */
  void *file = aligned_alloc(4096, (size + 4095) / 4096 * 4096 + 4096);
  if (!file)
    return 0;
  memcpy(file, data, size);
  mt_cursor *c = NULL;
  mt_error err;
  if (mt_cursor_open_memory(&c, file, size, &err) == MT_OK) {
    int fd = memfd_create("fuzz-trace", MFD_CLOEXEC);
    mt_recorder *rec = NULL;
    mt_recorder_options o = {.no_symbols = true, .flush_interval_ms = -1};
    if (fd >= 0 && mt_recorder_create(&rec, fd, &o, &err) == MT_OK &&
        rec_recorder_attach_cursor(rec, c, &err) == MT_OK) {
      mt_recorder_poll(rec, NULL, &err);
      mt_recorder_finish(rec, &err);
      mt_recorder_stats st;
      mt_recorder_stats_get(rec, &st);
      if (!st.failed)
        check_trace(fd);
    } else {
      mt_cursor_close(c);
    }
    mt_recorder_destroy(rec);
    if (fd >= 0)
      close(fd);
  }
  free(file);
  return 0;
}
