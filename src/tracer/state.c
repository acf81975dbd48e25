/* The shim's process-wide life cycle (docs/tracer.md, "Start-up", "Fork"): reading the
 * configuration at the first allocation or at the constructor, whichever comes first; opening the
 * ring file; the process registry entry; the fork handlers; and stopping for good when something
 * fails. Runs with the calling thread's depth raised, so that what it calls (getenv, the ring,
 * dl_iterate_phdr, pthread_atfork) allocates straight from the next allocator. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/address_space_limit.h"
#include "common/cancel_hold.h"
#include "common/file_identity.h"
#include "common/number_pair.h"
#include "common/process_image.h"
#include "ring/process.h"
#include "ring/producer.h"
#include "ring/user_dir.h"
#include "tracer/shim.h"

mt_shim_state mt_shim;
__thread mt_shim_thread mt_shim_self __attribute__((tls_model("initial-exec")));
MT_HIDDEN _Atomic uint32_t mt_shim_session;

extern char **environ;

/* getenv without getenv: the shim may run before libc has published the environment, and a
 * pure lookup over `environ` is what the parser needs. */
const char *mt_shim_getenv(void *user, const char *name) {
  (void)user;
  size_t n = strlen(name);
  for (char **e = environ; e && *e; e++)
    if (!strncmp(*e, name, n) && (*e)[n] == '=')
      return *e + n + 1;
  return NULL;
}

static void register_process(int64_t parent_pid) {
  /* Static, not on the stack (which may be a small thread's in a fork child): its callers run
   * alone, the start-up under mt_shim.init and a fork child in its only thread. */
  static struct {
    mt_tracer_process h;
    char path[4096 + 4096]; /* the executable's path, then the command line */
  } buf;
  memset(&buf.h, 0, sizeof buf.h);
  int saved_errno = errno; /* the program's, in the child fork returns to */
  buf.h.image = mt_process_image("/proc/self/auxv", (uint8_t *)buf.path, sizeof buf.path);
  ssize_t n = readlink("/proc/self/exe", buf.path, 4096);
  if (n < 0)
    n = 0;
  ssize_t command = 0;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    for (ssize_t got; command < 4096; command += got)
      if ((got = read(fd, buf.path + n + command, 4096 - (size_t)command)) <= 0)
        break;
    close(fd);
  }
  errno = saved_errno;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  buf.h.sample_rate = mt_shim.config.full ? 1.0 : mt_shim.config.rate;
  buf.h.flags = mt_shim.config.full ? MT_TRACER_PROCESS_FULL : 0;
  buf.h.exe_length = (uint32_t)n;
  buf.h.pid = getpid();
  buf.h.parent_pid = parent_pid;
  buf.h.start_realtime_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  mt_ring_register(mt_shim.ring, MT_TRACER_REGISTRY_PROCESS, 0, &buf,
                   sizeof buf.h + (size_t)n + (size_t)command);
}

/* memtap record's pid namespace, as MEMTAP_RING_PID_NS named it at start-up; 0 when unset. */
static uint64_t memtap_pid_namespace(void) {
  const char *theirs = mt_shim_ring_variable(MT_SHIM_RING_PID_NS);
  uint64_t named = 0;
  for (const char *c = theirs; c && *c >= '0' && *c <= '9' && named < UINT64_MAX / 16; c++)
    named = named * 10 + (uint64_t)(*c - '0');
  return named;
}

/* A process of `memtap record` that the shim does not trace (a forked or exec'd descendant without
 * --follow-fork, or a copy made by the clone system call without fork handlers: `clone_copy`)
 * leaves `<pid>.untraced` in the ring directory, holding the program it runs (or nothing when its
 * path is long: memtap then reads /proc/PID/exe itself), after `why`: 0, `+` for a clone copy, `!`
 * for a followed child whose ring file could not be made, `?` for a followed descendant whose
 * MEMTAP_* variables its program set malformed, so that memtap can say which processes went
 * untraced and why. System calls only (no allocation, no
 * stdio): it runs in a fork child, where only async-signal-safe calls are allowed; and in a few
 * hundred bytes of stack, as the forking thread's stack may be small. Best effort: a failure
 * changes nothing for the program. Returns whether the note was left. */
