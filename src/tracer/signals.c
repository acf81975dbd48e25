/* Signal handlers that allocate (docs/tracer.md, "Signals"). The shim interposes sigaction and
 * signal and installs, for each handler the program sets, a trampoline that runs the program's
 * handler with the thread's depth set to 0: a handler that interrupted the shim's own code
 * (unwinding, writing a record) is the program's code, and its allocations are recorded like any
 * other instead of passing through as the shim's. The interrupted shim code is left in a state a
 * nested record can run beside: the sampler's countdown may lose an update, the sets are
 * lock-free, module scans only try their lock, and a record that would nest inside the
 * interrupted ring write is queued and written right after it (record.c). SIG_DFL, SIG_IGN and
 * processes that do not trace are left alone: the handler is installed as given.
 *
 * In process (MEMTAP=), a signal whose default action ends the process (a crash, Ctrl-C, a
 * SIGTERM, a SIGPIPE) would end it before the consumer thread finished the trace, which then
 * stopped at its last flush, up to a second earlier: while the program leaves such a signal at
 * SIG_DFL, the shim's ending_handler is installed in its place, which finishes the trace (bounded,
 * as from any handler) and then lets the default action happen; the program is told SIG_DFL. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "ring/producer.h"
#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

/* The program's handler of each signal, in two slots so that a delivery never reads a handler
 * with another handler's flags: the writer fills the slot not in use, then flips `current`. */
typedef struct user_handler {
  void *handler;
  int flags;
} user_handler;

static user_handler handlers[_NSIG][2];
static _Atomic int current[_NSIG];

static void trampoline(int sig, siginfo_t *info, void *context) {
  mt_shim_thread *t = &mt_shim_self;
  uint32_t depth = t->depth, in_allocator = t->in_allocator;
  uintptr_t handler_frame = t->handler_frame, alt_low = t->alt_low, alt_high = t->alt_high;
  /* Off the thread's own stack: on the alternate signal stack, whose size the unwinder must
   * respect (unwind.c). One system call per such delivery. */
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  if (!t->stack_high || here < t->stack_low || here >= t->stack_high) {
    stack_t ss;
    if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK)) {
      t->alt_low = (uintptr_t)ss.ss_sp;
      t->alt_high = (uintptr_t)ss.ss_sp + ss.ss_size;
    }
  }
  /* The outermost handler that interrupts a ring write or a record being built: a longjmp out of
   * it (longjmp.c) abandons the write, which would otherwise keep the thread's records deferred
   * for good, and the record's scratch level, which would otherwise stay taken. */
  uint32_t scratch = mt_record_scratch_level();
  if (!handler_frame && (scratch || mt_record_in_write()))
    t->handler_frame = (uintptr_t)__builtin_frame_address(0);
  t->depth = 0;
  t->in_allocator = 0;
  if (!t->in_handler++)
    t->handler_outer = (uintptr_t)__builtin_frame_address(0);
  mt_ring_note_signal(sig); /* memtap record forwards only what the program did not get */
  atomic_signal_fence(memory_order_seq_cst);
  const user_handler *h = &handlers[sig][atomic_load_explicit(&current[sig], memory_order_acquire)];
  if (h->flags & SA_SIGINFO)
    ((void (*)(int, siginfo_t *, void *))h->handler)(sig, info, context);
  else
    ((void (*)(int))h->handler)(sig);
  atomic_signal_fence(memory_order_seq_cst);
  if (!--t->in_handler)
    t->handler_outer = 0;
  t->depth = depth;
  t->in_allocator = in_allocator;
  t->handler_frame = handler_frame;
  t->alt_low = alt_low;
  t->alt_high = alt_high;
  /* A handler's own records give their levels back, unless a longjmp inside it left one: the
   * record it interrupted is never finished. */
  mt_record_abandon_scratch(scratch);
}

static int (*real_sigaction(void))(int, const struct sigaction *, struct sigaction *);

/* The signals whose default action ends the process, but SIGTRAP (debuggers) and SIGKILL and
 * SIGSTOP (no handler), and the profiling timers. */
