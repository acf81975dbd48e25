/* Process identity for the ring files: a process's start time (so that a pid reused by another
 * process is told apart from the one that created a file or registered as a consumer) and
 * whether it is still alive. Malloc-free and async-signal-safe (open, read, close, kill). */
#ifndef MEMTAP_SRC_RING_PROCESS_H
#define MEMTAP_SRC_RING_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads field 22 (starttime, clock ticks since boot) and field 3 (state) of /proc/PID/stat
 * (pid 0: the calling process). Returns false if the process does not exist or /proc cannot be
 * read. */
bool mt_process_stat(int pid, uint64_t *start_time, char *state);

/* Whether `pid` has ended and waits to be reaped: a zombie whose threads have all exited (/proc
 * counts the leader's remains as its one thread). A leader that called pthread_exit while other
 * threads run is a zombie too, but counts more threads: not ended. */
bool mt_process_ended(int pid);

/* Whether `pid` is a live process (not a zombie) started at `start_time` (0: any). A process we
 * cannot inspect for lack of permission counts as alive. */
bool mt_process_alive(int pid, uint64_t start_time);

/* The calling process's pid namespace: the inode of /proc/self/ns/pid, or 0 when /proc cannot
 * tell (not mounted, too old a kernel). Two processes in one namespace get the same number. */
uint64_t mt_process_pid_namespace(void);

/* Whether some process this one can see in /proc is in the pid namespace `pidns` (the inode
 * number of /proc/PID/ns/pid). True when /proc cannot be read, so that nothing of that namespace's
 * is taken for abandoned then. No malloc (getdents64 into a buffer on the stack). */
bool mt_pid_namespace_alive(uint64_t pidns);

/* The first `size` - 1 bytes of the file at `path`, NUL-terminated: a /proc or /sys file read in
 * one go (open, read, close). False when it cannot be read or is empty. */
bool mt_read_small_file(const char *path, char *buf, size_t size);

/* Writes the decimal digits of `value` at `out` (no NUL) and returns how many. */
int mt_format_decimal(char *out, uint64_t value);

#endif
