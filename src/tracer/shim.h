/* Internal state of the preload shim (libmemtap-preload.so), shared by its files: the next
 * allocator's functions, the process-wide tracing state, the per-thread state in initial-exec TLS,
 * and the functions that write records. Everything here lives in static storage or mmap'd
 * memory; nothing is allocated with the interposed allocator. docs/tracer.md describes the design.
 */
#ifndef MEMTAP_SRC_TRACER_SHIM_H
#define MEMTAP_SRC_TRACER_SHIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "memtap/ring.h"
#include "memtap/tracer.h"
#include "tracer/config.h"
#include "tracer/sampled_set.h"
#include "tracer/sampler.h"
#include "tracer/unwind_cfi.h"

#define MT_HIDDEN __attribute__((visibility("hidden")))
#define MT_LIKELY(x) __builtin_expect(!!(x), 1)
#define MT_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The next allocator in lookup order (usually glibc's, or a preloaded jemalloc). Functions the
 * next allocator's object does not define are NULL and emulated (bootstrap.c). */
typedef struct mt_real {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  size_t (*malloc_usable_size)(void *);
  void *(*mmap)(void *, size_t, int, int, int, off_t);
  int (*munmap)(void *, size_t);
  void *(*mremap)(void *, size_t, size_t, int, ...);
  int (*pthread_create)(void *, const void *, void *(*)(void *), void *);
  void *(*dlopen)(const char *, int);
  int (*dlclose)(void *);
  void *sigaction; /* int (*)(int, const struct sigaction *, struct sigaction *) */
  /* void (*)(struct __jmp_buf_tag *, int): longjmp, _longjmp, siglongjmp, __longjmp_chk */
  void *longjmp, *longjmp_, *siglongjmp, *longjmp_chk;
  /* int (*)(int, const struct rlimit *) and int (*)(pid_t, int, const struct rlimit *, struct
   * rlimit *), and their 64 forms (rlimit.c) */
  void *setrlimit, *setrlimit64, *prlimit, *prlimit64;
  /* The ends of a process that run no exit handler, and the exec family (ending.c): _exit, _Exit,
   * execve, execv, execvp, execvpe, fexecve, execveat, and daemon. */
  void *exit_, *exit_upper, *execve, *execv, *execvp, *execvpe, *fexecve, *execveat, *daemon;
  void *unshare, *setns; /* in process, a user namespace ends the trace first (ending.c) */
  /* setuid, seteuid, setreuid, setresuid (credentials.c) */
  void *setuid, *seteuid, *setreuid, *setresuid;
  void *prctl, *syscall; /* a seccomp filter stops tracing first (sandbox.c) */
} mt_real;

extern MT_HIDDEN mt_real mt_shim_real;

/* Process-wide state. `mode` is what free and the slow path test. */
enum {
  MT_SHIM_OFF = 0,     /* pass-through: not asked to trace, stopped, or failed */
  MT_SHIM_SAMPLED = 1, /* Poisson sampling; frees recorded for sampled blocks only */
  MT_SHIM_FULL = 2,    /* every allocation and every non-NULL free */
};

/* Resolution of the next allocator: UNRESOLVED -> RESOLVING (one thread) -> RESOLVED. */
enum { MT_RESOLVE_NONE = 0, MT_RESOLVE_BUSY = 1, MT_RESOLVE_DONE = 2 };

typedef struct mt_shim_state {
  _Atomic int mode;
  _Atomic int resolve;
  _Atomic int init; /* 0 not started, 1 running, 2 done (tracing or not) */
  mt_tracer_config config;
  mt_sampler sampler;
  mt_sampled_set set;
  /* Full tracing: blocks allocated while the shim's own code ran (libunwind's thread-local
   * storage, dlerror's buffer...), so that their later free by libc is not written as a free of
   * a block the consumer never saw. */
  mt_sampled_set internal;
  mt_ring *ring;
  uintptr_t text_low, text_high; /* the shim's own code, removed from stacks */
  _Atomic uint64_t dl_pending;   /* dlopen calls so far (modules.c rescans when it changes) */
  _Atomic uint64_t records_failed;
  /* This process can never trace (a descendant of `memtap record` that is not followed): its
   * threads skip the trampoline, and mt_tracer_start refuses. */
  _Atomic bool never;
} mt_shim_state;

