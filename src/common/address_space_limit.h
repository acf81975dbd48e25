/* The address-space limit (RLIMIT_AS, `ulimit -v`): every mapping counts against it, reserved or
 * not; and the data limit (RLIMIT_DATA), for private writable mappings. What memtap maps inside the
 * traced program (the shim's ring file and sets, and in process the consumer's second mapping of
 * the ring file) takes room the program would have had untraced, so it is sized from the room left,
 * not from the limit alone. */
#ifndef MEMTAP_COMMON_ADDRESS_SPACE_LIMIT_H
#define MEMTAP_COMMON_ADDRESS_SPACE_LIMIT_H

#include <fcntl.h>
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

/* Bytes the process has mapped now (/proc/self/statm), or 0 when that cannot be read. Malloc-free
 * and async-signal-safe. */
static inline uint64_t mt_address_space_size(void) {
  uint64_t pages = 0;
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[64];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
      pages = pages * 10 + (uint64_t)(buf[i] - '0');
  }
  return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Bytes the process may still map: the limit less its size now (the limit itself when that cannot
 * be read), or UINT64_MAX when there is no limit. Malloc-free and async-signal-safe. */
static inline uint64_t mt_address_space_room(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return UINT64_MAX;
  uint64_t used = mt_address_space_size();
  return used < (uint64_t)rl.rlim_cur ? (uint64_t)rl.rlim_cur - used : 0;
}

/* Bytes of private writable memory the process may still map under its data limit (RLIMIT_DATA,
 * `ulimit -d`, which counts such mappings whole, reserved or not: the shim's sampled set), or
 * UINT64_MAX when there is no limit. What it uses now is statm's data field (data and stack, a
 * little more than the kernel counts). Malloc-free and async-signal-safe. */
static inline uint64_t mt_data_room(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_DATA, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return UINT64_MAX;
  uint64_t fields[6] = {0};
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    unsigned field = 0;
    for (ssize_t i = 0; i < n && field < 6; i++) {
      if (buf[i] >= '0' && buf[i] <= '9')
        fields[field] = fields[field] * 10 + (uint64_t)(buf[i] - '0');
      else if (buf[i] == ' ')
        field++;
      else
        break;
    }
  }
  uint64_t used = fields[5] * (uint64_t)sysconf(_SC_PAGESIZE);
  return used < (uint64_t)rl.rlim_cur ? (uint64_t)rl.rlim_cur - used : 0;
}

#endif
