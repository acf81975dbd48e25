/* signal_malloc: a signal handler that mallocs.
 *   raise   the main thread mallocs, raises SIGUSR1 (whose handler mallocs and frees), then frees
 *   async   the main thread mallocs and frees until 300 handlers ran, interrupted by a timer that
 *           sends it SIGUSR1 every 200 us: handlers land at whatever point of the loop the thread
 *           had reached, inside malloc and free and the tracer's code too. The counts vary; they
 *           are printed on stderr ("async: N rounds, H handled"). The timer, not another thread,
 *           paces the signals so that the number of rounds per handler has a bound whatever the
 *           machine's load: a signalling thread that a loaded machine left waiting for its turn
 *           let the loop run millions of rounds (a trace of gigabytes of dump to check). Main and
 *           handler use sizes of different tcache bins, warmed up first, so glibc itself (not
 *           async-signal-safe) never re-enters the same state; the tracer must cope on its own.
 *   longjmp the same timer, but a handler that finds it interrupted the tracer's own code (the
 *           interrupted PC in libmemtap-preload.so) leaves by siglongjmp, abandoning whatever the
 *           tracer was doing (never glibc's malloc, which could not survive it), until 100 such
 *           jumps; then 20000 allocations that must all be in the trace, and 50 reallocs 60 calls
 *           deep whose backtraces must be whole (main included): the jumps also leave records
 *           being built outside the ring. Untraced, there is no tracer to interrupt and the
 *           jumping part is skipped. Prints "longjmp: J jumps".
 *   interrupt  siginterrupt(SIGALRM, 1), then signal(SIGALRM, ...): a timer's SIGALRM must make a
 *           read of an empty pipe fail with EINTR, not restart it (which would wait for ever).
 *           Prints "interrupt: read -1 EINTR". */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "test_program.h"

#define RAISES 2000
#define ASYNC_HANDLED 300
#define JUMPS 100
#define AFTER_JUMPS 20000
#define DEEP_CALLS 60
#define DEEP_REALLOCS 50

#ifndef sigev_notify_thread_id /* glibc before 2.35 names the field only by its inner name */
#define sigev_notify_thread_id _sigev_un._tid
#endif

static atomic_int handled;

static void handler(int sig) {
  (void)sig;
  void *p = malloc(1000); // @expect[raise] allocs=2000 frees=2000 @expect[async] frees=allocs
  KEEP(p);
  free(p);
  atomic_fetch_add(&handled, 1);
}

/* A timer that sends SIGUSR1 to the calling thread every 200 us of wall time (the signals that
 * fall due while the thread waits for a CPU merge into one, delivered when it runs again). */
static int start_timer(timer_t *timer) {
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGUSR1;
  ev.sigev_notify_thread_id = gettid();
  if (timer_create(CLOCK_MONOTONIC, &ev, timer) != 0)
    return -1;
  struct itimerspec every = {{0, 200 * 1000}, {0, 200 * 1000}};
  return timer_settime(*timer, 0, &every, NULL);
}

/* The tracer's code (the executable segment of libmemtap-preload.so), when it is loaded. */
static uintptr_t tracer_low, tracer_high;
static sigjmp_buf jump_back;
static volatile sig_atomic_t jumps;

static int find_tracer(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  (void)user;
  if (!strstr(info->dlpi_name, "libmemtap-preload"))
    return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      tracer_low = info->dlpi_addr + ph->p_vaddr;
      tracer_high = tracer_low + ph->p_memsz;
    }
  }
  return 1;
}

static void jumper(int sig, siginfo_t *info, void *context) {
  (void)sig;
  (void)info;
  uintptr_t pc = (uintptr_t)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP];
  if (pc >= tracer_low && pc < tracer_high && jumps < JUMPS) {
    jumps++;
    siglongjmp(jump_back, 1);
  }
}