extern MT_HIDDEN mt_shim_state mt_shim;
/* Changes when tracing starts and in a followed fork child: a thread whose `session` differs
 * writes its THREAD_START first. */
extern MT_HIDDEN _Atomic uint32_t mt_shim_session;
/* dlopen (modules.c): how many calls so far, and the next dlopen (for the assembly stub). */
extern MT_HIDDEN _Atomic uint64_t mt_dl_pending;
extern MT_HIDDEN void *mt_dl_real_open;

/* Per-thread state. The fast path touches `countdown` only. */
typedef struct mt_shim_thread {
  int64_t countdown;     /* bytes until the next sample point; <= 0 sends malloc to the slow path */
  uint32_t depth;        /* > 0 while the shim's own code runs: calls pass straight through */
  uint32_t in_allocator; /* > 0 while the next allocator runs (its mmaps are not regions) */
  uint32_t resolving;    /* this thread is resolving the next allocator (bootstrap arena) */
  uint32_t seeded;
  uint32_t started;           /* THREAD_START written in the current session */
  uint32_t session;           /* the session `started` refers to */
  uint32_t countdown_session; /* the session the countdown was drawn in (mt_shim_thread_current) */
  mt_rng rng;
  /* The thread's stack [low, high) when known (THREAD_START), else 0: the bound a stack walker
   * that reads the stack itself needs. */
  uint64_t stack_low, stack_high;
  int *errno_at; /* this thread's errno (&errno), once asked: a record keeps it without a call */
  /* The frame of the outermost signal handler (its trampoline's) that interrupted this thread
   * inside a ring write, while it drained deferred records or while it built a record in a
   * scratch level, until that handler returns; else 0. A longjmp from it to a frame above
   * abandons what it interrupted (longjmp.c), scratch levels included. */
  uintptr_t handler_frame;
  /* The alternate signal stack [low, high) the running handler is on (signals.c), else 0: a
   * handler's stack may be a few KiB (SIGSTKSZ), too little for libunwind. */
  uintptr_t alt_low, alt_high;
  /* > 0 while a program's handler runs through the trampoline (signals.c) on this thread: a
   * process that ends from there (_exit in a SIGTERM handler) may have interrupted a lock the
   * in-process consumer needs, so the end of its trace is waited for only so long (ending.c).
   * A longjmp out of the outermost handler (longjmp.c) sets it back to 0. */
  uint32_t in_handler;
  uintptr_t handler_outer; /* the frame of the outermost trampoline while in_handler > 0 */
} mt_shim_thread;

extern MT_HIDDEN __thread mt_shim_thread mt_shim_self __attribute__((tls_model("initial-exec")));

/* The countdown of a thread while nothing is traced: the bytes it allocates between two visits to
 * the slow path, where it notices that tracing started (mt_tracer_start, a later session). Small
 * enough that a thread that exists when tracing starts joins within 16 KiB of allocations, large
 * enough that the visits cost nothing measurable (one per 16 KiB: a few loads). */
#define MT_SHIM_COUNTDOWN_IDLE ((int64_t)16 * 1024)

/* Whether the thread's countdown belongs to the current session: false after tracing (re)started,
 * so that the slow path draws a new gap at the session's rate. */
static inline bool mt_shim_thread_current(const mt_shim_thread *t) {
  return t->countdown_session == atomic_load_explicit(&mt_shim_session, memory_order_relaxed);
}

/* bootstrap.c */
/* The code of the next allocator's object when it is not libc's (jemalloc): its mmap calls are
 * its arenas, not regions. Both 0 otherwise. */
extern MT_HIDDEN uintptr_t mt_shim_allocator_low, mt_shim_allocator_high;
/* Resolves the next allocator once (thread-safe; the resolving thread's own allocations come from
 * the bootstrap arena). */
MT_HIDDEN void mt_shim_resolve(void);
/* The next definition held in `slot` (a field of mt_shim_real), resolving first when the slot is
 * still empty: an interposed function called before the shim's constructor ran. Otherwise
 * resolved at start-up, so that no lookup happens later in a signal handler or a vfork child.
 * NULL when there is no next definition. */
