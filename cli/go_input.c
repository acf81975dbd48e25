/* Opening a Go execution trace as a memtrace trace (go_input.h). The converted trace goes to an
 * unlinked temporary file, not to memory, so that a long Go trace needs disk, not RAM; the reader
 * opens it again through /proc/self/fd and the file disappears when the reader closes. */
#include "go_input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "memtap/import.h"

bool cli_is_go_trace(const char *path) {
  /* Only a regular file can be looked at first and read again from its start: opening a FIFO
   * would let its writer in (and kill it by SIGPIPE at the close), and the bytes read from a pipe
   * or a terminal (`<(...)`, /dev/stdin) would be gone for the reader. Those are read as
   * memtrace traces, as `-` is. */
  struct stat st;
  if (!strcmp(path, "-") || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
    return false;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return false;
  unsigned char head[16];
  ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, head, sizeof head, 0) : -1;
  close(fd);
  return n == (ssize_t)sizeof head && mt_go_trace_detect(head, sizeof head);
}

static int temporary_file(void) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir)
    dir = "/tmp";
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0)
    return fd;
  char path[4096];
  snprintf(path, sizeof path, "%s/memtap-go-XXXXXX", dir);
  fd = mkostemp(path, O_CLOEXEC);
  if (fd >= 0)
    unlink(path);
  return fd;
}

mt_reader *cli_open_go_trace(const char *path, const mt_reader_options *options, bool *damaged) {
  int in = open(path, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    cli_error(path, "cannot open: %s", strerror(errno));
    return NULL;
  }
  int out = temporary_file();
  if (out < 0) {
    cli_error(path, "cannot create a temporary file for the converted Go trace: %s",
              strerror(errno));
    close(in);
    return NULL;
  }
  mt_go_import_options o = {.on_warning = options->on_warning,
                            .warning_user = options->warning_user};
  struct stat st;
  if (fstat(in, &st) == 0)
    o.start_time = (int64_t)st.st_mtim.tv_sec * 1000000 + st.st_mtim.tv_nsec / 1000;
  mt_error err;
  mt_go_import_stats stats = {0};
  int rc = mt_go_import_fd(in, out, &o, &stats, &err);
  close(in);
  /* Damaged after a whole generation (a program killed while tracing): the generations before it
   * were converted into a readable trace. Damaged in the first, or cut after the header (no
   * generation at all, though the converter wrote the trace's start), nothing was converted:
   * that stays a failure. */
  if (damaged && rc == MT_E_MALFORMED && stats.generations > 0 && lseek(out, 0, SEEK_END) > 0) {
    if (options->on_warning)
      cli_error(path, "warning: %s; the analysis covers the generations converted before it",
                err.message);
    *damaged = true;
    rc = MT_OK;
  }
  mt_reader *r = NULL;
  if (rc == MT_OK) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", out);
    rc = mt_reader_open(&r, self, options, &err);
  }
  close(out);
  if (rc) {
    cli_report(path, &err);
    return NULL;
  }
  return r;
}
