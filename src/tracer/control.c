/* The shim's control entry points (docs/tracer.md, "Starting and stopping from the program"): the
 * three functions libmemtap's mt_tracer_start, mt_tracer_stop and mt_tracer_running find in the
 * process and call. A start opens a session as MEMTAP=path does at start-up, from the calling
 * thread (a safe moment: not inside an allocator call, so loading the unwinder and libmemtap is
 * allowed); a stop ends it as the process's exit does. One call at a time (a mutex: none of this
 * is on the allocation path). These are the only exports besides the interposed functions.
 *
 * Sessions and threads: a start bumps the session number. A thread drew its countdown in some
 * session (mt_shim_thread.countdown_session); when it next reaches the slow path, within
 * MT_SHIM_COUNTDOWN_IDLE bytes of allocation, it draws a fresh gap at the new session's rate, and
 * its first record writes its THREAD_START (with the stack its trampoline noted). */
#include <pthread.h>
#include <string.h>

#include "common/error.h"
#include "tracer/control.h"
#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

static pthread_mutex_t control_lock = PTHREAD_MUTEX_INITIALIZER;

/* The session's configuration: the environment's sampling variables first (MEMTAP_FULL,
 * MEMTAP_SAMPLE_INTERVAL, MEMTAP_RATE, MEMTRACE_RATE), then the caller's. */
static int configure(double rate, bool full, mt_error *err) {
  mt_tracer_config c;
  int rc = mt_tracer_config_parse(&c, mt_shim_getenv, NULL, err);
  if (rc != MT_OK)
    return rc;
  if (c.rate_source == MT_TRACER_RATE_DEFAULT && full) {
    c.full = true;
    c.rate = 1.0;
    c.interval = 8;
  } else if (c.rate_source == MT_TRACER_RATE_DEFAULT && rate != 0) {
    if (!(rate > 0 && rate <= 1))
      return mt_fail(err, MT_E_INVALID, -1,
                     "the sampling rate %g is not in (0, 1] (samples per 8-byte word)", rate);
    if (8.0 / rate > (double)MT_TRACER_MAX_INTERVAL)
      return mt_fail(err, MT_E_INVALID, -1,
                     "the sampling rate %g is too low (at least one sample per 1 PiB)", rate);
    c.rate = rate;
    c.interval = (uint64_t)(8.0 / rate + 0.5);
    mt_tracer_config_rate_one_is_full(&c);
  }
  c.record = false;
  c.output = NULL;
  c.trace_pid = 0;
  mt_shim.config = c;
  return MT_OK;
}

static int start_locked(const char *path, double rate, bool full, mt_error *err) {
  if (atomic_load(&mt_shim.never))
    return mt_fail(err, MT_E_STATE, -1,
                   "this process is a child of a program traced by memtap record, which does not "
                   "follow it (see --follow-fork)");
  if (atomic_load(&mt_shim.mode) != MT_SHIM_OFF || mt_inprocess_running())
    return mt_fail(err, MT_E_STATE, -1,
                   mt_shim.config.record ? "this process is traced by memtap record already"
                                         : "this process is tracing itself already");
  if (!path || !*path)
    return mt_fail(err, MT_E_INVALID, -1, "no trace file named");
  int rc = configure(rate, full, err);
  if (rc != MT_OK)
    return rc;
  if ((rc = mt_inprocess_prepare(path, err)) != MT_OK)
    return rc;
  mt_shim_find_own_text();
  mt_tracer_unwind_load();
  int mode = mt_shim_open_session(true, err);
  if (mode == MT_SHIM_OFF) {
    mt_error ignored;
    mt_inprocess_finish(&ignored); /* closes the trace file */
    return err->code ? err->code : MT_E_STATE;
  }
  if ((rc = mt_inprocess_launch(err)) != MT_OK) {
    mt_ring_close(mt_shim.ring);
    return rc;
  }
  mt_shim_set_mode(mode);
  mt_shim_self.countdown = 0; /* the caller's next allocation draws its gap: it joins at once */
  return MT_OK;
}

MT_EXPORT int mt_tracer_shim_start(const char *path, double rate, int full, mt_error *err) {
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  /* The next allocator and the start-up configuration first: MEMTAP=path may be tracing. */
  mt_shim_resolve();
  t->depth--;
  mt_shim_init();
  t->depth++;
  memset(err, 0, sizeof *err);
  pthread_mutex_lock(&control_lock);
  int rc = start_locked(path, rate, full != 0, err);
  pthread_mutex_unlock(&control_lock);
  t->depth--;
  return rc;
}

MT_EXPORT int mt_tracer_shim_stop(mt_error *err) {
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  memset(err, 0, sizeof *err);
  pthread_mutex_lock(&control_lock);
  int rc;
  if (mt_shim.config.record && atomic_load(&mt_shim.mode) != MT_SHIM_OFF)
    rc = mt_fail(err, MT_E_STATE, -1,
                 "this process is traced by memtap record, which stops when it exits");
  else
    rc = mt_inprocess_finish(err);
  pthread_mutex_unlock(&control_lock);
  t->depth--;
  return rc;
}

MT_EXPORT int mt_tracer_shim_running(void) {
  return atomic_load(&mt_shim.mode) != MT_SHIM_OFF;
}