static inline void *mt_shim_next(void *const *slot) {
  if (!*slot) {
    mt_shim_self.depth++;
    mt_shim_resolve();
    mt_shim_self.depth--;
  }
  return *slot;
}
/* The bootstrap arena (static storage of the shim). */
#define MT_BOOTSTRAP_SIZE (1u << 20)
extern MT_HIDDEN unsigned char mt_bootstrap_arena[MT_BOOTSTRAP_SIZE];
static inline bool mt_bootstrap_owns(const void *p) {
  return (uintptr_t)p - (uintptr_t)mt_bootstrap_arena < MT_BOOTSTRAP_SIZE;
}
MT_HIDDEN void *mt_bootstrap_alloc(size_t size, size_t align);
MT_HIDDEN size_t mt_bootstrap_size(const void *p);

/* malloc.c */
/* Sets mt_shim.mode, and before it the gate that free's fast path reads instead of the mode. Every
 * change of the mode goes through here. Async-signal-safe. */
MT_HIDDEN void mt_shim_set_mode(int mode);

/* state.c */
/* getenv without getenv, for mt_tracer_config_parse: the shim may run before libc has published
 * the environment, and a pure lookup over `environ` is what the parser needs. */
MT_HIDDEN const char *mt_shim_getenv(void *user, const char *name);
/* Reads the configuration and starts tracing if asked (once; thread-safe). */
MT_HIDDEN void mt_shim_init(void);
/* MEMTAP_RING_DIR or MEMTAP_RING_PID_NS as the environment held them at mt_shim_init (whatever
 * the program did to its environment since), or NULL. */
enum { MT_SHIM_RING_DIR = 0, MT_SHIM_RING_PID_NS = 1 };
MT_HIDDEN const char *mt_shim_ring_variable(int which);
/* Stops tracing (a failure, or mt_tracer_stop): the program goes on untraced. */
MT_HIDDEN void mt_shim_stop(void);
/* The shim's fork handler in the child (after the ring's): registered with pthread_atfork, and
 * called by the clone interposer (clone.c) for a child glibc gives no handlers. */
MT_HIDDEN void mt_shim_fork_child(void);
/* In a copy of the process made without any fork handler (the clone system call called directly,
 * src/ring/producer.h), whose ring session closed at its first write: tracing stops here for good,
 * as in a fork child that is not followed, and memtap record is left a note. Async-signal-safe. */
MT_HIDDEN void mt_shim_leave_copy(void);
/* Opens a tracing session with mt_shim.config: the ring file (lossless for `memtap record`, a
 * flight recorder for a consumer thread of this process), the process entry, every loaded module.
 * Returns the mode to publish, or MT_SHIM_OFF with `err` filled. Called with depth raised, once
 * at a time (start-up, or control.c under its lock). */
MT_HIDDEN int mt_shim_open_session(bool inprocess, mt_error *err);
/* The shim's own text range and the unwinder's view of it, once. */
MT_HIDDEN void mt_shim_find_own_text(void);
/* The slow path's per-thread set-up: seeds the generator, resets the countdown for the current
 * mode, and writes THREAD_START the first time. Called with depth raised. */
MT_HIDDEN void mt_shim_thread_refresh(mt_shim_thread *t);

/* record.c: the records. Each raises depth around its own work. `skip` is unused by the
 * libunwind unwinder (the shim's frames are removed by address). */
MT_HIDDEN void mt_record_alloc(void *p, size_t size, uint64_t nsamples, unsigned kind);
/* The same, with the stack walked from `from` (mt_tracer_unwind). */
MT_HIDDEN void mt_record_alloc_from(const mt_cfi_regs *from, void *p, size_t size,
                                    uint64_t nsamples, unsigned kind);
MT_HIDDEN void mt_record_realloc_from(const mt_cfi_regs *from, void *old, void *p, size_t size,
                                      uint64_t nsamples);
