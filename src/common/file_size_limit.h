/* The file size limit (RLIMIT_FSIZE, `ulimit -f`): writing a file past it raises SIGXFSZ, which
 * kills a process by default. memtap's writers stop short of it instead, since they may run
 * inside the traced program (the shim's ring file, a trace written in process), which must never
 * be killed by them, and memtap itself then says what stopped rather than dying. */
#ifndef MEMTAP_COMMON_FILE_SIZE_LIMIT_H
#define MEMTAP_COMMON_FILE_SIZE_LIMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

/* The limit in bytes, or UINT64_MAX when there is none. Async-signal-safe. */
static inline uint64_t mt_file_size_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return UINT64_MAX;
  return (uint64_t)rl.rlim_cur;
}

/* Whether writing `len` more bytes at `fd`'s offset stays within the limit (true for what has no
 * offset: a pipe, a terminal). */
static inline bool mt_file_size_limit_allows(int fd, uint64_t len) {
  uint64_t limit = mt_file_size_limit();
  if (limit == UINT64_MAX)
    return true;
  off_t at = lseek(fd, 0, SEEK_CUR);
  return at < 0 || (uint64_t)at + len <= limit;
}

#endif