static bool note_untraced_process(char why) {
  const char *dir = mt_shim_ring_variable(MT_SHIM_RING_DIR);
  if (!mt_shim.config.record || !dir || dir[0] != '/')
    return false;
  /* Written as <pid>.untraced.part and renamed: memtap never reads a note half-written. In
   * another pid namespace than memtap's, <pid>-pidns<namespace>.<start time>: pid 1 is every
   * namespace's. */
  static const char suffix[] = ".untraced.part";
  char partial[64 + sizeof suffix], name[sizeof partial];
  size_t len = (size_t)mt_format_decimal(partial, (uint64_t)getpid());
  uint64_t named = memtap_pid_namespace();
  uint64_t ours = named ? mt_process_pid_namespace() : 0;
  if (ours && ours != named) {
    /* and the start time: the kernel gives a freed namespace's number to the next one */
    uint64_t start = 0;
    mt_process_stat(0, &start, NULL);
    memcpy(partial + len, "-pidns", 6);
    len += 6;
    len += (size_t)mt_format_decimal(partial + len, ours);
    partial[len++] = '.';
    len += (size_t)mt_format_decimal(partial + len, start);
  }
  memcpy(partial + len, suffix, sizeof suffix);
  len += sizeof ".untraced" - 1;
  memcpy(name, partial, len);
  name[len] = 0;
  int saved_errno = errno;       /* the program's, in the child fork returns to */
  int cancel = mt_cancel_hold(); /* openat, write, close: inside fork or exec */
  bool left = false;
  int dfd = mt_ring_user_dir_open(dir); /* uid-N after a change of user (credentials.c) */
  int fd = dfd < 0
               ? -1
               : openat(dfd, partial, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) {
    char exe[257] = {why};
    ssize_t n = readlink("/proc/self/exe", exe + 1, sizeof exe - 1);
    if (n <= 0 || n >= (ssize_t)sizeof exe - 1)
      n = 0; /* an empty note (or a lone mark) still counts the process */
    if (write(fd, why ? exe : exe + 1, (size_t)n + (why != 0)) < 0) {
      /* as empty */
    }
    close(fd);
    left = renameat(dfd, partial, dfd, name) == 0;
    if (!left)
      unlinkat(dfd, partial, 0);
  }
  if (dfd >= 0)
    close(dfd);
  mt_cancel_release(cancel);
  errno = saved_errno;
  return left;
}

/* Fork handlers (registered after the ring's, so that in a followed child the ring's handler
 * has created the child's file before this one registers the child's process entry). */
void mt_shim_fork_child(void) {
  if (atomic_load(&mt_shim.mode) == MT_SHIM_OFF)
    return;
  mt_modules_after_fork();
  if (!mt_shim.config.follow_fork) {
    /* The ring's handler (fork_untraced) closed the session without creating a file. A child of
     * `memtap record` stays untraced; one of a process tracing itself may start its own trace. */
    mt_shim_set_mode(MT_SHIM_OFF);
    if (mt_shim.config.record) {
      atomic_store(&mt_shim.never, true);
      note_untraced_process(0);
    }
    return;
  }
  if (atomic_load(&mt_ring_session.epoch) & 1) {
    /* The ring could not create the child's file (a file size or descriptor limit of the
     * program's, a full disk): this child runs untraced, and memtap is told why. */
    mt_shim_set_mode(MT_SHIM_OFF);
    if (mt_shim.config.record) {
      atomic_store(&mt_shim.never, true);
      if (!note_untraced_process('!')) {
        /* Nothing memtap could find (the directory is another user's: the process changed its
         * user twice, credentials.c): said here, or nobody would know. */
        static const char line[] = "memtap: a forked process runs untraced: it cannot make its "
                                   "ring file (or a note) in memtap's ring directory\n";
        mt_shim_say(line, sizeof line - 1);
      }
    }
    return;
  }
  mt_shim_self.depth++;
  mt_shim_self.seeded = 0; /* the child's samples must not repeat the parent's */
  atomic_fetch_add(&mt_shim_session, 1);
  register_process(getppid());
  mt_shim_self.depth--;
}

void mt_shim_leave_copy(void) {
  if (atomic_load(&mt_shim.mode) == MT_SHIM_OFF)
    return;
  mt_shim_set_mode(MT_SHIM_OFF);
  if (mt_shim.config.record) {
    atomic_store(&mt_shim.never, true);
    note_untraced_process('+');
  }
}

