/* In-process mode (docs/tracer.md, "In-process mode"): `MEMTAP=trace.ctf prog` or memtrace's own
 * `MEMTRACE=trace.ctf prog` with the shim preloaded. The process traces itself: the shim writes its
 * ring as under `memtap record`, and a background thread of the shim consumes it and writes the
 * trace with the recorder of libmemtap (memtap/record.h).
 *
 * The recorder and what it needs (elfutils' libdw for symbols, zstd) are not linked into the shim:
 * libmemtap.so is loaded with dlopen(RTLD_LOCAL) only when this mode starts, from the constructor,
 * so no other traced process carries them and none of their symbols can interpose the program's.
 *
 * As memtrace does, the output is opened without O_TRUNC, locked, then truncated, so a trace that
 * another process is writing is never clobbered, and the variable is emptied so that the program's
 * children are not traced into the same file. The consumer thread works in a descriptor table of
 * its own (unshare(CLONE_FILES)), and the output's descriptor then leaves the program's table: a
 * program that closes every descriptor and reuses the numbers (daemons, sandboxes) can neither
 * close the trace nor have it written into its own file, and none of the recorder's descriptors
 * (the output's duplicate, the compressor's memfd, libdw's ELF files) take numbers the program
 * sees. The lock is an open file description lock (F_OFD_SETLK), which that close does not drop
 * and which conflicts with memtrace's lockf. The consumer thread blocks every
 * signal and its own allocations pass straight through the shim (its depth stays raised). The ring
 * is a flight recorder here: a lossless producer could wait for a consumer thread that itself waits
 * for a lock the producer holds (the loader's, stdio's); records overwritten before the thread
 * read them are counted as lost in the trace's summary. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/cancel_hold.h"
#include "common/count_text.h"
#include "common/empty_file.h"
#include "common/file_identity.h"
#include "memtap/record.h"
#include "tracer/shim.h"

extern char **environ;

enum { IDLE, RUNNING, FINISHING };

/* The recorder's entry points, from the dlopen'd libmemtap. */
typedef struct recorder_api {
  int (*create)(mt_recorder **, int, const mt_recorder_options *, mt_error *);
  int (*attach)(mt_recorder *, const char *, bool, mt_error *);
  int (*poll)(mt_recorder *, bool *, mt_error *);
  int (*finish)(mt_recorder *, mt_error *);
  void (*set_end)(mt_recorder *, int64_t);
  void (*stats)(const mt_recorder *, mt_recorder_stats *);
  void (*destroy)(mt_recorder *);
} recorder_api;

static struct {
  int fd;                    /* the locked output, or -1 */
  mt_file_identity identity; /* its file: the program may close fd and reuse the number */
  char path[4096];           /* the output's name, for messages */
  char ring[4096];           /* the ring file the thread consumes */
  pthread_t thread;          /* the consumer */
  _Atomic int state;         /* IDLE, RUNNING, FINISHING (one caller takes RUNNING to it) */
  _Atomic long finisher;     /* that caller's thread id while it finishes, else 0 */
  pid_t pid;                 /* the process that opened the file and runs the thread */
  _Atomic int stop;          /* set at stop or exit: drain, finish, return */
  _Atomic int then_signal;   /* mt_inprocess_end_then_signal's signal, sent once finished */
  _Atomic int table; /* the thread's descriptor table: 0 not yet known, 1 its own, -1 shared */
  int status;        /* how the thread's finish went, and why not */
  mt_error error;
  uint64_t lost; /* records overwritten before the thread read them */
  recorder_api api;
  uint64_t stack_low, stack_high; /* the consumer thread's stack, guard included */
} inproc = {.fd = -1};

