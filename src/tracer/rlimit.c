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
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/address_space_limit.h"
#include "ring/producer.h"
#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

/* Makes the ring file's mapping fit under the address-space limit just set (`limit` bytes): a
 * sixteenth at most of the room the limit leaves beside everything else mapped, the rings of live
 * threads always kept. Only in the process that made the file: a vfork child shares its parent's
 * memory, and a limit it sets is its own. errno is kept. */
static void make_room(uint64_t limit) {
  const struct mt_ring *s = &mt_ring_session;
  uint64_t rings = mt_ring_mapped_data_bytes();
  if (!rings || s->geo.pid != getpid())
    return; /* not tracing, nothing left to give, or not the file's process */
  int saved_errno = errno;
  uint64_t size = mt_address_space_size();
  uint64_t others = size > rings ? size - rings : 0;
  uint64_t room = limit > others ? limit - others : 0; /* beside everything but the rings */
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
    uint64_t left = mt_address_space_room();
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

/* After a call setting `pid`'s limit `resource` to `limit` returned `rc`: when it set this
 * process's address-space limit to a finite value, the ring file is made to fit. Returns `rc`. */
static int after_setting(int rc, pid_t pid, int resource, const struct rlimit *limit) {
  if (rc == 0 && limit && resource == RLIMIT_AS && limit->rlim_cur != RLIM_INFINITY &&
      (pid == 0 || pid == getpid()))
    make_room(limit->rlim_cur);
  return rc;
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
  return after_setting(next_setrlimit(mt_shim_real.setrlimit, (int)resource, limit), 0,
                       (int)resource, limit);
}

MT_EXPORT int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *limit) {
  _Static_assert(sizeof(struct rlimit64) == sizeof(struct rlimit), "64-bit limits");
  const struct rlimit *l = (const struct rlimit *)limit;
  return after_setting(next_setrlimit(mt_shim_real.setrlimit64, (int)resource, l), 0, (int)resource,
                       l);
}

MT_EXPORT int prlimit(pid_t pid, __rlimit_resource_t resource, const struct rlimit *limit,
                      struct rlimit *old) {
  return after_setting(next_prlimit(mt_shim_real.prlimit, pid, (int)resource, limit, old), pid,
                       (int)resource, limit);
}

MT_EXPORT int prlimit64(pid_t pid, __rlimit_resource_t resource, const struct rlimit64 *limit,
                        struct rlimit64 *old) {
  const struct rlimit *l = (const struct rlimit *)limit;
  return after_setting(
      next_prlimit(mt_shim_real.prlimit64, pid, (int)resource, l, (struct rlimit *)old), pid,
      (int)resource, l);
}
