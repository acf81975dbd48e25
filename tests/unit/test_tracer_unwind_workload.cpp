/* The program test_tracer_unwind_shim runs under `memtap record --full` with the shim's unwind
 * check (MEMTAP_TEST_UNWIND_CHECK=1: every stack the cached walker gives is compared with
 * libunwind's): allocations from the places where a cached unwinder goes wrong first. Built -O2
 * without frame pointers, as Debian builds. Each scenario allocates from:
 *   - recursion   frames with rsp- and rbp-based CFA (variable-length arrays), at many depths;
 *   - exceptions  constructors, destructors run while an exception unwinds through the frames that
 *                 allocate, and catch blocks, at many depths, rethrown on the way;
 *   - longjmp     a deep frame that then jumps out, and the reused stack below the jump's target;
 *   - signals     a timer signal's handler, at whatever instruction the program is at (inside
 *                 malloc and the shim too), and raise() at many depths;
 *   - qsort       a comparator called by libc;
 *   - threads     4 threads doing all of the above but the timer.
 * Usage: test_tracer_unwind_workload [ROUNDS]. Exit status 0; prints what it did. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

static volatile unsigned sink;

__attribute__((noinline)) static void allocate_here(size_t size) {
  char *p = static_cast<char *>(malloc(size));
  if (!p)
    abort();
  p[0] = static_cast<char>(size);
  sink = sink + static_cast<unsigned char>(p[0]);
  free(p);
}

/* ---- recursion ---------------------------------------------------------------------------- */

static unsigned recurse_vla(int depth);

__attribute__((noinline)) static unsigned recurse_plain(int depth) {
  if (depth % 4 == 0)
    allocate_here(16 + static_cast<size_t>(depth));
  if (depth == 0)
    return 1;
  unsigned r = depth % 3 == 0 ? recurse_vla(depth - 1) : recurse_plain(depth - 1);
  return r + sink;
}

__attribute__((noinline)) static unsigned recurse_vla(int depth) {
  volatile char pad[8 + (depth % 5) * 16];
  pad[0] = static_cast<char>(depth);
  unsigned r = recurse_plain(depth - 1);
  return r + static_cast<unsigned char>(pad[0]);
}

/* ---- exceptions --------------------------------------------------------------------------- */

struct Guard {
  std::string *name;
  explicit Guard(int k) : name(new std::string(static_cast<size_t>(24 + k % 40), 'g')) {}
  ~Guard() {
    allocate_here(32); /* runs while the exception unwinds through this frame */
    delete name;
  }
};

__attribute__((noinline)) static int throw_from(int depth) {
  Guard g(depth);
  if (depth == 0)
    throw std::runtime_error(std::string(64, 'x'));
  if (depth % 7 == 0) {
    try {
      return throw_from(depth - 1) + 1;
    } catch (const std::runtime_error &) {
      allocate_here(48);
      throw;
    }
  }
  return throw_from(depth - 1) + static_cast<int>(sink);
}

static int exceptions(int rounds) {
  int caught = 0;
  for (int i = 0; i < rounds; i++) {
    try {
      throw_from(i % 30);
    } catch (const std::exception &e) {
      std::vector<int> v(static_cast<size_t>(8 + i % 16), i);
      caught += v[0] == i && e.what()[0] == 'x';
    }
  }
  return caught;
}

/* ---- longjmp ------------------------------------------------------------------------------ */

static thread_local jmp_buf jump_target;
static volatile bool jump_enabled = true;

__attribute__((noinline)) static void jump_from(int depth) {
  if (depth == 0) {
    allocate_here(40);
    if (jump_enabled)
      longjmp(jump_target, 1);
    return;
  }
  jump_from(depth - 1);
  sink = sink + 1;
}

static void longjumps(int rounds) {
  for (volatile int i = 0; i < rounds; i++) {
    if (setjmp(jump_target) == 0)
      jump_from(i % 50);
    else
      recurse_plain(i % 12); /* the stack below the jump's target is reused */
  }
}

/* ---- signals ------------------------------------------------------------------------------ */

static volatile sig_atomic_t handled;

static void on_signal(int sig) {
  (void)sig;
  allocate_here(24);
  handled = handled + 1;
}

__attribute__((noinline)) static unsigned raise_at(int depth) {
  if (depth == 0) {
    raise(SIGUSR1);
    return 1;
  }
  return raise_at(depth - 1) + sink;
}

/* ---- qsort -------------------------------------------------------------------------------- */

static int compare_allocating(const void *a, const void *b) {
  allocate_here(20);
  int x = *static_cast<const int *>(a), y = *static_cast<const int *>(b);
  return (x > y) - (x < y);
}

static void sorts(int rounds) {
  for (int r = 0; r < rounds; r++) {
    int v[16];
    for (int k = 0; k < 16; k++)
      v[k] = (k * 7 + r) % 16;
    qsort(v, 16, sizeof v[0], compare_allocating);
  }
}

/* ---- all of it ---------------------------------------------------------------------------- */

static int scenarios(int rounds) {
  for (int depth = 1; depth <= 200; depth += 9)
    sink = recurse_plain(depth);
  int caught = exceptions(rounds);
  longjumps(rounds);
  for (int i = 0; i < rounds; i++)
    sink = raise_at(i % 40);
  sorts(rounds / 4 + 1);
  return caught;
}

static void *thread_main(void *arg) {
  int rounds = static_cast<int>(reinterpret_cast<intptr_t>(arg));
  return reinterpret_cast<void *>(static_cast<intptr_t>(scenarios(rounds)));
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200;
  if (rounds < 1)
    rounds = 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGUSR1, &sa, nullptr) != 0 || sigaction(SIGALRM, &sa, nullptr) != 0)
    return 1;
  /* The timer interrupts the main thread wherever it is, for the whole run. */
  struct itimerval every = {{0, 200}, {0, 200}};
  setitimer(ITIMER_REAL, &every, nullptr);
  /* The timer's signal is the process's, which the kernel gives to any thread not blocking it:
   * the threads are created with it blocked. A handler allocating in a thread that exits would
   * deadlock in glibc whatever the tracer (glibc frees the thread's cache under its arena's lock at
   * thread exit). */
  sigset_t timer, before;
  sigemptyset(&timer);
  sigaddset(&timer, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &timer, &before);
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    if (pthread_create(&t[i], nullptr, thread_main,
                       reinterpret_cast<void *>(static_cast<intptr_t>(rounds / 2))) != 0)
      return 1;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  int caught = scenarios(rounds);
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    caught += static_cast<int>(reinterpret_cast<intptr_t>(r));
  }
  struct itimerval stop = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &stop, nullptr);
  printf("workload: %d rounds, %d exceptions caught, %d signals handled\n", rounds, caught,
         static_cast<int>(handled));
  return 0;
}
