/* mt_tracer_start, mt_tracer_stop and mt_tracer_running (memtap/tracer.h), in libmemtap: they
 * find the preload shim's control entry points in the process (control.c) and call them. The
 * shim is a library of its own, loaded before libc by LD_PRELOAD or by linking; libmemtap never
 * loads it, since a shim loaded late would come after libc in symbol lookup and see no
 * allocation. */
#include <dlfcn.h>
#include <string.h>

#include "common/error.h"
#include "memtap/tracer.h"
#include "tracer/control.h"

typedef __typeof__(mt_tracer_shim_start) *start_fn;
typedef __typeof__(mt_tracer_shim_stop) *stop_fn;
typedef __typeof__(mt_tracer_shim_running) *running_fn;

static void *shim_entry(const char *name) {
  return dlsym(RTLD_DEFAULT, name);
}

static int not_loaded(mt_error *err) {
  return mt_fail(err, MT_E_STATE, -1,
                 "the tracer is not in this process: run the program with "
                 "LD_PRELOAD=libmemtap-preload.so, or link it with -lmemtap-preload");
}

int mt_tracer_start(const char *path, const mt_tracer_options *opts, mt_error *err) {
  mt_error scratch;
  if (!err)
    err = &scratch;
  memset(err, 0, sizeof *err);
  start_fn start = (start_fn)shim_entry(MT_TRACER_SHIM_START);
  if (!start)
    return not_loaded(err);
  mt_tracer_options defaults = {0};
  if (!opts)
    opts = &defaults;
  return start(path, opts->rate, opts->full, err);
}

int mt_tracer_stop(mt_error *err) {
  mt_error scratch;
  if (!err)
    err = &scratch;
  memset(err, 0, sizeof *err);
  stop_fn stop = (stop_fn)shim_entry(MT_TRACER_SHIM_STOP);
  if (!stop)
    return not_loaded(err);
  return stop(err);
}

bool mt_tracer_running(void) {
  running_fn running = (running_fn)shim_entry(MT_TRACER_SHIM_RUNNING);
  return running && running();
}
