/* libFuzzer target for the environment variables memtap reads: the ring layer's MEMTAP_RING_DIR,
 * MEMTAP_RING_SIZE, MEMTAP_RING_THREADS, MEMTAP_RING_CLOCK, MEMTAP_RING_PRESERVE,
 * MEMTAP_RING_CONSUMER and MEMTAP_RING_PID_NS (ring.h),
 * through mt_ring_options_parse, which is mt_ring_options_init without getenv (setting the real
 * environment per input would leak every value in glibc), and the ring file path built from the
 * directory (mt_ring_file_path).
 *
 * Input: up to seven values separated by NUL bytes, in the order above, then (after an eighth NUL)
 * 4 bytes of pid and 2 bytes of path buffer size. A missing value is an unset variable; an empty
 * one is set but empty, which counts as unset.
 *
 * The result must be either MT_OK with every setting as ring.h documents it, checked against a
 * separate reading of each value below, or MT_E_INVALID with a message naming a variable, and
 * the defaults kept for the settings that could not be parsed. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtap/ring.h"
#include "ring/layout.h"
#include "ring/producer.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {
    "MEMTAP_RING_DIR",      "MEMTAP_RING_SIZE",     "MEMTAP_RING_THREADS", "MEMTAP_RING_CLOCK",
    "MEMTAP_RING_PRESERVE", "MEMTAP_RING_CONSUMER", "MEMTAP_RING_PID_NS"};
enum { DIR_VAR, SIZE_VAR, THREADS_VAR, CLOCK_VAR, PRESERVE_VAR, CONSUMER_VAR, PID_NS_VAR, NVARS };

typedef struct environment {
  char *value[NVARS]; /* NULL: unset */
} environment;

static const char *lookup(void *user, const char *name) {
  environment *env = user;
  for (int i = 0; i < NVARS; i++)
    if (!strcmp(name, names[i]))
      return env->value[i];
  fprintf(stderr, "fuzz_env: the library read %s, which this harness does not know\n", name);
  abort();
}

static bool set(const char *v) {
  return v && *v;
}

/* The documented syntax of a size: decimal digits, then optionally K, M or G (any case) for 2^10,
 * 2^20, 2^30, which may be followed by i and then by B ("64K", "1MiB", "2gb"). Read here with
 * 128-bit arithmetic, so that every value that fits in 64 bits is found. */
static bool reference_size(const char *s, uint64_t *out) {
  unsigned __int128 v = 0;
  const char *p = s;
  if (*p < '0' || *p > '9')
    return false;
  for (; *p >= '0' && *p <= '9'; p++) {
    v = v * 10 + (unsigned)(*p - '0');
    if (v > UINT64_MAX)
      return false;
  }
  unsigned shift = 0;
  const char *suffix = strchr("kKmMgG", *p);
  if (*p && suffix) {
    shift = 10 * (unsigned)(1 + (suffix - "kKmMgG") / 2);
    p++;
    if (*p == 'i' || *p == 'I')
      p++;
    if (*p == 'b' || *p == 'B')
      p++;
  }
  if (*p)
    return false;
  v <<= shift;
  if (v > UINT64_MAX)
    return false;
  *out = (uint64_t)v;
  return true;
}

/* The digits in [p, end), at least one and nothing else, as a number below 2^64. */
static bool reference_decimal(const char *p, const char *end, uint64_t *out) {
  unsigned __int128 v = 0;
  if (p == end)
    return false;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9')
      return false;
    v = v * 10 + (unsigned)(*p - '0');
    if (v > UINT64_MAX)
      return false;
  }
  *out = (uint64_t)v;
  return true;
}

