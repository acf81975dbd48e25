/* The process's mappings, read from /proc/self/maps without allocating (system calls into buffers
 * on the stack), for the interposed calls that must tell the shim's mappings from the program's
 * (mlock.c) or find the ring file's (rlimit.c). */
#ifndef MEMTAP_SRC_TRACER_MAPS_H
#define MEMTAP_SRC_TRACER_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One line of /proc/self/maps, as far as it matters here. */
typedef struct mt_vma {
  uint64_t start, end;
  uint64_t offset; /* in the mapped file */
  unsigned major, minor;
  uint64_t inode;
  const char *path; /* the rest of the line ("" for anonymous memory) */
  size_t path_length;
} mt_vma;

/* Calls `each` for every mapping of the process, in address order; false when the maps cannot be
 * read. A line longer than PATH_MAX and a bit is cut (no ring file has such a path). */
bool mt_maps_each(void (*each)(const mt_vma *, void *), void *user);

#endif
