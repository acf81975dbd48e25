/* memtap record: runs a program under the native tracer (libmemtap-preload.so, contract.md) and
 * turns the ring files of its process(es) into memtrace traces through mt_recorder
 * (memtap/record.h, docs/record.md). This file owns the process side: refusing programs the
 * tracer cannot enter, the child's environment, signals (passed on by record_signals.c; memtap
 * waits for the program), the subreaper, finding ring files as processes appear and exec, one trace
 * per process under --follow-fork, and the closing summary. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"
#include "process_program.h"
#include "record_dir.h"
#include "record_ends.h"
#include "record_signals.h"
#include "record_untraced.h"
#include "ring/user_dir.h"
#include "memtap/record.h"
#include "memtap/ring.h"
#include "common/empty_file.h"
#include "common/grow.h"
#include "ring/clock.h"
#include "ring/process.h"

static const char usage[] =
    "usage: memtap record [-o FILE] [--rate R | --sample-interval N | --full] [--follow-fork]\n"
    "                     [--v2] [--compress] [--time-resolution D] [--debuginfod]\n"
    "                     [--no-debug-cache]\n"
    "                     -- PROGRAM ARGS...\n"
    "\n"
    "Runs PROGRAM with the memtap tracer loaded (LD_PRELOAD) and writes what it allocates and\n"
    "frees as a memtrace trace, symbolised (functions, files, lines, inlined frames).\n"
    "\n"
    "  -o, --output FILE        the trace (default: PROGRAM.PID.ctf, .ctf.zst with --compress)\n"
    "      --rate R             samples per 8-byte word, 7.2e-15 to 1 (memtrace's MEMTRACE_RATE;\n"
    "                           1 records every allocation, as --full)\n"
    "      --sample-interval N  mean bytes between samples, 8 to 1P, e.g. 64K (default 512K;\n"
    "                           8 records every allocation, as --full)\n"
    "      --full               record every allocation (lossless: the program waits for memtap)\n"
    "      --follow-fork        trace forked children too, each into FILE.PID\n"
    "      --v2                 write memtrace format version 2 (readable by memtrace 0.2.x)\n"
    "      --compress           compress the trace with zstd\n"
    "      --time-resolution D  round event times down to steps of D, 1us to 1s (like 1ms;\n"
    "                           default 1us, the format's own): a long --full trace shrinks\n"
    "                           several-fold compressed, lifetimes shorter than D read as 0\n"
    "      --debuginfod         fetch missing debug info from $DEBUGINFOD_URLS (default: only\n"
    "                           this machine's: /usr/lib/debug, .gnu_debuglink)\n"
    "      --no-debug-cache     do not keep inflated copies of compressed debug files (default:\n"
    "                           in $XDG_CACHE_HOME/memtap or ~/.cache/memtap, 16 at most)\n"
    "  -h, --help               show this help\n"
    "\n"
    "Without an option the environment decides (MEMTAP_FULL, MEMTAP_SAMPLE_INTERVAL, MEMTAP_RATE,\n"
    "MEMTRACE_RATE, MEMTAP_TIME_RESOLUTION). Ctrl-C reaches the program; memtap then writes\n"
    "the trace. A program that execs another (sh -c 'exec prog') is traced as the program it\n"
    "became; if the tracer cannot enter that one, memtap says so and the trace ends at the exec.\n"
    "Processes the program starts (gcc's cc1, a shell's commands) are traced only with\n"
    "--follow-fork; without it memtap says how many went untraced and which programs they ran.\n"
    "Statically linked, set-user-ID and sanitizer-built programs are refused with the\n"
    "reason. The rings live in a private directory under $TMPDIR (or /tmp), removed at the end;\n"
    "one that a killed memtap left behind is removed by a later memtap record once its program\n"
    "has ended.\n"
    "\n"
    "Exit status: the program's; a program killed by a signal kills memtap with the same signal\n"
    "once the trace is written (\"killed by SIGSEGV\" says so); 1 when the trace could not be\n"
    "written or the program was refused; 64 bad command line or MEMTAP_* variable; 126 the\n"
    "program cannot be executed; 127 it was not found.\n";

enum {
  OPT_RATE = 256,
  OPT_INTERVAL,
  OPT_FULL,
  OPT_FOLLOW,
  OPT_V2,
  OPT_COMPRESS,
  OPT_DEBUGINFOD,
  OPT_NO_DEBUG_CACHE,
  OPT_TIME_RESOLUTION
};

/* Ring size per thread, unless MEMTAP_RING_SIZE says otherwise: under --full (below), and when
 * sampling, where the consumer naps between polls (NAP_RECORDS). */
#define FULL_RING_SIZE "16M"
#define SAMPLED_RING_SIZE "4M"
/* --full: the main loop polls again at once while it is behind (a poll read FULL_NAP_RECORDS or
 * more). Caught up, polling again at once would read a few records per poll right behind the
 * program, each poll pulling the ring's tail and data lines from the program's core while it
 * writes them (the program then pays about four times as much per record): it naps instead for
 * as long as the records' arrival rate takes to bring about FULL_NAP_RECORDS of them (about a
 * tenth of a 16 MiB ring), FULL_NAP_MIN_US to FULL_NAP_MAX_US, so that the ring stays far from
 * full and the program never waits for it. Idle (a poll read nothing), it sleeps from
 * IDLE_MIN_US, doubling up to IDLE_MAX_US. The ring directory is scanned for new processes every
 * SCAN_US. Every sleep ends early when a child exits (SIGCHLD). */
#define FULL_NAP_RECORDS 16384
#define FULL_NAP_MIN_US 20
#define FULL_NAP_MAX_US 1000
#define IDLE_MIN_US 50
#define IDLE_MAX_US 5000
#define SCAN_US 20000
/* Sampling: a consumer that woke for every few records took the program's CPU on a loaded machine
 * (thousands of involuntary context switches a second for sampled churn). It naps after every poll
 * for as long as the records' arrival rate takes to bring about NAP_RECORDS of them (a few hundred
 * KiB of a 4 MiB ring even with deep stacks), at most NAP_MAX_US: well under the trace's 1 s
 * flush interval, so the file stays readable up to its last flush. A nap at most doubles the
 * previous one (from IDLE_MIN_US), so that a burst after a quiet spell waits for us about as long
 * as the spell lasted at most. Records arriving faster than NAP_RECORDS per NAP_BUSY_US (a high
 * sampling rate), or a poll that read more than NAP_BEHIND, mean polling again at once, as --full
 * does: a consumer that sleeps and wakes a thousand times a second on a loaded machine waits for a
 * CPU at every wake-up, and the producer for it. */
#define NAP_RECORDS 1024
#define NAP_BEHIND (16 * NAP_RECORDS)
#define NAP_BUSY_US 1000
#define NAP_MAX_US 100000

typedef struct settings {
  const char *output;
  bool follow_fork, v2, compress, debuginfod, no_debug_cache;
  mt_record_settings sampling;
} settings;

/* One traced process (or, without --follow-fork, a child whose ring is drained unwritten). */
typedef struct traced {
  int pid; /* in memtap's pid namespace; 0: not known (a process of another namespace, gone) */
  /* Its ring file's name: the pid in the process's own namespace, and that namespace when it is
   * not memtap's (else 0). A process that has a dead one's pid (reused, or the same pid in
   * another namespace) makes a file of the same name: its start time tells it apart. */
  int ring_pid;
  uint64_t ring_ns;
  uint64_t start_time;
  int64_t created_ns;  /* when the file read now was made (CLOCK_REALTIME) */
  uint64_t seen_start; /* its start time as memtap read it in /proc (0: not read), which a
                          time namespace may shift from the tracer's own reading */
  char ring_name[96];  /* the name of the file read now */
  bool main;           /* the process memtap started */
  dev_t dev;
  ino_t ino;
  mt_recorder *rec;
  mt_cursor *discard; /* an untraced child's ring, drained so that it never waits for us */
  int fd;
  char *path;
  bool finished;
  bool regular; /* the trace is a regular file (not a device or a pipe) */
  mt_recorder_stats stats;
  char *exe; /* the program it ran when last looked at (/proc/PID/exe), or NULL */
  long uid;  /* the effective user id it ran as then, or -1 */
  /* Seen running an image other than the one its tracer started in (mt_recorder_image): an exec,
   * perhaps of the same program, that the tracer did not follow. */
  bool image_changed;
  /* Ended and read to its end while the run went on: its trace is finished, its recorder and
   * descriptors let go (retire), and what the end of the run says of it kept here. */
  bool retired;
  char *described; /* mt_recorder_executable, kept */
  /* Readable once the process has ended (pidfd_open), so that a nap ends then; -1 once noted,
   * when pidfd_open failed, or for a process of another pid namespace that /proc does not show. */
  int pidfd;
  int64_t ended_ns; /* CLOCK_REALTIME when memtap first knew it had ended, 0 before */
  uint64_t end_key; /* its name for the end watcher (record_ends.h), 0 if not watched */
  /* Already ended when its trace was opened: memtap never saw it alive (end_of). */
  bool ended_unseen;
} traced;

