/* /proc/PID/stat parsing without stdio or malloc (process.h). */
#include "ring/process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int mt_format_decimal(char *out, uint64_t value) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = (char)('0' + value % 10);
    value /= 10;
  } while (value);
  for (int i = 0; i < n; i++)
    out[i] = digits[n - 1 - i];
  return n;
}

bool mt_read_small_file(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t got;
  do
    got = read(fd, buf, size - 1);
  while (got < 0 && errno == EINTR);
  close(fd);
  if (got <= 0)
    return false;
  buf[got] = 0;
  return true;
}

/* Field `field` (1-based, 3 or more) of the /proc/PID/stat line in `buf`, or NULL. */
static const char *stat_field(const char *buf, int field) {
  /* The command name (field 2) may contain spaces and parentheses: fields resume after the
   * last ')'. */
  const char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ')
    return NULL;
  p += 2;
  for (int at = 3; at < field; at++) {
    p = strchr(p, ' ');
    if (!p)
      return NULL;
    p++;
  }
  return p;
}

bool mt_process_ended(int pid) {
  char path[32] = "/proc/";
  if (pid <= 0)
    return false;
  int n = 6 + mt_format_decimal(path + 6, (uint64_t)pid);
  memcpy(path + n, "/stat", 6);
  char buf[1024];
  if (!mt_read_small_file(path, buf, sizeof buf))
    return false;
  const char *state = stat_field(buf, 3), *threads = stat_field(buf, 20);
  return state && threads && *state == 'Z' && threads[0] == '1' && threads[1] == ' ';
}

bool mt_process_stat(int pid, uint64_t *start_time, char *state) {
  char path[32] = "/proc/";
  int n = 6;
  if (pid > 0)
    n += mt_format_decimal(path + n, (uint64_t)pid);
  else {
    memcpy(path + n, "self", 4);
    n += 4;
  }
  memcpy(path + n, "/stat", 6);
  char buf[1024];
  if (!mt_read_small_file(path, buf, sizeof buf))
    return false;
  const char *p = stat_field(buf, 3);
  if (!p)
    return false;
  if (state)
    *state = *p;
  if (!(p = stat_field(buf, 22)))
    return false;
  uint64_t v = 0;
  if (*p < '0' || *p > '9')
    return false;
  for (; *p >= '0' && *p <= '9'; p++)
    v = v * 10 + (uint64_t)(*p - '0');
  if (start_time)
    *start_time = v;
  return true;
}

/* This process's time namespace's boottime offset in clock ticks (USER_HZ, 100 on Linux, the unit
 * of /proc/PID/stat's start time): /proc shows other processes' start times shifted by it. 0
 * outside a time namespace, or when /proc/self/timens_offsets cannot be read. */
static int64_t boottime_offset_ticks(void) {
  char buf[256];
  if (!mt_read_small_file("/proc/self/timens_offsets", buf, sizeof buf))
    return 0;
  const char *p = strstr(buf, "boottime");
  if (!p)
    return 0;
  p += 8;
  int64_t field[2] = {0, 0};
  for (int i = 0; i < 2; i++) {
    while (*p == ' ' || *p == '\t')
      p++;
    bool negative = *p == '-';
    p += negative;
    for (; *p >= '0' && *p <= '9' && field[i] < INT64_MAX / 100; p++)
      field[i] = field[i] * 10 + (*p - '0');
    field[i] = negative ? -field[i] : field[i];
  }
  return field[0] * 100 + field[1] / 10000000;
}

bool mt_process_alive(int pid, uint64_t start_time) {
  if (pid <= 0)
    return false;
  if (kill(pid, 0) != 0 && errno == ESRCH)
    return false;
  uint64_t started;
  char state;
  if (!mt_process_stat(pid, &started, &state))
    return kill(pid, 0) == 0 || errno != ESRCH;
  if (state == 'Z' || state == 'X')
    return false;
  /* A start time taken outside this process's time namespace (memtap's, for a program started
   * with unshare --time) reads shifted here. */
  return start_time == 0 || started == start_time ||
         (int64_t)(started - start_time) == boottime_offset_ticks();
}

uint64_t mt_process_pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

bool mt_pid_namespace_alive(uint64_t pidns) {
  int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return true;
  bool found = false, listed = false;
  char buf[4096] __attribute__((aligned(8)));
  long got;
  while (!found && (got = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
    listed = true;
    /* struct linux_dirent64: inode (8 bytes), offset (8), record length (2), type (1), name */
    for (long at = 0; at + 19 < got && !found;) {
      unsigned short reclen;
      memcpy(&reclen, buf + at + 16, sizeof reclen);
      const char *name = buf + at + 19;
      at += reclen ? reclen : got;
      if (name[0] < '1' || name[0] > '9')
        continue;
      char path[64] = "/proc/";
      size_t n = strnlen(name, 24);
      memcpy(path + 6, name, n);
      memcpy(path + 6 + n, "/ns/pid", 8);
      struct stat st;
      found = stat(path, &st) == 0 && (uint64_t)st.st_ino == pidns;
    }
  }
  close(dir);
  return found || !listed;
}
