/* Which file a descriptor names (device and inode), to write only while it still names the file
 * it was handed over for: a program traced in process (or tracing itself) may close every
 * descriptor it inherited and reuse the numbers for files of its own, which memtap must never
 * write into. Async-signal-safe. */
#ifndef MEMTAP_COMMON_FILE_IDENTITY_H
#define MEMTAP_COMMON_FILE_IDENTITY_H

#include <stdbool.h>
#include <sys/stat.h>

typedef struct mt_file_identity {
  dev_t dev;
  ino_t ino;
  bool known; /* false: nothing to compare with (fstat failed, or never taken) */
} mt_file_identity;

static inline mt_file_identity mt_file_identity_of(int fd) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0)
    return (mt_file_identity){.known = false};
  return (mt_file_identity){.dev = st.st_dev, .ino = st.st_ino, .known = true};
}

/* Whether `fd` still names the file `id` was taken of (true when `id` is not known). */
static inline bool mt_file_identity_holds(const mt_file_identity *id, int fd) {
  if (!id->known)
    return true;
  struct stat st;
  return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == id->dev && st.st_ino == id->ino;
}

#endif