typedef struct session {
  const settings *set;
  const char *shim; /* the tracer's path, as given to the program */
  char dir[PATH_MAX];
  int dir_lock; /* record_dir_make's lock on `dir` */
  char *context;
  const char *program;
  int main_pid;
  const char *main_output;
  traced *procs;
  size_t count;
  uint64_t retired_records; /* read by recorders since retired, for records_read */
  uint64_t traces_open;     /* traces with a descriptor open (each has two: ours, the recorder's) */
  int64_t namespaces_read_us; /* when retire_ended last listed the pid namespaces alive */
  record_untraced untraced;   /* descendants that went untraced (without --follow-fork) */
  /* Module files deleted or replaced while the program ran (mt_recorder_options.module_gone). */
  struct gone_module {
    char *path;
    bool from_process; /* its symbols were read from the running process */
  } gone[16];
  size_t gone_count;
  bool failed;
  /* A signalfd for SIGCHLD (blocked): naps end at a child's change. (An inotify watch on `dir`,
   * to attach new processes at once, was tried: closing it cost the kernel 6-20 ms at the end of
   * every run, more than memtap's whole fixed cost on a short program.) */
  int chld_fd;
  struct pollfd *polled; /* the naps' descriptors: chld_fd and the processes' pidfds */
  size_t polled_cap;
  /* Stamps ends while the main loop is busy (started with the first pidfd), NULL if it could not
   * start; end_keys names the processes it watches. */
  record_ends *ends;
  uint64_t end_keys;
} session;

/* --- finding things -------------------------------------------------------------------------- */

/* PROGRAM as exec would find it: a name with a slash as given, else the first executable file of
 * that name in $PATH. */
static bool find_program(const char *name, char *out, size_t size, int *error) {
  if (strchr(name, '/')) {
    if (strlen(name) >= size) {
      *error = ENAMETOOLONG;
      return false;
    }
    strcpy(out, name);
    struct stat st;
    if (stat(out, &st)) {
      *error = errno;
      return false;
    }
    if (S_ISDIR(st.st_mode)) {
      *error = EISDIR;
      return false;
    }
    return true;
  }
  const char *path = getenv("PATH");
  if (!path || !*path)
    path = "/usr/local/bin:/usr/bin:/bin";
  *error = ENOENT;
  for (const char *p = path;;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    int n = snprintf(out, size, "%.*s%s%s", (int)len, p, len ? "/" : "", name);
    struct stat st;
    if (n > 0 && (size_t)n < size && stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
      if (access(out, X_OK) == 0)
        return true;
      *error = EACCES;
    }
    if (!colon)
      return false;
    p = colon + 1;
  }
}

/* The shim: $MEMTAP_PRELOAD, else next to the memtap executable, else its lib directories. */
static bool find_shim(char *out, size_t size) {
  const char *env = getenv("MEMTAP_PRELOAD");
  if (env && *env) {
    snprintf(out, size, "%s", env);
    return access(out, R_OK) == 0;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return false;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (slash)
    *slash = 0;
  static const char *const places[] = {"", "/../lib/x86_64-linux-gnu/memtap", "/../lib/memtap"};
  for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
    if (snprintf(out, size, "%s%s/libmemtap-preload.so", exe, places[i]) >= (int)size)
      continue;
    if (access(out, R_OK) == 0)
      return true;
  }
  return false;
}

/* --- the child ------------------------------------------------------------------------------- */

static void set_sampling_env(const settings *set) {
  char value[64];
  unsetenv("MEMTAP_FULL");
  unsetenv("MEMTAP_SAMPLE_INTERVAL");
  unsetenv("MEMTAP_RATE");
  unsetenv("MEMTRACE_RATE");
  if (set->sampling.full) {
    setenv("MEMTAP_FULL", "1", 1);
  } else {
    snprintf(value, sizeof value, "%.17g", set->sampling.rate);
    setenv("MEMTAP_RATE", value, 1);
  }
}

/* In the child: waits for the go byte, sets the environment, execs. Never returns. */
static void run_child(const session *s, const char *shim, const char *resolved, char **argv,
                      int go_fd, int status_fd) {
  /* A TSC reading for the program's clock calibration, taken before the wait, so that the span
   * from here to the shim's start replaces the millisecond it would otherwise wait for. */
  char anchor[64];
  mt_clock_anchor_format(anchor, sizeof anchor);
  char byte;
  if (read(go_fd, &byte, 1) != 1)
    _exit(127);
  close(go_fd);
  /* Signal dispositions are left as memtap found them (forked before it changed its own): a
   * program run under nohup, or in the background of a shell, ignores what it would untraced. */
  const char *old = getenv("LD_PRELOAD");
  char preload[2 * PATH_MAX + 2];
  if (old && *old)
    snprintf(preload, sizeof preload, "%s:%s", shim, old);
  else
    snprintf(preload, sizeof preload, "%s", shim);
  char pid[32];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  setenv("LD_PRELOAD", preload, 1);
  setenv("MEMTAP_RECORD", "1", 1);
  setenv("MEMTAP_RING_DIR", s->dir, 1);
  /* The pids memtap reads file names and /proc by: a process in another pid namespace names its
   * file after that namespace too, and judges memtap's liveness by a lock, not by its pid. */
  char pidns[32];
  snprintf(pidns, sizeof pidns, "%" PRIu64, mt_process_pid_namespace());
  if (strcmp(pidns, "0"))
    setenv("MEMTAP_RING_PID_NS", pidns, 1);
  else
    unsetenv("MEMTAP_RING_PID_NS");
  setenv(MT_CLOCK_ANCHOR_ENV, anchor, 1);
  /* memtap, the consumer every traced process waits for: a process that makes its ring file after
   * memtap was killed then stops tracing at once, where it would wait for a consumer that never
   * comes for the ring's attach timeout (10 s) with its ring full. */
  uint64_t memtap_start = 0;
  char consumer[64];
  mt_process_stat(getppid(), &memtap_start, NULL);
  snprintf(consumer, sizeof consumer, "%d:%" PRIu64, (int)getppid(), memtap_start);
  setenv("MEMTAP_RING_CONSUMER", consumer, 1);
  /* Kept after the producer closes, so that a program faster than our first look is still read;
   * the directory is ours and goes at the end. */
  setenv("MEMTAP_RING_PRESERVE", "1", 1);
  if (s->set->follow_fork) {
    /* Every descendant traces, the exec'd ones included: the shim turns itself off in any
     * process whose pid is not MEMTAP_TRACE_PID, so the variable is left out. */
    unsetenv("MEMTAP_TRACE_PID");
    setenv("MEMTAP_FOLLOW_FORK", "1", 1);
  } else {
    setenv("MEMTAP_TRACE_PID", pid, 1);
    unsetenv("MEMTAP_FOLLOW_FORK");
  }
  unsetenv("MEMTAP"); /* in-process mode would trace twice */
  unsetenv("MEMTRACE");
  set_sampling_env(s->set);
  /* Full tracing is lossless: a thread whose ring is full waits for us. A ring of 16 MiB holds
   * about 10 ms of a thread allocating as fast as it can, so that a consumer descheduled for a
   * few scheduler ticks does not stall the program (the default 1 MiB lasts under 1 ms). Pages
   * of the file are only touched by threads that write that much. */
  if (!getenv("MEMTAP_RING_SIZE"))
    setenv("MEMTAP_RING_SIZE", s->set->sampling.full ? FULL_RING_SIZE : SAMPLED_RING_SIZE, 1);
  execv(resolved, argv);
  int e = errno;
  if (e == ENOEXEC) {
    /* A script without "#!": the shell runs it, as execvp (env, nice, timeout) and shells do. */
    size_t n = 0;
    while (argv[n])
      n++;
    char **sh_argv = calloc(n + 2, sizeof *sh_argv);
    if (sh_argv) {
      static char sh[] = "sh";
      sh_argv[0] = sh;
      sh_argv[1] = (char *)resolved;
      memcpy(sh_argv + 2, argv + 1, n * sizeof *argv); /* argv[1..n), then the NULL */
      execv("/bin/sh", sh_argv);
    }
  }
  if (write(status_fd, &e, sizeof e) < 0) {
    /* nothing more to say */
  }
  _exit(e == ENOENT ? 127 : 126);
}

/* --- traced processes ------------------------------------------------------------------------ */

/* Each process traced holds descriptors until it has ended (its trace, and the recorder's): a
 * build under --follow-fork runs more processes at once than the usual soft limit of 1024 lets
 * memtap keep. memtap raises its own to the hard limit once the program has been forked, so that
 * the program runs with the limits it was given. */