MT_HIDDEN void mt_record_free(void *p);
MT_HIDDEN void mt_record_realloc(void *old, void *p, size_t size, uint64_t nsamples);
MT_HIDDEN void mt_record_map(void *p, size_t length, int prot, int flags, unsigned kind);
MT_HIDDEN void mt_record_unmap(void *p, size_t length);
MT_HIDDEN void mt_record_thread(unsigned type, uint64_t tid, uint64_t low, uint64_t high);
/* At thread exit: writes the records a signal handler left waiting, frees their buffer. */
MT_HIDDEN void mt_record_thread_done(void);
/* Writes MT_TRACER_REC_PROCESS_END, when tracing. */
MT_HIDDEN void mt_record_process_end(void);
/* MEMTAP_TEST_NO_SCRATCH=1 (tests only): records built outside the ring never get a scratch page,
 * as when mmap fails, and take the fallback on the stack (record.c). */
extern MT_HIDDEN bool mt_record_no_scratch;
/* Writes a raw record; on a failure that means the consumer is gone, stops tracing. */
MT_HIDDEN void mt_record_write(unsigned type, unsigned id, const uint64_t *payload, size_t words);
/* Whether this thread is inside a ring write or draining deferred records: what a signal handler
 * that interrupts it must not disturb (its records are deferred). */
MT_HIDDEN bool mt_record_in_write(void);
/* The interrupted ring write (or draining) will never resume: a handler is leaving it by longjmp.
 * Its record was not published (the tail moves last) and is given up; writing goes on. */
MT_HIDDEN void mt_record_abandon_write(void);
/* The scratch levels this thread has taken (record.c): non-zero while it builds a record outside
 * the ring. */
MT_HIDDEN uint32_t mt_record_scratch_level(void);
/* The records being built in levels `level` and above will never be finished (a handler is
 * leaving them by longjmp): the levels are free again. Lowers the level only. */
MT_HIDDEN void mt_record_abandon_scratch(uint32_t level);

/* modules.c */
/* Registers every loaded module not registered yet and writes MODULE_UNLOAD for vanished ones. */
MT_HIDDEN void mt_modules_scan(void);
/* Rescans when a dlopen happened since the last scan, or when a frame lies in no known module
 * and a dlopen is in progress or happened since the last such rescan. */
MT_HIDDEN void mt_modules_check(const uint64_t *pcs, size_t n);
/* mt_dl_pending at the last scan (set under the scan's lock). */
extern MT_HIDDEN uint64_t mt_modules_scanned_pending;
/* mt_modules_check(pcs, 0) inline, for frames all in known modules: only a dlopen since the last
 * scan needs one. */
static inline void mt_modules_check_pending(void) {
  if (MT_UNLIKELY(atomic_load_explicit(&mt_dl_pending, memory_order_acquire) !=
                  mt_modules_scanned_pending))
    mt_modules_check(NULL, 0);
}
MT_HIDDEN void mt_modules_after_fork(void);
/* For a new ring file (a later session): registers every live module again. */
MT_HIDDEN void mt_modules_register_again(void);

/* state.c: writes one of the shim's lines (`length` bytes, newline included) to standard error,
 * only while descriptor 2 names the file it named when the shim started, and never when none was
 * open then: a program that closed it and opened a file of its own as descriptor 2 must not find
 * memtap's words in that file. Async-signal-safe, no allocation. */
MT_HIDDEN void mt_shim_say(const char *line, size_t length);

/* inprocess.c: MEMTAP=path / MEMTRACE=path or mt_tracer_start, a process tracing itself. */
/* Opens and locks the trace file, empties the variables for children; MT_OK, or an error in
 * `err`. */
MT_HIDDEN int mt_inprocess_prepare(const char *path, mt_error *err);
/* Loads libmemtap and starts the consumer thread on the session's ring; MT_OK, or an error in
 * `err` (the trace file is then closed; the caller stops tracing). */
MT_HIDDEN int mt_inprocess_launch(mt_error *err);
/* Stops tracing, closes the ring and waits for the consumer thread to write the end of the
 * trace: MT_OK, or what failed in `err`. MT_E_STATE when this process runs no consumer thread. */
MT_HIDDEN int mt_inprocess_finish(mt_error *err);
/* Whether this process runs a consumer thread now. */
MT_HIDDEN bool mt_inprocess_running(void);
/* The running consumer thread's stack [low, high), its guard included: memory of the shim's,
 * which mlockall leaves unlocked. False when there is none. */
