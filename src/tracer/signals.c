/* Signal handlers that allocate (docs/tracer.md, "Signals"). The shim interposes sigaction and
 * signal and installs, for each handler the program sets, a trampoline that runs the program's
 * handler with the thread's depth set to 0: a handler that interrupted the shim's own code
 * (unwinding, writing a record) is the program's code, and its allocations are recorded like any
 * other instead of passing through as the shim's. The interrupted shim code is left in a state a
 * nested record can run beside: the sampler's countdown may lose an update, the sets are
 * lock-free, module scans only try their lock, and a record that would nest inside the
 * interrupted ring write is queued and written right after it (record.c). SIG_DFL, SIG_IGN and
 * processes that do not trace are left alone: the handler is installed as given. */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

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
    if (handler != (void *)SIG_DFL && handler != (void *)SIG_IGN && wrapping()) {
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
  if (rc == 0 && old && (old->sa_flags & SA_SIGINFO) && old->sa_sigaction == trampoline) {
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
MT_EXPORT __sighandler_t signal(int sig, __sighandler_t handler) {
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  if (sig > 0 && sig < _NSIG)
    sigaddset(&act.sa_mask, sig);
  act.sa_flags = SA_RESTART;
  if (sigaction(sig, &act, &old) < 0)
    return SIG_ERR;
  return old.sa_handler;
}
