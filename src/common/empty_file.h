/* Emptying a file that is about to be written from its start (a trace written over an older one).
 * A file truncated to length 0 is flushed to disk when it is closed on ext4 (its auto_da_alloc
 * heuristic for files replaced by truncation): closing a 250 MB trace then took 150 ms of the
 * recorder's time after the program had ended, spent allocating blocks and starting writeback. A
 * file that is empty already is left alone, so that a new trace pays none of it. */
#ifndef MEMTAP_COMMON_EMPTY_FILE_H
#define MEMTAP_COMMON_EMPTY_FILE_H

#include <sys/stat.h>
#include <unistd.h>

/* Truncates the regular file `fd` to 0 bytes unless it has none. 0, or -1 with errno set. */
static inline int mt_empty_file(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return -1;
  return st.st_size == 0 ? 0 : ftruncate(fd, 0);
}

#endif
