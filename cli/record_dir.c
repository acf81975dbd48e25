/* memtap record's private ring directory (record_dir.h): its name says whose it is (the recorder's
 * pid and start time, /proc/PID/stat field 22, so that a recycled pid is not mistaken for the
 * recorder), and the recorder holds a flock on it for its whole life, released by the kernel
 * however the recorder ends. A recorder killed by SIGKILL cannot remove its directory, and the
 * ring file in it (sparse, up to gigabytes of apparent size, its written pages real memory on a
 * tmpfs) would stay for good: every new recorder therefore sweeps its temporary directory for
 * directories whose recorder is provably gone. The name alone would judge a recorder in another
 * pid namespace sharing /tmp by the wrong pid, and the lock alone cannot cover the moment between
 * mkdtemp and flock: a directory is removed only when both say so. */
#include "record_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memtap/ring.h"
#include "record_untraced.h"
#include "ring/process.h"
#include "ring/user_dir.h"

#define PREFIX "memtap-record-"

static bool same_inode(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int record_dir_make(const char *tmp, char *dir, size_t size) {
  uint64_t start = 0; /* /proc unreadable: 0, which a sweeper takes as "any start time" */
  mt_process_stat(0, &start, NULL);
  for (int attempt = 0; attempt < 3; attempt++) {
    int n = snprintf(dir, size, "%s/" PREFIX "%d-%" PRIu64 "-XXXXXX", tmp, (int)getpid(), start);
    if (n < 0 || (size_t)n >= size) {
      errno = ENAMETOOLONG;
      return -1;
    }
    if (!mkdtemp(dir))
      return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      rmdir(dir);
      errno = e;
      return -1;
    }
    /* A sweeper in another pid namespace (where our pid names nobody) may have taken the
     * directory before our lock: then it is gone, and we make another. A file system without
     * flock leaves it unlocked, and sweepers, who cannot lock it either, leave it alone. */
    struct stat held, named;
    if (flock(fd, LOCK_EX) != 0 || (fstat(fd, &held) == 0 && stat(dir, &named) == 0 &&
                                    same_inode(&held, &named) && held.st_nlink > 0))
      return fd;
    close(fd);
  }
  errno = EEXIST;
  return -1;
}

/* Removes the entries of the directory open at `dfd` (not following links), and of its user
 * subdirectories (ring/user_dir.h) with them. */
static void empty_entries(int dfd, bool user_dirs) {
  int fd = dup(dfd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0)
      close(fd);
    return;
  }
  rewinddir(d); /* the descriptor's offset is shared with `dfd`, read to its end last time */
  struct dirent *e;
  while ((e = readdir(d))) {
    uid_t uid;
    if (e->d_name[0] == '.')
      continue;
    if (user_dirs && mt_ring_user_dir_parse(e->d_name, &uid)) {
      int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) {
        empty_entries(sub, false);
        close(sub);
      }
      unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
      continue;
    }
    unlinkat(dirfd(d), e->d_name, 0);
  }
  closedir(d);
}

bool record_dir_ring_name(const char *name, int *pid, uint64_t *ns) {
  const char *slash = strchr(name, '/'); /* uid-N/ for a process that left root */
  if (slash)
    name = slash + 1;
  if (name[0] < '1' || name[0] > '9')
    return false;
  char *end;
  errno = 0;
  long p = strtol(name, &end, 10);
  unsigned long long n = 0;
  if (!strncmp(end, "-pidns", 6) && end[6] >= '1' && end[6] <= '9')
    n = strtoull(end + 6, &end, 10);
  if (end[0] == '.' && end[1] >= '1' && end[1] <= '9')
    strtoull(end + 1, &end, 10);
  if (errno || p <= 0 || p > INT32_MAX || strcmp(end, ".memtap-ring"))
    return false;
  *pid = (int)p;
  *ns = n;
  return true;
}

void record_dir_remove(const char *dir, int lock_fd) {
  /* Untraced descendants still running may add a note meanwhile (a background job's exec, while
   * the ring file's unlink takes milliseconds): emptied again until the directory goes. Once it
   * is gone their notes fail to be made, harmlessly. The entries are reached through the
   * directory memtap holds open (and locked), not its path. */
  int fd = lock_fd >= 0 ? lock_fd : open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  for (int pass = 0; pass < 5 && fd >= 0; pass++) {
    empty_entries(fd, true);
    if (rmdir(dir) == 0 || errno != ENOTEMPTY)
      break;
  }
  if (fd >= 0 && fd != lock_fd)
    close(fd);
  if (lock_fd >= 0)
    close(lock_fd);
}