static void raise_descriptor_limit(void) {
  struct rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

/* The latest process whose ring file had this name. */
static traced *find_traced(session *s, const char *ring_name) {
  for (size_t i = s->count; i-- > 0;)
    if (!strcmp(s->procs[i].ring_name, ring_name))
      return &s->procs[i];
  return NULL;
}

static traced *main_traced(session *s) {
  return s->count ? &s->procs[0] : NULL;
}

/* Whether another process's trace already has the name `path`. */
static bool path_taken(const session *s, const traced *t, const char *path) {
  for (size_t i = 0; i < s->count; i++)
    if (&s->procs[i] != t && s->procs[i].path && !strcmp(s->procs[i].path, path))
      return true;
  return false;
}

/* Whether two paths name one existing file (device and inode). */
static bool same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static void note_ended(traced *t, int64_t now_ns);

static int open_output(session *s, traced *t) {
  if (t->fd >= 0)
    return 0;
  if (t->main || same_file(s->main_output, "/dev/null")) {
    t->path = strdup(s->main_output);
  } else {
    /* OUTPUT.PID; a pid an earlier process of the run had (reused, or a process of another pid
     * namespace that memtap cannot see) adds .2, .3, ... */
    size_t len = strlen(s->main_output) + 48;
    t->path = malloc(len);
    int pid = t->pid ? t->pid : t->ring_pid;
    if (t->path)
      snprintf(t->path, len, "%s.%d", s->main_output, pid);
    for (unsigned k = 2; t->path && path_taken(s, t, t->path); k++)
      snprintf(t->path, len, "%s.%d.%u", s->main_output, pid, k);
  }
  if (!t->path)
    return -1;
  t->fd = open(t->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (t->fd < 0) {
    cli_error(t->path, "cannot create the trace: %s", strerror(errno));
    s->failed = true;
    return -1;
  }
  /* A regular file is locked before it is emptied, so that two recorders given one name do not
   * both write it: the second stops (the lock is the one in-process tracing takes). A device or
   * a pipe is written as it is. */
  struct stat st;
  struct flock whole = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  t->regular = fstat(t->fd, &st) == 0 && S_ISREG(st.st_mode);
  if (t->regular && (fcntl(t->fd, F_OFD_SETLK, &whole) != 0 || mt_empty_file(t->fd) != 0)) {
    int e = errno;
    cli_error(t->path, "cannot write the trace: %s",
              e == EAGAIN || e == EACCES ? "another process is writing it" : strerror(e));
    close(t->fd);
    t->fd = -1;
    s->failed = true;
    return -1;
  }
  s->traces_open++;
  /* Its end wakes memtap's naps (pidfd_open, Linux 5.3): without it the end is seen at the next
   * look, up to a nap later. */
  int64_t ended_ns = 0;
  if (t->pid > 0 && t->pidfd < 0 && t->pid == t->ring_pid &&
      record_ends_adopt(s->ends, t->pid, t->start_time, &t->pidfd, &t->end_key, &ended_ns)) {
    /* The end watcher found it alive while the main loop was busy, and watches it. */
    if (ended_ns)
      note_ended(t, ended_ns);
  } else if (t->pid > 0 && t->pidfd < 0) {
    t->pidfd = (int)syscall(SYS_pidfd_open, t->pid, 0);
    struct pollfd ended = {.fd = t->pidfd, .events = POLLIN};
    t->ended_unseen = t->pidfd < 0 ? errno == ESRCH : poll(&ended, 1, 0) == 1;
    /* And a thread stamps it as it comes, whatever the main loop is doing then (record_ends.h). */
    if (t->pidfd >= 0 && !t->ended_unseen) {
      if (!s->ends)
        s->ends = record_ends_start(s->dir);
      t->end_key = ++s->end_keys;
      if (!record_ends_watch(s->ends, t->pidfd, t->end_key))
        t->end_key = 0;
    }
  }
  return 0;
}

/* Why exec said ENOENT of a program file that exists: what it needs to run (its #! interpreter
 * or its dynamic loader) is missing. That, into `out`, or NULL when it is not the reason. */
static const char *missing_loader(const char *program, char *out, size_t size) {
  const char *what = mt_record_program_needs(program, out, size);
  return what && access(out, F_OK) != 0 ? what : NULL;
}

/* mt_recorder_options.module_gone: noted once per path, for the end of the run. */
static void note_module_gone(void *user, const char *path, bool from_process) {
  session *s = user;
  for (size_t i = 0; i < s->gone_count; i++)
    if (!strcmp(s->gone[i].path, path)) {
      s->gone[i].from_process &= from_process;
      return;
    }
  if (s->gone_count == sizeof s->gone / sizeof s->gone[0])
    return;
  char *copy = strdup(path);
  if (copy)
    s->gone[s->gone_count++] = (struct gone_module){copy, from_process};
}

/* After the run: what those modules' frames are. */
static void say_modules_gone(session *s) {
  for (size_t i = 0; i < s->gone_count; i++) {
    const char *path = s->gone[i].path, *slash = strrchr(path, '/');
    if (s->gone[i].from_process)
      cli_error(NULL,
                "note: %s was deleted or replaced while the program ran: its symbols were "
                "read from the running program's mapping of it",
                path);
    else
      cli_error(NULL,
                "warning: %s was deleted or replaced while the program ran, and could not "
                "be read from the program: its frames have no symbols (%s+0x...)",
                path, slash ? slash + 1 : path);
    free(s->gone[i].path);
  }
  s->gone_count = 0;
}

static mt_recorder *new_recorder(session *s, traced *t) {
  char cache[PATH_MAX];
  mt_recorder_options o = {
      .version = s->set->v2 ? 2 : 3,
      .compress = s->set->compress,
      /* A followed child's: its own command line, which its ring gives (NULL), not the one
       * memtap started. */
      .context = t->main ? s->context : NULL,
      .debuginfod = s->set->debuginfod,
      .debug_cache_dir = s->set->no_debug_cache ? NULL : cli_debug_cache_dir(cache, sizeof cache),
      .time_resolution_us = (int64_t)s->set->sampling.time_resolution_us,
      .module_gone = note_module_gone,
      .module_gone_user = s,
  };
  mt_recorder *rec;
  mt_error err = {0};
  int rc = mt_recorder_create(&rec, t->fd, &o, &err);
  if (rc) {
    cli_report(t->path, &err);
    return NULL;
  }
  return rec;
}

/* The pid and start time of the process that made the ring file at `path`; false while it is
 * still being made (or is not a ring file). */
static bool ring_creator(const char *path, int *pid, uint64_t *start_time, int64_t *created_ns) {
  mt_cursor *c;
  mt_ring_file_info info;
  if (mt_cursor_open_file(&c, path, NULL))
    return false;
  bool ok = mt_cursor_info(c, &info) == MT_OK;
  mt_cursor_close(c);
  *pid = info.pid;
  *start_time = info.start_time;
  *created_ns = info.created_realtime_ns;
  return ok;
}

static traced *add_traced(session *s, const char *name, int ring_pid, uint64_t ring_ns,
                          uint64_t start_time) {
  traced *grown = realloc(s->procs, (s->count + 1) * sizeof *grown);
  if (!grown)
    return NULL;
  s->procs = grown;
  traced *t = &s->procs[s->count++];
  /* A process of another namespace is looked at in /proc by its pid in ours, when it can be
   * found: /proc/PID names another process of ours, or none. */
  int pid = ring_ns ? (int)process_in_namespace(ring_ns, ring_pid, start_time) : ring_pid;
  *t = (traced){
      .pid = pid, .ring_pid = ring_pid, .ring_ns = ring_ns, .fd = -1, .uid = -1, .pidfd = -1};
  snprintf(t->ring_name, sizeof t->ring_name, "%s", name);
  return t;
}

static void retire_ended(session *s);
static void nap(session *s, long us);

/* Before a new trace is opened: when the descriptors held come near the limit (a burst of
 * processes since the last scan, a memtap slowed down by others), the processes that have ended
 * are retired first, rather than a process left untraced. */
static bool make_room_for_descriptors(session *s) {
  struct rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY)
    return false;
  /* What else memtap may have open at once: the ring file being attached, module files being
   * symbolised, the directory, standard streams. */
  if (3 * s->traces_open + 64 < (uint64_t)files.rlim_cur)
    return false;
  retire_ended(s);
  return true;
}

/* A ring file `name` in the directory: attach it, or notice an exec. `owner`: the user of the
 * subdirectory it lies in (uid-N/, ring/user_dir.h), or -1 for the directory itself. */
static void found_ring(session *s, const char *name, const struct stat *st, long owner) {
  int pid;
  uint64_t ns;
  if (strlen(name) >= sizeof((traced *)0)->ring_name || !record_dir_ring_name(name, &pid, &ns))
    return;
  traced *t = find_traced(s, name);
  if (t && t->dev == st->st_dev && t->ino == st->st_ino)
    return;
  /* Before any entry is taken up: retiring may finish the one found here. */
  if (make_room_for_descriptors(s))
    t = find_traced(s, name);
  char path[PATH_MAX + 256];
  if (snprintf(path, sizeof path, "%s/%s", s->dir, name) >= (int)sizeof path)
    return;
  bool wanted = (!ns && pid == s->main_pid) || s->set->follow_fork;
  mt_error err = {0};
  if (!wanted) {
    /* A child the tracer should not follow made a ring anyway: drain it so it never waits. */
    mt_cursor *c;
    if (mt_cursor_open_file(&c, path, &err))
      return;
    mt_cursor_register_primary(c, NULL);
    if (!t) {
      t = add_traced(s, name, pid, ns, 0);
      if (!t) {
        mt_cursor_close(c);
        return;
      }
    } else if (t->discard) {
      mt_cursor_close(t->discard);
    }
    t->discard = c;
    t->dev = st->st_dev;
    t->ino = st->st_ino;
    return;
  }
  /* The same name after an exec (the start time stays), or another process: one that has the
   * pid of a process traced earlier in the run, or the same pid in another pid namespace of the
   * same kind (two `unshare --pid --fork`). That one gets a trace of its own. */
  int creator;
  uint64_t start_time;
  int64_t created_ns;
  if (!ring_creator(path, &creator, &start_time, &created_ns))
    return; /* still being created: next scan */
  /* A file of a user subdirectory speaks for a process of that user only: one whose name and
   * header disagree on the pid, or that names a live process running as another user (a root
   * process, whose trace it would replace as if that process had exec'd), is not taken. */
  if (owner >= 0) {
    long euid = ns ? -1 : process_effective_uid(creator); /* our /proc: our namespace's pids */
    if (creator != pid || (euid >= 0 && euid != owner)) {
      if (!t)
        t = add_traced(s, name, pid, ns, 0);
      if (t) {
        t->dev = st->st_dev;
        t->ino = st->st_ino;
      }
      return;
    }
  }
  /* A start time of 0 is unknown (/proc could not tell the tracer): such a file is this
   * process's after an exec, as it always was. */
  bool other = t && t->rec && t->start_time && start_time && t->start_time != start_time;
  if (t && (other || t->finished))
    t = NULL; /* a finished trace is never written again: an exec memtap took for an end too */
  if (!t && start_time) {
    /* An exec under another name: a process that had to take PID.K.memtap-ring (a dead one's
     * file had its name) may find the plain name free when it execs, and the other way round.
     * Of its two files the older is the image before the exec, which the trace drops: it is
     * removed (nobody else removes or replaces it, docs/ring.md §2), whichever is seen first. */
    for (size_t i = s->count; i-- > 0 && !t;) {
      traced *same = &s->procs[i];
      if (same->rec && !same->finished && same->ring_pid == pid && same->ring_ns == ns &&
          same->start_time == start_time)
        t = same;
    }
    struct stat now;
    if (t && created_ns < t->created_ns) {
      if (lstat(path, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino)
        unlink(path);
      return;
    }
  }
  if (!t && !(t = add_traced(s, name, pid, ns, start_time)))
    return;
  t->start_time = start_time;
  if (open_output(s, t))
    return;
  mt_recorder *rec = new_recorder(s, t);
  if (!rec)
    return;
  int rc = mt_recorder_attach(rec, path, true, &err);
  if (rc) {
    mt_recorder_destroy(rec);
    if (rc == MT_E_STATE || (rc == MT_E_IO && err.sys_errno == ENOENT))
      return; /* still being created: next scan */
    /* Not a ring we can read: say so once, and do not try this file again. */
    cli_report(path, &err);
    t->dev = st->st_dev;
    t->ino = st->st_ino;
    return;
  }
  if (t->rec) {
    /* The process called exec: the trace describes the program it became, from its start. What
     * the process was last seen running (and as whom) was the image before: a program that ends
     * before the next scan must not be taken for an exec into an untraced one. Its file under
     * another name (PID.K) is removed, as above. */
    mt_recorder_destroy(t->rec);
    if (strcmp(t->ring_name, name)) {
      char old[PATH_MAX + 256];
      struct stat was;
      if (snprintf(old, sizeof old, "%s/%s", s->dir, t->ring_name) < (int)sizeof old &&
          lstat(old, &was) == 0 && was.st_dev == t->dev && was.st_ino == t->ino)
        unlink(old);
    }
    if (ftruncate(t->fd, 0) || lseek(t->fd, 0, SEEK_SET) < 0)
      cli_error(t->path, "cannot start the trace over after exec: %s", strerror(errno));
    free(t->exe);
    t->exe = NULL;
    t->uid = -1;
  }
  t->rec = rec;
  t->dev = st->st_dev;
  t->ino = st->st_ino;
  t->created_ns = created_ns;
  snprintf(t->ring_name, sizeof t->ring_name, "%s", name);
  /* The start time as memtap's /proc gives it, for process_gone to tell the pid taken by
   * another process later: the tracer's own reading differs under a time namespace. */
  t->seen_start = 0;
  if (t->pid > 0)
    mt_process_stat(t->pid, &t->seen_start, NULL);
  t->image_changed = false; /* compared with the image that made this ring from now on */
}

/* --- an exec into a program the tracer did not start in -------------------------------------
 * A traced process that execs a set-user-ID, statically linked or sanitizer-built program, or
 * one whose environment lost LD_PRELOAD (env -i), goes on untraced, and its trace ends at the
 * exec. memtap notes the program each traced process runs at every directory scan and, at the
 * end, compares the last one with the program its trace describes; an exec of that same program
 * (a daemon re-executing itself with a clean environment) shows as a change of the process's
 * image (process_image). A program that ran and ended between two scans (SCAN_US, or a sampling
 * nap of up to NAP_MAX_US) is not seen. */

static void note_programs(session *s) {
  for (size_t i = 0; i < s->count; i++) {
    traced *t = &s->procs[i];
    char exe[PATH_MAX];
    if (!t->rec || t->finished || t->pid <= 0 || !process_program(t->pid, exe, sizeof exe))
      continue;
    uint64_t traced_image = mt_recorder_image(t->rec), image = process_image(t->pid);
    t->uid = process_effective_uid(t->pid);
    if (traced_image && image && image != traced_image)
      t->image_changed = true;
    if (!t->exe || strcmp(t->exe, exe) != 0) {
      char *copy = strdup(exe);
      if (copy) {
        free(t->exe);
        t->exe = copy;
      }
    }
  }
}

/* Whether `t` was last seen running as another user than memtap: then it could not make its ring
 * file in memtap's private directory (record_dir.h), whatever its environment. */
static bool became_another_user(const traced *t) {
  return t->uid >= 0 && t->uid != (long)geteuid();
}

/* Whether users other than its owner and group can reach and read the file at `path`: every
 * directory on the way searchable by others, the file readable by them. */
static bool others_can_read(const char *path) {
  char copy[PATH_MAX];
  struct stat st;
  if (snprintf(copy, sizeof copy, "%s", path) >= (int)sizeof copy || stat(copy, &st) != 0 ||
      !(st.st_mode & S_IROTH))
    return false;
  for (char *slash = strrchr(copy, '/'); slash && slash != copy; slash = strrchr(copy, '/')) {
    *slash = 0;
    if (stat(copy, &st) != 0 || !(st.st_mode & S_IXOTH))
      return false;
  }
  return true;
}

static void say_became_another_user(const session *s, const traced *t, const char *described) {
  if (!others_can_read(s->shim))
    cli_error(t->path,
              "warning: process %d exec'd %s as user id %ld, who cannot read the tracer (%s is "
              "not readable by other users), so the tracer did not start in it: the trace "
              "describes %s up to that exec (install memtap where all users can read it, or run "
              "memtap record as that user)",
              t->pid, t->exe, t->uid, s->shim, described);
  else
    cli_error(t->path,
              "warning: process %d exec'd %s as user id %ld, who cannot write memtap's ring "
              "directory, so the tracer did not start in it: the trace describes %s up to that "
              "exec (to trace that program, run memtap record as that user)",
              t->pid, t->exe, t->uid, described);
}

/* After the program ended: says so when the last program `t` was seen running is not the one its
 * trace describes, with the reason when memtap can tell it. */
/* Whether `t` still ran the program its trace describes when it ended: not after an exec into an
 * image the tracer did not enter, whose run is not the trace's (it ends at its last event). */
static bool ran_traced_image(const traced *t) {
  const char *described = t->rec ? mt_recorder_executable(t->rec) : NULL;
  return !t->image_changed && (!t->exe || !described || strcmp(t->exe, described) == 0);
}

static void say_untraced_exec(const session *s, const traced *t) {
  const char *described = t->rec ? mt_recorder_executable(t->rec) : t->described;
  if (!t->exe || !described || !*described) /* "": the tracer could not read /proc/self/exe */
    return;
  if (strcmp(t->exe, described) == 0) {
    if (t->image_changed && became_another_user(t))
      say_became_another_user(s, t, described);
    else if (t->image_changed)
      cli_error(t->path,
                "warning: process %d exec'd %s again and the tracer did not start in it (was "
                "LD_PRELOAD taken out of its environment?): the trace describes it up to that "
                "exec",
                t->pid, t->exe);
    return;
  }
  mt_error err = {0};
  int rc = mt_record_check_program(t->exe, &err);
  /* The paths are the traced program's to choose: cli_error defuses them on a terminal. */
  if (rc == MT_E_UNSUPPORTED)
    cli_error(t->path,
              "warning: process %d exec'd %s, which the tracer cannot enter (%s): the trace "
              "describes %s up to that exec",
              t->pid, t->exe, err.message, described);
  else if (rc == MT_OK && became_another_user(t))
    say_became_another_user(s, t, described);
  else if (rc == MT_OK)
    cli_error(t->path,
              "warning: process %d exec'd %s and the tracer did not start in it (was LD_PRELOAD "
              "taken out of its environment?): the trace describes %s up to that exec",
              t->pid, t->exe, described);
}

/* The ring files and notes of a user subdirectory (uid-N, ring/user_dir.h) of the directory open
 * at `dfd`: made by processes that left root for user N. Only regular files of that user are read,
 * and the subdirectory only when it is that user's: whatever else is there is not a tracer's. */
static void scan_user_dir(session *s, int dfd, const char *sub, uid_t uid) {
  int fd = openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  DIR *d = fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == uid ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0)
      close(fd);
    return;
  }
  struct dirent *e;
  char name[sizeof((traced *)0)->ring_name];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
        !S_ISREG(st.st_mode) || st.st_uid != uid ||
        record_untraced_take(&s->untraced, dirfd(d), e->d_name))
      continue;
    if (snprintf(name, sizeof name, "%s/%s", sub, e->d_name) < (int)sizeof name)
      found_ring(s, name, &st, (long)uid);
  }
  closedir(d);
}

