/* The ends of a process that run no exit handler, and exec (docs/tracer.md, "In-process mode").
 * In process the trace is finished by an exit handler, so a program that left by `_exit` or
 * `_Exit` (dash's every exit, Python's os._exit, a SIGTERM handler) or replaced its image by exec
 * (`sh -c 'exec prog'`, env, a launcher) left an empty trace. The shim interposes those functions:
 * in a process that runs a consumer thread (mt_inprocess_end), tracing stops and the trace is
 * finished before the call goes on. Anywhere else (memtap record, whose ring file outlives the
 * process; a forked or vfork child, whose pid is not the consumer's) they only pass the call on.
 *
 * An exec that fails returns to a program no longer traced. So an exec that would surely fail
 * (no executable regular file at the path or descriptor, or none on PATH for the p forms) is
 * passed on without finishing, and one that failed all the same is said. The l forms build their
 * argument vector on the stack as glibc does, then go through the v forms. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cancel_hold.h"
#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

/* glibc declares these only for _GNU_SOURCE builds or newer versions. */
int execvpe(const char *file, char *const argv[], char *const envp[]);
int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags);

/* Whether the kernel would run `path` (relative to `dirfd`): a regular file the process may
 * execute. `flags` as execveat's (AT_EMPTY_PATH: `dirfd` itself, AT_SYMLINK_NOFOLLOW). */
static bool runnable_at(int dirfd, const char *path, int flags) {
  struct stat st;
  /* (the flag first: an invalid pointer is the kernel's to refuse, EFAULT, as untraced) */
  if ((flags & AT_EMPTY_PATH) && path && !*path) /* the descriptor's file; its mode */
    return fstat(dirfd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
  return fstatat(dirfd, path, &st, flags & AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
         faccessat(dirfd, path, X_OK, AT_EACCESS) == 0;
}

static bool executable(const char *path) {
  return runnable_at(AT_FDCWD, path, 0);
}

/* Whether execvp(file) finds something to run: a path with a slash, or an executable in a PATH
 * directory (glibc's default PATH when it is unset). */
static bool found_on_path(const char *file) {
  if (!*file)
    return false;
  if (strchr(file, '/'))
    return executable(file);
  const char *path = mt_shim_getenv(NULL, "PATH");
  if (!path)
    path = "/bin:/usr/bin";
  char candidate[4096];
  size_t length = strlen(file);
  for (const char *dir = path;; dir++) {
    const char *end = strchrnul(dir, ':');
    size_t n = (size_t)(end - dir);
    if (n == 0) /* an empty entry is the current directory */
      n = 1, dir = ".";
    if (n + 1 + length < sizeof candidate) {
      memcpy(candidate, dir, n);
      candidate[n] = '/';
      memcpy(candidate + n + 1, file, length + 1);
      if (executable(candidate))
        return true;
    }
    if (!*end)
      return false;
    dir = end;
  }
}

/* Whether this process runs the in-process consumer. A signal the consumer thread is about to
 * send again (the program took it inside libc) is waited for first: an exec must not replace the
 * program before the signal ends it. */
static bool tracing_here(void) {
  mt_inprocess_await_signal();
  return mt_inprocess_running();
}

/* Before an exec that is expected to succeed: the trace is finished. Returns whether it was.
 * Callers ask tracing_here() first, so that an exec anywhere else (memtap record, which
 * needs none of this) makes no system call of the shim's. */
static bool before_exec(bool expected) {
  return expected && mt_inprocess_end(mt_shim_self.in_handler != 0);
}

/* After an exec returned (it failed): said when the trace was finished for it. Returns rc. */
static int after_exec(bool finished, const char *what, int rc) {
  if (finished) {
    int saved_errno = errno;
    char line[600];
    int n = snprintf(line, sizeof line,
                     "memtap: the trace ended before an exec of %s, which failed (%s): the program "
                     "goes on untraced\n",
                     what, strerror(saved_errno));
    if (n > 0)
      mt_shim_say(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    errno = saved_errno;
  }
  return rc;
}

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);

static int next_execve(const char *path, char *const argv[], char *const envp[]) {
  execve_fn f = (execve_fn)mt_shim_next(&mt_shim_real.execve);
  return f ? f(path, argv, envp) : (int)syscall(SYS_execve, path, argv, envp);
}

MT_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  bool finished = tracing_here() && before_exec(executable(path));
  return after_exec(finished, path, next_execve(path, argv, envp));
}

MT_EXPORT int execv(const char *path, char *const argv[]) {
  bool finished = tracing_here() && before_exec(executable(path));
  execv_fn f = (execv_fn)mt_shim_next(&mt_shim_real.execv);
  extern char **environ;
  return after_exec(finished, path, f ? f(path, argv) : next_execve(path, argv, environ));
}

MT_EXPORT int execvp(const char *file, char *const argv[]) {
  bool finished = tracing_here() && before_exec(found_on_path(file));
  execv_fn f = (execv_fn)mt_shim_next(&mt_shim_real.execvp);
  if (!f) {
    errno = ENOSYS;
    return after_exec(finished, file, -1);
  }
  return after_exec(finished, file, f(file, argv));
}

MT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  bool finished = tracing_here() && before_exec(found_on_path(file));
  execve_fn f = (execve_fn)mt_shim_next(&mt_shim_real.execvpe);
  if (!f) {
    errno = ENOSYS;
    return after_exec(finished, file, -1);
  }
  return after_exec(finished, file, f(file, argv, envp));
}