/* The shim's own code: frames inside it are removed from every stack. */
static int find_own_text(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  uintptr_t self = (uintptr_t)data, low = UINTPTR_MAX, high = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (lo < low)
      low = lo;
    if (hi > high)
      high = hi;
  }
  if (self < low || self >= high)
    return 0;
  mt_shim.text_low = low;
  mt_shim.text_high = high;
  return 1;
}

/* One line on stderr, without stdio (which may allocate or hold its lock around this malloc). A
 * full file system gets the way out said: the ring file's directory is $TMPDIR's (under memtap
 * record, a directory it made there) unless MEMTAP_RING_DIR names another. */
static void say_not_tracing(const mt_error *err) {
  char line[400];
  bool full = err->sys_errno == ENOSPC || err->sys_errno == EDQUOT;
  int n = snprintf(line, sizeof line, "memtap: not tracing: %s%s\n", err->message,
                   full ? " (set TMPDIR to a directory whose file system has room)" : "");
  if (n > 0)
    mt_shim_say(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* MEMTAP_TEST_PUBLISH_DELAY (tests only): about one record in 64 waits 20-320 µs between being
 * stamped and being published, as a thread preempted there would, so that tests see records
 * arrive out of their stamps' order across threads. */
static void publish_delay(void) {
  static __thread uint64_t count __attribute__((tls_model("initial-exec")));
  uint64_t r = ++count * 0x9e3779b97f4a7c15ull;
  r ^= r >> 29;
  r *= 0xbf58476d1ce4e5b9ull;
  r ^= r >> 32;
  if (r & 63)
    return;
  struct timespec ts = {0, (long)(20000 + ((r >> 6) % 300000))};
  int cancel = mt_cancel_hold();
  nanosleep(&ts, NULL);
  mt_cancel_release(cancel);
}

void mt_shim_find_own_text(void) {
  if (mt_shim.text_high)
    return;
  dl_iterate_phdr(find_own_text, (void *)(uintptr_t)find_own_text);
  mt_tracer_unwind_init();
}

/* The set of sampled blocks for a session: made the first time, emptied for a later session
 * (the blocks it remembers were sampled for a trace that is finished). */
static int prepare_sets(const mt_tracer_config *c) {
  if (!c->full) {
    /* 2^22 slots, whose pages are mapped as members need them (sampled_set.c): 4 KiB of
     * directory, and a 64 KiB page or two per cluster of live sampled blocks. Reserved whole, the
     * table took 32 MiB of the program's room under an address-space or data limit, and under one
     * the program lowered itself. */
    unsigned slot_bits = 22;
    if (mt_shim.set.filter)
      mt_sampled_set_clear(&mt_shim.set);
    else if (mt_sampled_set_init(&mt_shim.set, 20, slot_bits) != 0)
      return -1;
  }
  /* The shim's own blocks stay the shim's across sessions: never emptied. */
  if (c->full && !mt_shim.internal.filter && mt_sampled_set_init(&mt_shim.internal, 16, 16) != 0)
    return -1;
  return 0;
}

int mt_shim_open_session(bool inprocess, mt_error *err) {
  static bool fork_handler;
  const mt_tracer_config *c = &mt_shim.config;
  mt_sampler_init(&mt_shim.sampler, c->rate);
  if (prepare_sets(c) != 0) {
    mt_fail(err, MT_E_NOMEM, -1, "cannot map the set of sampled blocks");
    return MT_SHIM_OFF;
  }
  mt_ring_options o;
  if (mt_ring_options_init(&o, err) != MT_OK)
    return MT_SHIM_OFF;
  /* In-process, the consumer is a thread of this process: a producer waiting for it could hold
   * a lock it needs (inprocess.c), so the ring never waits, and it is larger. */
  o.mode = inprocess ? MT_RING_FLIGHT_RECORDER : MT_RING_LOSSLESS;
  if (inprocess && !mt_shim_getenv(NULL, "MEMTAP_RING_SIZE"))
    o.ring_size = c->full ? 16u << 20 : 4u << 20;
  o.fork_untraced = !c->follow_fork;
  /* The shim is never unloaded: the close at exit may wait for the last library destructor,
   * whose frees are the program's (in process, the consumer's own exit handler ends the trace
   * first, inprocess.c). */
  mt_ring_close_after_libraries();
  if (mt_ring_open(&mt_shim.ring, &o, err) != MT_OK)
    return MT_SHIM_OFF;
  if (!fork_handler) {
    if (pthread_atfork(NULL, NULL, mt_shim_fork_child) != 0) {
      mt_ring_close(mt_shim.ring);
      mt_fail(err, MT_E_NOMEM, -1, "cannot register the fork handler");
      return MT_SHIM_OFF;
    }
    fork_handler = true;
  }
  bool later = atomic_fetch_add(&mt_shim_session, 1) != 0;
  register_process(0);
  if (later)
    mt_modules_register_again(); /* a new file: the modules the last one listed, again */
  mt_modules_scan();
  return c->full ? MT_SHIM_FULL : MT_SHIM_SAMPLED;
}

/* "memtap: warning: ", then `before`, `owner` (a path) and `after`, as one line on the program's
 * standard error, once at start: what the trace will lack is said rather than left to be guessed.
 * A line too long for the buffer is cut, keeping its newline. */
static void say_allocator_warning(const char *before, const char *owner, const char *after) {
  char line[700];
  int n = snprintf(line, sizeof line, "memtap: warning: %s%s%s\n", before, owner, after);
  if (n <= 0)
    return;
  if ((size_t)n >= sizeof line) {
    n = (int)sizeof line - 1;
    line[n - 1] = '\n';
  }
  mt_shim_say(line, (size_t)n);
}

/* A program (or a library preloaded before the shim) that defines malloc itself binds every
 * malloc call to its own allocator, which LD_PRELOAD cannot come before: the shim sees only what
 * that allocator passes on to the next malloc, often nothing. Said once, so that an empty trace is
 * explained rather than silent. dladdr runs only then (it is slow: a symbol table search). */
static void warn_if_malloc_is_not_ours(void) {
  uintptr_t bound = (uintptr_t)dlsym(RTLD_DEFAULT, "malloc");
  if (!bound || (bound >= mt_shim.text_low && bound < mt_shim.text_high))
    return;
  /* A non-PIE program that takes malloc's address has an undefined malloc whose value is its
   * canonical PLT entry, which the loader binds malloc to; that entry jumps to the shim's. */
  Dl_info info;
  const ElfW(Sym) *sym = NULL;
  int found = dladdr1((void *)bound, &info, (void **)&sym, RTLD_DL_SYMENT);
  if (found && sym && sym->st_shndx == SHN_UNDEF)
    return;
  const char *owner = found && info.dli_fname && info.dli_fname[0] ? info.dli_fname : "the program";
  say_allocator_warning("malloc is defined by ", owner,
                        ", which comes before the tracer: only what that allocator passes on to "
                        "the next malloc is traced");
}

/* dl_iterate_phdr: whether an object other than `data` (the allocator's path) and the
 * C++ runtime itself needs the C++ runtime (a DT_NEEDED of libstdc++ or libc++): a C program run
 * with jemalloc preloaded loads libstdc++ for jemalloc only. */
static int needs_cxx_runtime(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  if (!strcmp(info->dlpi_name, data) || strstr(info->dlpi_name, "libstdc++") ||
      strstr(info->dlpi_name, "libc++"))
    return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
      continue;
    const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    uintptr_t strtab = 0;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
      if (d->d_tag == DT_STRTAB)
        strtab = d->d_un.d_ptr < info->dlpi_addr ? info->dlpi_addr + d->d_un.d_ptr : d->d_un.d_ptr;
    if (!strtab)
      return 0;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
      const char *name = (const char *)(strtab + d->d_un.d_val);
      if (d->d_tag == DT_NEEDED &&
          (!strncmp(name, "libstdc++.", 10) || !strncmp(name, "libc++.", 7)))
        return 1;
    }
  }
  return 0;
}

