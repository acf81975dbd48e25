/* The program a process runs, as /proc names it: for memtap record's checks of what its traced
 * process exec'd and of the processes it did not trace. */
#ifndef MEMTAP_CLI_PROCESS_PROGRAM_H
#define MEMTAP_CLI_PROCESS_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Drops the " (deleted)" the kernel appends to a program's path when the file was replaced or
 * removed since it was started. */
void process_program_undeleted(char *path);

/* The program `pid` runs now (/proc/PID/exe, undeleted) into buf of `size` bytes; false when it
 * cannot be read (the process has ended) or does not fit. */
bool process_program(long pid, char *buf, size_t size);

/* The effective user id `pid` runs as (/proc/PID/status), or -1 when it cannot be read. */
long process_effective_uid(long pid);

/* The fingerprint of the image `pid` runs now (common/process_image.h), 0 when it cannot be read
 * (the process has ended or is not ours). */
uint64_t process_image(long pid);

/* The pid, in memtap's own namespace, of the live process whose pid is `local_pid` in the pid
 * namespace `pidns` (the inode of its /proc/PID/ns/pid) and which started at `start_time`
 * (0: any), found by a walk of /proc; 0 when no process there is it (it has ended and another
 * namespace was given the number, or /proc shows another namespace's processes). */
long process_in_namespace(uint64_t pidns, long local_pid, uint64_t start_time);

/* The pid namespaces of the processes /proc shows (the inode numbers of their /proc/PID/ns/pid),
 * sorted, without repeats, into a malloc'd array (*count of them); NULL when /proc cannot be read
 * or memory is short. */
uint64_t *process_live_namespaces(size_t *count);

/* Whether `pidns` is in such an array of `count`. */
bool process_namespace_listed(const uint64_t *namespaces, size_t count, uint64_t pidns);

#endif
