/* Which image a process runs: a fingerprint of its auxiliary vector (/proc/PID/auxv), whose stack,
 * vDSO and entry addresses the kernel chooses anew at every exec. The shim records its own in its
 * process entry (mt_tracer_process.image) and memtap record compares it with the process's now,
 * so that an exec of the same program with the tracer left out (a daemon re-executing itself with
 * a clean environment) is noticed, where comparing the program's path is not enough. A fork child
 * shares its parent's vector, and its fingerprint. Async-signal-safe (open, read, close). */
#ifndef MEMTAP_COMMON_PROCESS_IMAGE_H
#define MEMTAP_COMMON_PROCESS_IMAGE_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "common/hashmap.h"

/* The fingerprint of the process whose vector `auxv_path` names ("/proc/self/auxv",
 * "/proc/PID/auxv"), read through `buf` (`size` bytes: 4 KiB holds any x86-64 vector); 0 when it
 * cannot be read (a process that ended, or someone else's). */
static inline uint64_t mt_process_image(const char *auxv_path, uint8_t *buf, size_t size) {
  int fd = open(auxv_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  size_t total = 0;
  for (ssize_t got; total < size; total += (size_t)got)
    if ((got = read(fd, buf + total, size - total)) <= 0)
      break;
  close(fd);
  return total ? mt_hash_bytes(0, buf, total) | 1 : 0;
}

#endif
