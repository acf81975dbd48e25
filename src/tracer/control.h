/* The shim's control entry points (control.c), exported by libmemtap-preload.so and called by
 * libmemtap's mt_tracer_start/stop/running (control_api.c), which find them with dlsym: the
 * contract between the two libraries. Names and types must not change without a new name. */
#ifndef MEMTAP_SRC_TRACER_CONTROL_H
#define MEMTAP_SRC_TRACER_CONTROL_H

#include "memtap/common.h"

/* mt_tracer_start with the options unpacked: `rate` 0 for the default, `full` 0 or 1. */
int mt_tracer_shim_start(const char *path, double rate, int full, mt_error *err);
int mt_tracer_shim_stop(mt_error *err);
/* 1 while allocations are traced, else 0. */
int mt_tracer_shim_running(void);

#define MT_TRACER_SHIM_START "mt_tracer_shim_start"
#define MT_TRACER_SHIM_STOP "mt_tracer_shim_stop"
#define MT_TRACER_SHIM_RUNNING "mt_tracer_shim_running"

#endif
