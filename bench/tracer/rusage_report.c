/* A helper library of the tracer benchmark's runner, preloaded into every measured run (and through
 * memtap record and heaptrack into the traced program and their helper processes): at exit each
 * process writes its own peak RSS and CPU time to $MEMTAP_BENCH_RUSAGE_DIR/<pid>, one line
 * "<exe path>\t<VmHWM KiB>\t<user s>\t<sys s>\t<minor faults>\t<voluntary context switches>\t
 * <involuntary context switches>\t<CLOCK_MONOTONIC s at load>\t<CLOCK_MONOTONIC s at exit>". The
 * two times give the runner memtap's start-up (spawn to the program's start) and its tail (the
 * program's exit to memtap's). The runner uses it to tell the
 * program's figures from the tracer's own, which the wait4 rusage of the whole process tree mixes.
 * The RSS is the image's own VmHWM: ru_maxrss would also count the runner's pages the forked child
 * had before exec. It interposes nothing and allocates nothing. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static struct timespec loaded;

__attribute__((constructor)) static void rusage_start(void) {
  clock_gettime(CLOCK_MONOTONIC, &loaded);
}

__attribute__((destructor)) static void rusage_report(void) {
  const char *dir = getenv("MEMTAP_BENCH_RUSAGE_DIR");
  if (!dir || !*dir)
    return;
  struct rusage ru;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return;
  long hwm_kb = -1;
  char exe[PATH_MAX], path[PATH_MAX], line[PATH_MAX + 128], status[4096];
  int sfd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (sfd >= 0) {
    ssize_t got = read(sfd, status, sizeof status - 1);
    close(sfd);
    status[got > 0 ? got : 0] = '\0';
    const char *hwm = strstr(status, "VmHWM:");
    if (hwm)
      hwm_kb = strtol(hwm + 6, NULL, 10);
  }
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
  int len = snprintf(
      line, sizeof line, "%s\t%ld\t%ld.%06ld\t%ld.%06ld\t%ld\t%ld\t%ld\t%ld.%09ld\t%ld.%09ld\n",
      exe, hwm_kb, (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec, (long)ru.ru_stime.tv_sec,
      (long)ru.ru_stime.tv_usec, (long)ru.ru_minflt, (long)ru.ru_nvcsw, (long)ru.ru_nivcsw,
      (long)loaded.tv_sec, (long)loaded.tv_nsec, (long)now.tv_sec, (long)now.tv_nsec);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  if (len > 0 && write(fd, line, (size_t)len) < 0) {
    /* nothing to do: the runner shows a missing figure as n/a */
  }
  close(fd);
}
