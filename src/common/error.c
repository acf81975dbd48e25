/* Status names and the error-filling helpers every layer shares (common.h, src/common/error.h). */
#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *mt_status_name(int code) {
  switch (code) {
  case MT_OK: return "success";
  case MT_E_IO: return "I/O error";
  case MT_E_MALFORMED: return "malformed input";
  case MT_E_NOMEM: return "out of memory";
  case MT_E_INVALID: return "invalid argument";
  case MT_E_FORKED: return "writer used after fork";
  case MT_E_UNSUPPORTED: return "unsupported";
  case MT_E_STATE: return "invalid state";
  default: return "unknown error";
  }
}

const char *mt_version(void) {
  return MEMTAP_VERSION_STRING;
}

int mt_fail(mt_error *err, int code, int64_t offset, const char *fmt, ...) {
  if (err) {
    err->code = code;
    err->sys_errno = code == MT_E_IO ? errno : 0;
    err->offset = offset;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return code;
}

int mt_fail_io(mt_error *err, const char *what) {
  int saved = errno;
  if (err) {
    err->code = MT_E_IO;
    err->sys_errno = saved;
    err->offset = -1;
    snprintf(err->message, sizeof err->message, "%s: %s", what, strerror(saved));
  }
  errno = saved;
  return MT_E_IO;
}
