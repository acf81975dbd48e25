/* Internal helpers to fill an mt_error (common.h). Shared by every layer of the library. */
#ifndef MEMTAP_SRC_COMMON_ERROR_H
#define MEMTAP_SRC_COMMON_ERROR_H

#include "memtap/common.h"

#define MEMTAP_VERSION_STRING "0.1.0"

/* Fills `err` (if non-NULL) with `code`, `offset` and a printf-formatted message; returns `code`.
 */
int mt_fail(mt_error *err, int code, int64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Fills `err` with MT_E_IO, the current errno and "<what>: <strerror>"; returns MT_E_IO. */
int mt_fail_io(mt_error *err, const char *what);

#endif
