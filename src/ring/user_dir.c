/* The per-user subdirectories of a ring directory (user_dir.h). */
#include "ring/user_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ring/process.h"

/* "uid-<uid>" into out (room for 32 bytes); its length. */
static size_t user_dir_name(char *out, uid_t uid) {
  size_t n = sizeof MT_RING_USER_DIR_PREFIX - 1;
  memcpy(out, MT_RING_USER_DIR_PREFIX, n);
  n += (size_t)mt_format_decimal(out + n, (uint64_t)uid);
  out[n] = 0;
  return n;
}

int mt_ring_user_dir_prepare(const char *dir, uid_t uid) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0)
    return -1;
  struct stat st;
  char name[32];
  user_dir_name(name, uid);
  int rc = -1;
  if (fstat(dfd, &st) == 0 && st.st_uid == 0) {
    struct stat sub;
    if (mkdirat(dfd, name, 0700) != 0 && errno != EEXIST) {
      /* rc stays -1 */
    } else if (fstatat(dfd, name, &sub, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sub.st_mode) &&
               (sub.st_uid == uid || (sub.st_uid == 0 && fchownat(dfd, name, uid, (gid_t)-1,
                                                                  AT_SYMLINK_NOFOLLOW) == 0))) {
      rc = (st.st_mode & 0011) == 0011 ? 0 : fchmod(dfd, (st.st_mode & 07777) | 0011);
    }
  }
  int saved = errno;
  close(dfd);
  errno = saved;
  return rc;
}

bool mt_ring_user_dir_choose(const char *dir, char *out, size_t size) {
  size_t n = strlen(dir);
  if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0) {
    char name[32];
    size_t m = user_dir_name(name, geteuid());
    struct stat st;
    if (n + 1 + m < size) {
      memcpy(out, dir, n);
      out[n] = '/';
      memcpy(out + n + 1, name, m + 1);
      if (lstat(out, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
        return true;
    }
  }
  if (n >= size)
    return false;
  memcpy(out, dir, n + 1);
  return true;
}

int mt_ring_user_dir_open(const char *dir) {
  int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || faccessat(dfd, ".", W_OK | X_OK, AT_EACCESS) == 0)
    return dfd;
  char name[32];
  user_dir_name(name, geteuid());
  int sub = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (sub >= 0 && (fstat(sub, &st) != 0 || st.st_uid != geteuid())) {
    close(sub);
    sub = -1;
  }
  if (sub < 0)
    return dfd;
  close(dfd);
  return sub;
}

bool mt_ring_user_dir_parse(const char *name, uid_t *uid) {
  size_t n = sizeof MT_RING_USER_DIR_PREFIX - 1;
  if (strncmp(name, MT_RING_USER_DIR_PREFIX, n) != 0)
    return false;
  const char *p = name + n;
  uint64_t v = 0;
  if (*p < '0' || *p > '9' || (*p == '0' && p[1]))
    return false;
  for (; *p >= '0' && *p <= '9'; p++) {
    v = v * 10 + (uint64_t)(*p - '0');
    if (v > UINT32_MAX)
      return false;
  }
  if (*p)
    return false;
  *uid = (uid_t)v;
  return true;
}