static void scan(session *s) {
  DIR *d = opendir(s->dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d))) {
    struct stat st;
    uid_t uid;
    if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
      continue;
    if (S_ISDIR(st.st_mode) && mt_ring_user_dir_parse(e->d_name, &uid))
      scan_user_dir(s, dirfd(d), e->d_name, uid);
    if (!S_ISREG(st.st_mode) || record_untraced_take(&s->untraced, dirfd(d), e->d_name))
      continue;
    found_ring(s, e->d_name, &st, -1);
  }
  closedir(d);
  record_ends_scanned(s->ends);
}

static int drain_discarded(void *user, const mt_ring_event *ev) {
  (void)user;
  (void)ev;
  return MT_CURSOR_NEXT;
}

/* --full: the recorders offer their clock tick while they poll, and withdraw it before an idle
 * nap (mt_recorder_set_clock_tick). */
static void offer_clock_ticks(session *s, bool on) {
  for (size_t i = 0; i < s->count; i++)
    if (s->procs[i].rec && !s->procs[i].finished)
      mt_recorder_set_clock_tick(s->procs[i].rec, on);
}

static bool poll_all(session *s) {
  bool any = false;
  for (size_t i = 0; i < s->count; i++) {
    traced *t = &s->procs[i];
    if (t->rec && !t->finished) {
      bool progress = false;
      mt_error err = {0};
      if (mt_recorder_poll(t->rec, &progress, &err) == MT_E_NOMEM)
        cli_report(t->path, &err);
      any |= progress;
    }
    if (t->discard) {
      mt_cursor_callbacks cb = {.other = drain_discarded};
      mt_cursor_set_callbacks(t->discard, &cb, NULL);
      size_t got = 0;
      mt_cursor_poll(t->discard, 1 << 20, &got, NULL);
      any |= got > 0;
    }
  }
  return any;
}

