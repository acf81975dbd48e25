/* A per-user cache of the debug files inflate.c inflates (docs/record.md, "Symbolisation"):
 * inflating libc6-dbg's libc (4.4 MB of compressed sections, 10 MB inflated), needed for the
 * frames at the bottom of every stack, was 87% of a sampled `memtap record`'s own instructions,
 * at every run. A copy is kept as `<dir>/<key>.debug`, the key made of the source file's identity
 * (device, inode, size, modification time) and the copy's size, so that an upgraded package
 * makes a new entry. A cached copy is used only if it is a regular file of this user, of exactly
 * the planned size, whose section header table is byte for byte the one planned for it; anything
 * else is ignored and replaced. Entries are written to a temporary name and renamed, so a reader
 * never sees half of one; the least recently used beyond CACHE_ENTRIES are removed. Off unless
 * the recorder names a directory (memtap record does; a program tracing itself writes nothing
 * into its user's home). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_size_limit.h"
#include "record/inflate.h"

#define CACHE_ENTRIES 16

static char cache_dir[PATH_MAX]; /* empty: no cache */

void rec_debug_cache_use(const char *dir) {
  if (!dir || !*dir || strlen(dir) >= sizeof cache_dir - 64)
    cache_dir[0] = 0;
  else
    memcpy(cache_dir, dir, strlen(dir) + 1);
}

/* The entry's path; false if it does not fit. */
static bool entry_path(char *out, size_t size, const struct stat *source, uint64_t total,
                       const char *suffix) {
  uint64_t h = 0xcbf29ce484222325ull;
  const uint64_t parts[] = {(uint64_t)source->st_dev,          (uint64_t)source->st_ino,
                            (uint64_t)source->st_size,         (uint64_t)source->st_mtim.tv_sec,
                            (uint64_t)source->st_mtim.tv_nsec, total};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    for (int b = 0; b < 64; b += 8)
      h = (h ^ ((parts[i] >> b) & 0xff)) * 0x100000001b3ull;
  int n = snprintf(out, size, "%s/%016llx%s", cache_dir, (unsigned long long)h, suffix);
  return n > 0 && (size_t)n < size;
}

int rec_debug_cache_open(const struct stat *source, uint64_t total, const void *shdrs,
                         size_t shdrs_size, uint64_t shoff) {
  if (!cache_dir[0] || shoff > total || shdrs_size > total - shoff)
    return -1;
  char path[PATH_MAX];
  if (!entry_path(path, sizeof path, source, total, ".debug"))
    return -1;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  struct stat st;
  char table[64 * 1024];
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
            (uint64_t)st.st_size == total && shdrs_size <= sizeof table &&
            pread(fd, table, shdrs_size, (off_t)shoff) == (ssize_t)shdrs_size &&
            memcmp(table, shdrs, shdrs_size) == 0;
  if (!ok) {
    close(fd);
    return -1;
  }
  futimens(fd, NULL); /* used now: the last to be evicted */
  return fd;
}

/* Keeps the CACHE_ENTRIES most recently used entries. */
static void evict(void) {
  DIR *d = opendir(cache_dir);
  if (!d)
    return;
  for (;;) {
    size_t count = 0;
    char oldest[NAME_MAX + 1] = "";
    struct timespec oldest_time = {0, 0};
    rewinddir(d);
    for (struct dirent *e; (e = readdir(d));) {
      size_t n = strlen(e->d_name);
      struct stat st;
      if (n < 6 || strcmp(e->d_name + n - 6, ".debug") != 0 ||
          fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        continue;
      count++;
      if (!oldest[0] || st.st_mtim.tv_sec < oldest_time.tv_sec ||
          (st.st_mtim.tv_sec == oldest_time.tv_sec && st.st_mtim.tv_nsec < oldest_time.tv_nsec)) {
        memcpy(oldest, e->d_name, n + 1);
        oldest_time = st.st_mtim;
      }
    }
    if (count <= CACHE_ENTRIES || unlinkat(dirfd(d), oldest, 0) != 0)
      break;
  }
  closedir(d);
}

void rec_debug_cache_store(const struct stat *source, int copy, uint64_t total) {
  if (!cache_dir[0] || total > mt_file_size_limit())
    return;
  /* The directory and its parent (~/.cache), private to this user. */
  char parent[PATH_MAX];
  memcpy(parent, cache_dir, strlen(cache_dir) + 1);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) {
    *slash = 0;
    mkdir(parent, 0700);
  }
  if (mkdir(cache_dir, 0700) != 0 && errno != EEXIST)
    return;
  char path[PATH_MAX], temporary[PATH_MAX], suffix[48];
  snprintf(suffix, sizeof suffix, ".%d.partial", (int)getpid());
  if (!entry_path(path, sizeof path, source, total, ".debug") ||
      !entry_path(temporary, sizeof temporary, source, total, suffix))
    return;
  int out = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0)
    return;
  off_t at = 0;
  while ((uint64_t)at < total) {
    ssize_t n = sendfile(out, copy, &at, (size_t)(total - (uint64_t)at));
    if (n <= 0)
      break;
  }
  bool ok = (uint64_t)at == total;
  ok = close(out) == 0 && ok;
  if (!ok || rename(temporary, path) != 0) {
    unlink(temporary);
    return;
  }
  evict();
}
