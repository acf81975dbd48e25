/* mlockall and munlockall (docs/tracer.md, "Locked memory"). The shim maps large regions the
 * program never touches: the ring file (16 to 64 GiB of address space, a second mapping of it
 * for a consumer in process) and the sampled set's tables. mlockall(MCL_CURRENT) would lock them
 * too: as root it faults in and pins all of it (gigabytes of zeroed pages, or the machine out of
 * memory), and for anyone else it fails with ENOMEM, since the process's address space is then
 * far above RLIMIT_MEMLOCK, where the untraced program's call succeeds. So while such regions
 * exist, MCL_CURRENT is done here: the same limit check on the program's own mappings, then
 * each of them locked with mlock2 (mlockall locks every mapping and ignores what cannot be
 * faulted in; so do we). MCL_FUTURE goes to the kernel, which applies it to later mappings only;
 * the shim's later ring mappings are made unlocked (common/map_unlocked.h). No allocation: the
 * mappings are read from /proc/self/maps with system calls into a buffer on the stack. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ring/producer.h"
#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif

#define PAGE 4096u
#define USER_END ((uint64_t)1 << 47) /* above: [vsyscall], which is no mapping of the process */
#define OWN_MAX 40

/* One line of /proc/self/maps, as far as it matters here. */
typedef struct vma {
  uint64_t start, end;
  unsigned major, minor;
  uint64_t inode;
  const char *path; /* the rest of the line ("" for anonymous memory) */
  size_t path_length;
} vma;

typedef struct own_ranges {
  uint64_t start[OWN_MAX], end[OWN_MAX];
  unsigned count;
  /* Mappings of the ring file are the shim's too (the consumer's, in process): known by device
   * and inode, or by path (a file system may show /proc/self/maps another device than stat). */
  bool ring_file;
  unsigned major, minor;
  uint64_t inode;
  const char *path;
} own_ranges;

static void own_add(own_ranges *o, const void *p, uint64_t bytes) {
  if (p && bytes && o->count < OWN_MAX) {
    o->start[o->count] = (uint64_t)(uintptr_t)p;
    o->end[o->count++] = (uint64_t)(uintptr_t)p + bytes;
  }
}

static void own_add_set(own_ranges *o, const mt_sampled_set *set) {
  if (set->filter)
    own_add(o, set->filter, (uint64_t)set->filter_mask + 1);
  if (set->pages) /* the directory; the pages it points to: set_page_end */
    own_add(o, set->pages, mt_sampled_set_pages(set) * sizeof(void *));
}

/* The shim's large regions now; false when there are none (mlockall then goes to the kernel). */
static bool own_regions(own_ranges *o) {
  const struct mt_ring *s = &mt_ring_session;
  *o = (own_ranges){0};
  if (s->base) { /* its mapping is looked up part by part (rings given back are the program's) */
    o->ring_file = true;
    o->major = major(s->dev);
    o->minor = minor(s->dev);
    o->inode = (uint64_t)s->ino;
    o->path = s->path;
  }
  own_add_set(o, &mt_shim.set);
  own_add_set(o, &mt_shim.internal);
  bool large = o->count > 0 || o->ring_file;
  uint64_t stack_low, stack_high; /* in process, the consumer thread's 8 MiB stack */
  if (mt_inprocess_stack(&stack_low, &stack_high))
    own_add(o, (const void *)(uintptr_t)stack_low, stack_high - stack_low);
  /* The shim's objects (own_objects.c): locked, their pages counted against the program's
   * RLIMIT_MEMLOCK. */
  mt_own_range objects[OWN_MAX];
  size_t n = mt_own_objects_ranges(objects, OWN_MAX - o->count);
  for (size_t i = 0; i < n; i++)
    own_add(o, (const void *)(uintptr_t)objects[i].start, objects[i].end - objects[i].start);
  return large;
}

