/* Building traces in tests: a writer on an in-memory file, a deterministic resolver (every code has
 * a location list derived from its value), and reading a whole trace back into events. */
#ifndef MEMTAP_TRACEGEN_H
#define MEMTAP_TRACEGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/packet.h"
#include "memtap/format.h"

#define TG_START 1700000000000000LL
#define TG_PID 4242

/* trace_info for test traces: start TG_START, pid TG_PID, the given rate, word size 64. */
mt_trace_info tg_info(double rate);

/* A writer on a fresh memfd (version 2 or 3). Fails the test if it cannot. */
mt_writer *tg_writer(int version, double rate, int *fd);

/* Closes the writer (asserting success) and returns the file's bytes (caller frees). */
uint8_t *tg_finish(mt_writer *w, int fd, size_t *size);

/* The bytes of a memfd written so far (caller frees). */
uint8_t *tg_fd_bytes(int fd, size_t *size);

/* Resolver (thread-safe): code c gets (c % 3) + 1 entries "fn_<c>_<i>" in "file_<c % 40>.c", line c
 * % 100000. A `user` of NULL is fine. */
int tg_resolve(void *user, uint64_t code, const mt_location **entries, size_t *count);

/* A reader with backtraces on `data` (flat, or runs only), asserting it opens; caller closes. */
mt_reader *tg_open_memory(const uint8_t *data, size_t size, bool runs_only);

/* One event read back, with its backtrace copied. */
typedef struct tg_event {
  mt_event ev;
  int64_t *backtrace;
} tg_event;

/* Reads every event of `data` (asserting the reader succeeds); caller frees with tg_free_events.
 * The reader is returned in *reader when non-NULL (caller closes), else closed. */
tg_event *tg_read_all(const uint8_t *data, size_t size, bool backtraces, size_t *count,
                      mt_reader **reader);
void tg_free_events(tg_event *events, size_t count);

/* Opens a reader on memory and returns the status of reading it to the end (0 when well-formed),
 * with the error in *err. *events (if non-NULL) receives how many events were read. */
int tg_read_status(const uint8_t *data, size_t size, bool backtraces, mt_error *err, size_t *events,
                   uint64_t *warnings, bool *truncated);

/* The packets of a trace, walked by their headers (asserting each header is whole and valid). */
#define TG_MAX_PACKETS 4096
typedef struct tg_packets {
  mt_packet_header h[TG_MAX_PACKETS];
  size_t offset[TG_MAX_PACKETS], size[TG_MAX_PACKETS], count;
} tg_packets;
void tg_walk_packets(const uint8_t *data, size_t size, tg_packets *out);

#endif