/* An allocator preloaded after the shim that defines C++ operator new itself (Debian's jemalloc,
 * tcmalloc) allocates inside it without calling malloc: every `new` goes untraced, and a `delete`
 * that frees through `free` shows as a free of an unknown block. Said once, like the above. */
static void warn_if_new_bypasses_malloc(void) {
  void *new_fn = dlsym(RTLD_DEFAULT, "_Znwm"), *next_malloc = (void *)mt_shim_real.malloc;
  Dl_info by_new, by_malloc;
  if (!new_fn || !next_malloc || !dladdr(new_fn, &by_new) || !dladdr(next_malloc, &by_malloc) ||
      !by_new.dli_fname || !by_malloc.dli_fname || strcmp(by_new.dli_fname, by_malloc.dli_fname))
    return; /* libstdc++'s new, which calls malloc (libc defines no operator new) */
  if (!dl_iterate_phdr(needs_cxx_runtime, (void *)by_new.dli_fname))
    return; /* no C++ code but the allocator's own: nothing calls new */
  say_allocator_warning("C++ operator new is defined by ",
                        by_new.dli_fname[0] ? by_new.dli_fname : "the next allocator",
                        ", the allocator after the tracer, which allocates without calling malloc: "
                        "memory allocated with new is not traced");
}

