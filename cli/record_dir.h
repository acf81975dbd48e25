/* memtap record's private ring directory under $TMPDIR: making it (named after its recorder and
 * locked for the recorder's life), removing it at the end, and sweeping the ones that recorders
 * killed before their end (SIGKILL, a crash) left behind (record_dir.c, docs/record.md §8). */
#ifndef MEMTAP_CLI_RECORD_DIR_H
#define MEMTAP_CLI_RECORD_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Makes `<tmp>/memtap-record-<pid>-<start time>-XXXXXX` (mkdtemp: mode 0700) for the calling
 * process and holds an exclusive flock on it until record_dir_remove (the descriptor is
 * close-on-exec: the traced program does not inherit it). Returns the lock's descriptor, or -1
 * with errno set; `dir` (of `size` bytes) receives the path. */
int record_dir_make(const char *tmp, char *dir, size_t size);

/* Removes the files of `dir` and `dir` itself, then closes `lock_fd` (if >= 0). */
void record_dir_remove(const char *dir, int lock_fd);

/* Whether `name` (a file of the directory, or uid-N/file for one of a user subdirectory) is a ring
 * file's: PID.memtap-ring for a process of memtap's pid namespace (*ns = 0),
 * PID-pidnsNS.memtap-ring for one of another namespace (mt_ring_options.pid_namespace); either with
 * .K before the suffix when a preserved file of a dead process had the name first. */
bool record_dir_ring_name(const char *name, int *pid, uint64_t *ns);

/* Removes from `tmp` the directories of recorders that are gone, and only those: named as
 * record_dir_make names them, owned by the caller's user, not locked (no live recorder, in any
 * pid namespace, holds them), whose recorder (pid and start time of the name) is not alive, and
 * holding nothing but ring files whose producers are gone too (a traced program that outlived its
 * recorder still writes its ring). Anything else is left alone. Best effort and silent; safe
 * against other recorders sweeping at the same time. Returns how many directories it removed. */
int record_dir_sweep(const char *tmp);

#endif
