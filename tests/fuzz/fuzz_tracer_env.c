/* libFuzzer target for the tracer's environment variables (src/tracer/config.c, docs/tracer.md):
 * MEMTAP_RECORD, MEMTAP_FULL, MEMTAP_FOLLOW_FORK, MEMTAP_SAMPLE_INTERVAL, MEMTAP_RATE,
 * MEMTRACE_RATE, MEMTAP_TRACE_PID, MEMTAP_SEED, MEMTAP, MEMTRACE and MEMTAP_TIME_RESOLUTION,
 * through mt_tracer_config_parse with a lookup over the input (the real environment would leak).
 *
 * Input: up to eleven values separated by NUL bytes, in the order above. A missing value is an
 * unset variable; an empty one counts as unset.
 *
 * The result must be MT_OK with a usable configuration (a rate in (0, 1], an interval from 8 to
 * 2^50 bytes agreeing with it, the precedence of config.h), checked against a separate reading of
 * the flags and the interval, or MT_E_INVALID with a message naming a variable. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracer/config.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {
    "MEMTAP_RECORD", "MEMTAP_FULL",   "MEMTAP_FOLLOW_FORK",    "MEMTAP_SAMPLE_INTERVAL",
    "MEMTAP_RATE",   "MEMTRACE_RATE", "MEMTAP_TRACE_PID",      "MEMTAP_SEED",
    "MEMTAP",        "MEMTRACE",      "MEMTAP_TIME_RESOLUTION"};
enum {
  RECORD,
  FULL,
  FOLLOW,
  INTERVAL,
  RATE,
  TRACE_RATE,
  PID,
  SEED,
  OUT,
  TRACE_OUT,
  RESOLUTION,
  NVARS
};

typedef struct environment {
  char *value[NVARS];
} environment;

static const char *lookup(void *user, const char *name) {
  environment *env = user;
  for (int i = 0; i < NVARS; i++)
    if (!strcmp(name, names[i]))
      return env->value[i];
  fprintf(stderr, "fuzz_tracer_env: the parser read %s, which this harness does not know\n", name);
  abort();
}

static bool set(const char *v) {
  return v && *v;
}

/* A flag as documented: unset, "0" or "1"; anything else is malformed (returns -1). */
static int flag(const char *v) {
  if (!set(v))
    return 0;
  if (!strcmp(v, "0") || !strcmp(v, "1"))
    return v[0] == '1';
  return -1;
}

/* The documented size syntax, read with 128-bit arithmetic. */
static bool reference_size(const char *s, unsigned __int128 *out) {
  unsigned __int128 v = 0;
  const char *p = s;
  if (*p < '0' || *p > '9')
    return false;
  for (; *p >= '0' && *p <= '9'; p++) {
    v = v * 10 + (unsigned)(*p - '0');
    if (v > ((unsigned __int128)1 << 100))
      return false;
  }
  unsigned shift = 0;
  const char *suffixes = "kKmMgGtTpP", *suffix = *p ? strchr(suffixes, *p) : NULL;
  if (suffix) {
    shift = 10 * (unsigned)(1 + (suffix - suffixes) / 2);
    p++;
    if (*p == 'i' || *p == 'I')
      p++;
    if (*p == 'b' || *p == 'B')
      p++;
  }
  if (*p)
    return false;
  *out = v << shift;
  return true;
}

