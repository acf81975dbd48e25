/* libFuzzer target for the consumer of the tracer's rings (src/record): any bytes are opened as a
 * ring file in memory; if the ring layer accepts it, its records (allocations, frees, reallocs,
 * regions, module loads and unloads, in any order, with any payload) go through a recorder to a
 * trace in memory, which must then read back whole with backtraces, times never decreasing and
 * every collect naming a live object: every trace the recorder writes is valid, whatever the rings
 * held. Symbolisation is off (module paths come from the input). Inputs whose last byte is odd are
 * read in place, as a lossless primary reads them, the others through the cursor's copy. Nothing
 * may crash, hang, leak or read outside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memtap/format.h"
#include "memtap/record.h"
#include "record/record_internal.h"
#include "ring/consumer.h"
#include "trace_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
  mt_cursor_test_in_place = size && (data[size - 1] & 1);
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