static const int ending_signals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGABRT, SIGBUS,
                                     SIGFPE,  SIGSEGV, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1,
                                     SIGUSR2, SIGXCPU, SIGXFSZ, SIGSYS};

/* What the program last set for each ending signal while the shim's handler stood in for its
 * SIG_DFL (flags and mask, as sigaction must give them back). */
static struct sigaction default_as_set[_NSIG];

/* How long a handler waits for the consumer thread to finish the trace before the signal's
 * default action goes on anyway: it may need a lock that the interrupted code holds. */
#define ENDING_WAIT_S 2

/* Whether the interrupted code stood at a system call (x86-64: the `syscall` instruction just
 * before the saved instruction pointer): blocked in the kernel or just back, holding no lock of
 * its own that the consumer needs (but for the few calls the allocator makes under its lock).
 * Elsewhere this answers true: the trace is then finished within the bound. */
static bool at_system_call(const void *context) {
#if defined(__x86_64__)
  const ucontext_t *uc = context;
  const uint8_t *pc = (const uint8_t *)(uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
  /* Read only within the page the resumed code is in (its first two bytes answer true). */
  if (!pc || ((uintptr_t)pc & 4095) < 2)
    return true;
  return pc[-2] == 0x0f && pc[-1] == 0x05;
#else
  (void)context;
  return true;
#endif
}

/* Puts SIG_DFL back for `sig`, as the kernel sees it. */
static void put_back_default(int sig) {
  struct sigaction default_action = {.sa_handler = SIG_DFL};
  sigemptyset(&default_action.sa_mask);
  int (*real)(int, const struct sigaction *, struct sigaction *) = real_sigaction();
  if (real)
    real(sig, &default_action, NULL);
}

/* One of the ending signals, left at SIG_DFL by the program. Where the program stood decides:
 * - sent (not a fault) while it ran code that may hold a lock the consumer thread needs (inside
 *   malloc, say, not at a system call): the handler returns at once, and the consumer thread
 *   finishes the trace and then sends the signal again under SIG_DFL (the program runs on for
 *   those milliseconds, as if the signal had come that much later);
 * - at a system call, or a fault: the trace is finished here, waiting at most ENDING_WAIT_S, then
 *   the default action happens: a fault returns to its instruction, which faults again (a core
 *   dump shows where), anything sent is raised again.
 * On the consumer thread itself (an abort inside the recorder), only the default action. */
static void ending_handler(int sig, siginfo_t *info, void *context) {
  int saved_errno = errno;
  /* Put back without SA_SIGINFO by a call the shim does not see (glibc's sigset and sysv_signal
   * use its internal sigaction, and return this handler's address): the other arguments are
   * then not there. */
  struct sigaction now;
  if (real_sigaction()(sig, NULL, &now) != 0 || !(now.sa_flags & SA_SIGINFO))
    info = NULL, context = NULL;
  bool fault = info && info->si_code > 0 &&
               (sig == SIGSEGV || sig == SIGILL || sig == SIGFPE ||
                (sig == SIGBUS && info->si_code != BUS_MCEERR_AO));
  if (mt_inprocess_signal_pending()) {
    /* Another signal is about to end the process (the consumer thread finishes the trace): this
     * one is one too many. A fault cannot wait: it happens again under the default action. */
    if (fault)
      put_back_default(sig);
    errno = saved_errno;
    return;
  }
  if (!mt_inprocess_is_consumer()) {
    if (!fault && context && !at_system_call(context) && mt_inprocess_end_then_signal(sig)) {
      errno = saved_errno;
      return;
    }
    mt_shim_thread *t = &mt_shim_self;
    t->in_handler++;
    mt_inprocess_end_within(ENDING_WAIT_S);
    t->in_handler--;
  }
  put_back_default(sig);
  if (!fault) {
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
  }
  errno = saved_errno;
}

void mt_signals_default_action(int sig) {
  put_back_default(sig);
  kill(getpid(), sig);
}

static struct sigaction ending_action(void) {
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_sigaction = ending_handler;
  act.sa_flags = SA_SIGINFO | SA_ONSTACK; /* a stack overflow's SIGSEGV needs the program's */
  sigfillset(&act.sa_mask);
  return act;
}

static bool is_ending(int sig) {
  for (size_t i = 0; i < sizeof ending_signals / sizeof *ending_signals; i++)
    if (ending_signals[i] == sig)
      return true;
  return false;
}

void mt_signals_keep_trace(void) {
  int (*real)(int, const struct sigaction *, struct sigaction *) = real_sigaction();
  /* A namespace's first process (a container's init) never gets a signal whose action is the
   * default from inside its namespace: a handler would change that. */
  if (!real || getpid() == 1)
    return;
  struct sigaction act = ending_action(), now;
  for (size_t i = 0; i < sizeof ending_signals / sizeof *ending_signals; i++) {
    int sig = ending_signals[i];
    if (real(sig, NULL, &now) == 0 && !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL)
      real(sig, &act, NULL);
  }
}

static int (*real_sigaction(void))(int, const struct sigaction *, struct sigaction *) {
  static int (*real)(int, const struct sigaction *, struct sigaction *);
  if (!real) {
    mt_shim_self.depth++;
    mt_shim_resolve();
    mt_shim_self.depth--;
    real = (int (*)(int, const struct sigaction *, struct sigaction *))mt_shim_real.sigaction;
  }
  return real;
}

/* Whether handlers set now get the trampoline: only while tracing. */
static bool wrapping(void) {
  return atomic_load_explicit(&mt_shim.mode, memory_order_acquire) != MT_SHIM_OFF;
}

MT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  int (*real)(int, const struct sigaction *, struct sigaction *) = real_sigaction();
  if (!real)
    return -1;
  if (sig <= 0 || sig >= _NSIG)
    return real(sig, act, old);
  /* The program's handler in place before this call, for `old`. */
  user_handler previous = handlers[sig][atomic_load_explicit(&current[sig], memory_order_acquire)];
  struct sigaction wrapped;
  const struct sigaction *install = act;
  if (act) {
    void *handler =
        (act->sa_flags & SA_SIGINFO) ? (void *)act->sa_sigaction : (void *)act->sa_handler;
    if (handler == (void *)SIG_DFL && is_ending(sig) && mt_inprocess_running() && getpid() != 1) {
      /* Left at the default action while tracing in process: the shim's handler stays. */
      default_as_set[sig] = *act;
      wrapped = ending_action();
      install = &wrapped;
    } else if (handler != (void *)SIG_DFL && handler != (void *)SIG_IGN && wrapping()) {
      int slot = 1 - atomic_load_explicit(&current[sig], memory_order_relaxed);
      handlers[sig][slot].handler = handler;
      handlers[sig][slot].flags = act->sa_flags;
      atomic_store_explicit(&current[sig], slot, memory_order_release);
      wrapped = *act;
      wrapped.sa_sigaction = trampoline;
      wrapped.sa_flags |= SA_SIGINFO;
      install = &wrapped;
    }
  }
  int rc = real(sig, install, old);
  if (rc == 0 && old && (old->sa_flags & SA_SIGINFO) && old->sa_sigaction == ending_handler) {
    /* The program left it at the default action: so it reads, with what it set. */
    *old = default_as_set[sig];
    old->sa_handler = SIG_DFL;
    old->sa_flags &= ~SA_SIGINFO;
  } else if (rc == 0 && old && (old->sa_flags & SA_SIGINFO) && old->sa_sigaction == trampoline) {
    /* Report the program's own handler and flags, as it set them. */
    old->sa_flags = previous.flags;
    if (previous.flags & SA_SIGINFO)
      old->sa_sigaction = (void (*)(int, siginfo_t *, void *))previous.handler;
    else
      old->sa_handler = (void (*)(int))previous.handler;
  }
  return rc;
}