/* Whether the mapping's path is `path`, as maps shows it (" (deleted)" after an unlink). */
static bool same_path(const vma *v, const char *path) {
  size_t n = strlen(path);
  if (!n || v->path_length < n || memcmp(v->path, path, n) != 0)
    return false;
  return v->path_length == n || v->path[n] == ' ';
}

static bool is_own(const own_ranges *o, const vma *v) {
  if (o->ring_file &&
      ((v->inode == o->inode && v->major == o->major && v->minor == o->minor) ||
       same_path(v, o->path) || mt_ring_mapping_overlaps(&mt_ring_session, v->start, v->end)))
    return true;
  return v->start >= USER_END;
}

/* The end of the page of the sampled set `set` that holds `at`, or 0 if none does; lowers *next to
 * the start of any of its pages between `at` and *next. Its pages (sampled_set.c, up to 512 of
 * 64 KiB, mapped as members need them) are too many for own_ranges. */
static uint64_t set_page_end(const mt_sampled_set *set, uint64_t at, uint64_t *next) {
  if (!set->pages)
    return 0;
  for (size_t i = 0; i < mt_sampled_set_pages(set); i++) {
    uint64_t p = (uint64_t)(uintptr_t)atomic_load_explicit(&set->pages[i], memory_order_acquire);
    if (!p)
      continue;
    if (at >= p && at < p + MT_SET_PAGE_BYTES)
      return p + MT_SET_PAGE_BYTES;
    if (p > at && p < *next)
      *next = p;
  }
  return 0;
}

/* Calls `each` for the parts of `v` outside the shim's ranges: the kernel merges neighbouring
 * anonymous mappings, so a range of the shim's may share a mapping with the program's memory. */
static void each_program_part(const own_ranges *o, const vma *v, void (*each)(const vma *, void *),
                              void *user) {
  uint64_t at = v->start;
  while (at < v->end) {
    uint64_t next = v->end;
    bool covered = false;
    for (unsigned i = 0; i < o->count && !covered; i++) {
      if (at >= o->start[i] && at < o->end[i]) {
        at = o->end[i]; /* inside one: past it */
        covered = true;
      } else if (o->start[i] > at && o->start[i] < next) {
        next = o->start[i];
      }
    }
    if (covered)
      continue;
    uint64_t page_end = set_page_end(&mt_shim.set, at, &next);
    if (!page_end)
      page_end = set_page_end(&mt_shim.internal, at, &next);
    if (page_end) {
      at = page_end;
      continue;
    }
    vma part = *v;
    part.start = at;
    part.end = next;
    each(&part, user);
    at = next;
  }
}

static const char *hex(const char *p, const char *end, uint64_t *out) {
  uint64_t v = 0;
  for (; p < end; p++) {
    unsigned d = *p >= '0' && *p <= '9'   ? (unsigned)(*p - '0')
                 : *p >= 'a' && *p <= 'f' ? (unsigned)(*p - 'a' + 10)
                                          : 16u;
    if (d == 16)
      break;
    v = v << 4 | d;
  }
  *out = v;
  return p;
}

static const char *skip_field(const char *p, const char *end) {
  while (p < end && *p != ' ')
    p++;
  while (p < end && *p == ' ')
    p++;
  return p;
}

/* "start-end perms offset major:minor inode path": false when the line is not one. */
static bool parse_vma(const char *p, const char *end, vma *v) {
  uint64_t major_, minor_;
  p = hex(p, end, &v->start);
  if (p >= end || *p != '-')
    return false;
  p = hex(p + 1, end, &v->end);
  while (p < end && *p == ' ')
    p++;
  p = skip_field(skip_field(p, end), end); /* perms, offset */
  p = hex(p, end, &major_);
  if (p >= end || *p != ':')
    return false;
  p = hex(p + 1, end, &minor_);
  while (p < end && *p == ' ')
    p++;
  v->inode = 0;
  for (; p < end && *p >= '0' && *p <= '9'; p++)
    v->inode = v->inode * 10 + (uint64_t)(*p - '0');
  while (p < end && *p == ' ')
    p++;
  v->path = p;
  v->path_length = (size_t)(end - p);
  v->major = (unsigned)major_;
  v->minor = (unsigned)minor_;
  return v->end > v->start;
}

