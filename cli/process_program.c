/* /proc/PID/exe, read and cleaned, the effective uid in /proc/PID/status, /proc/PID/auxv's
 * fingerprint and a process found by its pid in another namespace (process_program.h). */
#include "process_program.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/process_image.h"
#include "ring/process.h"

void process_program_undeleted(char *path) {
  static const char deleted[] = " (deleted)";
  size_t len = strlen(path), tail = sizeof deleted - 1;
  if (len > tail && strcmp(path + len - tail, deleted) == 0)
    path[len - tail] = 0;
}

bool process_program(long pid, char *buf, size_t size) {
  char link[64];
  snprintf(link, sizeof link, "/proc/%ld/exe", pid);
  ssize_t n = readlink(link, buf, size - 1);
  if (n <= 0 || (size_t)n == size - 1)
    return false;
  buf[n] = 0;
  process_program_undeleted(buf);
  return true;
}

long process_effective_uid(long pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%ld/status", pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return -1;
  long real = -1, effective = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Uid: %ld %ld", &real, &effective) == 2)
      break;
  fclose(f);
  return effective;
}

uint64_t process_image(long pid) {
  char path[64];
  uint8_t auxv[4096];
  snprintf(path, sizeof path, "/proc/%ld/auxv", pid);
  return mt_process_image(path, auxv, sizeof auxv);
}

/* The last pid of /proc/PID/status's NSpid line (the pid in the process's own namespace), or -1. */
static long innermost_pid(long pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%ld/status", pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return -1;
  long last = -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "NSpid:", 6))
      continue;
    for (char *p = line + 6, *end;; p = end) {
      long v = strtol(p, &end, 10);
      if (end == p)
        break;
      last = v;
    }
    break;
  }
  fclose(f);
  return last;
}

/* The pid a /proc entry names and the inode of its pid namespace; false for an entry that is not
 * a process, or one gone or hidden since. */
static bool proc_entry(const char *name, long *pid, uint64_t *pidns) {
  char *end, path[64];
  *pid = strtol(name, &end, 10);
  struct stat st;
  if (*pid <= 0 || *end)
    return false;
  snprintf(path, sizeof path, "/proc/%ld/ns/pid", *pid);
  if (stat(path, &st) != 0)
    return false;
  *pidns = (uint64_t)st.st_ino;
  return true;
}

long process_in_namespace(uint64_t pidns, long local_pid, uint64_t start_time) {
  DIR *d = opendir("/proc");
  if (!d)
    return 0;
  long found = 0, pid;
  uint64_t ns, started = 0;
  struct dirent *e;
  while (!found && (e = readdir(d)))
    if (proc_entry(e->d_name, &pid, &ns) && ns == pidns && innermost_pid(pid) == local_pid &&
        (!start_time || (mt_process_stat((int)pid, &started, NULL) && started == start_time)))
      found = pid;
  closedir(d);
  return found;
}

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

uint64_t *process_live_namespaces(size_t *count) {
  DIR *d = opendir("/proc");
  if (!d)
    return NULL;
  size_t n = 0, cap = 64;
  uint64_t *ns = malloc(cap * sizeof *ns), one;
  long pid;
  struct dirent *e;
  while (ns && (e = readdir(d))) {
    if (!proc_entry(e->d_name, &pid, &one))
      continue;
    if (n == cap) {
      uint64_t *grown = realloc(ns, 2 * cap * sizeof *ns);
      if (!grown) {
        free(ns);
        ns = NULL;
        break;
      }
      ns = grown;
      cap *= 2;
    }
    ns[n++] = one;
  }
  closedir(d);
  if (!ns)
    return NULL;
  qsort(ns, n, sizeof *ns, compare_u64);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (!kept || ns[kept - 1] != ns[i])
      ns[kept++] = ns[i];
  *count = kept;
  return ns;
}

bool process_namespace_listed(const uint64_t *namespaces, size_t count, uint64_t pidns) {
  return bsearch(&pidns, namespaces, count, sizeof *namespaces, compare_u64) != NULL;
}