MT_HIDDEN bool mt_inprocess_stack(uint64_t *low, uint64_t *high);
/* The process is about to end without its exit handlers (_exit) or to replace its image (exec):
 * when it runs a consumer thread, tracing stops and the trace is finished now, as at exit. From a
 * signal handler (`bounded`) the consumer is waited for at most MT_INPROCESS_END_BOUND_S seconds.
 * Returns whether a trace was finished. Keeps errno. */
MT_HIDDEN bool mt_inprocess_end(bool bounded);
/* mt_inprocess_end with the wait bounded by `bound_s` seconds (0: not bounded). */
MT_HIDDEN bool mt_inprocess_end_within(int bound_s);
/* From a signal handler that may hold a lock the consumer thread needs (it interrupted libc):
 * tracing stops, and the consumer thread finishes the trace on its own, then lets `sig` end the
 * process (mt_signals_default_action). False when this process runs no trace to finish. */
MT_HIDDEN bool mt_inprocess_end_then_signal(int sig);
/* Whether a signal waits to be sent again by the consumer thread (mt_inprocess_end_then_signal). */
MT_HIDDEN bool mt_inprocess_signal_pending(void);
/* When one does: waits (at most MT_INPROCESS_SIGNAL_WAIT_S) for it to end the process, so that
 * what the program does next (an exec) does not come before it. At once otherwise. */
MT_HIDDEN void mt_inprocess_await_signal(void);
#define MT_INPROCESS_SIGNAL_WAIT_S 2
/* Whether the calling thread is the consumer thread. */
MT_HIDDEN bool mt_inprocess_is_consumer(void);
/* signals.c: in process, the ending signals the program leaves at SIG_DFL get the shim's handler,
 * which finishes the trace before the default action (called once the consumer runs). */
MT_HIDDEN void mt_signals_keep_trace(void);
/* Puts SIG_DFL back for `sig` and sends it to the process: its default action happens. */
MT_HIDDEN void mt_signals_default_action(int sig);
#define MT_INPROCESS_END_BOUND_S 10

/* own_objects.c: the objects the shim brought into the process, which mlockall leaves unlocked. */
/* The last loaded object now, before a dlopen of the shim's own (libunwind, libmemtap); then, after
 * it, mt_own_objects_note_since(mark) notes what it loaded. */
MT_HIDDEN const void *mt_own_objects_mark(void);
MT_HIDDEN void mt_own_objects_note_since(const void *mark);
typedef struct mt_own_range {
  uint64_t start, end; /* page-aligned */
} mt_own_range;
/* The address ranges of the shim, of the libraries only it needs (libm) and of what it loaded for
 * itself; up to `max`, returns how many. Takes the loader's lock: not in a signal handler. */
MT_HIDDEN size_t mt_own_objects_ranges(mt_own_range *out, size_t max);

/* unwind.c: the unwinder, behind one function so that it can be replaced. */
/* Loads the unwinder (libunwind, privately) at a safe moment: the shim's constructor. */
MT_HIDDEN void mt_tracer_unwind_load(void);
/* Tells the cached CFI walker which frames are the shim's own (after the shim's text is known). */
MT_HIDDEN void mt_tracer_unwind_init(void);
/* Frames asked of the unwinder beyond the ones kept: the shim's own, removed afterwards. */
#define MT_UNWIND_SLACK 16
/* Fills pcs[0..] with return addresses, innermost first, the shim's own frames removed; returns
 * how many (<= max). `pcs` has room for max + MT_UNWIND_SLACK entries (scratch). Sets
 * MT_TRACER_FLAG_NO_STACK or MT_TRACER_FLAG_TRUNCATED in *flags. `from` (may be NULL): registers
 * taken with MT_CFI_HERE in the interposed function's own frame, still live, where the walk
 * starts instead of here. */
MT_HIDDEN size_t mt_tracer_unwind(const mt_cfi_regs *from, uint64_t *pcs, size_t max,
                                  unsigned *flags);
/* Not a record flag: set in *flags by mt_tracer_unwind when every frame it returns lies in a module
 * of the cached walker's table, which the module scan fills (mt_modules_check need not look them
 * up). The caller clears it before writing the flags. */
#define MT_UNWIND_KNOWN (1u << 31)
/* At thread exit: releases the thread's walk memo. */
MT_HIDDEN void mt_tracer_unwind_thread_done(void);

/* threads.c */
MT_HIDDEN void mt_threads_main_started(void);

#endif
