/* The primary consumer's liveness lock (liveness.h). */
#include "ring/liveness.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

void mt_ring_primary_lock(int fd) {
  int saved = errno;
  struct flock first = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
  if (fcntl(fd, F_OFD_SETLK, &first) != 0) {
    /* nothing to do: a producer on such a kernel cannot test it either */
  }
  errno = saved;
}

int mt_ring_primary_lock_held(const char *path) {
  int saved = errno;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    errno = saved;
    return -1;
  }
  /* A write lock would conflict with the primary's shared one: the kernel reports it if held. */
  struct flock probe = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
  int held = fcntl(fd, F_OFD_GETLK, &probe) != 0 ? -1 : probe.l_type != F_UNLCK;
  close(fd);
  errno = saved;
  return held;
}

int mt_ring_directory_lock_held(const char *dir) {
  int saved = errno;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    errno = saved;
    return -1;
  }
  int held = -1;
  if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
    flock(fd, LOCK_UN);
    held = 0;
  } else if (errno == EWOULDBLOCK) {
    held = 1;
  }
  close(fd);
  errno = saved;
  return held;
}
