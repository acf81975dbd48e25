/* The Go trace event tables per format version (go_events.h). The wire layout of every event is
 * one type byte followed by `nargs` unsigned varints; the Go runtime's internal/trace/tracev2
 * package describes the same events. */
#include "import/go_events.h"

#include <stdio.h>
#include <string.h>

#include "import/go_buffer.h"

#define S(i) (uint8_t)(1u << (i))
#define EV(type, label, n, stacks, strings) [type] = {label, n, stacks, strings}

/* Every per-M event of "go 1.25 trace"; "go 1.23 trace" is the same without types 50 and 51. */
static const go_event_spec specs_125[256] = {
    EV(9, "ProcsChange", 3, S(2), 0),
    EV(10, "ProcStart", 3, 0, 0),
    EV(11, "ProcStop", 1, 0, 0),
    EV(12, "ProcSteal", 4, 0, 0),
    EV(13, "ProcStatus", 3, 0, 0),
    EV(14, "GoCreate", 4, S(2) | S(3), 0),
    EV(15, "GoCreateSyscall", 2, 0, 0),
    EV(16, "GoStart", 3, 0, 0),
    EV(17, "GoDestroy", 1, 0, 0),
    EV(18, "GoDestroySyscall", 1, 0, 0),
    EV(19, "GoStop", 3, S(2), S(1)),
    EV(20, "GoBlock", 3, S(2), S(1)),
    EV(21, "GoUnblock", 4, S(3), 0),
    EV(22, "GoSyscallBegin", 3, S(2), 0),
    EV(23, "GoSyscallEnd", 1, 0, 0),
    EV(24, "GoSyscallEndBlocked", 1, 0, 0),
    EV(25, "GoStatus", 4, 0, 0),
    EV(26, "STWBegin", 3, S(2), S(1)),
    EV(27, "STWEnd", 1, 0, 0),
    EV(28, "GCActive", 2, 0, 0),
    EV(29, "GCBegin", 3, S(2), 0),
    EV(30, "GCEnd", 2, 0, 0),
    EV(31, "GCSweepActive", 2, 0, 0),
    EV(32, "GCSweepBegin", 2, S(1), 0),
    EV(33, "GCSweepEnd", 3, 0, 0),
    EV(34, "GCMarkAssistActive", 2, 0, 0),
    EV(35, "GCMarkAssistBegin", 2, S(1), 0),
    EV(36, "GCMarkAssistEnd", 1, 0, 0),
    EV(37, "HeapAlloc", 2, 0, 0),
    EV(38, "HeapGoal", 2, 0, 0),
    EV(39, "GoLabel", 2, 0, S(1)),
    EV(40, "UserTaskBegin", 5, S(4), S(3)),
    EV(41, "UserTaskEnd", 3, S(2), 0),
    EV(42, "UserRegionBegin", 4, S(3), S(2)),
    EV(43, "UserRegionEnd", 4, S(3), S(2)),
    EV(44, "UserLog", 5, S(4), S(2) | S(3)),
    EV(45, "GoSwitch", 3, 0, 0),
    EV(46, "GoSwitchDestroy", 3, 0, 0),
    EV(47, "GoCreateBlocked", 4, S(2) | S(3), 0),
    EV(48, "GoStatusStack", 5, S(4), 0),
    EV(51, "ClockSnapshot", 4, 0, 0),
    EV(128, "Span", 4, 0, 0),
    EV(129, "SpanAlloc", 4, 0, 0),
    EV(130, "SpanFree", 2, 0, 0),
    EV(131, "HeapObject", 3, 0, 0),
    EV(132, "HeapObjectAlloc", 3, 0, 0),
    EV(133, "HeapObjectFree", 2, 0, 0),
    EV(134, "GoroutineStack", 3, 0, 0),
    EV(135, "GoroutineStackAlloc", 3, 0, 0),
    EV(136, "GoroutineStackFree", 2, 0, 0),
};

static go_event_spec specs_123[256];
static bool specs_123_ready;

const go_event_spec *go_event_specs(int version) {
  if (version >= 25)
    return specs_125;
  if (!specs_123_ready) { /* idempotent: racing threads write the same bytes */
    go_event_spec t[256];
    memcpy(t, specs_125, sizeof t);
    memset(&t[GO_EV_SYNC], 0, sizeof t[0]);
    memset(&t[GO_EV_CLOCK_SNAPSHOT], 0, sizeof t[0]);
    memcpy(specs_123, t, sizeof t);
    __atomic_store_n(&specs_123_ready, true, __ATOMIC_RELEASE);
  }
  return specs_123;
}

const char *go_event_name(int version, uint8_t type, char buf[16]) {
  static const char *structural[] = {NULL,     "EventBatch", "Stacks",    "Stack",    "Strings",
                                     "String", "CPUSamples", "CPUSample", "Frequency"};
  if (type >= 1 && type <= 8)
    return structural[type];
  if (type == GO_EV_EXPERIMENTAL_BATCH)
    return "ExperimentalBatch";
  if (version >= 25 && type == GO_EV_SYNC)
    return "Sync";
  if (version >= 25 && type == 52)
    return "EndOfGeneration";
  const go_event_spec *s = &go_event_specs(version)[type];
  if (s->name)
    return s->name;
  snprintf(buf, 16, "type %u", type);
  return buf;
}

bool go_header_looks_like_trace(const uint8_t *data, size_t size) {
  return size >= GO_HEADER_SIZE && !memcmp(data, "go 1.", 5) && !memcmp(data + 7, " trace", 6);
}

int go_header_parse(const uint8_t *data, size_t size, int *version, mt_error *err) {
  if (size < GO_HEADER_SIZE)
    return go_fail(err, (int64_t)size, "the file ends inside the 16-byte header");
  if (!go_header_looks_like_trace(data, size) || data[5] < '0' || data[5] > '9' || data[6] < '0' ||
      data[6] > '9' || memcmp(data + 13, "\0\0\0", 3))
    return go_fail(err, 0, "no Go execution trace header (\"go 1.NN trace\")");
  int v = (data[5] - '0') * 10 + (data[6] - '0');
  if (v == 23 || v == 25) {
    *version = v;
    return MT_OK;
  }
  if (err) {
    go_fail(err, 5, "x");
    snprintf(err->message, sizeof err->message,
             "Go trace format go 1.%d is not supported: memtap reads the alloc/free experiment "
             "of \"go 1.23 trace\" (Go 1.23 and 1.24) and \"go 1.25 trace\" (Go 1.25)%s",
             v, v < 23 ? "; older Go versions cannot record it" : "");
    err->code = MT_E_UNSUPPORTED;
  }
  return MT_E_UNSUPPORTED;
}
