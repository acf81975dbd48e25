/* libFuzzer target for the ring consumer's file parsing (src/ring/layout.c, consumer.c): any
 * bytes are opened as a ring file in memory, and if the header is accepted every ring and the
 * registry are polled to the end, every record's payload and bytes touched, every registry entry
 * looked up. Inputs of odd size are read up to an end set after the first poll
 * (mt_cursor_set_end), as `memtap ring-dump` does; inputs whose size is 2 or 3 modulo 4 in time
 * order (mt_cursor_set_time_order, as `memtap record` reads), the oldest unread stamp asked for
 * before each poll. Nothing may crash, hang, leak or read outside the input. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memtap/ring.h"
#include "ring/consumer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static int touch(void *user, const mt_ring_event *ev) {
  mt_cursor *c = user;
  uint64_t sum = ev->ring ^ ev->generation ^ ev->type ^ ev->id ^ ev->seq ^ ev->timestamp;
  for (size_t i = 0; i < ev->words; i++)
    sum += ev->payload[i];
  for (size_t i = 0; i < ev->length; i++)
    sum += ev->bytes[i];
  sum += (uint64_t)mt_cursor_timestamp_ns(c, ev->timestamp);
  const void *name;
  size_t length;
  if (mt_cursor_lookup(c, MT_RING_REGISTRY_NAME, ev->id, &name, &length) == MT_OK && length)
    sum += ((const uint8_t *)name)[length - 1];
  sink += sum;
  /* Now and then, stop: the record must come again on the next poll. */
  return ev->seq % 97 == 13 ? MT_CURSOR_STOP : MT_CURSOR_NEXT;
}

static void lost(void *user, uint32_t ring, uint64_t records) {
  (void)user;
  sink += ring + records;
}

static void registry(void *user, unsigned kind, uint64_t id, const void *bytes, size_t length) {
  (void)user;
  sink += kind + id + length + (length ? ((const uint8_t *)bytes)[0] : 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 24))
    return 0;
  /* The cursor reads the file as 64-bit words: give it the alignment a mapping has. */
  void *file = aligned_alloc(4096, (size + 4095) / 4096 * 4096 + 4096);
  if (!file)
    return 0;
  memcpy(file, data, size);
  mt_cursor *c = NULL;
  mt_error err;
  if (mt_cursor_open_memory(&c, file, size, &err) == MT_OK) {
    mt_cursor_callbacks cb = {0};
    cb.other = touch;
    cb.lost = lost;
    cb.registry = registry;
    mt_cursor_set_callbacks(c, &cb, c);
    bool time_order = size % 4 >= 2;
    mt_cursor_set_time_order(c, time_order);
    for (int round = 0; round < 64; round++) {
      size_t got = 0;
      uint64_t stamp = 0;
      if (time_order && mt_cursor_oldest_unread(c, &stamp))
        sink += stamp;
      int rc = mt_cursor_poll(c, 1000, &got, &err);
      if (rc == MT_OK && got == 0 && mt_cursor_drained(c))
        break;
      if (round == 0 && size % 2)
        mt_cursor_set_end(c);
    }
    mt_ring_file_info info;
    mt_cursor_info(c, &info);
    sink += info.records_written + info.lost_records + mt_cursor_lost_records(c);
    mt_cursor_close(c);
  }
  free(file);
  return 0;
}
