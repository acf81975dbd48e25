/* The event types of the Go execution-trace format versions memtap reads (docs/go.md), as the Go
 * runtime writes them: the header "go 1.N trace" and, per version, which event types exist, how
 * many varint arguments each takes and which of those name a stack or a string of the generation's
 * tables. The reader needs this for every event, not only the ones it converts, since events are
 * not length-prefixed: an event is skipped by reading its arguments.
 *
 * Versions: "go 1.23 trace" (written by Go 1.23 and Go 1.24, which kept the format) and
 * "go 1.25 trace" (Go 1.25: sync batches with a wall-clock snapshot). Go 1.22 traces cannot carry
 * the alloc/free experiment and older ones are another format; both are refused by name. */
#ifndef MEMTAP_SRC_IMPORT_GO_EVENTS_H
#define MEMTAP_SRC_IMPORT_GO_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/common.h"

#define GO_HEADER_SIZE 16
#define GO_MAX_BATCH_SIZE 65536 /* the runtime's trace buffer; a larger batch is malformed */
#define GO_MAX_STRING_SIZE 1024
#define GO_MAX_FRAMES 128
#define GO_MAX_ARGS 5

/* Event type numbers (the byte that starts every event). */
enum {
  GO_EV_EVENT_BATCH = 1,
  GO_EV_STACKS = 2,
  GO_EV_STACK = 3,
  GO_EV_STRINGS = 4,
  GO_EV_STRING = 5,
  GO_EV_CPU_SAMPLES = 6,
  GO_EV_CPU_SAMPLE = 7,
  GO_EV_FREQUENCY = 8,
  GO_EV_GC_BEGIN = 29,
  GO_EV_EXPERIMENTAL_BATCH = 49,
  GO_EV_SYNC = 50,           /* Go 1.25 */
  GO_EV_CLOCK_SNAPSHOT = 51, /* Go 1.25 */
  /* The alloc/free experiment (GODEBUG=traceallocfree=1). */
  GO_EV_SPAN = 128,
  GO_EV_SPAN_ALLOC = 129,
  GO_EV_SPAN_FREE = 130,
  GO_EV_HEAP_OBJECT = 131,
  GO_EV_HEAP_OBJECT_ALLOC = 132,
  GO_EV_HEAP_OBJECT_FREE = 133,
  GO_EV_GOROUTINE_STACK = 134,
  GO_EV_GOROUTINE_STACK_ALLOC = 135,
  GO_EV_GOROUTINE_STACK_FREE = 136,
};

/* The experiment number of alloc/free experimental batches. */
#define GO_EXPERIMENT_ALLOC_FREE 1

/* What an event of a regular (per-M) batch looks like on the wire. */
typedef struct go_event_spec {
  const char *name;    /* NULL: not an event of this version's per-M batches */
  uint8_t nargs;       /* varint arguments, the first being the time delta */
  uint8_t stack_args;  /* bit i: argument i is a stack id (0 = none) */
  uint8_t string_args; /* bit i: argument i is a string id */
} go_event_spec;

/* Reads the 16-byte header; stores the format version (23 or 25) or fails: MT_E_MALFORMED for
 * bytes that are no Go trace header, MT_E_UNSUPPORTED naming a version memtap does not read. */
int go_header_parse(const uint8_t *data, size_t size, int *version, mt_error *err);

/* Whether `data` starts like a Go execution trace ("go 1." ... " trace"), whatever its version. */
bool go_header_looks_like_trace(const uint8_t *data, size_t size);

/* The per-M batch event table of `version` (256 entries, indexed by the type byte). */
const go_event_spec *go_event_specs(int version);

/* A name for any type byte of `version` ("HeapObjectAlloc", "Strings", or "type 77"). The result
 * of the last form lives in `buf`. */
const char *go_event_name(int version, uint8_t type, char buf[16]);

#endif