static void check(environment *env) {
  mt_tracer_config c;
  mt_error err;
  memset(&err, 0x55, sizeof err);
  int rc = mt_tracer_config_parse(&c, lookup, env, &err);
  CHECK(rc == MT_OK || rc == MT_E_INVALID);
  if (rc == MT_E_INVALID) {
    CHECK(err.code == MT_E_INVALID);
    CHECK(memchr(err.message, 0, sizeof err.message));
    CHECK(!strncmp(err.message, "MEMTAP_", 7) || !strncmp(err.message, "MEMTRACE_", 9));
  }
  int record = flag(env->value[RECORD]), full = flag(env->value[FULL]),
      follow = flag(env->value[FOLLOW]);
  if (record < 0 || full < 0 || follow < 0) {
    CHECK(rc == MT_E_INVALID);
    return;
  }
  if (rc != MT_OK)
    return; /* a later variable was malformed; which one is not re-derived here */
  CHECK(c.record == (record == 1));
  CHECK(c.follow_fork == (follow == 1));
  CHECK(c.rate > 0.0 && c.rate <= 1.0);
  CHECK(c.interval >= 8 && c.interval <= MT_TRACER_MAX_INTERVAL);
  /* Full tracing: MEMTAP_FULL=1, or a rate of 1 however it was asked for. */
  CHECK(c.full == (full == 1 || c.rate == 1.0));
  if (full == 1) {
    CHECK(c.rate == 1.0 && c.interval == 8 && c.rate_source == MT_TRACER_RATE_FULL);
  } else if (c.full) {
    CHECK(c.rate == 1.0 && c.interval == 8 && c.rate_source != MT_TRACER_RATE_FULL &&
          c.rate_source != MT_TRACER_RATE_DEFAULT);
  } else if (set(env->value[INTERVAL])) {
    unsigned __int128 want;
    CHECK(reference_size(env->value[INTERVAL], &want));
    CHECK(want >= 8 && want <= MT_TRACER_MAX_INTERVAL && c.interval == (uint64_t)want);
    CHECK(c.rate == 8.0 / (double)c.interval);
  } else if (set(env->value[RATE]) || set(env->value[TRACE_RATE])) {
    CHECK(c.rate_source ==
          (set(env->value[RATE]) ? MT_TRACER_RATE_MEMTAP_RATE : MT_TRACER_RATE_MEMTRACE_RATE));
    CHECK(fabs((double)c.interval - 8.0 / c.rate) <= 1.0);
  } else {
    CHECK(c.rate_source == MT_TRACER_RATE_DEFAULT && c.interval == MT_TRACER_DEFAULT_INTERVAL);
  }
  CHECK(c.trace_pid >= 0 && c.trace_pid <= 0x7fffffff);
  CHECK(c.trace_pid == 0 || set(env->value[PID]));
  CHECK(c.seeded == set(env->value[SEED]));
  const char *out = set(env->value[OUT])         ? env->value[OUT]
                    : set(env->value[TRACE_OUT]) ? env->value[TRACE_OUT]
                                                 : NULL;
  CHECK(c.output == out);
  if (set(env->value[RESOLUTION])) {
    /* digits, then exactly one of the three units */
    const char *v = env->value[RESOLUTION];
    size_t digits = strspn(v, "0123456789");
    const char *unit = v + digits;
    CHECK(digits > 0 && (!strcmp(unit, "us") || !strcmp(unit, "ms") || !strcmp(unit, "s")));
    CHECK(c.time_resolution_us >= 1 && c.time_resolution_us <= MT_TRACER_MAX_TIME_RESOLUTION_US);
    unsigned __int128 want = 0;
    for (size_t i = 0; i < digits && want <= MT_TRACER_MAX_TIME_RESOLUTION_US; i++)
      want = want * 10 + (unsigned)(v[i] - '0');
    want *= unit[0] == 'u' ? 1 : unit[0] == 'm' ? 1000 : 1000000;
    CHECK(want == c.time_resolution_us);
  } else {
    CHECK(c.time_resolution_us == 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536)
    return 0;
  environment env = {0};
  size_t at = 0;
  int count = 0;
  while (count < NVARS && at < size) {
    const uint8_t *nul = memchr(data + at, 0, size - at);
    size_t len = nul ? (size_t)(nul - (data + at)) : size - at;
    env.value[count] = malloc(len + 1);
    if (!env.value[count])
      goto done;
    memcpy(env.value[count], data + at, len);
    env.value[count++][len] = 0;
    at += len + 1;
  }
  check(&env);
done:
  for (int i = 0; i < NVARS; i++)
    free(env.value[i]);
  return 0;
}
