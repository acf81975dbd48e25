/* Creating the per-process ring file (docs/ring.md §2.1): `<dir>/<pid>.memtap-ring`, mode 0600,
 * O_EXCL and O_NOFOLLOW so that nobody can plant a file or a symbolic link for us to write
 * through. A file already at that path is replaced only if it is a ring file whose creator is
 * gone: a dead process whose pid we now have (its start time differs from ours), or this same
 * process before it called exec. Anything else is refused, never deleted. The same judgement of
 * a file's creator answers cleaners of ring directories (mt_ring_file_abandoned). Malloc-free and
 * built only on async-signal-safe calls, because a forked child creates its file inside the fork
 * handler. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/address_space_limit.h"
#include "common/cancel_hold.h"
#include "common/error.h"
#include "common/file_identity.h"
#include "common/file_size_limit.h"
#include "common/map_unlocked.h"
#include "ring/process.h"
#include "ring/producer.h"
#include "ring/user_dir.h"

/* "<dir>/<pid>.memtap-ring", with "-pidns<namespace>" after the pid when `pidns` is not 0 and
 * ".<other>" when `other` is not 0, without snprintf (which may allocate). */
static bool build_path(char *out, size_t size, const char *dir, int pid, uint64_t pidns,
                       unsigned other) {
  char name[80];
  int n = mt_format_decimal(name, (uint64_t)pid);
  if (pidns) {
    memcpy(name + n, MT_RING_FILE_PIDNS, sizeof MT_RING_FILE_PIDNS - 1);
    n += (int)sizeof MT_RING_FILE_PIDNS - 1;
    n += mt_format_decimal(name + n, pidns);
  }
  if (other) {
    name[n++] = '.';
    n += mt_format_decimal(name + n, other);
  }
  size_t dlen = strlen(dir), need = dlen + 1 + (size_t)n + sizeof MT_RING_FILE_SUFFIX;
  if (need > size)
    return false;
  memmove(out, dir, dlen); /* `dir` may be `out` itself */
  out[dlen] = '/';
  memcpy(out + dlen + 1, name, (size_t)n);
  memcpy(out + dlen + 1 + n, MT_RING_FILE_SUFFIX, sizeof MT_RING_FILE_SUFFIX);
  return true;
}

/* What the start of the file open at `fd` says of its creator. */
enum creator { CREATOR_FOREIGN, CREATOR_UNWRITTEN, CREATOR_KNOWN };

/* CREATOR_KNOWN with its pid and start time for a ring file, or one whose creation has begun
 * (magic still 0, pid written); CREATOR_UNWRITTEN for a regular file whose first 256 bytes (or
 * all of it, if shorter) are zero, as a creator that died before writing the header leaves it;
 * CREATOR_FOREIGN for anything else. */
static enum creator file_creator(int fd, int *pid, uint64_t *start_time) {
  struct stat st;
  mt_ring_file_header h;
  memset(&h, 0, 256);
  ssize_t got = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, &h, 256, 0) : -1;
  if (got < 0)
    return CREATOR_FOREIGN;
  uint64_t magic;
  memcpy(&magic, &h, sizeof magic);
  if (got == 256 && (magic == MT_RING_MAGIC || (magic == 0 && h.pid != 0))) {
    *pid = h.pid;
    *start_time = h.start_time;
    return CREATOR_KNOWN;
  }
  static const unsigned char zero[256];
  return memcmp(&h, zero, 256) == 0 ? CREATOR_UNWRITTEN : CREATOR_FOREIGN;
}

/* Whether the file at `path` is a ring file that no live process other than our own earlier
 * image (before exec) created (*own: it is that image's: our pid, and our start time when both
 * are known). Sets *what to a reason when it is not. A file with our pid and another start time
 * is a dead process's: one that had our pid before us, or the first process of an earlier pid
 * namespace whose inode number ours was given again (the name is the same). */
static bool is_stale(const char *path, uint64_t own_start, const char **what, bool *own) {
  *own = false;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *what = errno == ELOOP ? "is a symbolic link" : "cannot be inspected";
    return false;
  }
  int pid = 0;
  uint64_t start_time = 0;
  enum creator c = file_creator(fd, &pid, &start_time);
  close(fd);
  if (c != CREATOR_KNOWN) {
    *what = "is not a memtap ring file";
    return false;
  }
  if (pid == getpid()) {
    *own = !start_time || !own_start || start_time == own_start;
    return true;
  }
  if (mt_process_alive(pid, start_time)) {
    *what = "belongs to a live process";
    return false;
  }
  return true;
}