static void say(const char *what, const char *detail) {
  char line[600];
  int n = snprintf(line, sizeof line, "memtap: %s%s%s\n", what, detail ? ": " : "",
                   detail ? detail : "");
  if (n > 0)
    mt_shim_say(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* Empties MEMTAP and MEMTRACE in place (their values become ""), without setenv: this may run
 * inside a malloc that setenv itself made, under libc's environment lock. */
static void empty_variables(void) {
  for (char **e = environ; e && *e; e++)
    if (!strncmp(*e, "MEMTAP=", 7))
      (*e)[7] = 0;
    else if (!strncmp(*e, "MEMTRACE=", 9))
      (*e)[9] = 0;
}

/* A trace prepared but never started (the ring file could not be made: `ulimit -f`, a full
 * disk): the file was emptied by the opening and holds no trace, which a reader would reject as
 * malformed. It is removed when it is still that empty regular file at its path. */
static void remove_unstarted_trace(void) {
  struct stat held, named;
  if (inproc.fd >= 0 && mt_file_identity_holds(&inproc.identity, inproc.fd) &&
      fstat(inproc.fd, &held) == 0 && S_ISREG(held.st_mode) && held.st_size == 0 &&
      stat(inproc.path, &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino)
    unlink(inproc.path);
}

/* Closes the trace's descriptor unless the program closed it and reused the number. */
static void close_trace_fd(void) {
  if (inproc.fd >= 0 && mt_file_identity_holds(&inproc.identity, inproc.fd))
    close(inproc.fd);
  inproc.fd = -1;
}

MT_HIDDEN int mt_inprocess_prepare(const char *path, mt_error *err) {
  if (inproc.fd >= 0 && inproc.pid != getpid()) {
    close_trace_fd(); /* a forked child's copy of its parent's trace (its lock is the parent's) */
    inproc.fd = -1;
    atomic_store(&inproc.state, IDLE);
  }
  if (inproc.fd >= 0)
    return mt_fail(err, MT_E_STATE, -1, "a trace is being written already (%s)", inproc.path);
  size_t n = strlen(path);
  if (n >= sizeof inproc.path)
    return mt_fail(err, MT_E_INVALID, -1, "the trace file's name is too long");
  int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0)
    return mt_fail(err, MT_E_IO, -1, "cannot open the trace file %s: %s", path, strerror(errno));
  struct flock whole = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
  if (fcntl(fd, F_OFD_SETLK, &whole) != 0) {
    close(fd);
    return mt_fail(err, MT_E_IO, -1,
                   "cannot lock the trace file %s (is another process writing it?)", path);
  }
  if (mt_empty_file(fd) != 0) {
    /* /dev/null and other devices: nothing to truncate */
  }
  memcpy(inproc.path, path, n + 1);
  inproc.fd = fd;
  inproc.identity = mt_file_identity_of(fd);
  inproc.pid = getpid();
  empty_variables();
  return MT_OK;
}

/* libmemtap.so.0 next to the shim (installed: <libdir>/memtap/../), or in the build tree (the shim
 * in the build directory, the library in src/), or wherever the loader finds it. */
static void *load_libmemtap(void) {
  Dl_info self;
  char dir[4096];
  if (dladdr((void *)load_libmemtap, &self) && self.dli_fname) {
    const char *slash = strrchr(self.dli_fname, '/');
    size_t len = slash ? (size_t)(slash - self.dli_fname) : 0;
    static const char *const places[] = {"/../libmemtap.so.0", "/src/libmemtap.so.0",
                                         "/libmemtap.so.0"};
    for (size_t i = 0; slash && i < sizeof places / sizeof *places; i++) {
      int n = snprintf(dir, sizeof dir, "%.*s%s", (int)len, self.dli_fname, places[i]);
      if (n > 0 && (size_t)n < sizeof dir && access(dir, R_OK) == 0) {
        void *h = dlopen(dir, RTLD_NOW | RTLD_LOCAL);
        if (h)
          return h;
      }
    }
  }
  return dlopen("libmemtap.so.0", RTLD_NOW | RTLD_LOCAL);
}

static bool resolve_api(void *h) {
  recorder_api *a = &inproc.api;
  *(void **)&a->create = dlsym(h, "mt_recorder_create");
  *(void **)&a->attach = dlsym(h, "mt_recorder_attach");
  *(void **)&a->poll = dlsym(h, "mt_recorder_poll");
  *(void **)&a->finish = dlsym(h, "mt_recorder_finish");
  *(void **)&a->set_end = dlsym(h, "mt_recorder_set_end");
  *(void **)&a->stats = dlsym(h, "mt_recorder_stats_get");
  *(void **)&a->destroy = dlsym(h, "mt_recorder_destroy");
  return a->create && a->attach && a->poll && a->finish && a->set_end && a->stats && a->destroy;
}

static void sleep_ms(long ms) {
  struct timespec ts = {0, ms * 1000000};
  nanosleep(&ts, NULL);
}

/* What a finished trace has to say: records overwritten before they were read (not a failure:
 * the trace is whole but for those, and its summary counts them), or, for a failure the caller
 * does not report itself (`error` given), that. */
static void report_finish(int status, const mt_error *error) {
  if (status != MT_OK) {
    if (error)
      say("the trace could not be written", error->message);
  } else if (inproc.lost) {
    char detail[160], count[32];
    snprintf(detail, sizeof detail, "%s record%s overwritten before they were read",
             mt_count_text(inproc.lost, count), inproc.lost == 1 ? " was" : "s were");
    say(inproc.path, detail);
  }
}

/* Whether this thread is the process's only one left that runs: the program's threads have all
 * ended, its main thread by pthread_exit (a zombie until the process ends). glibc would have ended
 * the process with exit(0) when the last of them ended, had this thread not been there. Read from
 * /proc/self/stat: the group leader's state and the thread count. */
static bool only_thread_left(void) {
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = 0;
  const char *p = strrchr(buf, ')'); /* after the command, which may hold anything */
  if (!p || p[1] != ' ')
    return false;
  char state = p[2];
  /* fields after the state: ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
   * utime stime cutime cstime priority nice num_threads (the 17th); p + 3 is the space before
   * the first, and each step finds the space before the next */
  p += 3;
  for (int field = 1; field < 17 && p; field++)
    p = strchr(p + 1, ' ');
  long threads = p ? strtol(p + 1, NULL, 10) : 0;
  return state == 'Z' && threads == 2; /* the zombie leader and this thread */
}

static void *consume(void *arg) {
  mt_recorder *rec = arg;
  mt_shim_self.depth++; /* this thread's allocations are not the program's */
  atomic_store(&inproc.table, unshare(CLONE_FILES) == 0 ? 1 : -1);
  mt_error err = {0};
  bool alone = false, broken = false;
  for (unsigned idle = 0; !atomic_load(&inproc.stop);) {
    bool progress = false;
    /* A damaged ring is read no further, but the thread stays until the end: a signal's end
     * (mt_inprocess_end_then_signal) counts on it to send the signal again. */
    if (!broken && inproc.api.poll(rec, &progress, &err) == MT_E_MALFORMED)
      broken = true;
    if (progress)
      continue;
    /* Every 100 ms of nothing: is the program gone but for a main thread that called
     * pthread_exit? Then this thread would keep the process alive for ever. */
    if (++idle % 10 == 0 && only_thread_left()) {
      int running = RUNNING;
      if (atomic_compare_exchange_strong(&inproc.state, &running, FINISHING)) {
        alone = true;
        mt_shim_stop();
        mt_ring_close(mt_shim.ring);
        break;
      }
    }
    sleep_ms(10);
  }
  /* The program is ending (or gone but for this thread): its trace lasts until now, whenever it
   * last allocated. */
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  inproc.api.set_end(rec, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
  inproc.status = inproc.api.finish(rec, &inproc.error);
  mt_recorder_stats st;
  inproc.api.stats(rec, &st);
  inproc.lost = st.lost_records;
  inproc.api.destroy(rec);
  close_trace_fd();
  int sig = atomic_load(&inproc.then_signal);
  if (alone || sig) {
    report_finish(inproc.status, &inproc.error);
    atomic_store(&inproc.state, IDLE);
    if (alone)
      exit(0); /* as glibc does when the last thread ends; exit handlers run here */
    mt_signals_default_action(sig); /* the program's signal, now to end it as it would have */
  }
  return NULL;
}

bool mt_inprocess_is_consumer(void) {
  return atomic_load(&inproc.state) != IDLE && inproc.pid == getpid() &&
         pthread_equal(pthread_self(), inproc.thread);
}

bool mt_inprocess_end_then_signal(int sig) {
  int running = RUNNING;
  if (inproc.pid != getpid() || !atomic_compare_exchange_strong(&inproc.state, &running, FINISHING))
    return false;
  int saved_errno = errno;
  mt_shim_stop();
  mt_ring_close(mt_shim.ring);
  atomic_store(&inproc.then_signal, sig);
  atomic_store(&inproc.stop, 1);
  errno = saved_errno;
  return true;
}

bool mt_inprocess_signal_pending(void) {
  return atomic_load(&inproc.then_signal) != 0 && inproc.pid == getpid();
}

void mt_inprocess_await_signal(void) {
  if (!atomic_load(&inproc.then_signal) || inproc.pid != getpid())
    return;
  int saved_errno = errno;
  int cancel = mt_cancel_hold();
  for (int waited = 0; waited < MT_INPROCESS_SIGNAL_WAIT_S * 1000; waited++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  mt_cancel_release(cancel);
  errno = saved_errno;
}

bool mt_inprocess_stack(uint64_t *low, uint64_t *high) {
  if (!mt_inprocess_running() || !inproc.stack_high)
    return false;
  *low = inproc.stack_low;
  *high = inproc.stack_high;
  return true;
}

bool mt_inprocess_running(void) {
  return atomic_load(&inproc.state) == RUNNING && inproc.pid == getpid();
}

/* Waits for the consumer thread; with `bound_s` > 0, at most that long (false on timeout). */
static bool join_consumer(int bound_s) {
  if (bound_s <= 0)
    return pthread_join(inproc.thread, NULL) == 0;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += bound_s;
  return pthread_timedjoin_np(inproc.thread, NULL, &deadline) == 0;
}

/* Another thread is finishing the trace (an _exit racing exit, say): waited for, at most the
 * bound, so that the process does not end under it; not when it is this thread, interrupted by
 * the handler that called us. */
static void wait_for_finisher(void) {
  long self = (long)syscall(SYS_gettid);
  for (int waited = 0;
       atomic_load(&inproc.state) == FINISHING && atomic_load(&inproc.finisher) != self &&
       waited < MT_INPROCESS_END_BOUND_S * 1000;
       waited++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

/* mt_inprocess_finish, with the wait for the consumer thread bounded by `bound_s` seconds when
 * positive. Whoever takes the state from RUNNING to FINISHING finishes: exit handlers,
 * mt_tracer_stop and an _exit or exec in another thread may race; the others wait for it. */
static int finish(int bound_s, mt_error *err) {
  mt_shim_self.depth++;
  int cancel = mt_cancel_hold(); /* joins and waits, at the program's exit, exec or _exit */
  int rc = MT_OK;
  int running = RUNNING;
  bool ours = inproc.pid == getpid();
  if (!ours || !atomic_compare_exchange_strong(&inproc.state, &running, FINISHING)) {
    if (ours && running == FINISHING)
      wait_for_finisher();
    if (ours && running == IDLE && inproc.fd >= 0) {
      remove_unstarted_trace(); /* prepared, never launched */
      close_trace_fd();
    }
    rc = mt_fail(err, MT_E_STATE, -1, "this process is not writing a trace");
  } else {
    atomic_store(&inproc.finisher, (long)syscall(SYS_gettid));
    mt_shim_stop();
    mt_ring_close(mt_shim.ring);
    atomic_store(&inproc.stop, 1);
    if (!join_consumer(bound_s)) {
      /* The process ends anyway: what the thread flushed last stays readable. */
      rc = mt_fail(err, MT_E_IO, -1,
                   "the trace was not finished within %d s of the program's end from a signal "
                   "handler: it ends at its last flush",
                   bound_s);
    } else if (inproc.status != MT_OK) {
      *err = inproc.error;
      rc = inproc.status;
    } else {
      report_finish(MT_OK, NULL);
    }
    atomic_store(&inproc.finisher, 0);
    atomic_store(&inproc.state, IDLE);
  }
  mt_cancel_release(cancel);
  mt_shim_self.depth--;
  return rc;
}

int mt_inprocess_finish(mt_error *err) {
  return finish(0, err);
}

bool mt_inprocess_end(bool bounded) {
  return mt_inprocess_end_within(bounded ? MT_INPROCESS_END_BOUND_S : 0);
}

bool mt_inprocess_end_within(int bound_s) {
  if (inproc.pid != getpid() || atomic_load(&inproc.state) == IDLE)
    return false;
  int saved_errno = errno;
  mt_error err = {0};
  int rc = finish(bound_s, &err);
  if (rc != MT_OK && rc != MT_E_STATE)
    say("the trace could not be written", err.message);
  errno = saved_errno;
  return rc != MT_E_STATE;
}

/* At exit (registered after the ring's own exit handler, so it runs first): the end of the trace,
 * as mt_tracer_stop would. A forked child has no consumer thread: it leaves the file alone. */
static void finish_at_exit(void) {
  mt_inprocess_end(mt_shim_self.in_handler != 0);
}

/* Once the consumer thread has a descriptor table of its own, the output's descriptor leaves the
 * program's: the thread keeps its copy under the same number. */
static void leave_program_table(void) {
  int table;
  for (int waited = 0; !(table = atomic_load(&inproc.table)) && waited < 2000; waited++) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  if (table == 1 && mt_file_identity_holds(&inproc.identity, inproc.fd))
    close(inproc.fd);
}

int mt_inprocess_launch(mt_error *err) {
  static bool exit_handler;
  if (inproc.fd < 0)
    return mt_fail(err, MT_E_STATE, -1, "no trace file is open");
  mt_shim_self.depth++;
  const void *mark = mt_own_objects_mark();
  void *h = load_libmemtap();
  mt_own_objects_note_since(mark);
  mt_recorder *rec = NULL;
  const char *ring = mt_ring_path(mt_shim.ring);
  mt_recorder_options options = {.time_resolution_us = (int64_t)mt_shim.config.time_resolution_us};
  int rc;
  if (!h || !resolve_api(h)) {
    const char *why = dlerror();
    rc = mt_fail(err, MT_E_STATE, -1, "cannot load libmemtap.so.0 (the recorder): %s",
                 why ? why : "a symbol is missing");
  } else if (strlen(ring) >= sizeof inproc.ring) {
    rc = mt_fail(err, MT_E_INVALID, -1, "the ring file's name is too long");
  } else if ((rc = inproc.api.create(&rec, inproc.fd, &options, err)) != MT_OK ||
             (rc = inproc.api.attach(rec, strcpy(inproc.ring, ring), false, err)) != MT_OK) {
    /* said in err */
  } else {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_store(&inproc.stop, 0);
    atomic_store(&inproc.table, 0);
    inproc.status = MT_OK;
    inproc.lost = 0;
    pthread_attr_t attr; /* the program's default may be small (pthread_setattr_default_np) */
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 8u << 20);
    int started = mt_shim_real.pthread_create(&inproc.thread, &attr, consume, rec);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started == 0) {
      pthread_attr_t running;
      void *stack;
      size_t stack_size, guard = 0;
      if (pthread_getattr_np(inproc.thread, &running) == 0) {
        if (pthread_attr_getstack(&running, &stack, &stack_size) == 0 &&
            pthread_attr_getguardsize(&running, &guard) == 0) {
          inproc.stack_low = (uint64_t)(uintptr_t)stack - guard;
          inproc.stack_high = (uint64_t)(uintptr_t)stack + stack_size;
        }
        pthread_attr_destroy(&running);
      }
      leave_program_table();
      /* Both mappings are made: the ring file needs no name any more, and without one it goes
       * with the process however it ends (exec, _exit, a fatal signal) instead of staying in
       * $TMPDIR. Kept where the producer still needs the path (a kernel before 5.14). */
      mt_ring_unlink(mt_shim.ring);
      inproc.pid = getpid();
      atomic_store(&inproc.state, RUNNING);
      /* quick_exit runs its own handlers, not exit's, then ends the process with glibc's
       * internal _exit, which the shim's does not see. */
      if (!exit_handler)
        exit_handler = atexit(finish_at_exit) == 0 && at_quick_exit(finish_at_exit) == 0;
      mt_signals_keep_trace(); /* and the ends by a signal's default action */
      mt_shim_self.depth--;
      return MT_OK;
    }
    rc = mt_fail(err, MT_E_NOMEM, -1, "cannot start the consumer thread: %s", strerror(started));
  }
  if (rec)
    inproc.api.destroy(rec);
  remove_unstarted_trace();
  close_trace_fd();
  mt_shim_self.depth--;
  return rc;
}
