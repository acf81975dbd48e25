/* memtap tap: a live look at a running process that memtap traces (docs/record.md §13). It reads
 * the process's ring file beside the consumer that writes its trace, as a second cursor that
 * neither slows the program nor takes records from that trace (mt_recorder_attach, not primary),
 * and turns what it reads into a trace of its own, the window: a line of counts every interval,
 * then the window's heaviest sites through `memtap top`. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "memtap/record.h"
#include "output.h"
#include "output_file.h"
#include "common/error.h"
#include "ring/process.h"
#include "tracer/config.h"

static const char usage[] =
    "usage: memtap tap [-o FILE] [--duration D] [--interval D] [-n N] PID\n"
    "\n"
    "Watches a running process that memtap traces (under memtap record, or tracing itself with\n"
    "MEMTAP=FILE or mt_tracer_start) as a second reader of its rings: the program and its own\n"
    "trace are not disturbed. Prints a line every interval with what the process allocated and\n"
    "freed since the last one, and when tap ends (Ctrl-C, --duration, or the process ending) the\n"
    "heaviest allocation sites of the window, as memtap top shows them. What tap read is a\n"
    "memtrace trace of its own, the window (-o keeps it). Sampled as the process's trace is.\n"
    "\n"
    "  -o, --output FILE  keep the window as a trace in FILE (default: a temporary file, removed)\n"
    "      --duration D   stop after D (like 30s or 500ms; default: until Ctrl-C or the process\n"
    "                     ends)\n"
    "      --interval D   a line every D (default 1s; 0s for none)\n"
    "  -n N               sites shown at the end (default 10; 0 for none)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Blocks allocated before the window and freed during it are counted in the closing line, not\n"
    "traced. Exit status: 0; 1 the process is not traced by memtap, cannot be read, or the window\n"
    "could not be written; 64 bad command line.\n";

/* Naps between polls of the rings: short enough that a busy process's rings do not fill behind
 * this cursor (it then loses records, counted) before the next read. */
#define POLL_NAP_NS 10000000L

static volatile sig_atomic_t stop_signal;

static void note_stop(int sig) {
  stop_signal = sig;
}

/* How often tap looks whether the process ended or exec'd. */
#define PROCESS_CHECK_US 100000

/* Whether process `pid` (started at `start_time`) has gone on without the ring file tap reads:
 * ended (a SIGKILL leaves its file unclosed), or exec'd (the new program has a file of its own, or
 * none). Returns why, for a message, or NULL. */
static const char *process_moved_on(int pid, uint64_t start_time, const struct stat *attached) {
  if (!mt_process_alive(pid, start_time))
    return "ended";
  char ring[PATH_MAX];
  mt_error err = {0};
  struct stat st;
  if (mt_record_find_ring(pid, ring, sizeof ring, &err) != MT_OK || stat(ring, &st) != 0 ||
      st.st_dev != attached->st_dev || st.st_ino != attached->st_ino)
    return mt_process_alive(pid, start_time) ? "exec'd another program (or stopped tracing)"
                                             : "ended";
  return NULL;
}

/* The process id argument: digits only, 1 to INT_MAX. */
static bool parse_pid(const char *text, int *pid) {
  long long v;
  if (!cli_parse_int(text, 1, INT_MAX, &v))
    return false;
  for (const char *p = text; *p; p++)
    if (*p < '0' || *p > '9')
      return false;
  *pid = (int)v;
  return true;
}

/* One line of counts: since the previous line, then since tap started. */
static void print_interval(double at_s, const mt_recorder_stats *now,
                           const mt_recorder_stats *then) {
  char count[32], bytes[32], frees[32], total[32], total_bytes[32];
  uint64_t allocs = now->allocations - then->allocations;
  printf("%8.1f s  %s allocation%s (%s), %s free%s; since tap started %s (%s)\n", at_s,
         out_format_count((double)allocs, count), allocs == 1 ? "" : "s",
         out_format_bytes(now->allocated_bytes - then->allocated_bytes, bytes),
         out_format_count((double)(now->frees - then->frees), frees),
         now->frees - then->frees == 1 ? "" : "s",
         out_format_count((double)now->allocations, total),
         out_format_bytes(now->allocated_bytes, total_bytes));
  fflush(stdout);
}

/* What the window holds, and what it could not: the closing line. */
static void print_closing(int pid, double seconds, const mt_recorder_stats *st, const char *kept) {
  char allocs[32], bytes[32], frees[32], before[32], lost[32];
  printf("memtap tap: process %d, %.1f s: %s allocation%s (%s), %s free%s", pid, seconds,
         out_format_count((double)st->allocations, allocs), st->allocations == 1 ? "" : "s",
         out_format_bytes(st->allocated_bytes, bytes), out_format_count((double)st->frees, frees),
         st->frees == 1 ? "" : "s");
  if (st->unknown_frees)
    printf(", %s free%s of blocks allocated before the window (not in it)",
           out_format_count((double)st->unknown_frees, before), st->unknown_frees == 1 ? "" : "s");
  if (st->lost_records)
    printf(", %s record%s lost (overwritten before tap read them)",
           out_format_count((double)st->lost_records, lost), st->lost_records == 1 ? "" : "s");
  printf("%s%s\n", kept ? "; the window: " : "", kept ? kept : "");
  fflush(stdout);
}

