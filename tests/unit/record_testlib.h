/* Helpers of the recorder's tests: writing tracer records (memtap/tracer.h) into a real ring file
 * of the test process, running a recorder on it, and reading the trace back whole. */
#ifndef MEMTAP_RECORD_TESTLIB_H
#define MEMTAP_RECORD_TESTLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/format.h"
#include "memtap/record.h"
#include "memtap/ring.h"

/* Opens the process's ring (flight recorder, kept after close) and registers the process
 * description (`full`: rate 1). */
mt_ring *rr_open(bool full, double rate);
/* Registers module `serial` covering [low, high) with `bias`, `path` and `build_id`. */
void rr_module(mt_ring *r, uint64_t serial, uint64_t bias, uint64_t low, uint64_t high,
               const char *path, const void *build_id, size_t build_id_length);
/* Registers the test executable itself as module `serial` (its real path, bias, build-id). */
void rr_module_self(mt_ring *r, uint64_t serial);
/* Registers the loaded object containing `address` as module `serial`. */
void rr_module_of(mt_ring *r, uint64_t serial, const void *address);

void rr_alloc(mt_ring *r, uint64_t addr, uint64_t size, const uint64_t *frames, size_t nframes);
/* rr_alloc with the record's kind and flags word (MT_TRACER_KIND_*, MT_TRACER_FLAG_*). */
void rr_alloc_kind(mt_ring *r, uint64_t addr, uint64_t size, const uint64_t *frames, size_t nframes,
                   uint64_t kind);
void rr_free(mt_ring *r, uint64_t addr);
void rr_realloc(mt_ring *r, uint64_t old_addr, uint64_t new_addr, uint64_t size);
void rr_map(mt_ring *r, uint64_t addr, uint64_t length);
void rr_unmap(mt_ring *r, uint64_t addr, uint64_t length);
void rr_unload(mt_ring *r, uint64_t serial);

/* Closes the ring, runs a recorder over its file into `name` in the temporary directory with
 * `options` (NULL: defaults), and returns the trace's path; *stats gets the recorder's counts. */
const char *rr_record(mt_ring *r, const char *name, const mt_recorder_options *options,
                      mt_recorder_stats *stats);

/* A whole trace, read back with backtraces. Every trace is also checked: it reads to its end
 * without error, collects name live objects only, and times never decrease. */
typedef struct rr_event {
  mt_event_kind kind;
  int64_t time, obj_id, length, nsamples;
  mt_source source;
  size_t depth;
  int64_t codes[64]; /* outermost first, as the reader gives them */
} rr_event;

typedef struct rr_trace {
  mt_reader *reader; /* still open, for location lookups */
  rr_event *events;
  size_t count, cap;
} rr_trace;

void rr_read(const char *path, rr_trace *out);
void rr_trace_free(rr_trace *t);
/* The location list of `code`; fails the test if the trace did not describe it. */
const mt_location *rr_locations(const rr_trace *t, int64_t code, size_t *count);

#endif
