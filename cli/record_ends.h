/* memtap record's end watcher: a thread that notes the moment each traced process ends, while the
 * main loop may be busy elsewhere (reading a large program's symbols takes up to a few hundred
 * ms), so that a trace ends when its process did, not when memtap next looked (record_ends.c,
 * docs/record.md §7). While the main loop is busy, the thread also looks for the ring files of
 * new processes itself, so that one that starts and ends meanwhile is seen alive and its end
 * stamped too. */
#ifndef MEMTAP_CLI_RECORD_ENDS_H
#define MEMTAP_CLI_RECORD_ENDS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct record_ends record_ends;

/* Starts the watcher thread (every signal blocked in it). NULL when it cannot (no memory, no
 * thread): the caller then notes ends itself, as late as it looks. With `ring_dir` (else NULL),
 * the ring directory of memtap record (record_dir.h): whenever the caller has not looked at it
 * for a while (record_ends_scanned), the thread lists it and watches every process of memtap's
 * pid namespace with a ring file there, for record_ends_adopt. */
record_ends *record_ends_start(const char *ring_dir);

/* Says the caller has just looked at the ring directory itself (and watches what it found): the
 * thread need not, for now. */
void record_ends_scanned(record_ends *w);

/* For a process the caller starts to trace (its pid and its start time, /proc/PID/stat field
 * 22): whether the thread found it alive in the ring directory first. If so, its watch is the
 * caller's from now on: *ended_ns is when it ended (CLOCK_REALTIME ns), or 0 while it runs, and
 * then *pidfd is its pidfd (the caller's to close) and *key the name record_ends_take will give
 * its end. False (nothing set) otherwise. */
bool record_ends_adopt(record_ends *w, int pid, uint64_t start_time, int *pidfd, uint64_t *key,
                       int64_t *ended_ns);

/* Watches `pidfd` (pidfd_open) and stamps CLOCK_REALTIME once it is readable (the process has
 * ended), under `key`, the caller's name for that process (below 2^62: the keys above are the
 * thread's own, for what it found itself). The caller keeps the descriptor and
 * may close it at any time: the watch goes with it. False if it cannot be watched. */
bool record_ends_watch(record_ends *w, int pidfd, uint64_t key);

/* Hands each end stamped since the last call to `noted` (key, CLOCK_REALTIME in ns), in the
 * caller's thread. */
void record_ends_take(record_ends *w, void (*noted)(void *user, uint64_t key, int64_t ended_ns),
                      void *user);

/* Stops the thread and frees `w` (NULL: nothing); ends not taken are dropped. */
void record_ends_stop(record_ends *w);

#endif