static void check_options(environment *env) {
  mt_ring_options o;
  mt_error err;
  memset(&err, 0x55, sizeof err);
  int rc = mt_ring_options_parse(&o, lookup, env, &err);
  CHECK(rc == MT_OK || rc == MT_E_INVALID);
  bool invalid = false;

  /* Settings no variable touches. */
  CHECK(o.registry_size == 1u << 20);
  CHECK(o.mode == MT_RING_FLIGHT_RECORDER);
  CHECK(o.attach_timeout_ms == 10000);

  const char *v = env->value[DIR_VAR];
  CHECK(o.dir == (set(v) ? v : NULL));

  v = env->value[SIZE_VAR];
  uint64_t want;
  if (!set(v)) {
    CHECK(o.ring_size == 1u << 20);
  } else if (reference_size(v, &want) && want >= MT_RING_MIN_SIZE &&
             want <= MT_RING_MAX_WORDS * 8) {
    CHECK(o.ring_size == want);
  } else {
    CHECK(o.ring_size == 1u << 20);
    invalid = true;
  }

  v = env->value[THREADS_VAR];
  if (!set(v)) {
    CHECK(o.max_rings == MT_RING_DEFAULT_RINGS);
  } else if (reference_size(v, &want) && want >= 1 && want <= MT_RING_MAX_RINGS) {
    CHECK(o.max_rings == want);
  } else {
    CHECK(o.max_rings == MT_RING_DEFAULT_RINGS);
    invalid = true;
  }
  CHECK(o.max_rings >= 1 && o.max_rings <= MT_RING_MAX_RINGS);

  v = env->value[CLOCK_VAR];
  if (!set(v) || !strcmp(v, "auto"))
    CHECK(o.clock == MT_RING_CLOCK_AUTO);
  else if (!strcmp(v, "tsc"))
    CHECK(o.clock == MT_RING_CLOCK_TSC);
  else if (!strcmp(v, "monotonic"))
    CHECK(o.clock == MT_RING_CLOCK_MONOTONIC);
  else if (!strcmp(v, "realtime"))
    CHECK(o.clock == MT_RING_CLOCK_REALTIME);
  else {
    CHECK(o.clock == MT_RING_CLOCK_AUTO);
    invalid = true;
  }

  v = env->value[PRESERVE_VAR];
  CHECK(o.preserve == (set(v) && strcmp(v, "0") != 0));

  /* <pid>:<start time>: decimal digits only on both sides, each below 2^64, the pid 1 to
   * INT32_MAX (read here with 128-bit arithmetic). */
  v = env->value[CONSUMER_VAR];
  if (!set(v)) {
    CHECK(o.consumer_pid == 0 && o.consumer_start_time == 0);
  } else {
    const char *colon = strchr(v, ':');
    uint64_t pid = 0, start = 0;
    bool pair = colon && reference_decimal(v, colon, &pid) &&
                reference_decimal(colon + 1, colon + 1 + strlen(colon + 1), &start);
    if (pair && pid >= 1 && pid <= INT32_MAX) {
      CHECK(o.consumer_pid == (int)pid);
      CHECK(o.consumer_start_time == start);
    } else {
      CHECK(o.consumer_pid == 0 && o.consumer_start_time == 0);
      invalid = true;
    }
  }

  /* A pid namespace: decimal digits only, 1 to 2^64 - 1. */
  v = env->value[PID_NS_VAR];
  if (!set(v)) {
    CHECK(o.pid_namespace == 0);
  } else if (reference_decimal(v, v + strlen(v), &want) && want >= 1) {
    CHECK(o.pid_namespace == want);
  } else {
    CHECK(o.pid_namespace == 0);
    invalid = true;
  }

  CHECK((rc == MT_E_INVALID) == invalid);
  if (invalid) {
    CHECK(err.code == MT_E_INVALID && err.offset == -1);
    CHECK(memchr(err.message, 0, sizeof err.message));
    CHECK(!strncmp(err.message, "MEMTAP_RING_", 12));
  }
}

/* mt_ring_file_path with the directory and pid from the input, into a buffer of `size` bytes. */
static void check_path(const char *dir, int pid, size_t size) {
  char expected[8192];
  int n = snprintf(expected, sizeof expected, "%s/%d%s", dir, pid, MT_RING_FILE_SUFFIX);
  if (n < 0 || (size_t)n >= sizeof expected)
    return;
  char *buf = malloc(size); /* exactly `size`, so that writing past it is caught */
  if (!buf)
    return;
  int rc = mt_ring_file_path(buf, size, dir, pid);
  if ((size_t)n < size) {
    CHECK(rc == MT_OK);
    CHECK(!strcmp(buf, expected));
  } else {
    CHECK(rc == MT_E_INVALID);
  }
  free(buf);
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
  check_options(&env);
  if (set(env.value[DIR_VAR]) && at + 6 <= size) {
    int32_t pid;
    uint16_t room;
    memcpy(&pid, data + at, 4);
    memcpy(&room, data + at + 4, 2);
    if (pid >= 0)
      check_path(env.value[DIR_VAR], pid, (size_t)room % 4200 + 1);
  }
done:
  for (int i = 0; i < NVARS; i++)
    free(env.value[i]);
  return 0;
}
