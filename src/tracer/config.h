/* The tracer's configuration from the environment (docs/tracer.md, "Environment"): a pure parser
 * over a getenv-like callback, shared by the preload shim (which reads the real environment at
 * start-up) and `memtap record` (which validates the same variables before starting a program).
 * Compiled into both libmemtap and libmemtap-preload.so; it never allocates. */
#ifndef MEMTAP_SRC_TRACER_CONFIG_H
#define MEMTAP_SRC_TRACER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "memtap/common.h"

/* The default mean gap between sample points, in bytes (jemalloc's and tcmalloc's default). */
#define MT_TRACER_DEFAULT_INTERVAL (512u * 1024u)
/* The largest interval accepted (a rate of 8 / 2^50 per word). */
#define MT_TRACER_MAX_INTERVAL (1ull << 50)
/* The coarsest time resolution accepted for the trace's timestamps (MEMTAP_TIME_RESOLUTION), in
 * microseconds: one second. */
#define MT_TRACER_MAX_TIME_RESOLUTION_US 1000000u

/* How the parser reads a variable: its value, or NULL when unset. An empty value counts as
 * unset. */
typedef const char *(*mt_tracer_env_fn)(void *user, const char *name);

typedef enum mt_tracer_rate_source {
  MT_TRACER_RATE_DEFAULT = 0,
  MT_TRACER_RATE_FULL,            /* MEMTAP_FULL=1 */
  MT_TRACER_RATE_SAMPLE_INTERVAL, /* MEMTAP_SAMPLE_INTERVAL */
  MT_TRACER_RATE_MEMTAP_RATE,     /* MEMTAP_RATE */
  MT_TRACER_RATE_MEMTRACE_RATE,   /* MEMTRACE_RATE */
} mt_tracer_rate_source;

typedef struct mt_tracer_config {
  bool record;       /* MEMTAP_RECORD=1: trace into a ring file for an external consumer */
  bool full;         /* every allocation is recorded */
  bool follow_fork;  /* MEMTAP_FOLLOW_FORK=1 */
  bool seeded;       /* MEMTAP_SEED was given */
  uint64_t seed;     /* its value */
  int64_t trace_pid; /* MEMTAP_TRACE_PID, 0 when unset */
  /* MEMTAP_RECORD, MEMTAP_FOLLOW_FORK and MEMTAP_TRACE_PID, which decide whether this process
   * traces at all, were read well (they are parsed first: a failure after them leaves this set) */
  bool scope_read;
  uint64_t interval; /* mean gap between sample points in bytes (8 with full tracing) */
  double rate;       /* lambda, samples per 8-byte word: 8 / interval (1 with full tracing) */
  mt_tracer_rate_source rate_source;
  /* MEMTAP_TIME_RESOLUTION in microseconds, 1 to MT_TRACER_MAX_TIME_RESOLUTION_US; 0 when unset
   * (the trace's own resolution, 1 µs) */
  uint64_t time_resolution_us;
  const char *output; /* MEMTAP, else MEMTRACE (in-process mode), or NULL; borrowed from lookup */
} mt_tracer_config;

/* Rate 1 (MEMTAP_RATE=1, MEMTAP_SAMPLE_INTERVAL=8, mt_tracer_start's rate 1) is memtrace's every
 * word sampled, which analyses read as every allocation recorded: it is full tracing, as memtap
 * record makes it. The byte sampler at rate 1 would miss a 4-byte block half the time, and every
 * malloc(0), under a trace whose rate says none was missed. */
static inline void mt_tracer_config_rate_one_is_full(mt_tracer_config *c) {
  if (!c->full && c->rate >= 1.0) {
    c->full = true;
    c->rate = 1.0;
    c->interval = 8;
  }
}

/* Fills `cfg` from the variables `lookup` gives (docs/tracer.md lists them). Precedence of the
 * rate: MEMTAP_FULL, then MEMTAP_SAMPLE_INTERVAL, then MEMTAP_RATE, then MEMTRACE_RATE, then the
 * default; only the variable that decides the rate is parsed for it. Returns MT_OK, or
 * MT_E_INVALID with a message naming the first malformed variable (`cfg` then holds the defaults
 * for what could not be read; the shim does not trace in that case). */
int mt_tracer_config_parse(mt_tracer_config *cfg, mt_tracer_env_fn lookup, void *user,
                           mt_error *err);

/* Parses a byte count "N[K|M|G][i][B]" (binary multiples) into *out; false if malformed or over
 * 2^64 - 1. */
bool mt_tracer_parse_size(const char *text, uint64_t *out);

/* Parses a duration "N" followed by one of the units us, ms, s into whole microseconds; false
 * if malformed, without a unit, or over 2^63 µs. */
bool mt_tracer_parse_duration_us(const char *text, uint64_t *out);

/* Parses a rate: a decimal number (digits, one optional '.', an optional exponent), 0 < rate <= 1.
 */
bool mt_tracer_parse_rate(const char *text, double *out);

#endif