/* Whether this process, under `memtap record`, is a descendant of the program memtap started
 * rather than that program: not MEMTAP_TRACE_PID, or with --follow-fork (which sets none) not a
 * child of memtap (MEMTAP_RING_CONSUMER's pid), or in another pid namespace. memtap is a
 * subreaper, so an orphan reparented to it reads as the program: it then says what the program
 * would. */
static bool record_descendant(const mt_tracer_config *c) {
  if (!c->scope_read || !c->record)
    return false;
  /* In another pid namespace than memtap's (MEMTAP_RING_PID_NS), pids are not memtap's to
   * compare, and the program memtap started is in memtap's: a descendant (a sandbox's child). */
  uint64_t named = memtap_pid_namespace();
  if (named && mt_process_pid_namespace() != named)
    return true;
  if (c->trace_pid)
    return c->trace_pid != getpid();
  uint64_t consumer, start_time;
  return mt_number_pair_parse(mt_shim_getenv(NULL, "MEMTAP_RING_CONSUMER"), &consumer,
                              &start_time) &&
         consumer != (uint64_t)getppid();
}

/* Whether `c` makes this process a descendant `memtap record` does not follow (exec'd, without
 * --follow-fork): it stays untraced, and says nothing even of a malformed MEMTAP_* its program set
 * for it (the shim's complaint went into the program's output). */
static bool unfollowed_descendant(const mt_tracer_config *c) {
  return !c->follow_fork && record_descendant(c);
}

static int start(void) {
  mt_error err = {0};
  bool parsed = mt_tracer_config_parse(&mt_shim.config, mt_shim_getenv, NULL, &err) == MT_OK;
  const mt_tracer_config *c = &mt_shim.config;
  if (unfollowed_descendant(c)) {
    atomic_store(&mt_shim.never, true);
    note_untraced_process(0);
    return MT_SHIM_OFF; /* an exec'd descendant that inherited the environment */
  }
  if (!parsed) {
    /* A followed descendant: its program set the variables, and its output is not the shim's to
     * change; memtap says it (the note), unless no note can be left. */
    if (!record_descendant(c) || !note_untraced_process('?'))
      say_not_tracing(&err);
    return MT_SHIM_OFF;
  }
  bool inprocess = !c->record;
  if (inprocess && !c->output)
    return MT_SHIM_OFF; /* not asked to trace (mt_tracer_start may ask later) */
  if (inprocess && mt_inprocess_prepare(c->output, &err) != MT_OK) {
    say_not_tracing(&err);
    return MT_SHIM_OFF;
  }
  mt_shim_find_own_text();
  const char *delay = mt_shim_getenv(NULL, "MEMTAP_TEST_PUBLISH_DELAY");
  if (delay && *delay && strcmp(delay, "0") != 0)
    mt_ring_test_before_publish = publish_delay;
  const char *no_scratch = mt_shim_getenv(NULL, "MEMTAP_TEST_NO_SCRATCH");
  mt_record_no_scratch = no_scratch && *no_scratch && strcmp(no_scratch, "0") != 0;
  int mode = mt_shim_open_session(inprocess, &err);
  if (mode == MT_SHIM_OFF) {
    say_not_tracing(&err);
    if (inprocess)
      mt_inprocess_finish(&err); /* closes the trace file */
  } else {
    warn_if_malloc_is_not_ours();
    warn_if_new_bypasses_malloc();
  }
  return mode;
}

/* Standard error as the shim found it (mt_shim_say). */
static mt_file_identity stderr_at_start;

