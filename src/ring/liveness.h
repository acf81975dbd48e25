/* Whether a lossless file's primary consumer is alive, for a producer that cannot see its pid: a
 * process in another pid namespace than the consumer's (unshare --pid, a container started under
 * memtap record) finds no such pid, or another process under it. Such a process names its file
 * for its namespace (`<pid>-pidns<ns>.memtap-ring`); the primary of such a file holds a shared
 * open-file-description lock on its first byte for as long as its cursor lives, and the kernel
 * drops the lock when the process dies, whatever the namespaces. Malloc-free and built on
 * async-signal-safe calls only (open, fcntl, close). */
#ifndef MEMTAP_SRC_RING_LIVENESS_H
#define MEMTAP_SRC_RING_LIVENESS_H

#include <stdbool.h>

/* Takes the primary's lock on the ring file open at `fd` (kept until that descriptor's last copy
 * is closed). A kernel without such locks (before Linux 3.15) leaves none: best effort. */
void mt_ring_primary_lock(int fd);

/* Whether some process holds the primary's lock on the ring file at `path`: 1 held, 0 not held,
 * -1 when this process cannot tell: the file cannot be opened (the program changed its user or
 * its root since, or the consumer removed its directory) or the kernel has no such locks. */
int mt_ring_primary_lock_held(const char *path);

/* Whether some process holds a flock on the directory `dir` (memtap record holds one on its ring
 * directory for its whole run): 1 held, 0 not held, -1 when this process cannot tell. Tried with
 * a shared lock, released at once. */
int mt_ring_directory_lock_held(const char *dir);

#endif