MT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  bool finished = tracing_here() && before_exec(runnable_at(fd, "", AT_EMPTY_PATH));
  typedef int (*fexecve_fn)(int, char *const[], char *const[]);
  fexecve_fn f = (fexecve_fn)mt_shim_next(&mt_shim_real.fexecve);
  int rc = f ? f(fd, argv, envp) : (int)syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH);
  return after_exec(finished, "a descriptor", rc);
}

MT_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                       int flags) {
  bool finished = tracing_here() && before_exec(runnable_at(dirfd, path, flags));
  typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);
  execveat_fn f = (execveat_fn)mt_shim_next(&mt_shim_real.execveat);
  int rc = f ? f(dirfd, path, argv, envp, flags)
             : (int)syscall(SYS_execveat, dirfd, path, argv, envp, flags);
  return after_exec(finished, *path ? path : "a descriptor", rc);
}

/* The l forms: arguments up to the NULL (and, for execle, the environment after it). */
static size_t count_arguments(va_list ap) {
  size_t n = 1; /* arg0, already taken */
  while (va_arg(ap, const char *))
    n++;
  return n;
}

#define COLLECT_ARGUMENTS(argv, arg, last, count)                                                  \
  va_list ap;                                                                                      \
  va_start(ap, last);                                                                              \
  va_list counting;                                                                                \
  va_copy(counting, ap);                                                                           \
  size_t count = count_arguments(counting);                                                        \
  va_end(counting);                                                                                \
  char *argv[count + 1];                                                                           \
  argv[0] = (char *)(arg);                                                                         \
  for (size_t i = 1; i <= count; i++)                                                              \
  argv[i] = va_arg(ap, char *)

MT_EXPORT int execl(const char *path, const char *arg, ...) {
  COLLECT_ARGUMENTS(argv, arg, arg, count);
  va_end(ap);
  return execv(path, argv);
}

MT_EXPORT int execlp(const char *file, const char *arg, ...) {
  COLLECT_ARGUMENTS(argv, arg, arg, count);
  va_end(ap);
  return execvp(file, argv);
}

MT_EXPORT int execle(const char *path, const char *arg, ...) {
  COLLECT_ARGUMENTS(argv, arg, arg, count);
  char *const *envp = va_arg(ap, char *const *);
  va_end(ap);
  return execve(path, argv, envp);
}

