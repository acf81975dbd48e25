/* memtap record's end watcher: a thread that notes the moment each traced process ends, while the
 * main loop may be busy elsewhere (reading a large program's symbols takes up to a few hundred
 * ms), so that a trace ends when its process did, not when memtap next looked (record_ends.c,
 * docs/record.md §7). */
#ifndef MEMTAP_CLI_RECORD_ENDS_H
#define MEMTAP_CLI_RECORD_ENDS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct record_ends record_ends;

/* Starts the watcher thread (every signal blocked in it). NULL when it cannot (no memory, no
 * thread): the caller then notes ends itself, as late as it looks. */
record_ends *record_ends_start(void);

/* Watches `pidfd` (pidfd_open) and stamps CLOCK_REALTIME once it is readable (the process has
 * ended), under `key`, the caller's name for that process. The caller keeps the descriptor and
 * may close it at any time: the watch goes with it. False if it cannot be watched. */
bool record_ends_watch(record_ends *w, int pidfd, uint64_t key);

/* Hands each end stamped since the last call to `noted` (key, CLOCK_REALTIME in ns), in the
 * caller's thread. */
void record_ends_take(record_ends *w, void (*noted)(void *user, uint64_t key, int64_t ended_ns),
                      void *user);

/* Stops the thread and frees `w` (NULL: nothing); ends not taken are dropped. */
void record_ends_stop(record_ends *w);

#endif
