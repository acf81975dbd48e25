/* Where the symboliser finds a module's separate debug information (debuginfo.c). */
#ifndef MEMTAP_RECORD_DEBUGINFO_H
#define MEMTAP_RECORD_DEBUGINFO_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>

/* libdwfl callbacks for files opened by path: the debug information is looked for on this machine
 * only (the build-id directory, then .gnu_debuglink), or also, with `debuginfod`, on the servers
 * named by $DEBUGINFOD_URLS (libdwfl's standard search). */
const Dwfl_Callbacks *rec_debuginfo_callbacks(bool debuginfod);

#endif
