/* setuid, seteuid, setreuid and setresuid under `memtap record` (docs/tracer.md, "Changing user").
 * A server started as root (nginx, Apache, a container's entry point, setpriv, runuser) becomes
 * another user and then forks its workers or execs the real program. Those processes make their
 * ring files (and memtap's notes about untraced ones) in memtap's ring directory, which memtap,
 * running as root, made private to root: after the change they could make nothing, and their
 * allocations went untraced without a word. So a process about to become another user while root
 * first makes that user's subdirectory in the ring directory (ring/user_dir.h), where the user's
 * processes then make their files; the directory itself stays root's, so that nobody but root can
 * rename, replace or empty it. A change that fails, or a temporary one (seteuid and back), leaves
 * only an empty subdirectory. */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cancel_hold.h"
#include "ring/user_dir.h"
#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

/* Before the effective user becomes `euid` ((uid_t)-1: unchanged). Keeps errno. */
static void before_change(uid_t euid) {
  if (euid == (uid_t)-1 || euid == 0 || !mt_shim.config.record || geteuid() != 0)
    return;
  const char *dir = mt_shim_ring_variable(MT_SHIM_RING_DIR);
  int saved_errno = errno;
  int cancel = mt_cancel_hold(); /* open, close */
  if (dir && dir[0] == '/' && mt_ring_user_dir_prepare(dir, euid) != 0) {
    /* the change goes on; the user's files then fail to be made, and that is said */
  }
  mt_cancel_release(cancel);
  errno = saved_errno;
}

typedef int (*set1_fn)(uid_t);
typedef int (*set2_fn)(uid_t, uid_t);
typedef int (*set3_fn)(uid_t, uid_t, uid_t);

/* Without a next definition (never seen), the system call changes the calling thread's
 * credentials only, not every thread's as glibc's do. */
MT_EXPORT int setuid(uid_t uid) {
  before_change(uid);
  set1_fn f = (set1_fn)mt_shim_next(&mt_shim_real.setuid);
  return f ? f(uid) : (int)syscall(SYS_setuid, uid);
}

MT_EXPORT int seteuid(uid_t euid) {
  before_change(euid);
  set1_fn f = (set1_fn)mt_shim_next(&mt_shim_real.seteuid);
  return f ? f(euid) : (int)syscall(SYS_setresuid, (uid_t)-1, euid, (uid_t)-1);
}

MT_EXPORT int setreuid(uid_t ruid, uid_t euid) {
  before_change(euid);
  set2_fn f = (set2_fn)mt_shim_next(&mt_shim_real.setreuid);
  return f ? f(ruid, euid) : (int)syscall(SYS_setreuid, ruid, euid);
}

MT_EXPORT int setresuid(uid_t ruid, uid_t euid, uid_t suid) {
  before_change(euid);
  set3_fn f = (set3_fn)mt_shim_next(&mt_shim_real.setresuid);
  return f ? f(ruid, euid, suid) : (int)syscall(SYS_setresuid, ruid, euid, suid);
}
