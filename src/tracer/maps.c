/* Reading /proc/self/maps without allocating (maps.h). */
#include "tracer/maps.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *hex(const char *p, const char *end, uint64_t *out) {
  uint64_t v = 0;
  for (; p < end; p++) {
    unsigned d = *p >= '0' && *p <= '9'   ? (unsigned)(*p - '0')
                 : *p >= 'a' && *p <= 'f' ? (unsigned)(*p - 'a' + 10)
                                          : 16u;
    if (d == 16)
      break;
    v = v << 4 | d;
  }
  *out = v;
  return p;
}

static const char *skip_field(const char *p, const char *end) {
  while (p < end && *p != ' ')
    p++;
  while (p < end && *p == ' ')
    p++;
  return p;
}

/* "start-end perms offset major:minor inode path": false when the line is not one. */
static bool parse_vma(const char *p, const char *end, mt_vma *v) {
  uint64_t major_, minor_;
  p = hex(p, end, &v->start);
  if (p >= end || *p != '-')
    return false;
  p = hex(p + 1, end, &v->end);
  while (p < end && *p == ' ')
    p++;
  p = hex(skip_field(p, end), end, &v->offset); /* after the permissions */
  while (p < end && *p == ' ')
    p++;
  p = hex(p, end, &major_);
  if (p >= end || *p != ':')
    return false;
  p = hex(p + 1, end, &minor_);
  while (p < end && *p == ' ')
    p++;
  v->inode = 0;
  for (; p < end && *p >= '0' && *p <= '9'; p++)
    v->inode = v->inode * 10 + (uint64_t)(*p - '0');
  while (p < end && *p == ' ')
    p++;
  v->path = p;
  v->path_length = (size_t)(end - p);
  v->major = (unsigned)major_;
  v->minor = (unsigned)minor_;
  return v->end > v->start;
}

bool mt_maps_each(void (*each)(const mt_vma *, void *), void *user) {
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  char buf[2048], line[160 + PATH_MAX];
  size_t kept = 0; /* the line being read */
  long n;
  while ((n = syscall(SYS_read, fd, buf, sizeof buf)) > 0) {
    for (long i = 0; i < n; i++) {
      if (buf[i] != '\n') {
        if (kept < sizeof line)
          line[kept++] = buf[i];
        continue;
      }
      mt_vma v;
      if (parse_vma(line, line + kept, &v))
        each(&v, user);
      kept = 0;
    }
  }
  syscall(SYS_close, fd);
  return n == 0;
}
