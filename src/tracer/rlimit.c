/* setrlimit, setrlimit64, prlimit and prlimit64 (docs/tracer.md, "Resource limits"). The ring file
 * is mapped whole when tracing starts (16 GiB of address space sampled, 64 GiB with full tracing,
 * almost none of it touched), planned under the address-space limit the program started with. A
 * program that lowers its own limit later (a test harness, a sandboxing launcher, Python's
 * resource.setrlimit, bash's ulimit -v) would then have its later mappings refused where untraced
 * they succeed. So before such a call goes on, the shim gives back the rings its threads are not
 * using (ring/give_back.c), keeping as many as fit in a sixteenth of the room the new limit leaves
 * the process, as a file planned under that limit would take. Only the calling process's own
 * RLIMIT_AS is looked at; a limit set from outside (prlimit --pid) is not seen. */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ring/producer.h"
#include "tracer/maps.h"
#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

/* The process's address space now (/proc/self/statm's first field), in bytes; 0 if unknown. */
static uint64_t address_space_size(void) {
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  char buf[128];
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  uint64_t pages = 0;
  for (long i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
    pages = pages * 10 + (uint64_t)(buf[i] - '0');
  long page = sysconf(_SC_PAGESIZE);
  return pages * (uint64_t)(page > 0 ? page : 4096);
}

/* The other mappings of the ring file in this process: a consumer in process (inprocess.c) maps
 * it a second time, read-only. After a give-back that view is in pieces, split where rings stayed
 * mapped; pieces past the first VIEW_PIECES are left as they are (room given back, not lost). */
#define VIEW_PIECES 32
typedef struct view_piece {
  uint64_t start, end, offset;
} view_piece;

typedef struct other_views {
  const struct mt_ring *s;
  view_piece view[VIEW_PIECES];
  unsigned count;
} other_views;

static void note_other_view(const mt_vma *v, void *user) {
  other_views *o = user;
  const struct mt_ring *s = o->s;
  uint64_t base = (uint64_t)(uintptr_t)s->base;
  if (v->inode == (uint64_t)s->ino && v->major == major(s->dev) && v->minor == minor(s->dev) &&
      (v->end <= base || v->start >= base + s->map_size) && o->count < VIEW_PIECES)
    o->view[o->count++] = (view_piece){v->start, v->end, v->offset};
}

/* Whether ring `i` was given back before any thread had it: nothing was, or will be, written in it,
 * so no consumer reads its data (a consumer reads a ring only up to its tail). */
static bool never_written(const struct mt_ring *s, uint32_t i) {
  const mt_ring_block *b = mt_ring_block_at(s->base, &s->geo, i);
  return mt_ring_given_back(i) && !mt_load_relaxed(&b->generation) && !mt_load_relaxed(&b->tail);
}

/* Unmaps, from the view `v`, file range [from, to). */
static void unmap_from_view(const view_piece *v, uint64_t from, uint64_t to) {
  uint64_t view_end = v->offset + (v->end - v->start);
  if (from < v->offset)
    from = v->offset;
  if (to > view_end)
    to = view_end;
  if (from < to)
    munmap((void *)(uintptr_t)(v->start + (from - v->offset)), (size_t)(to - from));
}

/* The rings given back that were never written, out of the other views `o` too: a consumer's view
 * of a 64 GiB file would otherwise keep the program's room as short as before. */
static void unmap_other_views(const struct mt_ring *s, const other_views *o) {
  uint64_t ring_bytes = s->geo.ring_words * 8;
  for (unsigned k = 0; k < o->count; k++)
    for (uint32_t i = 0, n = s->geo.ring_count; i < n;) {
      if (!never_written(s, i)) {
        i++;
        continue;
      }
      uint32_t first = i;
      while (i < n && never_written(s, i))
        i++;
      unmap_from_view(&o->view[k], s->geo.data_offset + first * ring_bytes,
                      s->geo.data_offset + i * ring_bytes);
    }
}

/* Makes the ring file's mapping fit under an address-space limit of `limit` bytes: a sixteenth at
 * most of the room the limit leaves beside everything else mapped, the rings of live threads
 * always kept. */
static void make_room(uint64_t limit) {
  uint64_t rings = mt_ring_mapped_data_bytes();
  if (!rings)
    return; /* not tracing, or nothing left to give */
  const struct mt_ring *s = &mt_ring_session;
  other_views views = {.s = s};
  uint64_t size = address_space_size(), viewed = 0;
  if (mt_maps_each(note_other_view, &views))
    for (unsigned k = 0; k < views.count; k++)
      viewed += views.view[k].end - views.view[k].start;
  /* Everything but the ring file's mappings, which the rings given back leave almost empty. */
  uint64_t others = size > rings + viewed ? size - rings - viewed : 0;
  uint64_t room = limit > others ? limit - others : 0;
  if (rings + viewed <= room / 16)
    return;
  uint64_t ring_bytes = s->geo.ring_words * 8;
  uint64_t fit = ring_bytes ? room / 16 / ring_bytes : 0;
  uint64_t held = s->header ? mt_load_relaxed(&s->header->rings_in_use) : 0;
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  if (mt_ring_give_back(fit > held ? (uint32_t)(fit - held < UINT32_MAX ? fit - held : UINT32_MAX)
                                   : 0))
    unmap_other_views(s, &views);
  t->depth--;
}

/* Whether a call of `pid`'s limit `resource` to `limit` lowers this process's address-space limit
 * (a call the kernel refuses as invalid is left to refuse). */
static bool lowers_own_limit(pid_t pid, int resource, const struct rlimit *limit) {
  return limit && resource == RLIMIT_AS && limit->rlim_cur != RLIM_INFINITY &&
         limit->rlim_cur <= limit->rlim_max && (pid == 0 || pid == getpid());
}

static int next_prlimit(void *next, pid_t pid, int resource, const struct rlimit *limit,
                        struct rlimit *old) {
  if (next)
    return ((int (*)(pid_t, int, const struct rlimit *, struct rlimit *))next)(pid, resource, limit,
                                                                               old);
  return (int)syscall(SYS_prlimit64, pid, resource, limit, old);
}

static int next_setrlimit(void *next, int resource, const struct rlimit *limit) {
  if (next)
    return ((int (*)(int, const struct rlimit *))next)(resource, limit);
  return (int)syscall(SYS_prlimit64, 0, resource, limit, NULL);
}

MT_EXPORT int setrlimit(__rlimit_resource_t resource, const struct rlimit *limit) {
  if (lowers_own_limit(0, (int)resource, limit))
    make_room(limit->rlim_cur);
  return next_setrlimit(mt_shim_real.setrlimit, (int)resource, limit);
}

MT_EXPORT int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *limit) {
  _Static_assert(sizeof(struct rlimit64) == sizeof(struct rlimit), "64-bit limits");
  const struct rlimit *l = (const struct rlimit *)limit;
  if (lowers_own_limit(0, (int)resource, l))
    make_room(l->rlim_cur);
  return next_setrlimit(mt_shim_real.setrlimit64, (int)resource, l);
}

MT_EXPORT int prlimit(pid_t pid, __rlimit_resource_t resource, const struct rlimit *limit,
                      struct rlimit *old) {
  if (lowers_own_limit(pid, (int)resource, limit))
    make_room(limit->rlim_cur);
  return next_prlimit(mt_shim_real.prlimit, pid, (int)resource, limit, old);
}

MT_EXPORT int prlimit64(pid_t pid, __rlimit_resource_t resource, const struct rlimit64 *limit,
                        struct rlimit64 *old) {
  const struct rlimit *l = (const struct rlimit *)limit;
  if (lowers_own_limit(pid, (int)resource, l))
    make_room(l->rlim_cur);
  return next_prlimit(mt_shim_real.prlimit64, pid, (int)resource, l, (struct rlimit *)old);
}