/* DEEP_REALLOCS reallocs from `depth` calls down (not a tail call: the frames stay). */
static __attribute__((noinline)) int deep_reallocs(int depth) {
  if (depth > 0) {
    int below = deep_reallocs(depth - 1);
    __asm__ volatile("" : "+r"(below)); /* no accumulator loop: the call stays a call */
    return below + 1;
  }
  for (int i = 0; i < DEEP_REALLOCS; i++) {
    void *p = malloc(56);      // @expect[longjmp] allocs=50 frees=50 words=350
    void *q = realloc(p, 120); // @expect[longjmp] allocs=50 frees=50 words=750
    KEEP(q);
    free(q);
  }
  return 0;
}

static int jump_out_of_the_tracer(void) {
  dl_iterate_phdr(find_tracer, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = jumper;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGUSR1, &sa, NULL);
  timer_t timer;
  if (start_timer(&timer) != 0) {
    perror("signal_malloc: timer");
    return 1;
  }
  sigsetjmp(jump_back, 1);
  while (tracer_high && jumps < JUMPS) {
    void *p = malloc(24); // @expect[longjmp] top=no (a jump may leave it unrecorded or unfreed)
    void *q = realloc(p, 200); // @expect[longjmp] top=no (its record is built outside the ring)
    KEEP(q);
    free(q);
  }
  timer_delete(timer);
  for (int i = 0; i < AFTER_JUMPS; i++) {
    void *p = malloc(40); // @expect[longjmp] allocs=20000 frees=20000 words=100000
    KEEP(p);
    free(p);
  }
  if (deep_reallocs(DEEP_CALLS) != DEEP_CALLS)
    return 1;
  fprintf(stderr, "longjmp: %d jumps\n", (int)jumps);
  return 0;
}

/* siginterrupt is deprecated, but programs still call it: the tracer must honour it. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static void on_alarm(int sig) {
  (void)sig;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "interrupt") == 0) {
    int ends[2];
    char c;
    if (pipe(ends) != 0 || siginterrupt(SIGALRM, 1) != 0 || signal(SIGALRM, on_alarm) == SIG_ERR)
      return 2;
    struct itimerval once = {.it_value = {0, 50000}};
    setitimer(ITIMER_REAL, &once, NULL);
    ssize_t n = read(ends[0], &c, 1);
    printf("interrupt: read %zd %s\n", n, n < 0 && errno == EINTR ? "EINTR" : "restarted");
    return 0;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigaction(SIGUSR1, &sa, NULL);
  if (strcmp(mode, "raise") == 0) {
    for (int i = 0; i < RAISES; i++) {
      void *p = malloc(24); // @expect[raise] allocs=2000 frees=2000 words=6000
      KEEP(p);
      raise(SIGUSR1);
      free(p);
    }
  } else if (strcmp(mode, "async") == 0) {
    void *warm = malloc(1000); // @expect[async] allocs=1 frees=1 words=125
    KEEP(warm);
    free(warm);
    timer_t timer;
    if (start_timer(&timer) != 0) {
      perror("signal_malloc: timer");
      return 1;
    }
    long rounds = 0;
    for (; atomic_load(&handled) < ASYNC_HANDLED; rounds++) {
      void *p = malloc(24); // @expect[async] frees=allocs
      KEEP(p);
      for (volatile int spin = 0; spin < 200; spin++) {
      }
      free(p);
    }
    timer_delete(timer);
    fprintf(stderr, "async: %ld rounds, %d handled\n", rounds, atomic_load(&handled));
  } else if (strcmp(mode, "longjmp") == 0) {
    if (jump_out_of_the_tracer() != 0)
      return 1;
  } else {
    fprintf(stderr, "usage: signal_malloc raise|async|longjmp\n");
    return 64;
  }
  if (strcmp(mode, "raise") == 0)
    printf("signal_malloc raise: %d handled\n", atomic_load(&handled));
  printf("signal_malloc %s done\n", mode);
  return 0;
}
