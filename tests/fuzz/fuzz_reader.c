/* libFuzzer target for the trace reader: any bytes, read with and without backtrace decoding, every
 * backtrace code looked up, and every event copied through the writer (to /dev/null), which must
 * either accept it or refuse it with a status. Nothing may crash, hang or leak. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "memtap/format.h"

static int dev_null = -1;

static void read_all(const uint8_t *data, size_t size, bool backtraces) {
  mt_reader_options options = {.backtraces = backtraces};
  mt_reader *r;
  if (mt_reader_open_memory(&r, data, size, &options, NULL))
    return;
  mt_event ev;
  while (mt_reader_next(r, &ev, NULL) > 0) {
    for (size_t i = 0; i < ev.backtrace_length; i++) {
      const mt_location *locs;
      size_t n;
      if (mt_reader_lookup_location(r, ev.backtrace[i], &locs, &n) && n)
        (void)locs[n - 1].defname[0];
    }
  }
  mt_reader_close(r);
}

static void transcode(const uint8_t *data, size_t size) {
  mt_reader_options options = {.backtraces = true};
  mt_reader *r;
  if (mt_reader_open_memory(&r, data, size, &options, NULL))
    return;
  mt_writer *w;
  mt_writer_options wopts = {.version = mt_reader_info(r)->version >= 3 ? 3 : 2};
  if (mt_writer_create(&w, dev_null, mt_reader_info(r), &wopts, NULL) == MT_OK) {
    mt_transcode(r, w, NULL);
    mt_writer_close(w, NULL);
  }
  mt_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (dev_null < 0)
    dev_null = open("/dev/null", O_WRONLY);
  read_all(data, size, false);
  read_all(data, size, true);
  transcode(data, size);
  return 0;
}
