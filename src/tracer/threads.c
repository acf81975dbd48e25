/* Thread start and exit records (docs/tracer.md, "Threads"): pthread_create is interposed and
 * starts the thread in a trampoline that notes the thread's stack range (and writes THREAD_START
 * with it when tracing), runs the program's function and writes THREAD_EXIT when it returns or
 * calls pthread_exit. The trampoline's argument lives in a static pool of slots (never the
 * allocator); when every slot is taken the thread starts directly and gets a start record without
 * its stack at its first record. */
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cancel_hold.h"
#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))
#define MT_TRAMPOLINE_SLOTS 1024u

typedef struct trampoline_slot {
  _Atomic int taken;
  void *(*start)(void *);
  void *arg;
} trampoline_slot;

static trampoline_slot slots[MT_TRAMPOLINE_SLOTS];
static _Atomic unsigned slot_hint;

static trampoline_slot *take_slot(void) {
  unsigned first = atomic_fetch_add_explicit(&slot_hint, 1, memory_order_relaxed);
  for (unsigned i = 0; i < MT_TRAMPOLINE_SLOTS; i++) {
    trampoline_slot *s = &slots[(first + i) % MT_TRAMPOLINE_SLOTS];
    int expected = 0;
    if (atomic_compare_exchange_strong(&s->taken, &expected, 1))
      return s;
  }
  return NULL;
}

/* The calling thread's stack [low, high), or zeros. pthread_getattr_np may allocate (the main
 * thread's reads /proc/self/maps): depth is raised, so that passes straight through. */
static void stack_range(uint64_t *low, uint64_t *high) {
  pthread_attr_t attr;
  void *addr;
  size_t size;
  *low = *high = 0;
  if (pthread_getattr_np(pthread_self(), &attr) != 0)
    return;
  if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
    *low = (uintptr_t)addr;
    *high = (uintptr_t)addr + size;
  }
  pthread_attr_destroy(&attr);
}

/* Notes the thread's stack in its state (the cached unwinder's bound), and writes THREAD_START
 * when tracing. A thread that starts untraced keeps its stack for a session that starts later
 * (mt_tracer_start): its first record then writes the start record with it. */
static void thread_started(void) {
  mt_shim_thread *t = &mt_shim_self;
  uint64_t low, high;
  t->depth++;
  stack_range(&low, &high);
  t->depth--;
  t->stack_low = low;
  t->stack_high = high;
  if (atomic_load_explicit(&mt_shim.mode, memory_order_relaxed) != MT_SHIM_OFF)
    mt_record_thread(MT_TRACER_REC_THREAD_START, (uint64_t)syscall(SYS_gettid), low, high);
}

static void thread_exiting(void *unused) {
  (void)unused;
  if (atomic_load_explicit(&mt_shim.mode, memory_order_relaxed) != MT_SHIM_OFF)
    mt_record_thread(MT_TRACER_REC_THREAD_EXIT, (uint64_t)syscall(SYS_gettid), 0, 0);
  mt_record_thread_done();
}

void mt_threads_main_started(void) {
  /* Allocations before the constructor may already have written the start record. */
  if (mt_shim_self.session != atomic_load_explicit(&mt_shim_session, memory_order_relaxed))
    thread_started();
}

static void *trampoline(void *arg) {
  trampoline_slot *s = arg;
  void *(*start)(void *) = s->start;
  void *start_arg = s->arg;
  atomic_store_explicit(&s->taken, 0, memory_order_release);
  /* The tracer's cancellation points (the ring's reservation) must not let a pthread_cancel sent
   * right after pthread_create end the thread before the program's function ran, nor one sent
   * while it ran end it after its function returned: held off, it stays pending for the
   * program's next cancellation point or, at the end, is not acted on, as untraced
   * (common/cancel_hold.h). A cancel acted on inside the function runs thread_exiting as a
   * cleanup handler: cancellation is then off already. */
  int cancel = mt_cancel_hold();
  thread_started();
  mt_cancel_release(cancel);
  void *result;
  pthread_cleanup_push(thread_exiting, NULL);
  result = start(start_arg);
  pthread_cleanup_pop(0);
  cancel = mt_cancel_hold();
  thread_exiting(NULL);
  mt_cancel_release(cancel);
  return result;
}

MT_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                             void *arg) {
  if (atomic_load_explicit(&mt_shim.resolve, memory_order_acquire) != MT_RESOLVE_DONE) {
    mt_shim_self.depth++;
    mt_shim_resolve();
    mt_shim_self.depth--;
  }
  int (*real)(void *, const void *, void *(*)(void *), void *) = mt_shim_real.pthread_create;
  if (!real)
    return EAGAIN;
  /* Through the trampoline whenever tracing is on or may start later (mt_tracer_start); not for
   * the shim's own threads, nor in a process that can never trace. */
  trampoline_slot *s = NULL;
  if (!mt_shim_self.depth && !atomic_load_explicit(&mt_shim.never, memory_order_relaxed))
    s = take_slot();
  if (!s)
    return real(thread, attr, start, arg);
  s->start = start;
  s->arg = arg;
  int rc = real(thread, attr, trampoline, s);
  if (rc != 0)
    atomic_store_explicit(&s->taken, 0, memory_order_release);
  return rc;
}