/* unshare(CLONE_NEWUSER) and setns into a user namespace want the process single-threaded, and
 * the consumer thread made them fail (EINVAL) where untraced they succeed (sandboxes, `unshare
 * -U`, rootless containers). The trace is finished first, which ends that thread, and the call
 * goes on; tracing ends there, as said. The thread may still count as the process's for a moment
 * after it was joined: the call is tried again for up to 100 ms while it says EINVAL. */
static void say_ended_for(const char *what) {
  char line[200];
  int n = snprintf(line, sizeof line,
                   "memtap: the trace ended before %s, which wants the process single-threaded "
                   "(memtap record traces past it)\n",
                   what);
  if (n > 0)
    mt_shim_say(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static int retried(long (*call)(long, long), long a, long b, bool finished) {
  long rc = call(a, b);
  for (int i = 0; finished && rc != 0 && errno == EINVAL && i < 100; i++) {
    struct timespec ms = {0, 1000000};
    int cancel = mt_cancel_hold();
    nanosleep(&ms, NULL);
    mt_cancel_release(cancel);
    rc = call(a, b);
  }
  return (int)rc;
}

static long unshare_call(long flags, long unused) {
  (void)unused;
  int (*f)(int) = (int (*)(int))mt_shim_next(&mt_shim_real.unshare);
  return f ? f((int)flags) : syscall(SYS_unshare, flags);
}

static long setns_call(long fd, long type) {
  int (*f)(int, int) = (int (*)(int, int))mt_shim_next(&mt_shim_real.setns);
  return f ? f((int)fd, (int)type) : syscall(SYS_setns, fd, type);
}

MT_EXPORT int unshare(int flags) {
  bool finished = (flags & CLONE_NEWUSER) && mt_inprocess_end(mt_shim_self.in_handler != 0);
  if (finished)
    say_ended_for("unshare(CLONE_NEWUSER)");
  return retried(unshare_call, flags, 0, finished);
}

/* Whether `fd` is a user namespace's (setns with type 0 takes any kind). */
static bool user_namespace_fd(int fd) {
  char link[64], target[32];
  int n = snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t len = n > 0 ? readlink(link, target, sizeof target - 1) : -1;
  return len >= 5 && memcmp(target, "user:", 5) == 0;
}

MT_EXPORT int setns(int fd, int type) {
  bool finished = (type == CLONE_NEWUSER || (type == 0 && user_namespace_fd(fd))) &&
                  mt_inprocess_end(mt_shim_self.in_handler != 0);
  if (finished)
    say_ended_for("setns into a user namespace");
  return retried(setns_call, fd, type, finished);
}

/* daemon(3) forks, and the parent leaves by glibc's internal _exit, which the shim's does not see;
 * the child goes on without the consumer thread, whose copy the fork did not make: the trace is
 * finished before, and ends there (memtap record --follow-fork traces the daemon). */
MT_EXPORT int daemon(int nochdir, int noclose) {
  mt_inprocess_end(mt_shim_self.in_handler != 0);
  int (*f)(int, int) = (int (*)(int, int))mt_shim_next(&mt_shim_real.daemon);
  if (!f) {
    errno = ENOSYS;
    return -1;
  }
  return f(nochdir, noclose);
}

/* The process ends: the trace first, then the next definition in `slot` (_exit or _Exit), or
 * the system call. */
static _Noreturn void leave(void *const *slot, int status) {
  mt_record_process_end(); /* for memtap record; in process the trace is finished next */
  mt_inprocess_end(mt_shim_self.in_handler != 0);
  void (*f)(int) = (void (*)(int))mt_shim_next(slot);
  if (f)
    f(status);
  for (;;)
    syscall(SYS_exit_group, status);
}

MT_EXPORT void _exit(int status) {
  leave(&mt_shim_real.exit_, status);
}

MT_EXPORT void _Exit(int status) {
  leave(&mt_shim_real.exit_upper, status);
}