/* Decimal digits without a leading zero at *p, below 2^63: moves *p past them. */
static bool name_number(const char **p, uint64_t *out) {
  const char *q = *p;
  uint64_t v = 0;
  for (; *q >= '0' && *q <= '9' && v <= INT64_MAX / 10; q++)
    v = v * 10 + (uint64_t)(*q - '0');
  if (q == *p || **p == '0' || (*q >= '0' && *q <= '9'))
    return false;
  *p = q;
  *out = v;
  return true;
}

bool mt_ring_file_abandoned(int dirfd, const char *name) {
  /* The name: the pid, "-pidns" and a namespace, "." and a number, the suffix, and nothing else
   * (create.c's build_path). */
  uint64_t named = 0, pidns = 0, other = 0;
  const char *p = name;
  if (!name_number(&p, &named) || named > INT32_MAX)
    return false;
  size_t tag = sizeof MT_RING_FILE_PIDNS - 1;
  if (!strncmp(p, MT_RING_FILE_PIDNS, tag) && (p += tag, !name_number(&p, &pidns)))
    return false;
  if (*p == '.' && p[1] != 'm' && (p++, !name_number(&p, &other)))
    return false;
  if (strcmp(p, MT_RING_FILE_SUFFIX))
    return false;
  /* A process of another pid namespace cannot be looked for by its pid here: its file is
   * abandoned once no process is left in that namespace. */
  if (pidns)
    return !mt_pid_namespace_alive(pidns);
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return false;
  int pid = 0;
  uint64_t start_time = 0;
  enum creator c = file_creator(fd, &pid, &start_time);
  close(fd);
  if (c == CREATOR_FOREIGN)
    return false;
  if (c == CREATOR_UNWRITTEN) /* its creator died before writing the header, or is writing it */
    return !mt_process_alive((int)named, 0);
  return !mt_process_alive(pid, start_time);
}

/* Creates `path`; *taken (and -1, nothing created, nothing in `err`) when it is a preserved file
 * of a dead process, whose name the caller then varies. */
static int open_exclusive(const char *path, bool preserve, uint64_t own_start, bool *taken,
                          mt_error *err) {
  *taken = false;
  for (int attempt = 0;; attempt++) {
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST || attempt == 2)
      return fd >= 0 ? fd : mt_fail_io(err, "cannot create the ring file");
    const char *what = NULL;
    bool own;
    if (!is_stale(path, own_start, &what, &own))
      return mt_fail(err, MT_E_STATE, -1, "%s already exists and %s", path, what);
    /* A preserved file is its consumer's to read and remove (memtap record removes each once
     * its process is gone and read): removing another's here could race the consumer's removal
     * of it, which finds the name by the file's inode number, and a new file may get the same. */
    if (preserve && !own) {
      *taken = true;
      return -1;
    }
    if (unlink(path) != 0 && errno != ENOENT)
      return mt_fail_io(err, "cannot remove the stale ring file");
  }
}

/* A smaller plan when the whole file cannot be mapped (an address-space limit, `ulimit -v`) or be
 * as large (a file size limit, `ulimit -f`): a quarter of the rings down to 16, then rings a
 * quarter the size down to the minimum, so that such a program is still traced, with fewer
 * threads at once or less buffering. */
static bool plan_smaller(mt_ring_geometry *g) {
  uint32_t rings = g->ring_count;
  uint64_t bytes = g->ring_words * 8;
  if (rings > 16)
    rings = rings / 4 < 16 ? 16 : rings / 4;
  else if (bytes / 4 >= MT_RING_MIN_SIZE)
    bytes /= 4;
  else
    return false;
  /* A new layout; the rest of the geometry (mode, clock, process) stays. */
  return mt_ring_layout_plan(g, rings, bytes, g->registry_words * 8, NULL) == MT_OK;
}

static int create_file(struct mt_ring *s, int parent_pid, uint64_t fork_number, mt_error *err);

int mt_ring_file_create(struct mt_ring *s, int parent_pid, uint64_t fork_number, mt_error *err) {
  int cancel = mt_cancel_hold(); /* open, pread, posix_fallocate, close: maybe inside malloc */
  int rc = create_file(s, parent_pid, fork_number, err);
  mt_cancel_release(cancel);
  return rc;
}

