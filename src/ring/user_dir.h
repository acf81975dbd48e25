/* The per-user subdirectories of a ring directory (docs/ring.md §4, "Another user"). memtap record
 * run as root keeps its ring directory private to root. A traced process that leaves root for
 * user N (a server dropping privileges before it forks its workers, setpriv, runuser) first makes
 * `uid-N` in it, owned by N, and lets others reach into the directory without listing or writing
 * it (mode 0711). Processes of user N, who cannot write the directory itself, make their ring
 * files and notes in `uid-N`. Only root can add, remove or rename entries of the directory, so
 * nobody can replace `uid-N` or the directory; what user N puts in `uid-N` is read by memtap as it
 * reads that user's ring files anywhere: without following links, as regular files only. All
 * malloc-free and async-signal-safe. */
#ifndef MEMTAP_SRC_RING_USER_DIR_H
#define MEMTAP_SRC_RING_USER_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define MT_RING_USER_DIR_PREFIX "uid-"

/* Before the effective user becomes `uid`, while still root: makes `dir`/uid-<uid> (if missing)
 * owned by `uid`, and makes `dir` reachable by others (0711). Nothing when `dir` is not root's.
 * Returns 0, or -1 with errno. */
int mt_ring_user_dir_prepare(const char *dir, uid_t uid);

/* Where this process makes its files: `dir` when its effective user may write there, else
 * `dir`/uid-<euid> when that is a directory of its own. Copied into `out`; false when it does not
 * fit. */
bool mt_ring_user_dir_choose(const char *dir, char *out, size_t size);

/* The same directory, opened (O_PATH): a descriptor to make files in with openat, or -1. For a
 * caller with little stack (a fork child's handler): no path is built. */
int mt_ring_user_dir_open(const char *dir);

/* Whether `name` is a user subdirectory's name, uid-<decimal>; its user in *uid. */
bool mt_ring_user_dir_parse(const char *name, uid_t *uid);

#endif
