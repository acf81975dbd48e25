/* Helpers shared by the ring tests: opening a producer in the test's temporary directory,
 * collecting what a cursor delivers, checksummed payloads, and pipes to step a forked process. */
#ifndef MEMTAP_RING_TESTLIB_H
#define MEMTAP_RING_TESTLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/ring.h"

/* Opens the process's producer in tu_temp_dir() (fails the test if it cannot). */
mt_ring *rt_open(mt_ring_mode mode, uint64_t ring_size, uint32_t max_rings, bool preserve);

/* The same for a forked child, where cmocka must not run: exits with status 90 on failure. */
mt_ring *rt_child_open(mt_ring_mode mode, uint64_t ring_size, uint32_t max_rings,
                       uint32_t attach_timeout_ms);

/* One delivered record, payload copied. */
typedef struct rt_record {
  uint32_t ring, generation, type, id;
  uint64_t seq, timestamp;
  size_t words;
  uint64_t payload[8]; /* the first 8 words */
  size_t length;       /* custom bytes */
  uint8_t bytes[64];
} rt_record;

/* Everything a cursor delivered: records (all types, in delivery order), lost records, registry
 * entries seen. */
typedef struct rt_collector {
  rt_record *records;
  size_t count, cap;
  uint64_t lost;
  uint64_t lost_by_ring[1024];
  size_t registry_entries;
  bool keep; /* false: count only (records[] not filled) */
  size_t seen;
  size_t failures; /* records `check` refused */
  /* Optional per-record check, called before storing; false counts a failure. */
  bool (*check)(const mt_ring_event *ev, void *arg);
  void *check_arg;
} rt_collector;

/* Callbacks that feed `collector` (every record type goes to `other`). */
void rt_collector_attach(mt_cursor *cursor, rt_collector *collector);

/* A run callback's work (mt_cursor_set_run_callback) for a collector: up to `limit` records of the
 * run at `rec` (`words` words), each asserted to be the run's (opaque, numbered on from
 * first_seq) and collected as the callbacks collect one; returns how many, *used their words. */
size_t rt_collect_run(rt_collector *collector, uint32_t ring, uint32_t generation,
                      uint64_t first_seq, const uint64_t *rec, size_t words, size_t limit,
                      size_t *used);
void rt_collector_free(rt_collector *collector);

/* Polls until the cursor is drained and the producer stopped (or only drained if
 * `until_stopped` is false). Fails the test on a poll error. */
void rt_drain(mt_cursor *cursor, bool until_stopped);

/* Payload words w[0..n-2] derived from (stream, index), w[n-1] their checksum. */
void rt_fill(uint64_t *payload, size_t words, uint64_t stream, uint64_t index);
/* Whether a payload is one rt_fill made, and its (stream, index). */
bool rt_verify(const uint64_t *payload, size_t words, uint64_t *stream, uint64_t *index);

/* A pipe for one process to wake another: rt_signal writes a byte, rt_wait reads one. */
typedef struct rt_pipe {
  int fd[2];
} rt_pipe;
void rt_pipe_open(rt_pipe *p);
void rt_signal(rt_pipe *p);
void rt_wait(rt_pipe *p);

/* Waits for a child and returns its exit status (128 + signal when killed). */
int rt_wait_child(int pid);

/* Opens a cursor on `pid`'s file in tu_temp_dir(), retrying while the file is being created. */
mt_cursor *rt_cursor(int pid);

#endif
