/* Mapping a ring file without locking it. A process that called mlockall(MCL_FUTURE) has every
 * later mapping locked and faulted in whole at mmap: for a ring file (16 to 64 GiB of address
 * space, almost all of it never touched) that would pin gigabytes of zeroed page cache, or fail.
 * So the file is mapped inaccessible first (nothing of an inaccessible mapping is faulted in),
 * unlocked, then given its access: three system calls, whatever the process asked for. */
#ifndef MEMTAP_COMMON_MAP_UNLOCKED_H
#define MEMTAP_COMMON_MAP_UNLOCKED_H

#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>

/* mmap(NULL, size, prot, flags, fd, 0), never locked; MAP_FAILED with errno on failure. */
static inline void *mt_map_unlocked(size_t size, int prot, int flags, int fd) {
  void *p = mmap(NULL, size, PROT_NONE, flags, fd, 0);
  if (p == MAP_FAILED)
    return p;
  munlock(p, size); /* fails harmlessly when nothing was locked */
  if (mprotect(p, size, prot) != 0) {
    int saved = errno;
    munmap(p, size);
    errno = saved;
    return MAP_FAILED;
  }
  return p;
}

#endif
