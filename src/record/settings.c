/* The sampling settings of the MEMTAP_* variables (contract.md, "Environment"), read through the
 * shim's own parser (src/tracer/config.c, compiled into libmemtap too), so that `memtap record`
 * refuses exactly what the shim would refuse, before starting a program that would otherwise run
 * untraced. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "memtap/record.h"
#include "tracer/config.h"

int mt_record_parse_interval(const char *text, uint64_t *out) {
  uint64_t n;
  if (!text || !mt_tracer_parse_size(text, &n) || n < 8 || n > MT_TRACER_MAX_INTERVAL)
    return MT_E_INVALID;
  *out = n;
  return MT_OK;
}

int mt_record_parse_time_resolution(const char *text, uint64_t *out_us) {
  uint64_t us;
  if (!text || !mt_tracer_parse_duration_us(text, &us) || us < 1 ||
      us > MT_TRACER_MAX_TIME_RESOLUTION_US)
    return MT_E_INVALID;
  *out_us = us;
  return MT_OK;
}

int mt_record_parse_rate(const char *text, double *out) {
  double rate;
  /* The shim's bound (config.c): a mean interval of at most MT_TRACER_MAX_INTERVAL bytes. */
  if (!text || !mt_tracer_parse_rate(text, &rate) || 8.0 / rate > (double)MT_TRACER_MAX_INTERVAL)
    return MT_E_INVALID;
  *out = rate;
  return MT_OK;
}

static const char *lookup(void *user, const char *name) {
  const char *(*get)(const char *) = *(const char *(**)(const char *))user;
  return get(name);
}

static const char *plain_getenv(const char *name) {
  return getenv(name);
}

int mt_record_settings_from_env(mt_record_settings *out, const char *(*get)(const char *name),
                                mt_error *err) {
  if (!get)
    get = plain_getenv;
  memset(out, 0, sizeof *out);
  mt_tracer_config cfg;
  int rc = mt_tracer_config_parse(&cfg, lookup, &get, err);
  if (rc)
    return rc;
  out->full = cfg.full;
  out->rate = cfg.rate;
  out->interval = cfg.interval;
  out->has_seed = cfg.seeded;
  out->seed = cfg.seed;
  out->time_resolution_us = cfg.time_resolution_us;
  return MT_OK;
}
