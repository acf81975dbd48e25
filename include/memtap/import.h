/* memtap/import.h: turning Go execution traces into memtrace traces (docs/go.md).
 *
 * Go 1.23 and later trace every heap object, heap span and goroutine stack when a program runs with
 * GODEBUG=traceallocfree=1 and writes an execution trace (runtime/trace, or `go test -trace`).
 * The trace also holds a snapshot of what exists when tracing starts. mt_go_import reads such a
 * trace as a stream, one generation at a time, and writes the memtrace trace every memtap
 * analysis reads:
 *
 *   - every allocation is recorded (sample rate 1): an allocation of `length` words carries
 *     `length` samples, so estimated bytes are exact;
 *   - heap objects are External allocations, heap spans Major ones and goroutine stacks Minor ones;
 *     `summary` and `info` name these sources "heap objects", "spans" and "goroutine stacks";
 *   - the backtrace of an allocation is one location: for a heap object its type's name ("[no
 * type]" when the runtime gave none; for a slice, the element type), for a span "[span class N (S
 * B)]",
 *     "[span large]" or "[span not heap]", for a stack "[goroutine stack]";
 *   - a heap object's size is its slot: the size class of the span that contains it, or the whole
 *     span for large objects (never its type's size); a span's size is its pages; a stack's size
 *     is its power of two;
 *   - the objects, spans and stacks of the start snapshot are allocations at the trace's start;
 *   - a free is the moment the garbage collector's sweeper (or the stack and span allocator)
 *     reclaims the memory, not the moment the program stopped using it;
 *   - times come from each generation's frequency; the start time is the wall clock of a
 *     "go 1.25 trace", or options.start_time for Go 1.23 and 1.24, which carry none.
 *
 * Supported: "go 1.23 trace" (written by Go 1.23 and Go 1.24) and "go 1.25 trace" (Go 1.25).
 * Other versions are refused with MT_E_UNSUPPORTED and a message naming them. Damaged input is
 * MT_E_MALFORMED with "malformed Go trace at byte N: ..." and N in mt_error.offset.
 *
 * Memory grows with the largest generation (Go starts one about every second) plus what is live
 * (objects, spans, stacks) and the distinct type names, never with the trace's length. */
#ifndef MEMTAP_IMPORT_H
#define MEMTAP_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/common.h"
#include "memtap/format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What to write (mt_go_import_options.kinds). */
#define MT_GO_OBJECTS 1u /* heap objects */
#define MT_GO_SPANS 2u   /* heap spans */
#define MT_GO_STACKS 4u  /* goroutine stacks */
#define MT_GO_ALL (MT_GO_OBJECTS | MT_GO_SPANS | MT_GO_STACKS)

typedef struct mt_go_import_options {
  unsigned kinds;     /* MT_GO_* bits; 0 means MT_GO_ALL */
  int64_t start_time; /* µs since the epoch, for traces without a wall clock (Go 1.23, 1.24) */
  int version;        /* memtrace version written: 3 (also when 0) or 2 */
  const char *executable_name; /* written into trace_info; NULL: "go program" */
  /* Called once at the end for each thing the user should know: no alloc/free events at all,
   * frees of objects never seen, objects outside any known span. May be NULL. */
  mt_warning_fn on_warning;
  void *warning_user;
} mt_go_import_options;

/* What happened to one kind of memory. */
typedef struct mt_go_counts {
  uint64_t allocated;     /* allocation events */
  uint64_t snapshot;      /* in the snapshot taken when tracing started */
  uint64_t frees;         /* free events in the trace */
  uint64_t freed;         /* frees written, each of something allocated or snapshotted before:
                           * the known free events, plus one per `replaced` */
  uint64_t unknown_frees; /* free events of something never seen: counted, not written */
  uint64_t duplicates;    /* snapshot entries of something already live: not written */
  uint64_t empty;         /* snapshot entries of nothing: a goroutine whose stack was freed
                           * (size 0) still has a record when tracing starts; not written */
  uint64_t replaced;      /* allocations over something live: its free is written first (a
                           * goroutine reusing a dead one's stack; a slot reused before the
                           * other thread's free event) */
  uint64_t live_end;      /* live at the end of the trace */
} mt_go_counts;

typedef struct mt_go_import_stats {
  int format_version;   /* 23 ("go 1.23 trace") or 25 */
  bool experiment;      /* the trace carries the alloc/free experiment */
  bool wall_clock;      /* the start time came from the trace (Go 1.25) */
  uint64_t generations; /* read */
  uint64_t batches;
  uint64_t go_events;         /* events and table entries parsed, converted or not */
  uint64_t alloc_free_events; /* the experiment's events among them */
  mt_go_counts objects, spans, stacks;
  uint64_t objects_outside_spans; /* objects with no known span: sized from their type */
  uint64_t late_frees;            /* frees that arrived after the slot's reuse (already written) */
  uint64_t type_names;            /* distinct type names */
  uint64_t largest_generation;    /* bytes */
  int64_t start_time, end_time;   /* µs since the epoch: the trace's start and its last event */
} mt_go_import_stats;

/* Whether `data` starts with a Go execution trace header (any version). 16 bytes suffice. */
bool mt_go_trace_detect(const void *data, size_t size);

/* Reads the Go trace on `in_fd` (a file or a pipe; it stays the caller's) and writes the memtrace
 * trace to `out_fd` (the caller's too). `options` and `stats` may be NULL. On failure what was
 * written so far is a readable but incomplete trace; remove it. */
int mt_go_import_fd(int in_fd, int out_fd, const mt_go_import_options *options,
                    mt_go_import_stats *stats, mt_error *err);

/* The same on a Go trace in memory. */
int mt_go_import_memory(const void *data, size_t size, int out_fd,
                        const mt_go_import_options *options, mt_go_import_stats *stats,
                        mt_error *err);

#ifdef __cplusplus
}
#endif
#endif