/* Calls `each` for every mapping of the process that is not the shim's; false when the maps
 * cannot be read. */
static bool for_each_program_vma(const own_ranges *o, void (*each)(const vma *, void *),
                                 void *user) {
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  char buf[2048], line[160 + PATH_MAX];
  size_t kept = 0; /* the line being read (a longer path than PATH_MAX is no ring file's) */
  long n;
  while ((n = syscall(SYS_read, fd, buf, sizeof buf)) > 0) {
    for (long i = 0; i < n; i++) {
      if (buf[i] != '\n') {
        if (kept < sizeof line)
          line[kept++] = buf[i];
        continue;
      }
      vma v;
      if (parse_vma(line, line + kept, &v) && !is_own(o, &v))
        each_program_part(o, &v, each, user);
      kept = 0;
    }
  }
  syscall(SYS_close, fd);
  return n == 0;
}

static void add_pages(const vma *v, void *user) {
  *(uint64_t *)user += (v->end - v->start) / PAGE;
}

static void lock_vma(const vma *v, void *user) {
  int onfault = *(int *)user;
  /* Errors are mlockall's to ignore too: a mapping that cannot be faulted in, or one the
   * program's other threads just unmapped. */
  if (onfault)
    syscall(SYS_mlock2, v->start, v->end - v->start, MLOCK_ONFAULT);
  else
    syscall(SYS_mlock, v->start, v->end - v->start);
}

static bool can_lock_without_limit(void) {
  struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[2] = {{0}};
  if (syscall(SYS_capget, &header, data) != 0)
    return false;
  return (data[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1;
}

/* mlockall(MCL_CURRENT | ...) with the shim's regions left out; as the kernel's: 0, or -1 with
 * errno EPERM (no locking allowed) or ENOMEM (the program's mappings exceed the limit), nothing
 * changed then. */
static int lock_current(const own_ranges *o, int flags) {
  if (!can_lock_without_limit()) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
      rl.rlim_cur = RLIM_INFINITY;
    if (rl.rlim_cur == 0) {
      errno = EPERM;
      return -1;
    }
    uint64_t pages = 0;
    if (rl.rlim_cur != RLIM_INFINITY && for_each_program_vma(o, add_pages, &pages) &&
        pages > (uint64_t)rl.rlim_cur / PAGE) {
      errno = ENOMEM;
      return -1;
    }
  }
  /* The future mappings first (the kernel leaves the current ones as they are), or none: without
   * MCL_FUTURE, mlockall ends an earlier one, as munlockall does before the current ones are
   * locked again below. */
  long rc = flags & MCL_FUTURE ? syscall(SYS_mlockall, flags & (MCL_FUTURE | MCL_ONFAULT))
                               : syscall(SYS_munlockall);
  if (rc != 0)
    return -1;
  mt_ring_set_future_locked((flags & MCL_FUTURE) != 0);
  int onfault = (flags & MCL_ONFAULT) != 0;
  if (!for_each_program_vma(o, lock_vma, &onfault)) {
    errno = ENOMEM; /* no /proc: the kernel's mlockall would pin the shim's regions whole */
    return -1;
  }
  return 0;
}

MT_EXPORT int mlockall(int flags) {
  own_ranges own;
  if (!(flags & MCL_CURRENT) || (flags & ~(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)) ||
      !own_regions(&own)) {
    long rc = syscall(SYS_mlockall, flags);
    if (rc == 0)
      mt_ring_set_future_locked((flags & MCL_FUTURE) != 0);
    return (int)rc;
  }
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  int rc = lock_current(&own, flags);
  t->depth--;
  return rc;
}

MT_EXPORT int munlockall(void) {
  long rc = syscall(SYS_munlockall);
  if (rc == 0)
    mt_ring_set_future_locked(false);
  return (int)rc;
}
