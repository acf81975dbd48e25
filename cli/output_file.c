/* Named outputs written safely (output_file.h): the same-file refusal, the temporary file renamed
 * into place, and its removal by a signal handler that uses only async-signal-safe calls. */
#include "output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"

/* --- the temporary file, and its removal on a signal ------------------------------------------ */

static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGXFSZ};
#define NSIGNALS (sizeof cleanup_signals / sizeof cleanup_signals[0])

/* The temporary file's path, read by the handler: written only while the signals are blocked. */
static char pending_path[PATH_MAX];
static volatile sig_atomic_t pending;
static struct sigaction previous[NSIGNALS];
static bool installed[NSIGNALS];

static void remove_pending_and_die(int sig) {
  int saved_errno = errno;
  if (pending)
    unlink(pending_path);
  pending = 0;
  /* The previous action (the default: terminate) runs once this handler returns, so that the
   * exit status still says which signal it was. */
  for (size_t i = 0; i < NSIGNALS; i++)
    if (cleanup_signals[i] == sig && installed[i])
      sigaction(sig, &previous[i], NULL);
  raise(sig);
  errno = saved_errno;
}

static void block_signals(sigset_t *old) {
  sigset_t set;
  sigemptyset(&set);
  for (size_t i = 0; i < NSIGNALS; i++)
    sigaddset(&set, cleanup_signals[i]);
  sigprocmask(SIG_BLOCK, &set, old);
}

/* Installs the handler for the signals not ignored (a signal ignored by whoever started memtap,
 * as nohup does with SIGHUP, stays ignored). SIGXFSZ (a write past RLIMIT_FSIZE) is ignored
 * instead: the write then fails with EFBIG, and the command says "File too large" and removes
 * the temporary file as for any failed write, rather than die without a word (exit 153). */
static void install_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < NSIGNALS; i++) {
    installed[i] = false;
    sa.sa_handler = cleanup_signals[i] == SIGXFSZ ? SIG_IGN : remove_pending_and_die;
    if (sigaction(cleanup_signals[i], NULL, &previous[i]) == 0 && previous[i].sa_handler != SIG_IGN)
      installed[i] = sigaction(cleanup_signals[i], &sa, NULL) == 0;
  }
}

static void restore_handlers(void) {
  for (size_t i = 0; i < NSIGNALS; i++)
    if (installed[i]) {
      sigaction(cleanup_signals[i], &previous[i], NULL);
      installed[i] = false;
    }
}