void mt_shim_say(const char *line, size_t length) {
  if (!stderr_at_start.known || !mt_file_identity_holds(&stderr_at_start, 2))
    return;
  int cancel = mt_cancel_hold();
  ssize_t ignored = write(2, line, length);
  (void)ignored;
  mt_cancel_release(cancel);
}

/* MEMTAP_RING_DIR and MEMTAP_RING_PID_NS as the process started with them (memtap record's): a
 * program may empty its environment (clearenv) or change it before it forks, and its notes must
 * still reach memtap's directory. Copied once, at start-up; "" when unset or too long. */
static char ring_variables[2][4096];

const char *mt_shim_ring_variable(int which) {
  return ring_variables[which][0] ? ring_variables[which] : NULL;
}

static void keep_ring_variables(void) {
  static const char *const names[2] = {"MEMTAP_RING_DIR", "MEMTAP_RING_PID_NS"};
  for (int i = 0; i < 2; i++) {
    const char *v = mt_shim_getenv(NULL, names[i]);
    size_t n = v ? strlen(v) : 0;
    if (n < sizeof ring_variables[i]) {
      memcpy(ring_variables[i], v ? v : "", n);
      ring_variables[i][n] = 0;
    }
  }
}

void mt_shim_init(void) {
  if (atomic_load_explicit(&mt_shim.init, memory_order_acquire) == 2)
    return;
  if (!environ)
    return; /* too early: libc has not published the environment; ask again later */
  int expected = 0;
  if (!atomic_compare_exchange_strong(&mt_shim.init, &expected, 1))
    return; /* another thread is starting: this one passes through until it is done */
  keep_ring_variables();
  stderr_at_start = mt_file_identity_of(2);
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  int cancel = mt_cancel_hold(); /* maybe inside the program's first malloc */
  int mode = start();
  mt_cancel_release(cancel);
  mt_shim_set_mode(mode);
  atomic_store_explicit(&mt_shim.init, 2, memory_order_release);
  t->depth--;
}

void mt_shim_stop(void) {
  mt_shim_set_mode(MT_SHIM_OFF);
}

static void seed_thread(mt_shim_thread *t);

void mt_shim_thread_refresh(mt_shim_thread *t) {
  uint32_t session = atomic_load_explicit(&mt_shim_session, memory_order_relaxed);
  if (!t->seeded)
    seed_thread(t);
  t->countdown = mt_sampler_gap(&mt_shim.sampler, &t->rng);
  t->countdown_session = session;
}

/* The thread's generator: seeded once per thread (again in a followed fork child). */
static void seed_thread(mt_shim_thread *t) {
  uint64_t seed;
  if (mt_shim.config.seeded) {
    /* Deterministic: the seed, mixed with the thread's order of arrival. */
    static _Atomic uint64_t arrivals;
    seed = mt_shim.config.seed + 0x9e3779b97f4a7c15ull * atomic_fetch_add(&arrivals, 1);
  } else {
    /* The kernel's randomness (a system call, once per thread; no malloc, no file), mixed with
     * the clock, pid and tid in case it is unavailable. */
    uint64_t entropy = 0;
    if (syscall(SYS_getrandom, &entropy, sizeof entropy, GRND_NONBLOCK) != (long)sizeof entropy)
      entropy = 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    seed = entropy ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
           ((uint64_t)getpid() << 40) ^ (uint64_t)syscall(SYS_gettid) ^ (uint64_t)(uintptr_t)t;
  }
  mt_rng_seed(&t->rng, seed);
  t->seeded = 1;
}

/* The constructor: a safe moment to load the unwinder (not inside a malloc that may hold the
 * loader lock), and the main thread's start record. */
__attribute__((constructor)) static void shim_constructor(void) {
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  mt_shim_resolve();
  t->depth--;
  mt_shim_init();
  if (atomic_load(&mt_shim.mode) == MT_SHIM_OFF)
    return;
  t->depth++;
  mt_tracer_unwind_load();
  mt_threads_main_started();
  mt_error err = {0};
  if (!mt_shim.config.record && mt_inprocess_launch(&err) != MT_OK) {
    mt_shim_stop();
    mt_ring_close(mt_shim.ring);
    say_not_tracing(&err);
  }
  t->depth--;
}
