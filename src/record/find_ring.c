/* Finding the ring file of a running process that memtap traces (memtap/record.h,
 * mt_record_find_ring): its tracer maps the file (docs/ring.md §2), so /proc/PID/maps names it, by
 * path while the file is in its directory (under memtap record) or as deleted (a process tracing
 * itself unlinks it), when /proc/PID/map_files still opens it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/error.h"
#include "memtap/record.h"
#include "ring/process.h"

#define RING_SUFFIX ".memtap-ring"
#define DELETED_SUFFIX " (deleted)"

/* One line of /proc/PID/maps. */
typedef struct mapping {
  uint64_t start, end;
  unsigned dev_major, dev_minor;
  uint64_t inode;
  bool writable, deleted;
  const char *path; /* inside the line; "" for an anonymous mapping */
} mapping;

/* Parses `line` (its newline removed, " (deleted)" cut off the path); false when malformed. */
static bool parse_mapping(char *line, mapping *m) {
  char perms[8];
  unsigned long long start, end, offset, inode;
  int path_at = -1;
  if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &offset, &m->dev_major,
             &m->dev_minor, &inode, &path_at) < 7 ||
      path_at < 0)
    return false;
  char *path = line + path_at;
  size_t n = strlen(path);
  m->deleted =
      n > strlen(DELETED_SUFFIX) && strcmp(path + n - strlen(DELETED_SUFFIX), DELETED_SUFFIX) == 0;
  if (m->deleted)
    path[n - strlen(DELETED_SUFFIX)] = 0;
  m->start = start;
  m->end = end;
  m->inode = inode;
  m->writable = perms[1] == 'w';
  m->path = path;
  return true;
}

/* Whether the mapping is of a ring file. */
static bool is_ring(const mapping *m) {
  size_t n = strlen(m->path);
  return m->path[0] == '/' && n > strlen(RING_SUFFIX) &&
         strcmp(m->path + n - strlen(RING_SUFFIX), RING_SUFFIX) == 0;
}

/* Opens /proc/PID/maps into *out: MT_OK, or why not (no such process, not readable). */
static int open_maps(int pid, FILE **out, mt_error *err) {
  *out = NULL;
  if (pid <= 0)
    return mt_fail(err, MT_E_INVALID, -1, "%d is not a process id", pid);
  char maps[64];
  snprintf(maps, sizeof maps, "/proc/%d/maps", pid);
  if ((*out = fopen(maps, "re")))
    return MT_OK;
  if (errno == ENOENT)
    return mt_fail(err, MT_E_INVALID, -1, "no process %d", pid);
  if (errno == EACCES || errno == EPERM)
    return mt_fail(err, MT_E_IO, -1,
                   "cannot read the mappings of process %d (%s): tap runs as the process's user "
                   "or as root",
                   pid, strerror(errno));
  return mt_fail(err, MT_E_IO, -1, "cannot read %s: %s", maps, strerror(errno));
}

/* The next mapping of `f` into *m (`line`, `cap`: getline's buffer); false at the end. */
static bool next_mapping(FILE *f, char **line, size_t *cap, mapping *m) {
  ssize_t len;
  while ((len = getline(line, cap, f)) > 0) {
    if ((*line)[len - 1] == '\n')
      (*line)[len - 1] = 0;
    if (parse_mapping(*line, m))
      return true;
  }
  return false;
}

/* Whether `path` is still the file the mapping shows (not replaced since by another of that
 * name). */
static bool same_file(const char *path, const mapping *m) {
  struct stat st;
  return stat(path, &st) == 0 && st.st_ino == m->inode && major(st.st_dev) == m->dev_major &&
         minor(st.st_dev) == m->dev_minor;
}

/* The process's ids, in its own pid namespace and every one above it (/proc/PID/status NSpid:
 * a ring file is named by the id its process has in its own); at least `pid`. */
static int namespace_pids(int pid, long ids[], int max) {
  int n = 0;
  char status[64], line[256];
  snprintf(status, sizeof status, "/proc/%d/status", pid);
  FILE *f = fopen(status, "re");
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "NSpid:", 6) == 0) {
      char *p = line + 6, *end;
      for (long v; n < max && (v = strtol(p, &end, 10)) > 0 && end != p; p = end)
        ids[n++] = v;
    }
  if (f)
    fclose(f);
  if (n == 0)
    ids[n++] = pid;
  return n;
}