/* glibc's signal(): BSD semantics (the signal blocked in its handler, SA_RESTART), through the
 * interposed sigaction. */
/* signal() with `flags`, blocking the signal in its handler unless SA_NODEFER, through the
 * interposed sigaction. */
static __sighandler_t set_handler(int sig, __sighandler_t handler, int flags) {
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  if (sig > 0 && sig < _NSIG && !(flags & SA_NODEFER))
    sigaddset(&act.sa_mask, sig);
  act.sa_flags = flags;
  if (sigaction(sig, &act, &old) < 0)
    return SIG_ERR;
  return old.sa_handler;
}

/* The signals siginterrupt(sig, 1) made interrupt system calls: signal() then sets no
 * SA_RESTART for them, as glibc's does. Bit n - 1 for signal n. */
static _Atomic uint64_t interrupting[(_NSIG + 63) / 64];

static int bsd_flags(int sig) {
  bool interrupts = sig > 0 && sig < _NSIG &&
                    (atomic_load(&interrupting[(sig - 1) / 64]) >> ((sig - 1) % 64) & 1);
  return interrupts ? 0 : SA_RESTART;
}

/* glibc's signal(), bsd_signal() and ssignal(): BSD semantics (the signal blocked in its
 * handler, SA_RESTART unless siginterrupt said otherwise). */
