/* The tracer's environment variables (config.h): parsed from a getenv-like callback, without
 * malloc, strtod or the locale, so that the shim can run it before anything else is set up and
 * `memtap record` can validate exactly what the shim will read. */
#include <string.h>

#include "common/error.h"
#include "tracer/config.h"

static const char *value(mt_tracer_env_fn lookup, void *user, const char *name) {
  const char *v = lookup(user, name);
  return v && *v ? v : NULL;
}

/* The decimal digits at the start of `text` (at least one) into *value; the first character
 * after them, or NULL when there are none or they overflow 64 bits. */
static const char *leading_number(const char *text, uint64_t *value) {
  uint64_t v = 0;
  const char *p = text;
  if (*p < '0' || *p > '9')
    return NULL;
  for (; *p >= '0' && *p <= '9'; p++) {
    uint64_t digit = (uint64_t)(*p - '0');
    if (v > (UINT64_MAX - digit) / 10)
      return NULL;
    v = v * 10 + digit;
  }
  *value = v;
  return p;
}

bool mt_tracer_parse_size(const char *text, uint64_t *out) {
  uint64_t v;
  const char *p = leading_number(text, &v);
  if (!p)
    return false;
  unsigned shift = 0;
  switch (*p) {
  case 'k':
  case 'K': shift = 10; break;
  case 'm':
  case 'M': shift = 20; break;
  case 'g':
  case 'G': shift = 30; break;
  case 't':
  case 'T': shift = 40; break;
  case 'p':
  case 'P': shift = 50; break;
  default: break;
  }
  if (shift) {
    p++;
    if (*p == 'i' || *p == 'I')
      p++;
    if (*p == 'b' || *p == 'B')
      p++;
  }
  if (*p || v > (UINT64_MAX >> shift))
    return false;
  *out = v << shift;
  return true;
}

bool mt_tracer_parse_duration_us(const char *text, uint64_t *out) {
  uint64_t v;
  const char *p = leading_number(text, &v);
  if (!p)
    return false;
  uint64_t scale;
  if (!strcmp(p, "us"))
    scale = 1;
  else if (!strcmp(p, "ms"))
    scale = 1000;
  else if (!strcmp(p, "s"))
    scale = 1000000;
  else
    return false;
  if (v > (UINT64_MAX >> 1) / scale)
    return false;
  *out = v * scale;
  return true;
}