/* Whether the ring file at `path` is named for one of `ids` ("<id>.memtap-ring", or
 * "<id>-pidns..." in a pid namespace): the process's own, not one it reads (memtap record maps
 * the files of the processes it traces). */
static bool named_for(const char *path, const long ids[], int n) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  char *end;
  long v = strtol(base, &end, 10);
  if (end == base || (*end != '.' && *end != '-'))
    return false;
  for (int i = 0; i < n; i++)
    if (ids[i] == v)
      return true;
  return false;
}

int mt_record_find_ring(int pid, char *path, size_t size, mt_error *err) {
  FILE *f;
  int rc = open_maps(pid, &f, err);
  if (rc != MT_OK)
    return rc;
  char *line = NULL;
  size_t cap = 0;
  mapping best = {0}, m;
  bool found = false, others = false;
  long ids[8];
  int nids = namespace_pids(pid, ids, 8);
  int read_errno = 0;
  errno = 0;
  while (next_mapping(f, &line, &cap, &m)) {
    if (!is_ring(&m))
      continue;
    if (!named_for(m.path, ids, nids)) {
      others = true;
      continue;
    }
    /* The writable mapping is the tracer's own (a process tracing itself also maps the file
     * read-only for its consumer thread); of several ring files, the last mapped is the newest. */
    if (!found || m.writable || !best.writable) {
      best = m;
      best.path = NULL;
      if (snprintf(path, size, "%s", m.path) >= (int)size) {
        free(line);
        fclose(f);
        return mt_fail(err, MT_E_INVALID, -1, "the ring file's path is longer than %zu bytes",
                       size);
      }
      found = true;
    }
  }
  if (ferror(f))
    read_errno = errno ? errno : EIO;
  free(line);
  fclose(f);
  if (read_errno)
    return mt_fail(err, MT_E_IO, -1, "cannot read /proc/%d/maps: %s", pid, strerror(read_errno));
  if (!found && others)
    return mt_fail(err, MT_E_STATE, -1,
                   "process %d reads the ring files of other processes (a memtap consumer, such as "
                   "memtap record) and has none of its own: tap the traced process itself",
                   pid);
  char state = 0;
  uint64_t start;
  if (!found && mt_process_stat(pid, &start, &state) && state == 'Z')
    return mt_fail(err, MT_E_STATE, -1, "process %d has ended (not yet reaped by its parent)", pid);
  if (!found)
    return mt_fail(err, MT_E_STATE, -1,
                   "process %d is not traced by memtap (it maps no ring file): start it under "
                   "`memtap record`, or with LD_PRELOAD=libmemtap-preload.so and MEMTAP=FILE",
                   pid);
  if (!best.deleted && same_file(path, &best))
    return MT_OK;
  /* Deleted or replaced: the process's own mapping of it. */
  char mapped[96];
  snprintf(mapped, sizeof mapped, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, best.start,
           best.end);
  if (access(mapped, R_OK) != 0)
    return mt_fail(err, MT_E_IO, -1,
                   "process %d's ring file %s was deleted, and %s cannot be opened (%s): that "
                   "takes root",
                   pid, path, mapped, strerror(errno));
  if (snprintf(path, size, "%s", mapped) >= (int)size)
    return mt_fail(err, MT_E_INVALID, -1, "the ring file's path is longer than %zu bytes", size);
  return MT_OK;
}

bool mt_record_process_maps(int pid, const char *path) {
  struct stat target;
  if (stat(path, &target) != 0)
    return false;
  FILE *f;
  if (open_maps(pid, &f, NULL) != MT_OK)
    return false;
  char *line = NULL;
  size_t cap = 0;
  mapping m;
  bool found = false;
  while (!found && next_mapping(f, &line, &cap, &m))
    found = m.inode == target.st_ino && m.dev_major == major(target.st_dev) &&
            m.dev_minor == minor(target.st_dev);
  free(line);
  fclose(f);
  return found;
}
