/* The primary consumer's liveness lock (liveness.h). */
#include "ring/liveness.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

void mt_ring_primary_lock(int fd) {
  int saved = errno;
  struct flock first = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
  if (fcntl(fd, F_OFD_SETLK, &first) != 0) {
    /* nothing to do: a producer on such a kernel cannot test it either */
  }
  errno = saved;
}

bool mt_ring_primary_locked(const char *path) {
  int saved = errno;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    errno = saved;
    return false;
  }
  /* A write lock would conflict with the primary's shared one: the kernel reports it if held. */
  struct flock probe = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
  bool held = fcntl(fd, F_OFD_GETLK, &probe) != 0 || probe.l_type != F_UNLCK;
  close(fd);
  errno = saved;
  return held;
}