/* Parses decimal digits at *p (no sign, no leading zero, at most `max`), moving *p past them. */
static bool parse_number(const char **p, uint64_t max, uint64_t *out) {
  const char *s = *p;
  uint64_t v = 0;
  if (*s < '0' || *s > '9' || (*s == '0' && s[1] >= '0' && s[1] <= '9'))
    return false;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (v > (max - (uint64_t)(*s - '0')) / 10)
      return false;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  *p = s;
  *out = v;
  return true;
}

/* Whether `name` is exactly what record_dir_make makes, with the recorder's pid and start time. */
static bool parse_name(const char *name, int *pid, uint64_t *start) {
  if (strncmp(name, PREFIX, sizeof PREFIX - 1))
    return false;
  const char *p = name + sizeof PREFIX - 1;
  uint64_t v;
  if (!parse_number(&p, INT32_MAX, &v) || v == 0 || *p++ != '-')
    return false;
  *pid = (int)v;
  if (!parse_number(&p, UINT64_MAX, start) || *p++ != '-')
    return false;
  /* mkdtemp's six characters, drawn from letters and digits. */
  for (int i = 0; i < 6; i++, p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
      return false;
  return *p == 0;
}

/* Whether the entry `name` of a swept directory is one of ours to delete: a regular file of our
 * user, either a ring file whose producer is gone or an untraced process's note
 * (record_untraced.h), which nothing reads once its recorder is gone. */
static bool abandoned_entry(int dfd, const char *name, uid_t uid) {
  struct stat st;
  return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
         st.st_uid == uid && (record_untraced_is_note(name) || mt_ring_file_abandoned(dfd, name));
}

static bool empty_directory(int dfd, uid_t uid, bool user_dirs);

/* Whether the entry `name` of a swept directory is a user subdirectory (ring/user_dir.h) of the
 * user its name says, holding nothing but that user's abandoned files; with `remove`, those are
 * deleted and the subdirectory with them. */
static bool abandoned_user_dir(int dfd, const char *name, bool remove) {
  uid_t uid;
  struct stat st;
  if (!mt_ring_user_dir_parse(name, &uid) || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      !S_ISDIR(st.st_mode) || st.st_uid != uid)
    return false;
  int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0)
    return false;
  bool ours = remove ? empty_directory(sub, uid, false) : true;
  close(sub);
  return ours && (!remove || unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT);
}

/* Deletes the abandoned ring files of the directory open (and locked) at `dfd`, entries of user
 * `uid` (and, with `user_dirs`, user subdirectories with only their user's abandoned files), if
 * it holds nothing else; false (nothing deleted) if it holds anything else. */
static bool empty_directory(int dfd, uid_t uid, bool user_dirs) {
  int fd = dup(dfd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0)
      close(fd);
    return false;
  }
  bool ours = true;
  struct dirent *e;
  /* First every entry is checked, so that a directory holding anything else is not touched at
   * all; then each is checked again as it is deleted. A user subdirectory is looked into only as
   * it is deleted: what it holds then decides. */
  for (int pass = 0; ours && pass < 2; pass++) {
    rewinddir(d);
    while (ours && (e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
        continue;
      if (user_dirs && abandoned_user_dir(dfd, e->d_name, false)) {
        if (pass == 1)
          ours = abandoned_user_dir(dfd, e->d_name, true);
        continue;
      }
      ours = abandoned_entry(dfd, e->d_name, uid);
      if (ours && pass == 1 && unlinkat(dfd, e->d_name, 0) != 0 && errno != ENOENT)
        ours = false;
    }
  }
  closedir(d);
  return ours;
}

int record_dir_sweep(const char *tmp) {
  int tfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (tfd < 0)
    return 0;
  int fd = dup(tfd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0)
      close(fd);
    close(tfd);
    return 0;
  }
  uid_t uid = geteuid();
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    int pid;
    uint64_t start;
    if (!parse_name(e->d_name, &pid, &start) || mt_process_alive(pid, start))
      continue;
    int dfd = openat(tfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
      continue;
    struct stat st, named;
    /* The lock: held by a live recorder, whatever its pid namespace, or by another sweeper at
     * work on this directory. */
    if (fstat(dfd, &st) == 0 && st.st_uid == uid && flock(dfd, LOCK_EX | LOCK_NB) == 0 &&
        empty_directory(dfd, uid, true) &&
        fstatat(tfd, e->d_name, &named, AT_SYMLINK_NOFOLLOW) == 0 && same_inode(&st, &named) &&
        unlinkat(tfd, e->d_name, AT_REMOVEDIR) == 0)
      removed++;
    close(dfd);
  }
  closedir(d);
  close(tfd);
  return removed;
}
