/* seccomp filters (docs/tracer.md, "Sandboxes"). A program that installs a seccomp filter allows
 * the system calls it makes itself, and a filter whose default action kills (SECCOMP_RET_KILL,
 * systemd's SystemCallFilter=, a browser's sandbox) killed it traced: the tracer's own calls (a new
 * thread's stack range through pthread_getattr_np, its ring through the ring file, a fork child's
 * file) are not on its list. So before a filter goes in, through prctl(PR_SET_SECCOMP) or the
 * seccomp system call through syscall(2) (libseccomp's way), tracing stops for good in this
 * process, as in a fork child that is not followed: no record, no trampoline for new threads, no
 * file for fork children; in process, the trace is finished first (its consumer thread writes
 * files). The call then goes on as the program made it. A filter that can only make calls fail
 * (SECCOMP_RET_ERRNO) leaves tracing on: the tracer copes with its own calls failing. A filter
 * installed by inline system call instructions is not seen. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

/* Whether the filter `prog` (the program's pointer, read through process_vm_readv: a bad one is
 * the kernel's to refuse, EFAULT, not ours to fault on) may end the process, or hand it a signal,
 * for a system call: a return of KILL_PROCESS, KILL_THREAD, TRAP or USER_NOTIF (a supervisor's
 * choice), or one computed at run time. A filter that only allows, logs, fails calls with an errno
 * or defers to a ptracer leaves the tracer's calls failing at worst, which it copes with (a
 * thread's stack unknown, its ring reserved through the mapping): tracing goes on. */
static bool may_kill(const void *prog) {
  struct sock_fprog fprog;
  struct iovec local = {&fprog, sizeof fprog}, remote = {(void *)(uintptr_t)prog, sizeof fprog};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof fprog)
    return true;
  struct sock_filter insns[256];
  for (unsigned done = 0; done < fprog.len;) {
    unsigned n = fprog.len - done < 256 ? fprog.len - done : 256;
    local = (struct iovec){insns, n * sizeof insns[0]};
    remote = (struct iovec){fprog.filter + done, n * sizeof insns[0]};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)(n * sizeof insns[0]))
      return true;
    for (unsigned i = 0; i < n; i++) {
      if (BPF_CLASS(insns[i].code) != BPF_RET)
        continue;
      if (BPF_RVAL(insns[i].code) != BPF_K)
        return true;
      uint32_t action = insns[i].k & SECCOMP_RET_ACTION_FULL;
      if (action != SECCOMP_RET_ALLOW && action != SECCOMP_RET_LOG && action != SECCOMP_RET_ERRNO &&
          action != SECCOMP_RET_TRACE)
        return true;
    }
    done += n;
  }
  return false;
}

/* Before a filter (or strict mode) is installed: tracing stops here, and the program is told. */
static void before_sandbox(void) {
  mt_shim_thread *t = &mt_shim_self;
  if (t->depth || atomic_load_explicit(&mt_shim.never, memory_order_relaxed))
    return; /* the shim's own call, or stopped already */
  int saved_errno = errno;
  t->depth++;
  bool traced = mt_inprocess_end(t->in_handler != 0) ||
                atomic_load_explicit(&mt_shim.mode, memory_order_relaxed) != MT_SHIM_OFF;
  atomic_store(&mt_shim.never, true);
  mt_shim_stop();
  /* memtap record's file: its session closes (the file is kept for memtap to read), so that a
   * fork child's handlers make no file of their own. */
  if (mt_shim.ring)
    mt_ring_close(mt_shim.ring);
  t->depth--;
  if (traced) {
    static const char line[] = "memtap: the program installs a seccomp filter: tracing stops "
                               "here (the filter could refuse the tracer's own system calls)\n";
    mt_shim_say(line, sizeof line - 1);
  }
  errno = saved_errno;
}

MT_EXPORT int prctl(int option, ...) {
  va_list ap;
  va_start(ap, option);
  unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long),
                a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
  va_end(ap);
  if (option == PR_SET_SECCOMP &&
      (a2 == SECCOMP_MODE_STRICT || (a2 == SECCOMP_MODE_FILTER && may_kill((const void *)a3))))
    before_sandbox();
  int (*real)(int, ...) = (int (*)(int, ...))mt_shim_next(&mt_shim_real.prctl);
  if (!real)
    return (int)syscall(SYS_prctl, option, a2, a3, a4, a5);
  return real(option, a2, a3, a4, a5);
}

MT_EXPORT long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long), a4 = va_arg(ap, long),
       a5 = va_arg(ap, long), a6 = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_seccomp && (a1 == SECCOMP_SET_MODE_STRICT ||
                                (a1 == SECCOMP_SET_MODE_FILTER && may_kill((const void *)a3))))
    before_sandbox();
  long (*real)(long, ...) = (long (*)(long, ...))mt_shim_next(&mt_shim_real.syscall);
  if (real)
    return real(number, a1, a2, a3, a4, a5, a6);
  /* Not resolved yet (the shim's own calls while it resolves): the instruction itself. */
  long rc;
  register long r10 __asm__("r10") = a4, r8 __asm__("r8") = a5, r9 __asm__("r9") = a6;
  __asm__ volatile("syscall"
                   : "=a"(rc)
                   : "a"(number), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  if (rc < 0 && rc > -4096) {
    errno = (int)-rc;
    return -1;
  }
  return rc;
}
