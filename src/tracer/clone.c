/* clone (docs/tracer.md, "Fork"): glibc's clone() runs no fork handlers. A child made without
 * CLONE_VM is a new process with a copy of its parent's memory, the ring's mapping included: it
 * went on writing its records into the ring its parent's thread owns, as its parent. Two
 * writers on one ring corrupt it, and a lossless parent then waited for its consumer for ever.
 * So around such a clone the shim runs what fork runs: the ring's prepare and parent handlers in
 * the parent, and in the child, before the program's function, the ring's and the shim's child
 * handlers (the child gets its own ring file under --follow-fork, and runs untraced otherwise).
 * A clone with CLONE_VM (a thread, or a vfork-like child that only execs) shares the parent's
 * memory and passes straight through, as does the raw system call. */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/types.h>

#include "ring/producer.h"
#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

typedef int (*clone_fn)(int (*)(void *), void *, int, void *, ...);

static _Atomic(clone_fn) real_clone;

/* What the child runs first: a copy, in the child's memory, of its parent's frame holds it. */
typedef struct clone_start {
  int (*fn)(void *);
  void *arg;
} clone_start;

static int clone_child(void *p) {
  const clone_start *start = p;
  mt_ring_fork_child();
  mt_shim_fork_child();
  return start->fn(start->arg);
}

MT_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...) {
  /* The optional arguments are read whatever the flags, as glibc's own clone reads them. */
  va_list ap;
  va_start(ap, arg);
  pid_t *parent_tid = va_arg(ap, pid_t *);
  void *tls = va_arg(ap, void *);
  pid_t *child_tid = va_arg(ap, pid_t *);
  va_end(ap);
  clone_fn real = atomic_load_explicit(&real_clone, memory_order_acquire);
  if (!real) {
    mt_shim_thread *t = &mt_shim_self;
    t->depth++; /* dlsym may allocate: not the program's */
    real = (clone_fn)dlsym(RTLD_NEXT, "clone");
    t->depth--;
    if (!real) {
      errno = ENOSYS;
      return -1;
    }
    atomic_store_explicit(&real_clone, real, memory_order_release);
  }
  if (flags & CLONE_VM || !fn)
    return real(fn, stack, flags, arg, parent_tid, tls, child_tid);
  clone_start start = {fn, arg};
  mt_ring_fork_prepare();
  int pid = real(clone_child, stack, flags, &start, parent_tid, tls, child_tid);
  int saved = errno;
  mt_ring_fork_parent();
  errno = saved;
  return pid;
}