/* Creates ".NAME.memtap-XXXXXX" next to `final`; the descriptor, or -1 with errno set. */
static int create_temporary(const char *final) {
  const char *slash = strrchr(final, '/');
  size_t dir_len = slash ? (size_t)(slash - final) + 1 : 0;
  const char *base = final + dir_len;
  if (dir_len + strlen(base) + sizeof ".memtap-XXXXXX" + 1 > sizeof pending_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  install_handlers();
  sigset_t old;
  block_signals(&old);
  snprintf(pending_path, sizeof pending_path, "%.*s.%s.memtap-XXXXXX", (int)dir_len, final, base);
  int fd = mkostemp(pending_path, O_CLOEXEC);
  int saved_errno = errno;
  pending = fd >= 0;
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (fd < 0) {
    restore_handlers();
    errno = saved_errno;
  }
  return fd;
}

/* Renames (keep) or removes the temporary file; false with errno set if the rename failed. */
static bool finish_temporary(const char *final, bool keep) {
  sigset_t old;
  block_signals(&old);
  bool ok = keep && rename(pending_path, final) == 0;
  int saved_errno = errno;
  if (!ok)
    unlink(pending_path);
  pending = 0;
  sigprocmask(SIG_SETMASK, &old, NULL);
  restore_handlers();
  errno = saved_errno;
  return ok;
}

/* --- opening -------------------------------------------------------------------------------- */

/* The index of the input that is the file `st` describes, or -1. */
static long same_as_input(const struct stat *st, const char *const *inputs, size_t ninputs) {
  for (size_t i = 0; i < ninputs; i++) {
    struct stat in;
    bool known = strcmp(inputs[i], "-") ? stat(inputs[i], &in) == 0 : fstat(0, &in) == 0;
    if (known && in.st_dev == st->st_dev && in.st_ino == st->st_ino)
      return (long)i;
  }
  return -1;
}

static bool refuse_input(const cli_output_file *o, const char *path, const char *input) {
  const char *shown = strcmp(input, "-") ? input : "standard input";
  if (path && !strcmp(path, input))
    cli_error(o->name, "is the input trace itself; refusing to overwrite it");
  else
    cli_error(o->name, "is the input trace itself (%s); refusing to overwrite it", shown);
  return false;
}

bool cli_output_file_open(cli_output_file *o, const char *path, const char *const *inputs,
                          size_t ninputs) {
  memset(o, 0, sizeof *o);
  o->fd = -1;
  struct stat st;
  long input;
  if (!path || !strcmp(path, "-")) {
    o->name = "<stdout>";
    o->is_stdout = true;
    /* `memtap copy T - >>T` would read what it appends. */
    if (fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode) &&
        (input = same_as_input(&st, inputs, ninputs)) >= 0)
      return refuse_input(o, NULL, inputs[input]);
    o->fd = STDOUT_FILENO;
    o->terminal = isatty(STDOUT_FILENO) == 1;
    return true;
  }
  o->name = path;
  if (!*path) { /* "memtap: : cannot replace it..." after the whole analysis, before */
    cli_error(NULL, "the output file name is empty");
    return false;
  }
  bool exists = stat(path, &st) == 0;
  if (!exists && errno != ENOENT) {
    cli_error(path, "cannot create: %s", strerror(errno));
    return false;
  }
  if (exists && (input = same_as_input(&st, inputs, ninputs)) >= 0)
    return refuse_input(o, path, inputs[input]);
  if (exists && S_ISDIR(st.st_mode)) {
    cli_error(path, "cannot create: %s", strerror(EISDIR));
    return false;
  }
  if (exists && !S_ISREG(st.st_mode)) { /* a device or a pipe: nothing to replace */
    o->fd = open(path, O_WRONLY | O_CLOEXEC);
    if (o->fd < 0) {
      cli_error(path, "cannot open: %s", strerror(errno));
      return false;
    }
    return true;
  }
  /* Through a symbolic link, the file it points to is the one replaced (the link stays). */
  if (!exists || !realpath(path, o->final))
    snprintf(o->final, sizeof o->final, "%s", path);
  o->fd = create_temporary(o->final);
  if (o->fd < 0) {
    if (exists && (errno == EACCES || errno == EPERM)) {
      /* A writable file in a directory we cannot create files in: written in place. */
      o->fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
      if (o->fd >= 0)
        return true;
    }
    cli_error(path, "cannot create: %s", strerror(errno));
    return false;
  }
  o->temporary = true;
  if (exists) {
    (void)!fchmod(o->fd, st.st_mode & 07777);
    if (st.st_uid != geteuid() || st.st_gid != getegid())
      (void)!fchown(o->fd, st.st_uid, st.st_gid); /* possible for root or the file's group */
  } else {
    mode_t mask = umask(0);
    umask(mask);
    (void)!fchmod(o->fd, 0666 & ~mask);
  }
  return true;
}

/* The terminal stream's writer: what stdio hands it goes through a cli_out on standard output,
 * which defuses it on a terminal (output.h). One at a time: a command has one output. */
static cli_out terminal_out;

static ssize_t write_to_terminal(void *cookie, const char *buf, size_t size) {
  (void)cookie;
  out_bytes(&terminal_out, buf, size);
  return out_flush(&terminal_out) ? (ssize_t)size : -1;
}

FILE *cli_output_file_stream(cli_output_file *o) {
  if (!o->stream && o->terminal) {
    fflush(stdout); /* what the command printed before stays before */
    out_init(&terminal_out, STDOUT_FILENO);
    o->stream = fopencookie(NULL, "w", (cookie_io_functions_t){.write = write_to_terminal});
  }
  if (!o->stream)
    o->stream = o->is_stdout ? stdout : fdopen(o->fd, "wb");
  if (!o->stream)
    cli_error(o->name, "cannot open: %s", strerror(errno));
  return o->stream;
}

bool cli_output_file_binary(cli_output_file *o, const char *command, const char *what) {
  if (!o->terminal)
    return true;
  cli_output_file_close(o, false);
  cli_usage_error(command,
                  "not writing %s to a terminal: give an output file or redirect "
                  "standard output",
                  what);
  return false;
}

bool cli_output_file_close(cli_output_file *o, bool keep) {
  bool ok = true;
  int error = 0;
  if (o->stream) {
    if (o->stream == stdout ? fflush(o->stream) != 0 : fclose(o->stream) != 0)
      ok = false, error = errno;
  } else if (!o->is_stdout && o->fd >= 0 && close(o->fd) != 0) {
    ok = false, error = errno;
  }
  o->stream = NULL;
  o->fd = -1;
  if (keep && !ok)
    cli_error(o->name, "writing failed: %s", strerror(error));
  keep = keep && ok;
  if (o->temporary) {
    o->temporary = false;
    if (!finish_temporary(o->final, keep) && keep) {
      cli_error(o->name, "cannot replace it with what was written: %s", strerror(errno));
      keep = false;
    }
  }
  return keep;
}