/* Whether `path` is a trace being written: memtap record and a process tracing itself hold a
 * write lock on the whole file while they write it (an open file description lock, as memtrace's
 * writer takes), whoever started them. */
static bool being_written(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return false;
  struct flock whole = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  bool locked = fcntl(fd, F_OFD_GETLK, &whole) == 0 && whole.l_type != F_UNLCK;
  close(fd);
  return locked;
}

/* Opens the window's file: FILE through `named` (a temporary file renamed into place at the end,
 * cli/output_file.h), or, without -o, a temporary file removed at once (no crash of tap's leaves
 * it behind), read back through /proc/self/fd/N (in `path`, for memtap top). */
static int open_window(const char *output, int pid, const char *ring, cli_output_file *named,
                       char *path, size_t size) {
  if (output) {
    if (being_written(output)) {
      cli_error(output, "is a trace being written (another process holds its write lock): tap "
                        "does not write over it; give another file");
      return -1;
    }
    struct stat st;
    if (stat(output, &st) == 0 && S_ISREG(st.st_mode) && mt_record_process_maps(pid, output)) {
      cli_error(output,
                "is mapped by process %d (a library or program it runs): tap does not "
                "write over it; give another file",
                pid);
      return -1;
    }
    const char *inputs[] = {ring}; /* tap's input: refused as an output, like every input */
    if (!cli_output_file_open(named, output, inputs, 1))
      return -1;
    snprintf(path, size, "%s", output);
    return named->fd;
  }
  const char *dir = getenv("TMPDIR");
  if (!dir || dir[0] != '/')
    dir = "/tmp";
  if (snprintf(path, size, "%s/memtap-tap-XXXXXX", dir) >= (int)size) {
    cli_error(dir, "TMPDIR is too long a path");
    return -1;
  }
  int fd = mkostemp(path, O_CLOEXEC);
  if (fd < 0) {
    cli_error(path, "cannot create the window's trace: %s", strerror(errno));
    return -1;
  }
  unlink(path);
  snprintf(path, size, "/proc/self/fd/%d", fd);
  return fd;
}

static int parse(int argc, char **argv, const char **output, int64_t *duration_us,
                 int64_t *interval_us, long long *sites, int *pid) {
  enum { OPT_DURATION = 1, OPT_INTERVAL };
  static const struct option options[] = {{"output", required_argument, NULL, 'o'},
                                          {"duration", required_argument, NULL, OPT_DURATION},
                                          {"interval", required_argument, NULL, OPT_INTERVAL},
                                          {"help", no_argument, NULL, 'h'},
                                          {0}};
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "o:n:h", options)) != -1) {
    uint64_t us;
    switch (c) {
    case 'h': fputs(usage, stdout); return -1;
    case 'o': *output = optarg; break;
    case OPT_DURATION:
      if (!mt_tracer_parse_duration_us(optarg, &us) || us == 0 || us > (uint64_t)INT64_MAX / 2)
        return cli_usage_error("tap", "--duration takes a duration like 30s or 500ms, not '%s'",
                               optarg);
      *duration_us = (int64_t)us;
      break;
    case OPT_INTERVAL:
      if (!mt_tracer_parse_duration_us(optarg, &us) || us > (uint64_t)INT64_MAX / 2)
        return cli_usage_error("tap", "--interval takes a duration like 1s or 500ms, not '%s'",
                               optarg);
      *interval_us = (int64_t)us;
      break;
    case 'n':
      if (!cli_parse_int(optarg, 0, INT_MAX, sites))
        return cli_usage_error("tap", "-n takes a count of sites from 0 to %d, not '%s'", INT_MAX,
                               optarg);
      break;
    default: return cli_bad_option("tap");
    }
  }
  if (optind != argc - 1)
    return cli_usage_error("tap", optind == argc ? "which process? give its PID"
                                                 : "one process at a time: give one PID");
  if (!parse_pid(argv[optind], pid))
    return cli_usage_error("tap", "'%s' is not a process id", argv[optind]);
  if (*output && !**output)
    return cli_usage_error("tap", "-o takes a file name");
  if (*output && !strcmp(*output, "-"))
    return cli_usage_error("tap", "-o takes a file: standard output shows tap's lines");
  return 0;
}