static void finish(session *s, traced *t) {
  if (!t->rec || t->finished)
    return;
  mt_error err = {0};
  int rc = mt_recorder_finish(t->rec, &err);
  mt_recorder_stats_get(t->rec, &t->stats);
  t->finished = true;
  if (rc && !t->stats.failed)
    cli_report(t->path, &err); /* a damaged ring: the trace is written anyway */
  if (t->stats.failed) {
    cli_error(t->path, "the trace could not be written: %s", t->stats.error.message);
    s->failed = true;
  }
  if (t->stats.tracer_stopped)
    cli_error(t->path,
              "warning: the tracer in process %d took memtap for gone and stopped tracing: the "
              "trace ends early",
              t->pid ? t->pid : t->ring_pid);
}

/* Whether the process `t` is gone for good: reaped (no such pid), or its pid is another process's
 * now (another start time; in memtap's own pid namespace, where the start time was read through
 * the same /proc). A zombie is not gone yet: its trace is finished once it is reaped, after the
 * scan that may attach the ring file of the image it exec'd into just before it ended (a zombie
 * leader whose other threads still run, after pthread_exit, is not even ended). */
static bool process_gone(const traced *t) {
  if (kill(t->pid, 0) != 0 && errno == ESRCH)
    return true;
  uint64_t start;
  return t->seen_start && mt_process_stat(t->pid, &start, NULL) && start != t->seen_start;
}

/* The end to give the trace of `t`, which had ended by `ended_ns`, or 0 for its last event. One
 * that memtap never saw alive lived less than a directory scan (SCAN_US, or a nap: it was found
 * gone at once), when its last event is nearer its end than when memtap looked; unless memtap
 * was that much behind (reading a large program's symbols), and the process lived longer. */
static int64_t end_of(const traced *t, int64_t ended_ns) {
  if (!ran_traced_image(t))
    return 0; /* it exec'd an image the tracer did not enter: its trace ends with the last */
  if (t->ended_unseen && ended_ns - mt_recorder_start_time(t->rec) < 2 * SCAN_US * 1000)
    return 0;
  return ended_ns;
}

/* Notes that `t`'s process had ended by now: the earliest time memtap knew it. */
static void note_ended(traced *t, int64_t now_ns) {
  if (!t->ended_ns || now_ns < t->ended_ns)
    t->ended_ns = now_ns;
  if (t->pidfd >= 0) {
    close(t->pidfd);
    t->pidfd = -1;
  }
}

/* The path of the ring file `t`'s recorder reads; false if it does not fit. */
static bool ring_path(const session *s, const traced *t, char *path, size_t size) {
  int n = snprintf(path, size, "%s/%s", s->dir, t->ring_name);
  return n > 0 && (size_t)n < size;
}

/* Whether `path` is the ring file `t`'s recorder reads: not when the process exec'd into a
 * program whose tracer made a new file, which the next scan attaches. */
static bool ring_file_current(const traced *t, const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 && st.st_dev == t->dev && st.st_ino == t->ino;
}

/* A traced process that is gone: nothing more will come into its ring file. Its trace is
 * finished now (what the file still holds is read), and its recorder (the file's mappings, the
 * symbols read for it) and descriptors go, so that what memtap holds follows the processes alive,
 * not all those a long run (a build under --follow-fork) has had. Its ring file goes too: it
 * holds the pages the process wrote (memory, on a tmpfs), and a file of that name from now on is
 * another process's, even one given the freed inode's number again. One whose file was replaced
 * by an exec memtap has not attached yet waits for the next scan (its trace starts over then).
 * Producers of memtap's directory never remove another process's file (they take another name,
 * docs/ring.md §2), so the name checked here is not replaced between the check and the unlink. */
static void retire_ended(session *s) {
  /* Every end is noted before any trace is finished: finishing one takes time (its symbols), and
   * a process that ended meanwhile must not be stamped with a time before its end, nor one
   * checked after it with a time long after. A pidfd tells; /proc only for those without one. */
  nap(s, 0);
  for (size_t i = 0; i < s->count; i++) {
    traced *t = &s->procs[i];
    if (t->rec && !t->finished && t->pid > 0 && t->pidfd < 0 && !t->ended_ns &&
        (mt_process_ended(t->pid) || process_gone(t)))
      note_ended(t, cli_realtime_ns()); /* ended, reaped or not */
  }
  uint64_t *namespaces = NULL; /* the pid namespaces alive, read once when needed */
  size_t nnamespaces = 0;
  bool namespaces_read = false;
  for (size_t i = 0; i < s->count; i++) {
    traced *t = &s->procs[i];
    char path[PATH_MAX + 64];
    if (!t->rec || t->finished || !ring_path(s, t, path, sizeof path))
      continue;
    /* One of another pid namespace that memtap could not find in /proc (it had ended, or
     * /proc shows another namespace's processes): gone once its tracer closed its file, all of
     * it was read, and no process is left in its namespace (a closed file alone may be an exec
     * under way, whose new image removes it and may get its inode's number). */
    bool gone;
    if (t->pid > 0) {
      gone = process_gone(t);
    } else {
      /* The walk of /proc at most once a second: such traces may wait that much longer. */
      gone = t->ring_ns && mt_recorder_done(t->rec);
      if (gone && !namespaces_read && cli_monotonic_us() - s->namespaces_read_us >= 1000000) {
        namespaces = process_live_namespaces(&nnamespaces);
        namespaces_read = true;
        s->namespaces_read_us = cli_monotonic_us();
      }
      gone = gone && namespaces && !process_namespace_listed(namespaces, nnamespaces, t->ring_ns);
    }
    if (!gone || !ring_file_current(t, path))
      continue;
    nap(s, 0); /* what ended while the last trace was being finished */
    note_ended(t,
               cli_realtime_ns()); /* unless noted before (another namespace's: when seen gone) */
    int64_t end = end_of(t, t->ended_ns);
    if (end)
      mt_recorder_set_end(t->rec, end);
    finish(s, t);
    const char *described = mt_recorder_executable(t->rec);
    t->described = described ? strdup(described) : NULL;
    s->retired_records += t->stats.records;
    mt_recorder_destroy(t->rec);
    t->rec = NULL;
    t->retired = true;
    close(t->fd);
    t->fd = -1;
    s->traces_open--;
    /* Forgotten once gone from the name: a new file there may be given its inode's number. */
    if (!ring_file_current(t, path) || unlink(path) == 0)
      t->dev = 0, t->ino = 0;
  }
  free(namespaces);
}

/* `path` as one shell word: as it is when it needs no quoting, else in single quotes. NULL when
 * out of memory. */
static char *shell_word(const char *path) {
  size_t n = strlen(path), quotes = 0;
  bool plain = n > 0 && path[0] != '-';
  for (const char *p = path; *p; p++) {
    plain &= strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:@%+=,-",
                    *p) != NULL;
    quotes += *p == '\'';
  }
  char *word = malloc(n + 3 * quotes + 5);
  if (!word || plain)
    return word ? strcpy(word, path) : NULL;
  char *w = word;
  if (path[0] == '-') /* not an option: ./-name */
    w = stpcpy(w, "./");
  *w++ = '\'';
  for (const char *p = path; *p; p++)
    w = *p == '\'' ? stpcpy(w, "'\\''") : (*w = *p, w + 1);
  *w++ = '\'';
  *w = 0;
  return word;
}

