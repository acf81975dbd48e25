/* memtap/common.h: status codes and the error record every memtap layer reports through.
 *
 * Library functions return an int: MT_OK (0) on success, a negative MT_E_* code on failure. Most
 * also take an optional `mt_error *`; when it is non-NULL and the call fails, it is filled with the
 * code, a human-readable message and, for parsers, the absolute byte offset of the offending field.
 * The library never prints and never exits. */
#ifndef MEMTAP_COMMON_H
#define MEMTAP_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
enum {
  MT_OK = 0,
  MT_E_IO = -1,          /* a system call failed (errno in mt_error.sys_errno) */
  MT_E_MALFORMED = -2,   /* input breaks a rule of its format; offset says where */
  MT_E_NOMEM = -3,       /* out of memory, or an input-derived size exceeds a documented bound */
  MT_E_INVALID = -4,     /* an argument is out of its documented range */
  MT_E_FORKED = -5,      /* the writer was created by another process (we are a forked child) */
  MT_E_UNSUPPORTED = -6, /* valid input, but a feature this build or version does not handle */
  MT_E_STATE = -7,       /* the object is in a state that forbids this call (closed, failed) */
};

/* Where and why a call failed. `offset` is -1 when no input position applies. */
typedef struct mt_error {
  int code;          /* one of MT_E_* */
  int sys_errno;     /* errno of the failing system call, for MT_E_IO; else 0 */
  int64_t offset;    /* absolute byte offset in the input, or -1 */
  char message[256]; /* what went wrong, without the file name: "malformed trace at byte 48213: ..."
                      */
} mt_error;

/* A short constant name for a status code ("malformed input", "I/O error", ...). */
const char *mt_status_name(int code);

/* The library version as "MAJOR.MINOR.PATCH". */
const char *mt_version(void);

#ifdef __cplusplus
}
#endif
#endif
