/* setuid, seteuid, setreuid and setresuid under `memtap record` (docs/tracer.md, "Changing user").
 * A server started as root (nginx, Apache, a container's entry point, setpriv, runuser) drops to
 * another user and then forks its workers or execs the real program. Those processes make their
 * ring files (and memtap's notes about untraced ones) in memtap's ring directory, which memtap,
 * running as root, made private to root: after the drop they could make nothing, and their
 * allocations went untraced without a word. So the process about to drop root hands the directory
 * (and its own ring file) to its new user first. memtap, as root, still reads and removes
 * everything in it. The first user the directory is handed to keeps it: a second drop to a third
 * user leaves the latter's processes untraced, as memtap then says.
 *
 * Only the effective user matters for making files, and only a change away from root can lose
 * the directory. This adds no trust: a process of that user could already write into the ring
 * files of the traced processes of that user, which it may also ptrace. */
#include <errno.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ring/producer.h"
#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

/* Before the effective user becomes `euid` ((uid_t)-1: unchanged). Keeps errno. */
static void before_change(uid_t euid) {
  if (euid == (uid_t)-1 || euid == 0 || !mt_shim.config.record || geteuid() != 0)
    return;
  const char *dir = mt_shim_getenv(NULL, "MEMTAP_RING_DIR");
  struct stat st;
  int saved_errno = errno;
  if (dir && dir[0] == '/' && stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0)
    if (chown(dir, euid, (gid_t)-1) != 0) {
      /* the drop goes on; the new user's files then fail to be made, and that is said */
    }
  /* The process's own ring file: its next image (an exec after the drop: setpriv, runuser) must
   * open it to see that it was its own before replacing it, and a thread's first claim opens it
   * again. */
  const struct mt_ring *s = &mt_ring_session;
  if (s->base && !s->unlinked && s->geo.pid == getpid() && s->path[0] == '/')
    if (chown(s->path, euid, (gid_t)-1) != 0) {
      /* as above */
    }
  errno = saved_errno;
}

typedef int (*set1_fn)(uid_t);
typedef int (*set2_fn)(uid_t, uid_t);
typedef int (*set3_fn)(uid_t, uid_t, uid_t);

/* The next definitions were resolved with the allocator. Without them (never seen), the system
 * call changes the calling thread's credentials only, not every thread's as glibc's do. */
MT_EXPORT int setuid(uid_t uid) {
  before_change(uid);
  set1_fn f = (set1_fn)mt_shim_real.setuid;
  return f ? f(uid) : (int)syscall(SYS_setuid, uid);
}

MT_EXPORT int seteuid(uid_t euid) {
  before_change(euid);
  set1_fn f = (set1_fn)mt_shim_real.seteuid;
  return f ? f(euid) : (int)syscall(SYS_setresuid, (uid_t)-1, euid, (uid_t)-1);
}

MT_EXPORT int setreuid(uid_t ruid, uid_t euid) {
  before_change(euid);
  set2_fn f = (set2_fn)mt_shim_real.setreuid;
  return f ? f(ruid, euid) : (int)syscall(SYS_setreuid, ruid, euid);
}

MT_EXPORT int setresuid(uid_t ruid, uid_t euid, uid_t suid) {
  before_change(euid);
  set3_fn f = (set3_fn)mt_shim_real.setresuid;
  return f ? f(ruid, euid, suid) : (int)syscall(SYS_setresuid, ruid, euid, suid);
}