bool mt_tracer_parse_rate(const char *text, double *out) {
  const char *p = text;
  uint64_t mantissa = 0;
  int scale = 0; /* decimal exponent of the mantissa's last digit */
  int digits = 0;
  bool dot = false;
  for (;; p++) {
    if (*p >= '0' && *p <= '9') {
      digits++;
      if (mantissa < 100000000000000000ull) {
        mantissa = mantissa * 10 + (uint64_t)(*p - '0');
        if (dot)
          scale--;
      } else if (!dot) {
        scale++; /* digits past 17 significant ones only scale the value */
      }
    } else if (*p == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!digits)
    return false;
  if (*p == 'e' || *p == 'E') {
    p++;
    bool negative = *p == '-';
    if (*p == '-' || *p == '+')
      p++;
    if (*p < '0' || *p > '9')
      return false;
    int e = 0;
    for (; *p >= '0' && *p <= '9'; p++)
      if (e < 10000)
        e = e * 10 + (*p - '0');
    scale += negative ? -e : e;
  }
  if (*p)
    return false;
  double v = (double)mantissa;
  for (; scale > 0 && v <= 1.0; scale--)
    v *= 10.0;
  for (; scale < 0 && v > 0.0; scale++)
    v /= 10.0;
  if (scale > 0 || !(v > 0.0) || v > 1.0)
    return false;
  *out = v;
  return true;
}

/* "1" or "0" (anything else is malformed); unset is false. */
static int parse_flag(mt_tracer_env_fn lookup, void *user, const char *name, bool *out,
                      mt_error *err) {
  const char *v = value(lookup, user, name);
  *out = false;
  if (!v)
    return MT_OK;
  if (!strcmp(v, "1") || !strcmp(v, "0")) {
    *out = v[0] == '1';
    return MT_OK;
  }
  return mt_fail(err, MT_E_INVALID, -1, "%s=%s is not 0 or 1", name, v);
}

static int parse_rate(mt_tracer_config *cfg, mt_tracer_env_fn lookup, void *user, mt_error *err) {
  const char *v;
  if (cfg->full) {
    cfg->rate_source = MT_TRACER_RATE_FULL;
    cfg->interval = 8;
    cfg->rate = 1.0;
    return MT_OK;
  }
  if ((v = value(lookup, user, "MEMTAP_SAMPLE_INTERVAL"))) {
    uint64_t n;
    if (!mt_tracer_parse_size(v, &n) || n < 8 || n > MT_TRACER_MAX_INTERVAL)
      return mt_fail(err, MT_E_INVALID, -1,
                     "MEMTAP_SAMPLE_INTERVAL=%s is not a byte count from 8 to 1P (like 512K)", v);
    cfg->rate_source = MT_TRACER_RATE_SAMPLE_INTERVAL;
    cfg->interval = n;
    cfg->rate = 8.0 / (double)n;
    return MT_OK;
  }
  static const char *const names[] = {"MEMTAP_RATE", "MEMTRACE_RATE"};
  for (int i = 0; i < 2; i++) {
    if (!(v = value(lookup, user, names[i])))
      continue;
    double rate;
    if (!mt_tracer_parse_rate(v, &rate) || 8.0 / rate > (double)MT_TRACER_MAX_INTERVAL)
      return mt_fail(err, MT_E_INVALID, -1,
                     "%s=%s is not a sampling rate (samples per word, 0 < rate <= 1, at least "
                     "8 per 2^50 bytes)",
                     names[i], v);
    cfg->rate_source = i == 0 ? MT_TRACER_RATE_MEMTAP_RATE : MT_TRACER_RATE_MEMTRACE_RATE;
    cfg->rate = rate;
    double interval = 8.0 / rate + 0.5;
    cfg->interval = interval < 8.0 ? 8 : (uint64_t)interval;
    return MT_OK;
  }
  return MT_OK;
}

int mt_tracer_config_parse(mt_tracer_config *cfg, mt_tracer_env_fn lookup, void *user,
                           mt_error *err) {
  memset(cfg, 0, sizeof *cfg);
  cfg->interval = MT_TRACER_DEFAULT_INTERVAL;
  cfg->rate = 8.0 / MT_TRACER_DEFAULT_INTERVAL;
  cfg->rate_source = MT_TRACER_RATE_DEFAULT;
  int rc;
  if ((rc = parse_flag(lookup, user, "MEMTAP_RECORD", &cfg->record, err)) != MT_OK ||
      (rc = parse_flag(lookup, user, "MEMTAP_FOLLOW_FORK", &cfg->follow_fork, err)) != MT_OK)
    goto fail;
  const char *v;
  if ((v = value(lookup, user, "MEMTAP_TRACE_PID"))) {
    uint64_t pid;
    bool digits_only = strspn(v, "0123456789") == strlen(v);
    if (!digits_only || !mt_tracer_parse_size(v, &pid) || pid < 1 || pid > 0x7fffffff) {
      rc = mt_fail(err, MT_E_INVALID, -1, "MEMTAP_TRACE_PID=%s is not a process id", v);
      goto fail;
    }
    cfg->trace_pid = (int64_t)pid;
  }
  cfg->scope_read = true;
  if ((rc = parse_flag(lookup, user, "MEMTAP_FULL", &cfg->full, err)) != MT_OK ||
      (rc = parse_rate(cfg, lookup, user, err)) != MT_OK)
    goto fail;
  mt_tracer_config_rate_one_is_full(cfg);
  if ((v = value(lookup, user, "MEMTAP_SEED"))) {
    bool digits_only = strspn(v, "0123456789") == strlen(v);
    if (!digits_only || !mt_tracer_parse_size(v, &cfg->seed)) {
      rc = mt_fail(err, MT_E_INVALID, -1, "MEMTAP_SEED=%s is not a decimal number below 2^64", v);
      goto fail;
    }
    cfg->seeded = true;
  }
  if ((v = value(lookup, user, "MEMTAP_TIME_RESOLUTION"))) {
    uint64_t us;
    if (!mt_tracer_parse_duration_us(v, &us) || us < 1 || us > MT_TRACER_MAX_TIME_RESOLUTION_US) {
      rc = mt_fail(err, MT_E_INVALID, -1,
                   "MEMTAP_TIME_RESOLUTION=%s is not a duration from 1us to 1s (like 1ms)", v);
      goto fail;
    }
    cfg->time_resolution_us = us;
  }
  if (!(cfg->output = value(lookup, user, "MEMTAP")))
    cfg->output = value(lookup, user, "MEMTRACE");
  return MT_OK;
fail:
  /* Whatever was parsed before the error stays; the rest keeps its default. The caller does not
   * trace at all, so the mix never takes effect. */
  return rc;
}