/* The closing line of one trace. Through cli_error: names a program chose (the default trace
 * name is the program's) are defused on a terminal. A device or a pipe has no size to give and
 * nothing to look at afterwards. */
static void summary(const traced *t) {
  char size[32], head[64] = "";
  const mt_recorder_stats *st = &t->stats;
  if (t->regular) /* the IEC style of every other output */
    snprintf(head, sizeof head, "%s, ", out_format_bytes((double)st->bytes, size));
  char *word = t->regular ? shell_word(t->path) : NULL;
  /* Lost records have a cause the user can act on: say it. */
  const char *why = !st->lost_records ? ""
                    : st->claims_failed_space
                        ? " (threads found no room for their rings: the ring directory's file "
                          "system is full; set TMPDIR to one with room)"
                    : st->claims_failed_limit
                        ? " (threads found no ring: the program lowered its address-space limit "
                          "(RLIMIT_AS), and the tracer gave back the rings its threads were not "
                          "using to keep the program's room)"
                    : st->claims_failed_full
                        ? " (more threads at once than rings: raise MEMTAP_RING_THREADS)"
                        : "";
  /* A followed child frees blocks its parent allocated before the fork: unknown to its trace,
   * which starts at the fork (they are in the parent's). */
  const char *unknown = !t->main && st->unknown_frees
                            ? " (blocks allocated before its trace began: its parent's, from "
                              "before the fork)"
                            : "";
  char allocs[32], frees[32], unknown_frees[32], lost[32]; /* grouped, as every text output */
  cli_error(t->path, "%s%s allocation%s, %s free%s, %s unknown free%s, %s lost record%s%s%s%s%s",
            head, out_format_count((double)st->allocations, allocs),
            out_plural((double)st->allocations), out_format_count((double)st->frees, frees),
            out_plural((double)st->frees),
            out_format_count((double)st->unknown_frees, unknown_frees),
            out_plural((double)st->unknown_frees), out_format_count((double)st->lost_records, lost),
            out_plural((double)st->lost_records), why, unknown,
            word ? "; look at it with: memtap top " : "", word ? word : "");
  free(word);
}

static char *join_command_line(char **argv) {
  size_t len = 1;
  for (char **a = argv; *a; a++)
    len += strlen(*a) + 1;
  char *out = malloc(len);
  if (!out)
    return NULL;
  out[0] = 0;
  for (char **a = argv; *a; a++) {
    if (a != argv)
      strcat(out, " ");
    strcat(out, *a);
  }
  return out;
}

/* --- options --------------------------------------------------------------------------------- */

static int parse(int argc, char **argv, settings *set, int *first_arg) {
  static const struct option options[] = {
      {"output", required_argument, NULL, 'o'},
      {"rate", required_argument, NULL, OPT_RATE},
      {"sample-interval", required_argument, NULL, OPT_INTERVAL},
      {"full", no_argument, NULL, OPT_FULL},
      {"follow-fork", no_argument, NULL, OPT_FOLLOW},
      {"v2", no_argument, NULL, OPT_V2},
      {"compress", no_argument, NULL, OPT_COMPRESS},
      {"debuginfod", no_argument, NULL, OPT_DEBUGINFOD},
      {"no-debug-cache", no_argument, NULL, OPT_NO_DEBUG_CACHE},
      {"time-resolution", required_argument, NULL, OPT_TIME_RESOLUTION},
      {"help", no_argument, NULL, 'h'},
      {0}};
  /* The environment first, so that a malformed variable is refused even when an option
   * overrides it: the shim in a child that inherits it would refuse it too. */
  mt_error err = {0};
  if (mt_record_settings_from_env(&set->sampling, NULL, &err))
    return cli_usage_error("record", "%s", err.message);
  mt_ring_options ro;
  if (mt_ring_options_init(&ro, &err))
    return cli_usage_error("record", "%s", err.message);
  unsigned chosen = 0; /* the sampling options given, one bit each */
  int c;
  /* 0, not 1: glibc's getopt then starts afresh and honours the '+' (stop at the program's name,
   * whose arguments are its own), instead of keeping the order of the last initialisation. */
  optind = 0;
  while ((c = cli_getopt(argc, argv, "+o:h", options)) != -1) {
    if (c == OPT_RATE || c == OPT_INTERVAL || c == OPT_FULL) {
      unsigned bit = c == OPT_RATE ? 1 : c == OPT_INTERVAL ? 2 : 4;
      if (chosen & bit)
        return cli_usage_error("record", "%s given twice",
                               c == OPT_RATE       ? "--rate"
                               : c == OPT_INTERVAL ? "--sample-interval"
                                                   : "--full");
      chosen |= bit;
    }
    switch (c) {
    case 'o': set->output = optarg; break;
    case OPT_RATE: {
      double rate;
      if (mt_record_parse_rate(optarg, &rate))
        return cli_usage_error(
            "record", "--rate %s is not a rate in (0, 1] of at least 8 per 2^50 bytes", optarg);
      set->sampling.full = false;
      set->sampling.rate = rate;
      break;
    }
    case OPT_INTERVAL: {
      uint64_t interval;
      if (mt_record_parse_interval(optarg, &interval))
        return cli_usage_error(
            "record", "--sample-interval %s is not a size from 8 to 1P (e.g. 512K)", optarg);
      set->sampling.full = false;
      set->sampling.rate = 8.0 / (double)interval;
      break;
    }
    case OPT_FULL:
      set->sampling.full = true;
      set->sampling.rate = 1;
      break;
    case OPT_FOLLOW: set->follow_fork = true; break;
    case OPT_V2: set->v2 = true; break;
    case OPT_COMPRESS: set->compress = true; break;
    case OPT_DEBUGINFOD: set->debuginfod = true; break;
    case OPT_NO_DEBUG_CACHE: set->no_debug_cache = true; break;
    case OPT_TIME_RESOLUTION:
      if (mt_record_parse_time_resolution(optarg, &set->sampling.time_resolution_us))
        return cli_usage_error(
            "record", "--time-resolution %s is not a duration from 1us to 1s (like 1ms)", optarg);
      break;
    case 'h': fputs(usage, stdout); return -1;
    default: return cli_bad_option("record");
    }
  }
  if (chosen & (chosen - 1))
    return cli_usage_error("record", "--rate, --sample-interval and --full exclude each other");
  /* Rate 1 is memtrace's every word sampled, every allocation recorded, as analyses read it. The
   * shim's sampler is a Poisson process over bytes: at rate 1 it still missed a 4-byte block half
   * the time, under a trace whose rate said none was missed. */
  if (!set->sampling.full && set->sampling.rate >= 1) {
    set->sampling.full = true;
    set->sampling.rate = 1;
  }
  if (optind >= argc)
    return cli_usage_error("record", "no program to run (memtap record -- PROGRAM ARGS...)");
  if (set->output && !*set->output)
    return cli_usage_error("record", "-o needs a file name");
  if (set->output && !strcmp(set->output, "-"))
    return cli_usage_error("record", "-o -: standard output is the program's; give a file name");
  *first_arg = optind;
  return 0;
}

/* --- the command ----------------------------------------------------------------------------- */

/* The program was killed by `sig`: memtap, its trace written, ends by the same signal, so that
 * whoever waits for it sees what it would have seen of the program. A shell stops a loop on a
 * child killed by SIGINT (Ctrl-C), not on one that exited with 130; `timeout`, `make` and
 * supervisors tell a crash from an exit the same way. No core of memtap's own: the program's, if
 * any, is the one that means something. Returns when the signal does not end a process (its
 * action is to ignore or stop; a program cannot have been killed by it then). */
static void end_as_killed(int sig) {
  fflush(NULL);
  struct rlimit no_core;
  if (getrlimit(RLIMIT_CORE, &no_core) == 0) {
    no_core.rlim_cur = 0;
    setrlimit(RLIMIT_CORE, &no_core);
  }
  struct sigaction default_action = {.sa_handler = SIG_DFL};
  sigemptyset(&default_action.sa_mask);
  sigaction(sig, &default_action, NULL); /* fails for SIGKILL, whose action is already that */
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  sigprocmask(SIG_UNBLOCK, &only, NULL);
  raise(sig);
  /* Not ended: a signal that stops (SIGTSTP at a terminal, then SIGCONT) or is ignored. */
}

static int exit_status(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

/* A program killed by a signal: memtap says so, with what the shell cannot know from memtap's own
 * end (whether the program dumped core) and what it means for the trace. Not for SIGINT and
 * SIGPIPE, which shells pass over in silence too. */
static void say_killed(const char *program, int status) {
  if (!WIFSIGNALED(status) || WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGPIPE)
    return;
  int sig = WTERMSIG(status);
  const char *name = sigabbrev_np(sig); /* NULL for real-time signals */
  char number[32];
  snprintf(number, sizeof number, "signal %d", sig);
  cli_error(program, "killed by %s%s (%s)%s: its trace ends there", name ? "SIG" : "",
            name ? name : number, strsignal(sig), WCOREDUMP(status) ? ", core dumped" : "");
}

/* Sleeps `us` microseconds or until a child exits, whichever comes first (SIGCHLD is blocked in
 * the main loop, so one that arrived since the last waitpid ends the sleep at once). */
static void sleep_us(long us) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  sigtimedwait(&chld, NULL, &ts);
}

