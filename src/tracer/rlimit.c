/* setrlimit, setrlimit64, prlimit and prlimit64 (docs/tracer.md, "Resource limits"). The ring file
 * is mapped whole when tracing starts (16 GiB of address space sampled, 64 GiB with full tracing,
 * almost none of it touched), planned under the address-space limit the program started with. A
 * program that lowers its own limit later (a test harness, a sandboxing launcher, Python's
 * resource.setrlimit, bash's ulimit -v) would then have its later mappings refused where untraced
 * they succeed. So once such a call has succeeded, the shim gives back the rings its threads are
 * not using (ring/give_back.c), keeping as many as fit in a sixteenth of the room the new limit
 * leaves the process, as a file planned under that limit would take. Only the calling process's
 * own RLIMIT_AS is looked at; a limit set from outside (prlimit --pid) is not seen. In process, the
 * consumer thread's own view of the file is not given back (its cursor unmaps it whole when it
 * closes, which would take whatever the program had mapped in a hole since): the shim says so. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ring/producer.h"
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

/* Makes the ring file's mapping fit under an address-space limit of `limit` bytes: a sixteenth at
 * most of the room the limit leaves beside everything else mapped, the rings of live threads
 * always kept. Only in the process that made the file: a vfork child shares its parent's memory,
 * and a limit it sets is its own. errno is kept. */
static void make_room(uint64_t limit) {
  const struct mt_ring *s = &mt_ring_session;
  uint64_t rings = mt_ring_mapped_data_bytes();
  if (!rings || s->geo.pid != getpid())
    return; /* not tracing, nothing left to give, or not the file's process */
  int saved_errno = errno;
  uint64_t size = address_space_size();
  uint64_t others = size > rings ? size - rings : 0;
  uint64_t room = limit > others ? limit - others : 0;
  if (rings > room / 16) {
    uint64_t ring_bytes = s->geo.ring_words * 8;
    uint64_t fit = ring_bytes ? room / 16 / ring_bytes : 0;
    uint64_t held = s->header ? mt_load_relaxed(&s->header->rings_in_use) : 0;
    mt_shim_thread *t = &mt_shim_self;
    t->depth++;
    mt_ring_give_back(fit > held ? (uint32_t)(fit - held < UINT32_MAX ? fit - held : UINT32_MAX)
                                 : 0);
    t->depth--;
    /* In process the consumer's view of the whole file stays: said once when it takes room the
     * program would have untraced. */
    static _Atomic int said;
    uint64_t now = address_space_size(), left = limit > now ? limit - now : 0;
    if (mt_inprocess_running() && left < s->map_size && !atomic_exchange(&said, 1)) {
      char line[400];
      int n = snprintf(line, sizeof line,
                       "memtap: warning: the program lowered its address-space limit to %llu MiB, "
                       "and in process the tracer's own view of its ring file (%llu MiB) stays "
                       "mapped: %llu MiB are left, less than the program would have untraced; "
                       "trace it with memtap record instead\n",
                       (unsigned long long)(limit >> 20), (unsigned long long)(s->map_size >> 20),
                       (unsigned long long)(left >> 20));
      if (n > 0)
        mt_shim_say(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    }
  }
  errno = saved_errno;
}

/* Whether a call (that succeeded) setting `pid`'s limit `resource` to `limit` set this process's
 * address-space limit to a finite value. */
static bool lowers_own_limit(pid_t pid, int resource, const struct rlimit *limit) {
  return limit && resource == RLIMIT_AS && limit->rlim_cur != RLIM_INFINITY &&
         (pid == 0 || pid == getpid());
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
  int rc = next_setrlimit(mt_shim_real.setrlimit, (int)resource, limit);
  if (rc == 0 && lowers_own_limit(0, (int)resource, limit))
    make_room(limit->rlim_cur);
  return rc;
}

MT_EXPORT int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *limit) {
  _Static_assert(sizeof(struct rlimit64) == sizeof(struct rlimit), "64-bit limits");
  const struct rlimit *l = (const struct rlimit *)limit;
  int rc = next_setrlimit(mt_shim_real.setrlimit64, (int)resource, l);
  if (rc == 0 && lowers_own_limit(0, (int)resource, l))
    make_room(l->rlim_cur);
  return rc;
}

MT_EXPORT int prlimit(pid_t pid, __rlimit_resource_t resource, const struct rlimit *limit,
                      struct rlimit *old) {
  int rc = next_prlimit(mt_shim_real.prlimit, pid, (int)resource, limit, old);
  if (rc == 0 && lowers_own_limit(pid, (int)resource, limit))
    make_room(limit->rlim_cur);
  return rc;
}

MT_EXPORT int prlimit64(pid_t pid, __rlimit_resource_t resource, const struct rlimit64 *limit,
                        struct rlimit64 *old) {
  const struct rlimit *l = (const struct rlimit *)limit;
  int rc = next_prlimit(mt_shim_real.prlimit64, pid, (int)resource, l, (struct rlimit *)old);
  if (rc == 0 && lowers_own_limit(pid, (int)resource, l))
    make_room(l->rlim_cur);
  return rc;
}