int mt_cmd_tap(int argc, char **argv) {
  const char *output = NULL;
  int64_t duration_us = 0, interval_us = 1000000;
  long long sites = 10;
  int pid = 0;
  int rc = parse(argc, argv, &output, &duration_us, &interval_us, &sites, &pid);
  if (rc)
    return rc < 0 ? MT_EXIT_OK : rc;

  mt_error err = {0};
  char ring[PATH_MAX];
  char pid_text[32];
  snprintf(pid_text, sizeof pid_text, "process %d", pid);
  if (mt_record_find_ring(pid, ring, sizeof ring, &err) != MT_OK) {
    cli_error(NULL, "tap: %s", err.message);
    return MT_EXIT_FAILURE;
  }
  char window[PATH_MAX];
  cli_output_file named = {0};
  int fd = open_window(output, pid, ring, &named, window, sizeof window);
  if (fd < 0)
    return MT_EXIT_FAILURE;
  char cache[PATH_MAX];
  mt_recorder_options opts = {.debug_cache_dir = cli_debug_cache_dir(cache, sizeof cache)};
  mt_recorder *r = NULL;
  rc = mt_recorder_create(&r, fd, &opts, &err);
  for (int tries = 0; rc == MT_OK && tries < 100; tries++) {
    rc = mt_recorder_attach(r, ring, false, &err);
    if (rc != MT_E_STATE) /* MT_E_STATE: a file still being made */
      break;
    struct timespec ts = {0, POLL_NAP_NS};
    nanosleep(&ts, NULL);
  }
  /* The process and its file as tap found them, to tell when it ends or execs (its file's
   * producer may never close it: a process killed by SIGKILL, an exec). */
  uint64_t start_time = 0;
  char state;
  struct stat attached;
  if (rc == MT_OK && (!mt_process_stat(pid, &start_time, &state) || stat(ring, &attached) != 0))
    rc = mt_fail(&err, MT_E_STATE, -1, "the process ended as tap attached");
  if (rc != MT_OK) {
    cli_error(NULL, "tap: %s: %s", pid_text, err.message);
    mt_recorder_destroy(r);
    if (output)
      cli_output_file_close(&named, false);
    else
      close(fd);
    return MT_EXIT_FAILURE;
  }

  /* A closed standard output (memtap tap ... | head) ends the watch like Ctrl-C, and the command
   * then says that writing failed. */
  struct sigaction stop = {.sa_handler = note_stop}, ignore = {.sa_handler = SIG_IGN};
  struct sigaction old_int, old_term, old_pipe;
  sigemptyset(&stop.sa_mask);
  sigemptyset(&ignore.sa_mask);
  stop_signal = 0;
  sigaction(SIGINT, &stop, &old_int);
  sigaction(SIGTERM, &stop, &old_term);
  sigaction(SIGPIPE, &ignore, &old_pipe);
  bool warned = false;
  int64_t started = cli_monotonic_us(), next_line = started + interval_us;
  mt_recorder_stats last = {0}, now;
  bool closed = false;    /* the process's tracer closed its file: the trace ends at its end */
  const char *why = NULL; /* why the window ended before tap was told to end it */
  int64_t checked = started;
  while (!stop_signal) {
    bool progress = false;
    if (mt_recorder_poll(r, &progress, &err) != MT_OK && !warned) {
      cli_error(NULL, "tap: %s: %s", pid_text, err.message);
      warned = true;
    }
    if (mt_recorder_done(r)) {
      closed = true;
      break;
    }
    int64_t t = cli_monotonic_us();
    if (t - checked >= PROCESS_CHECK_US) {
      checked = t;
      if ((why = process_moved_on(pid, start_time, &attached)))
        break;
    }
    if (interval_us && t >= next_line) {
      mt_recorder_stats_get(r, &now);
      print_interval((double)(t - started) / 1e6, &now, &last);
      last = now;
      if (ferror(stdout))
        break;
      next_line += interval_us * ((t - next_line) / interval_us + 1);
    }
    if (duration_us && t - started >= duration_us)
      break;
    if (!progress) {
      struct timespec ts = {0, POLL_NAP_NS};
      nanosleep(&ts, NULL);
    }
  }
  /* A second Ctrl-C while the window is finished ends tap at once. */
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (why)
    cli_error(NULL, "tap: %s %s: the window ends there", pid_text, why);
  if (!closed)
    mt_recorder_set_end(r, cli_realtime_ns());
  double seconds = (double)(cli_monotonic_us() - started) / 1e6;
  int status = MT_EXIT_OK;
  if (mt_recorder_finish(r, &err) != MT_OK) {
    cli_error(output, "the window could not be written: %s", err.message);
    status = MT_EXIT_FAILURE;
  }
  mt_recorder_stats_get(r, &now);
  mt_recorder_destroy(r);
  /* -o: renamed into place before anything reads it (or removed, when writing failed). */
  if (output && !cli_output_file_close(&named, status == MT_EXIT_OK))
    status = MT_EXIT_FAILURE;
  if (status == MT_EXIT_OK && !ferror(stdout)) {
    print_closing(pid, seconds, &now, output);
    if (sites > 0 && now.allocations > 0) {
      char count[32];
      snprintf(count, sizeof count, "%lld", sites);
      char *top_argv[] = {"top", "-n", count, window, NULL};
      int top_status = mt_cmd_top(4, top_argv);
      if (top_status != MT_EXIT_OK)
        status = top_status;
    }
  }
  if (!output)
    close(fd);
  sigaction(SIGPIPE, &old_pipe, NULL);
  return status;
}