static void end_stamped(void *user, uint64_t key, int64_t ended_ns) {
  session *s = user;
  for (size_t i = 0; i < s->count; i++)
    if (s->procs[i].end_key == key) {
      if (s->procs[i].rec && !s->procs[i].finished)
        note_ended(&s->procs[i], ended_ns);
      return;
    }
}

/* Naps up to `us` (0: only looks): until then, or until a child of memtap's changes state
 * (SIGCHLD) or a traced process ends (its pidfd turns readable), which is noted then, so that its
 * trace ends when the process did and not when memtap next looked (docs/record.md §7); and takes
 * the ends the watcher stamped while memtap was busy, which are earlier. */
static void nap(session *s, long us) {
  record_ends_take(s->ends, end_stamped, s);
  if (s->chld_fd < 0 ||
      (s->count + 1 > s->polled_cap && !MT_GROW(s->polled, s->polled_cap, s->count + 1))) {
    if (us)
      sleep_us(us);
    return;
  }
  size_t n = 0;
  s->polled[n++] = (struct pollfd){.fd = s->chld_fd, .events = POLLIN};
  for (size_t i = 0; i < s->count; i++)
    if (s->procs[i].pidfd >= 0)
      s->polled[n++] = (struct pollfd){.fd = s->procs[i].pidfd, .events = POLLIN};
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  if (ppoll(s->polled, n, &ts, NULL) <= 0)
    return;
  int64_t now = cli_realtime_ns();
  struct signalfd_siginfo info;
  if (s->polled[0].revents)
    while (read(s->chld_fd, &info, sizeof info) == (ssize_t)sizeof info) {
    }
  for (size_t k = 1; k < n; k++)
    for (size_t i = 0; s->polled[k].revents && i < s->count; i++)
      if (s->procs[i].pidfd == s->polled[k].fd) {
        note_ended(&s->procs[i], now);
        break;
      }
}

/* Records read from every traced process so far. */
static uint64_t records_read(const session *s) {
  uint64_t n = s->retired_records;
  for (size_t i = 0; i < s->count; i++) {
    if (s->procs[i].rec) {
      mt_recorder_stats st;
      mt_recorder_stats_get(s->procs[i].rec, &st);
      n += st.records;
    }
  }
  return n;
}

/* Sampling's nap after a poll that read `got` records in the `elapsed_us` since the previous
 * one, whose nap was `prev`: the time NAP_RECORDS more take to arrive at that rate, within the
 * bounds above; 0 to poll again at once. */
static long nap_us(uint64_t got, int64_t elapsed_us, long prev) {
  if (got > NAP_BEHIND)
    return 0;
  double us = NAP_MAX_US;
  if (got)
    us = (double)NAP_RECORDS * (double)(elapsed_us > 0 ? elapsed_us : 1) / (double)got;
  if (us < NAP_BUSY_US)
    return 0;
  long most = prev ? 2 * prev : IDLE_MIN_US;
  if (most > NAP_MAX_US)
    most = NAP_MAX_US;
  return us < (double)most ? (long)us : most;
}

/* --full's nap after a poll that read `got` records in the `elapsed_us` since the previous one
 * (see FULL_NAP_RECORDS); 0 to poll again at once. `prev_idle`: the previous nap if it was idle
 * too, else 0, so that an idle spell starts from IDLE_MIN_US whatever the busy naps before it
 * were. `progress`: the poll read something (records, or an untraced child's ring, which is
 * drained at once as before). */
static long full_nap_us(uint64_t got, int64_t elapsed_us, long prev_idle, bool progress) {
  if (got >= FULL_NAP_RECORDS || (progress && !got))
    return 0;
  if (!got) {
    long idle = prev_idle >= IDLE_MIN_US ? 2 * prev_idle : IDLE_MIN_US;
    return idle < IDLE_MAX_US ? idle : IDLE_MAX_US;
  }
  double us = (double)FULL_NAP_RECORDS * (double)(elapsed_us > 0 ? elapsed_us : 1) / (double)got;
  return us < FULL_NAP_MIN_US ? FULL_NAP_MIN_US : us > FULL_NAP_MAX_US ? FULL_NAP_MAX_US : (long)us;
}