static int create_file(struct mt_ring *s, int parent_pid, uint64_t fork_number, mt_error *err) {
  int pid = getpid();
  /* Looked at for every file: a process that called unshare(CLONE_NEWPID) forks its children
   * into another namespace than its own. */
  uint64_t pidns = s->options.pid_namespace ? mt_process_pid_namespace() : 0;
  s->foreign_namespace = pidns && pidns != s->options.pid_namespace;
  if (!s->foreign_namespace)
    pidns = 0;
  /* A process that left root for another user makes its file in that user's subdirectory of a
   * directory root made (user_dir.h). The directory is chosen into s->path, which build_path
   * then completes: no second PATH_MAX buffer on the stack of a fork handler. */
  if (!mt_ring_user_dir_choose(s->options.dir, s->path, sizeof s->path) ||
      !build_path(s->path, sizeof s->path, s->path, pid, pidns, 0))
    return mt_fail(err, MT_E_INVALID, -1, "ring directory path is too long");
  /* Within the file size limit: sizing the file past it would raise SIGXFSZ in the program.
   * Known before a file is made (or a previous image's, before exec, replaced). */
  uint64_t limit = mt_file_size_limit();
  /* Under an address-space limit, a sixteenth of the room left at most: the rest is the
   * program's (and, in process, the consumer's second mapping of the file). */
  uint64_t room = mt_address_space_room();
  while ((s->geo.file_size > limit || s->geo.file_size > room / 16) && plan_smaller(&s->geo)) {
  }
  if (s->geo.file_size > limit)
    return mt_fail(err, MT_E_IO, -1,
                   "the ring file needs %llu bytes, more than the file size limit (ulimit -f: "
                   "%llu bytes)",
                   (unsigned long long)s->geo.file_size, (unsigned long long)limit);
  /* A preserved file of a dead process that had our pid (its consumer has not removed it yet):
   * ours is PID.1.memtap-ring, PID.2..., the first name free. */
  bool taken;
  int fd = open_exclusive(s->path, s->options.preserve, s->start_time, &taken, err);
  for (unsigned other = 1; taken && other <= 64; other++) {
    if (!mt_ring_user_dir_choose(s->options.dir, s->path, sizeof s->path) ||
        !build_path(s->path, sizeof s->path, s->path, pid, pidns, other))
      return mt_fail(err, MT_E_INVALID, -1, "ring directory path is too long");
    fd = open_exclusive(s->path, s->options.preserve, s->start_time, &taken, err);
  }
  if (taken)
    return mt_fail(err, MT_E_STATE, -1, "%s and 63 more names like it are taken", s->path);
  if (fd < 0)
    return fd;
  struct stat st;
  int rc;
  void *base;
  do {
    rc = MT_OK;
    base = MAP_FAILED;
    if (ftruncate(fd, (off_t)s->geo.file_size) != 0)
      rc = mt_fail_io(err, "cannot size the ring file");
    /* Header, ring blocks and registry are reserved now; each ring's data when a thread claims
     * it. */
    else if ((errno = posix_fallocate(fd, 0, (off_t)s->geo.data_offset)) != 0)
      rc = mt_fail_io(err, "cannot reserve space for the ring file");
    else if (fstat(fd, &st) != 0)
      rc = mt_fail_io(err, "cannot stat the ring file");
    if (rc == MT_OK)
      base = mt_map_unlocked(s->geo.file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
  } while (rc == MT_OK && base == MAP_FAILED && errno == ENOMEM && plan_smaller(&s->geo));
  if (rc == MT_OK) {
    if (base == MAP_FAILED)
      rc = mt_fail_io(err, "cannot map the ring file");
    else /* no readahead: on a disk file (ext4) the first fault read ahead, zeroing, about 2 ms
          * of CPU's worth of pages of a process that then touched a few of them */
      madvise(base, s->geo.file_size, MADV_RANDOM);
  }
  if (rc != MT_OK) {
    int saved = errno;
    unlink(s->path);
    close(fd);
    errno = saved;
    return rc;
  }
  /* The mapping is all the producer needs: the descriptor is closed, so that the program sees
   * only descriptors of its own (a program listing /proc/self/fd, or counting its descriptors,
   * runs as it does untraced); a ring's first claim opens the file again (mt_ring_file_open). */
  close(fd);
  s->dev = st.st_dev;
  s->ino = st.st_ino;
  s->base = base;
  s->map_size = s->geo.file_size;
  s->unlinked = false;
  s->header = mt_ring_header_at(base);
  s->geo.pid = pid;
  s->geo.parent_pid = parent_pid;
  s->geo.fork_number = fork_number;
  s->geo.start_time = s->start_time;
  mt_ring_layout_write_header(s->header, &s->geo);
  mt_store_relaxed(&s->header->state, MT_RING_STATE_RUNNING);
  mt_ring_tick_arm(s);
  return MT_OK;
}

int mt_ring_file_open(const struct mt_ring *s) {
  int fd = open(s->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  mt_file_identity ring = {.dev = s->dev, .ino = s->ino, .known = true};
  if (fd >= 0 && !mt_file_identity_holds(&ring, fd)) { /* another file at the path now */
    close(fd);
    fd = -1;
  }
  return fd;
}
