/* Holding off pthread cancellation around the tracer's own cancellation points. open, close,
 * posix_fallocate, nanosleep, write, pthread_join... are cancellation points: made by the tracer
 * inside a program's malloc, in the trampoline before the program's thread function or at its
 * exit, they let a pending pthread_cancel end the thread where the program allows none (before
 * its function ran, or inside malloc while it holds its own lock, which then stays taken for
 * good). Held off, the cancel stays pending and acts at the program's next cancellation point, as
 * it would untraced (docs/tracer.md, "Threads").
 *
 * pthread_setcancelstate only flips a bit of the calling thread's own state with a
 * compare-and-swap (no lock, no allocation, no system call): safe inside malloc and in signal
 * handlers. Only on paths that already make a system call, never on the allocation fast path. */
#ifndef MEMTAP_COMMON_CANCEL_HOLD_H
#define MEMTAP_COMMON_CANCEL_HOLD_H

#include <pthread.h>

/* Disables cancellation for the calling thread; returns the state to give mt_cancel_release. */
static inline int mt_cancel_hold(void) {
  int old = PTHREAD_CANCEL_DISABLE;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  return old;
}

/* Puts back the state mt_cancel_hold returned (nested holds leave it disabled). */
static inline void mt_cancel_release(int old) {
  if (old != PTHREAD_CANCEL_DISABLE)
    pthread_setcancelstate(old, NULL);
}

#endif