int mt_cmd_record(int argc, char **argv) {
  settings set = {0};
  int first = 0;
  int rc = parse(argc, argv, &set, &first);
  if (rc)
    return rc < 0 ? MT_EXIT_OK : rc;
  char **prog_argv = argv + first;
  const char *program = prog_argv[0];

  char resolved[PATH_MAX];
  int error = 0;
  if (!find_program(program, resolved, sizeof resolved, &error)) {
    /* "command not found" only for a name looked up in PATH, as shells say. */
    cli_error(program, "%s",
              error == ENOENT && !strchr(program, '/') ? "command not found" : strerror(error));
    return error == ENOENT ? 127 : 126;
  }
  mt_error err = {0};
  if (mt_record_check_program(resolved, &err)) {
    cli_error(program, "cannot be traced: %s", err.message);
    return MT_EXIT_FAILURE;
  }
  /* A Go program runs traced, but its trace would read as nearly empty without a word. */
  const char *go_advice = mt_record_program_go_advice(resolved);
  if (go_advice)
    cli_error(program,
              "note: a Go program: the trace holds only what its C code allocates (cgo); %s",
              go_advice);
  char shim[PATH_MAX];
  if (!find_shim(shim, sizeof shim)) {
    cli_error(NULL, "cannot find libmemtap-preload.so (set MEMTAP_PRELOAD to its path)");
    return MT_EXIT_FAILURE;
  }
  /* The trace is created with O_TRUNC: never over the program or the shim themselves. */
  const char *precious[] = {resolved, shim};
  for (size_t i = 0; set.output && i < 2; i++)
    if (same_file(set.output, precious[i])) {
      cli_error(set.output, "is %s itself (%s); refusing to overwrite it",
                i ? "the tracer's library" : "the program", precious[i]);
      return MT_EXIT_FAILURE;
    }
  /* Nor into the program's standard output or error by another name (/dev/stdout, a terminal,
   * the file `>` sent them to), as -o - is refused; /dev/null takes anything. */
  for (int fd = 1; set.output && fd <= 2; fd++)
    if (same_file(set.output, fd == 1 ? "/dev/stdout" : "/dev/stderr") &&
        !same_file(set.output, "/dev/null"))
      return cli_usage_error("record",
                             "-o %s: that is standard %s, which the program writes too (the "
                             "trace would be mixed with it); give a file name",
                             set.output, fd == 1 ? "output" : "error");
  /* Nor over a file the program is given (`memtap record -o in.txt -- sort in.txt`): the program
   * would read the trace, and the file would be lost. By name too, for a file that does not exist
   * yet: the program would make it or read the trace in its place. */
  for (char **arg = prog_argv + 1; set.output && *arg; arg++)
    if (same_file(set.output, *arg) || !strcmp(set.output, *arg)) {
      cli_error(set.output,
                "is the program's argument '%s' (the program reads or writes it too); refusing "
                "to write the trace there",
                *arg);
      return MT_EXIT_FAILURE;
    }

  /* --follow-fork writes each child's trace next to the main one (FILE.PID): a device or a pipe
   * has no "next to". /dev/null takes them all; anything else is refused before the program runs
   * (it made /dev/null.PID regular files in /dev). */
  struct stat out_st;
  if (set.follow_fork && set.output && stat(set.output, &out_st) == 0 && !S_ISREG(out_st.st_mode) &&
      !same_file(set.output, "/dev/null")) {
    cli_error(set.output,
              "is not a regular file, and --follow-fork writes one trace per process next to "
              "it (FILE.PID): give a file name, or /dev/null to discard every trace");
    return MT_EXIT_USAGE;
  }

  session s = {.set = &set, .shim = shim, .program = program, .chld_fd = -1};
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp)
    tmp = "/tmp";
  s.dir_lock = record_dir_make(tmp, s.dir, sizeof s.dir);
  if (s.dir_lock < 0) {
    cli_error(s.dir,
              "cannot make a directory for the rings: %s (set TMPDIR to a writable "
              "directory; the program was not run)",
              strerror(errno));
    return MT_EXIT_FAILURE;
  }
  /* The directories of recorders killed before their end (SIGKILL, a crash) that are provably
   * no longer in use (record_dir.h). */
  record_dir_sweep(tmp);
  s.context = join_command_line(prog_argv);

  int go[2], exec_status[2];
  if (pipe2(go, O_CLOEXEC) || pipe2(exec_status, O_CLOEXEC)) {
    cli_error(NULL, "pipe: %s", strerror(errno));
    record_dir_remove(s.dir, s.dir_lock);
    free(s.context);
    return MT_EXIT_FAILURE;
  }
  /* Orphaned descendants (double-forking daemons) become our children, so we can wait for them. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  fflush(NULL);
  pid_t child = fork();
  if (child < 0) {
    cli_error(NULL, "fork: %s", strerror(errno));
    record_dir_remove(s.dir, s.dir_lock);
    free(s.context);
    return MT_EXIT_FAILURE;
  }
  if (child == 0) {
    close(go[1]);
    close(exec_status[0]);
    run_child(&s, shim, resolved, prog_argv, go[0], exec_status[1]);
  }
  close(go[0]);
  /* The end watcher, from the start (after the fork: the child runs no thread of ours). */
  s.ends = record_ends_start(s.dir);
  close(exec_status[1]);
  s.main_pid = child;
  raise_descriptor_limit();
  /* Blocked before any thread of ours starts (the recorder's), so that a child's exit is left
   * pending for sleep_us to take, not delivered elsewhere and ignored. */
  sigset_t chld, old_mask;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old_mask);
  s.chld_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK); /* -1: naps are sigtimedwait's */

  char default_name[PATH_MAX];
  if (set.output) {
    s.main_output = set.output;
  } else {
    const char *base = strrchr(program, '/') ? strrchr(program, '/') + 1 : program;
    snprintf(default_name, sizeof default_name, "%s.%d.ctf%s", base, (int)child,
             set.compress ? ".zst" : "");
    /* A control character of the program's name (a newline) is no file name to hand a user. */
    for (char *c = default_name; *c; c++)
      if ((unsigned char)*c < 0x20 || *c == 0x7f)
        *c = '_';
    s.main_output = default_name;
  }
  /* The output is created before the program starts, so that a name that cannot be made stops
   * us before the program runs. */
  s.procs = calloc(1, sizeof *s.procs);
  if (s.procs) {
    s.procs[0] =
        (traced){.pid = child, .ring_pid = child, .main = true, .fd = -1, .uid = -1, .pidfd = -1};
    snprintf(s.procs[0].ring_name, sizeof s.procs[0].ring_name, "%d.memtap-ring", (int)child);
    s.count = 1;
  }
  if (!s.procs || open_output(&s, &s.procs[0])) {
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    record_dir_remove(s.dir, s.dir_lock);
    free(s.context);
    free(s.procs ? s.procs[0].path : NULL);
    free(s.procs);
    if (s.chld_fd >= 0)
      close(s.chld_fd);
    return MT_EXIT_FAILURE;
  }

  record_signals signals = {0};
  record_signals_install(&signals);

  char byte = 1;
  if (write(go[1], &byte, 1) != 1) {
    /* the child is gone already; waitpid below says how */
  }
  close(go[1]);
  int exec_errno = 0;
  ssize_t n;
  while ((n = read(exec_status[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  close(exec_status[0]);

  int main_status = 0;
  bool main_done = false;
  int64_t ended_ns = 0;
  if (n == (ssize_t)sizeof exec_errno) {
    waitpid(child, &main_status, 0);
    char loader[PATH_MAX];
    const char *missing =
        exec_errno == ENOENT ? missing_loader(resolved, loader, sizeof loader) : NULL;
    if (missing)
      cli_error(program, "cannot execute: %s, %s, does not exist", missing, loader);
    else if (exec_errno == E2BIG)
      cli_error(program,
                "cannot execute: %s (the arguments and environment, with the variables memtap "
                "adds to it for the tracer, are more than the system takes)",
                strerror(exec_errno));
    else
      cli_error(program, "cannot execute: %s", strerror(exec_errno));
    unlink(s.main_output);
    main_done = true;
  } else {
    int64_t scanned_at = 0, polled_at = cli_monotonic_us();
    uint64_t read_before = 0;
    long idle_us = 0, full_nap = 0;
    for (;;) {
      int64_t now = cli_monotonic_us();
      /* Reading the directory is a few system calls: not at every poll of a busy ring. */
      if (idle_us || now - scanned_at >= SCAN_US) {
        scan(&s);
        note_programs(&s);
        /* After the scan: a process gone since may have exec'd under another file name, which the
         * scan has just attached to its trace (docs/record.md, "Many processes"). */
        retire_ended(&s);
        scanned_at = now;
      }
      if (set.sampling.full)
        offer_clock_ticks(&s, true);
      bool progress = poll_all(&s);
      int status;
      pid_t pid;
      bool no_children = false;
      while ((pid = waitpid(-1, &status, WNOHANG | WUNTRACED)) != 0) {
        if (pid < 0) {
          if (errno == EINTR)
            continue;
          no_children = true;
          break;
        }
        if (WIFSTOPPED(status)) { /* Ctrl-Z: the job stops when the program does */
          if (pid == child)
            record_signals_program_stopped(&signals, child, WSTOPSIG(status));
          continue;
        }
        if (pid == child) {
          main_status = status;
          main_done = true;
        }
      }
      if (main_done && (!set.follow_fork || no_children)) {
        /* The traced processes had ended by now: their traces end here at the latest, however
         * long finishing the first ones takes (symbols) before the others are. */
        ended_ns = cli_realtime_ns();
        break;
      }
      /* A signal waiting to be passed on keeps the naps short. */
      const traced *shown = main_traced(&s);
      const mt_recorder *counting = shown && !shown->finished ? shown->rec : NULL;
      long nap_cap = !main_done && record_signals_forward(&signals, counting, child, now)
                         ? RECORD_SIGNALS_WAIT_US / 6
                         : LONG_MAX;
      uint64_t read_now = progress ? records_read(&s) : read_before;
      if (!set.sampling.full) {
        idle_us = nap_us(read_now - read_before, now - polled_at, idle_us);
        if (idle_us)
          nap(&s, idle_us < nap_cap ? idle_us : nap_cap);
      } else {
        full_nap = full_nap_us(read_now - read_before, now - polled_at, idle_us, progress);
        idle_us = progress ? 0 : full_nap; /* a nap while records arrive: no directory scan */
        if (full_nap) {
          /* A nap of at most FULL_NAP_MAX_US keeps the tick, whether records arrive or not: the
           * program's stamps are then up to that much early, and the next poll stores a fresh
           * one. A longer (idle) one does not: a program that paused must not be stamped from
           * before its pause. Withdrawn at the first idle nap, the tick was missing whenever a
           * program resumed after a short lull (a phase without allocations): its records then
           * read the clock until memtap woke (docs/record.md, "Consuming"). */
          if (full_nap > FULL_NAP_MAX_US)
            offer_clock_ticks(&s, false);
          nap(&s, full_nap < nap_cap ? full_nap : nap_cap);
        }
      }
      read_before = read_now;
      polled_at = now;
    }
    scan(&s); /* a process that exited before we first looked */
    /* Children the program forked just before it ended (a shell's `sleep 1 & echo hi`) may not
     * have left their notes yet, and their line would be missing: without --follow-fork, wait
     * for a note per fork the program made, 100 ms at most. */
    traced *main = main_traced(&s);
    if (!set.follow_fork && main && (main->rec || main->retired)) {
      mt_recorder_stats st = main->stats; /* as it was finished, if it was retired */
      if (main->rec)
        mt_recorder_stats_get(main->rec, &st);
      for (int tries = 0; tries < 20 && s.untraced.pids.count < st.forks; tries++) {
        sleep_us(5000);
        scan(&s);
      }
    }
  }
  sigprocmask(SIG_SETMASK, &old_mask, NULL);

  record_ends_take(s.ends, end_stamped, &s);
  if (!ended_ns)
    ended_ns = cli_realtime_ns();
  for (size_t i = 0; i < s.count; i++) {
    traced *t = &s.procs[i];
    int64_t end = t->rec && !t->finished ? end_of(t, t->ended_ns ? t->ended_ns : ended_ns) : 0;
    if (end)
      mt_recorder_set_end(t->rec, end);
    finish(&s, t);
    if (t->pidfd >= 0)
      close(t->pidfd), t->pidfd = -1;
  }
  record_signals_restore(&signals);

  if (n != (ssize_t)sizeof exec_errno)
    say_killed(program, main_status);
  bool wrote = false;
  for (size_t i = 0; i < s.count; i++) {
    traced *t = &s.procs[i];
    if (t->rec || t->retired) {
      say_untraced_exec(&s, t);
      if (!t->stats.failed)
        summary(t);
      wrote = true;
    }
  }
  say_modules_gone(&s);
  if (wrote)
    record_untraced_say(&s.untraced, program, s.main_output);
  record_untraced_free(&s.untraced);
  if (!wrote && n != (ssize_t)sizeof exec_errno) {
    cli_error(program, "the tracer did not start in the program (no ring file appeared): no "
                       "trace written");
    unlink(s.main_output);
    s.failed = true;
  }
  for (size_t i = 0; i < s.count; i++) {
    traced *t = &s.procs[i];
    mt_recorder_destroy(t->rec);
    if (t->discard)
      mt_cursor_close(t->discard);
    if (t->fd >= 0)
      close(t->fd);
    free(t->path);
    free(t->exe);
    free(t->described);
  }
  record_ends_stop(s.ends);
  free(s.procs);
  free(s.polled);
  if (s.chld_fd >= 0)
    close(s.chld_fd);
  free(s.context);
  record_dir_remove(s.dir, s.dir_lock);
  int code = exit_status(main_status);
  if (n == (ssize_t)sizeof exec_errno)
    return exec_errno == ENOENT ? 127 : 126;
  if (WIFSIGNALED(main_status))
    end_as_killed(WTERMSIG(main_status));
  return s.failed && code == 0 ? MT_EXIT_FAILURE : code;
}