MT_EXPORT __sighandler_t signal(int sig, __sighandler_t handler) {
  return set_handler(sig, handler, bsd_flags(sig));
}

/* (bsd_signal is no longer declared by glibc's headers) */
MT_EXPORT __sighandler_t bsd_signal(int sig, __sighandler_t handler);
MT_EXPORT __sighandler_t bsd_signal(int sig, __sighandler_t handler) {
  return set_handler(sig, handler, bsd_flags(sig));
}

MT_EXPORT __sighandler_t ssignal(int sig, __sighandler_t handler) {
  return set_handler(sig, handler, bsd_flags(sig));
}

/* siginterrupt(3): whether the signal's handler interrupts system calls (no SA_RESTART), now and
 * for the handlers signal() sets later. glibc's own goes past the interposed sigaction and
 * signal(), which then restarted what the program wanted interrupted (a read waiting for an
 * alarm hung for ever). */
MT_EXPORT int siginterrupt(int sig, int interrupt) {
  if (sig <= 0 || sig >= _NSIG) {
    errno = EINVAL;
    return -1;
  }
  struct sigaction act;
  if (sigaction(sig, NULL, &act) < 0)
    return -1;
  uint64_t bit = UINT64_C(1) << ((sig - 1) % 64);
  if (interrupt) {
    atomic_fetch_or(&interrupting[(sig - 1) / 64], bit);
    act.sa_flags &= ~SA_RESTART;
  } else {
    atomic_fetch_and(&interrupting[(sig - 1) / 64], ~bit);
    act.sa_flags |= SA_RESTART;
  }
  return sigaction(sig, &act, NULL);
}

/* System V semantics: the handler runs once, unblocked, and system calls are not restarted.
 * glibc's own would go past the interposed sigaction. */
MT_EXPORT __sighandler_t sysv_signal(int sig, __sighandler_t handler) {
  return set_handler(sig, handler, (int)(SA_RESETHAND | SA_NODEFER));
}

MT_EXPORT __sighandler_t __sysv_signal(int sig, __sighandler_t handler) {
  return sysv_signal(sig, handler);
}

/* sigset(3): SIG_HOLD blocks the signal and keeps its disposition; anything else is installed
 * and the signal unblocked. Returns the previous disposition, or SIG_HOLD if it was blocked. */
MT_EXPORT __sighandler_t sigset(int sig, __sighandler_t handler) {
  sigset_t one, was;
  if (sig <= 0 || sig >= _NSIG || sigemptyset(&one) < 0 || sigaddset(&one, sig) < 0) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction old;
  if (handler == SIG_HOLD) {
    if (sigaction(sig, NULL, &old) < 0 || sigprocmask(SIG_BLOCK, &one, &was) < 0)
      return SIG_ERR;
    return sigismember(&was, sig) ? SIG_HOLD : old.sa_handler;
  }
  __sighandler_t previous = set_handler(sig, handler, 0);
  if (previous == SIG_ERR || sigprocmask(SIG_UNBLOCK, &one, &was) < 0)
    return SIG_ERR;
  return sigismember(&was, sig) ? SIG_HOLD : previous;
}
