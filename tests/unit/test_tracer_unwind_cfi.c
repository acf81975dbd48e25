/* The shim's cached CFI unwinder (src/tracer/unwind_cfi.c, eh_frame.c) against libunwind: at
 * thousands of points (deep -O2 recursion without frame pointers, qsort's comparator called from
 * libc, signal handlers on the same stack, timer signals at arbitrary instructions, threads sharing
 * a cold cache, C++ exceptions, longjmp) both walk the stack and must agree frame by frame, or the
 * cached walk must say it stopped early (the shim then falls back to libunwind). Also the walk's
 * own contract: truncation, skipping, stack bounds, module removal, the memo. The reduction of
 * .eh_frame to rules has its own test (test_tracer_eh_frame.c). */
#include <dlfcn.h>
#define UNW_LOCAL_ONLY /* unw_init_local and unw_step of libunwind.so: this process only */
#include <libunwind.h>
#include <pthread.h>
#include <search.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_customMem: exported by Debian's shared libzstd too */
#include <zstd.h>

#include "testutil.h"
#include "tracer/unwind_cfi.h"
#include "tracer_unwind_check.h"

#define MAX_FRAMES 512

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

/* ---- the comparison ------------------------------------------------------------------------ */

typedef struct stats {
  _Atomic long samples, matched, fallback, mismatched, signal;
  _Atomic long memo_hits, memo_mismatched; /* mt_cfi_unwind_memo against mt_cfi_unwind */
} stats;
static stats st;
static _Thread_local uintptr_t stack_top;
static uintptr_t thread_stack_top(void);
static _Atomic int reported, fallbacks_shown;

static void reset_stats(void) {
  atomic_store(&st.samples, 0);
  atomic_store(&st.matched, 0);
  atomic_store(&st.fallback, 0);
  atomic_store(&st.mismatched, 0);
  atomic_store(&st.signal, 0);
  atomic_store(&st.memo_hits, 0);
  atomic_store(&st.memo_mismatched, 0);
}

static void print_frame(const char *who, size_t i, uintptr_t pc) {
  Dl_info info;
  const char *name = dladdr((void *)pc, &info) && info.dli_sname ? info.dli_sname : "?";
  const char *obj = dladdr((void *)pc, &info) && info.dli_fname ? info.dli_fname : "?";
  fprintf(stderr, "  %s[%zu] %#lx %s (%s)\n", who, i, (unsigned long)pc, name, obj);
}

/* Prints the two walks, for the first 3 cases counted in *shown. */
static void report(_Atomic int *shown, const char *why, const uint64_t *a, size_t na,
                   unsigned flags, void **b, int nb) {
  if (atomic_fetch_add(shown, 1) >= 3)
    return;
  fprintf(stderr, "%s: cfi %zu frames, flags %#x; libunwind %d frames\n", why, na, flags, nb);
  for (size_t i = 0; i < na && i < 40; i++)
    print_frame("cfi", i, a[i]);
  for (int i = 0; i < nb && i < 40; i++)
    print_frame("unw", (size_t)i, (uintptr_t)b[i]);
}

/* The two walks start in different functions (ut_check's call sites differ), so they are aligned
 * on ut_check's caller: a[1] is the return address into it, and it must be among libunwind's
 * first frames. From there every frame must be equal, and the lengths too unless the cached walk
 * flagged an early stop (then what it has must be a prefix). */
static void compare(const uint64_t *a, size_t na, unsigned flags, void **b, int nb) {
  atomic_fetch_add(&st.samples, 1);
  if (flags & MT_CFI_PASSED_SIGNAL)
    atomic_fetch_add(&st.signal, 1);
  int j = 0;
  while (j < 4 && j < nb && na > 1 && (uintptr_t)b[j] != a[1])
    j++;
  bool early = flags & MT_CFI_STOP_INCOMPLETE;
  if (na < 2 || j == 4 || j == nb) {
    if (!early || na > 1) {
      atomic_fetch_add(&st.mismatched, 1);
      report(&reported, "no common caller", a, na, flags, b, nb);
    } else {
      atomic_fetch_add(&st.fallback, 1);
    }
    return;
  }
  size_t common = na - 1 < (size_t)(nb - j) ? na - 1 : (size_t)(nb - j);
  for (size_t i = 0; i < common; i++) {
    if (a[1 + i] != (uintptr_t)b[j + i]) {
      atomic_fetch_add(&st.mismatched, 1);
      report(&reported, "frame differs", a, na, flags, b, nb);
      return;
    }
  }
  if (early) {
    atomic_fetch_add(&st.fallback, 1);
    report(&fallbacks_shown, "fallback (what the cached walk could not express)", a, na, flags, b,
           nb);
  } else if (na - 1 == (size_t)(nb - j)) {
    atomic_fetch_add(&st.matched, 1);
  } else {
    atomic_fetch_add(&st.mismatched, 1);
    report(&reported, "lengths differ", a, na, flags, b, nb);
  }
}

/* The memoised walk must give what the plain one gives (both from ut_check, so all but their
 * first frame, the return address in ut_check, agree), with the same flags but MT_CFI_MEMO_HIT. */
static void compare_memo(const uint64_t *a, size_t na, unsigned flags, const uint64_t *m, size_t nm,
                         unsigned mflags) {
  if (mflags & MT_CFI_MEMO_HIT)
    atomic_fetch_add(&st.memo_hits, 1);
  if (na != nm || (mflags & ~(unsigned)MT_CFI_MEMO_HIT) != flags ||
      (na > 1 && memcmp(a + 1, m + 1, (na - 1) * sizeof a[0]) != 0)) {
    atomic_fetch_add(&st.memo_mismatched, 1);
    report(&reported, "memo differs", a, na, flags, (void **)m, (int)nm);
  }
}

/* libunwind's walk by unw_step from a context: what unw_backtrace does when its fast path gives
 * up, the same DWARF unwinder without unw_backtrace's per-thread frame cache. pcs[0] is a PC in
 * this function, pcs[1] the return address into its caller. */
__attribute__((noinline)) static int unw_step_walk(void **pcs, int max) {
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0)
    return 0;
  int n = 0;
  unw_word_t ip;
  do {
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0)
      break;
    pcs[n++] = (void *)ip;
  } while (n < max && unw_step(&cursor) > 0);
  return n;
}

/* The reference walk is unw_backtrace, but under TSan in any thread but the main one, where it is
 * unw_step_walk. unw_backtrace gives each thread a frame cache that a pthread key destructor frees
 * when the thread exits, in the last round of destructors, by locking a mutex (libunwind 1.6's
 * trace_cache_free). GCC 12's TSan runtime, libtsan.so.2 (the one CI links: the C++ part makes g++
 * the linker), tears the thread's TSan state down in a key destructor of that same round that runs
 * first; its pthread_mutex_lock interceptor then dereferences the freed state and the thread
 * dies of SIGSEGV as it exits (google/sanitizers#943: one unw_backtrace in a thread is enough).
 * The main thread never runs key destructors (exit does not), so it keeps unw_backtrace; the
 * step walk is checked against unw_backtrace by reference_walk_by_unw_step_matches_unw_backtrace.
 */
static bool reference_by_steps(void) {
#ifdef UNDER_TSAN
  return gettid() != getpid();
#else
  return false;
#endif
}

/* While set, ut_check also compares unw_step_walk with unw_backtrace where it calls the latter. */
static volatile bool check_step_walk;
static _Atomic long step_walks, step_walks_differ;

__attribute__((noinline)) static void compare_step_walk(void **b, int nb) {
  void *s[MAX_FRAMES];
  int ns = unw_step_walk(s, MAX_FRAMES);
  atomic_fetch_add(&step_walks, 1);
  /* b[1] is the return address into ut_check's caller: align the two walks on it. */
  int k = 0;
  while (k < 4 && k < ns && nb > 1 && s[k] != b[1])
    k++;
  if (nb < 2 || k == 4 || k == ns || ns - k != nb - 1 ||
      memcmp(s + k, b + 1, (size_t)(nb - 1) * sizeof b[0]) != 0) {
    atomic_fetch_add(&step_walks_differ, 1);
    report(&reported, "unw_step walk differs from unw_backtrace", (const uint64_t *)s, (size_t)ns,
           0, b, nb);
  }
}

static _Thread_local mt_cfi_memo memo;

__attribute__((noinline)) void ut_check(void) {
  if (!stack_top) /* a thread the test did not start itself (std::thread) */
    stack_top = thread_stack_top();
  uint64_t a[MAX_FRAMES], m[MAX_FRAMES];
  void *b[MAX_FRAMES];
  unsigned flags, mflags;
  size_t na = mt_cfi_unwind(a, MAX_FRAMES, 0, 0, stack_top, &flags);
  size_t nm = mt_cfi_unwind_memo(&memo, m, MAX_FRAMES, 0, 0, stack_top, &mflags);
  int nb;
  if (reference_by_steps()) {
    nb = unw_step_walk(b, MAX_FRAMES);
  } else {
    nb = unw_backtrace(b, MAX_FRAMES);
    if (check_step_walk)
      compare_step_walk(b, nb);
  }
  compare(a, na, flags, b, nb);
  compare_memo(a, na, flags, m, nm, mflags);
}

static void print_stats(const char *scenario) {
  long n = atomic_load(&st.samples);
  fprintf(stderr,
          "%s: %ld stacks, %ld fully matched (%.2f%%), %ld fallbacks, %ld mismatched, %ld "
          "through a signal frame; memo: %ld reused, %ld differ\n",
          scenario, n, atomic_load(&st.matched), n ? 100.0 * atomic_load(&st.matched) / n : 0.0,
          atomic_load(&st.fallback), atomic_load(&st.mismatched), atomic_load(&st.signal),
          atomic_load(&st.memo_hits), atomic_load(&st.memo_mismatched));
}

/* Every stack matched; no fallback unless allowed (a fraction, in thousandths). */
static void expect_all_matched(const char *scenario, long min_samples, long max_fallback_permille) {
  print_stats(scenario);
  long n = atomic_load(&st.samples);
  assert_true(n >= min_samples);
  assert_int_equal(atomic_load(&st.mismatched), 0);
  assert_int_equal(atomic_load(&st.memo_mismatched), 0);
  assert_true(atomic_load(&st.fallback) * 1000 <= max_fallback_permille * n);
  assert_int_equal(atomic_load(&st.matched) + atomic_load(&st.fallback), n);
}

/* ---- set-up ------------------------------------------------------------------------------ */

static int add_one(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size, (void)data;
  mt_cfi_module m;
  if (mt_cfi_module_from_phdr(info, &m) == 0)
    assert_int_equal(mt_cfi_add_module(&m), 0);
  return 0;
}

static uintptr_t thread_stack_top(void) {
  pthread_attr_t attr;
  void *addr;
  size_t size;
  assert_int_equal(pthread_getattr_np(pthread_self(), &attr), 0);
  assert_int_equal(pthread_attr_getstack(&attr, &addr, &size), 0);
  pthread_attr_destroy(&attr);
  return (uintptr_t)addr + size;
}

static int setup(void **state) {
  (void)state;
  static bool done;
  if (!done) {
    dl_iterate_phdr(add_one, NULL);
    done = true;
  }
  stack_top = thread_stack_top();
  mt_cfi_cache_clear();
  reset_stats();
  atomic_store(&reported, 0);
  atomic_store(&fallbacks_shown, 0);
  return 0;
}

/* ---- workloads: -O2 without frame pointers (the test is built with -fomit-frame-pointer) ---- */

static _Thread_local volatile unsigned sink; /* per thread: no race between workloads */
static volatile bool workload_checks = true; /* off while timer signals do the checking */
static unsigned recurse_vla(int depth, int every);

/* An rsp-based frame: CFA = rsp + k all along. */
__attribute__((noinline)) static unsigned recurse_plain(int depth, int every) {
  if (depth == 0 || depth % every == 0) {
    if (workload_checks)
      ut_check();
    if (depth == 0)
      return 1;
  }
  unsigned r = (depth % 3 == 0 ? recurse_vla(depth - 1, every) : recurse_plain(depth - 1, every));
  return r + sink;
}

/* A frame with a variable-length array: GCC keeps rbp as the frame base (CFA = rbp + 16). */
__attribute__((noinline)) static unsigned recurse_vla(int depth, int every) {
  volatile char pad[8 + (depth % 5) * 16];
  pad[0] = (char)depth;
  unsigned r = recurse_plain(depth - 1, every);
  return r + (unsigned char)pad[0];
}

static void unwind_matches_libunwind_in_deep_recursion_without_frame_pointers(void **state) {
  (void)state;
  for (int depth = 1; depth <= 300; depth += 7)
    sink = recurse_plain(depth, 4);
  expect_all_matched("recursion", 1000, 0);
}

static int compare_ints_plain(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static void noop_free(void *node) {
  (void)node;
}

static int compare_ints(const void *a, const void *b) {
  static _Thread_local int n;
  if (workload_checks && ++n % 5 == 0)
    ut_check(); /* called back from inside libc's qsort */
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

__attribute__((noinline)) static void sort_at_depth(int depth) {
  if (depth > 0) {
    sort_at_depth(depth - 1);
    sink = sink + 1;
    return;
  }
  int v[64];
  for (int i = 0; i < 64; i++)
    v[i] = (i * 7919) % 64;
  qsort(v, 64, sizeof v[0], compare_ints);
}

static void unwind_matches_libunwind_through_qsort_comparator(void **state) {
  (void)state;
  for (int i = 0; i < 20; i++)
    sort_at_depth(i);
  expect_all_matched("qsort", 1000, 0);
}

/* Callbacks from deeper library code: the loader's dl_iterate_phdr (frames in libc and ld.so),
 * tsearch's twalk and bsearch. */
static int on_module(struct dl_phdr_info *info, size_t size, void *data) {
  (void)info, (void)size, (void)data;
  ut_check();
  return 0;
}

static void on_node(const void *node, VISIT which, int depth) {
  (void)node, (void)depth;
  if (which == leaf || which == postorder)
    ut_check();
}

static int compare_keys(const void *a, const void *b) {
  ut_check();
  return compare_ints_plain(a, b);
}

static void unwind_matches_libunwind_in_callbacks_from_libc_and_the_loader(void **state) {
  (void)state;
  static int keys[64];
  void *root = NULL;
  for (int i = 0; i < 64; i++) {
    keys[i] = (i * 37) % 64;
    assert_non_null(tsearch(&keys[i], &root, compare_ints_plain));
  }
  for (int round = 0; round < 20; round++) {
    dl_iterate_phdr(on_module, NULL);
    twalk(root, on_node);
    int sorted[64];
    for (int i = 0; i < 64; i++)
      sorted[i] = i;
    int key = round * 3;
    assert_non_null(bsearch(&key, sorted, 64, sizeof sorted[0], compare_keys));
  }
  tdestroy(root, noop_free);
  expect_all_matched("libc and loader callbacks", 1000, 0);
}

/* ---- signals ------------------------------------------------------------------------------ */

static void on_signal(int sig) {
  (void)sig;
  ut_check();
}

__attribute__((noinline)) static unsigned raise_at_depth(int depth, int sig) {
  if (depth == 0) {
    raise(sig);
    return 1;
  }
  return raise_at_depth(depth - 1, sig) + sink;
}

static void unwind_matches_libunwind_in_signal_handler_on_same_stack(void **state) {
  (void)state;
  struct sigaction sa = {.sa_handler = on_signal}, old;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
  for (int i = 0; i < 1000; i++)
    sink = raise_at_depth(i % 40, SIGUSR1);
  sigaction(SIGUSR1, &old, NULL);
  expect_all_matched("raise", 1000, 0);
  assert_int_equal(atomic_load(&st.signal), atomic_load(&st.samples));
}

/* unw_step_walk, the reference in place of unw_backtrace under TSan (reference_by_steps), gives
 * what unw_backtrace gives: in recursion, through libc's qsort, in a signal handler. */
static void reference_walk_by_unw_step_matches_unw_backtrace(void **state) {
  (void)state;
  atomic_store(&step_walks, 0);
  atomic_store(&step_walks_differ, 0);
  check_step_walk = true;
  for (int depth = 1; depth <= 150; depth += 13)
    sink = recurse_plain(depth, 5);
  for (int i = 0; i < 5; i++)
    sort_at_depth(i);
  struct sigaction sa = {.sa_handler = on_signal}, old;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
  for (int i = 0; i < 50; i++)
    sink = raise_at_depth(i % 20, SIGUSR1);
  sigaction(SIGUSR1, &old, NULL);
  check_step_walk = false;
  fprintf(stderr, "unw_step walk against unw_backtrace: %ld walks, %ld differ\n",
          atomic_load(&step_walks), atomic_load(&step_walks_differ));
  assert_true(atomic_load(&step_walks) >= 400);
  assert_int_equal(atomic_load(&step_walks_differ), 0);
  expect_all_matched("unw_step reference", 400, 0);
}

/* A timer signal interrupts whatever instruction the workload is at (prologues, epilogues, libc
 * routines, PLT stubs): the walk then starts from an exact PC out of the kernel's ucontext. */
static void busy_work(int round) {
  char buf[256];
  for (int i = 0; i < 50; i++) {
    sink = recurse_plain(20 + (round + i) % 30, 1000000);
    snprintf(buf, sizeof buf, "%d %s %f", i, "interrupted", i * 0.5);
    sink = sink + (unsigned)strlen(buf);
    int v[32];
    for (int k = 0; k < 32; k++)
      v[k] = (k * 31 + round) % 32;
    qsort(v, 32, sizeof v[0], compare_ints);
  }
}

/* The timer is one-shot, armed again when the handler is done: a periodic one fell due again
 * while the handler walked (slower under load), so at sigreturn the next signal was pending and
 * came before one more instruction ran. The same PC was then checked tens of times over; inside
 * ld.so's lazy binding, whose CFA the cached walk cannot express, that made 72 fallbacks of 3072
 * (clang Release, loaded machine), past the 2% the test allows for what is a property of the
 * load. For the same reason a signal at the PC of the previous one is not checked again. */
static timer_t interrupt_timer;
static uintptr_t last_interrupted_pc;

static void on_timer(int sig, siginfo_t *info, void *context) {
  (void)sig, (void)info;
  uintptr_t pc = (uintptr_t)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP];
  if (pc != last_interrupted_pc) {
    last_interrupted_pc = pc;
    ut_check();
  }
  struct itimerspec once = {.it_value = {0, 50000}};
  timer_settime(interrupt_timer, 0, &once, NULL);
}

static void unwind_matches_libunwind_at_timer_interrupted_instructions(void **state) {
  (void)state;
  struct sigaction sa = {.sa_sigaction = on_timer, .sa_flags = SA_SIGINFO}, old;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
  struct sigevent ev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGALRM};
  ev._sigev_un._tid = gettid();
  assert_int_equal(timer_create(CLOCK_MONOTONIC, &ev, &interrupt_timer), 0);
  last_interrupted_pc = 0;
  struct itimerspec once = {.it_value = {0, 50000}};
  assert_int_equal(timer_settime(interrupt_timer, 0, &once, NULL), 0);
  workload_checks = false;
  for (int round = 0; round < 100000 && atomic_load(&st.samples) < 3000; round++)
    busy_work(round);
  workload_checks = true;
  timer_delete(interrupt_timer);
  sigaction(SIGALRM, &old, NULL);
  expect_all_matched("timer", 3000, 20);
#ifndef UNDER_TSAN /* TSan defers signals to its own safe points: no interrupted instruction */
  assert_int_equal(atomic_load(&st.signal), atomic_load(&st.samples));
#endif
}

/* A signal handler walking with the thread's memo while the interrupted code is inside a walk
 * with the same memo: both walks must still give what the plain walk gives. No libunwind here
 * (it is not meant to be re-entered from a signal handler). */
static _Atomic long reentry_walks, reentry_differ;

__attribute__((noinline)) static void memo_against_plain(void) {
  uint64_t a[MAX_FRAMES], m[MAX_FRAMES];
  unsigned flags, mflags;
  size_t na = mt_cfi_unwind(a, MAX_FRAMES, 0, 0, stack_top, &flags);
  size_t nm = mt_cfi_unwind_memo(&memo, m, MAX_FRAMES, 0, 0, stack_top, &mflags);
  atomic_fetch_add(&reentry_walks, 1);
  if (na != nm || (mflags & ~(unsigned)MT_CFI_MEMO_HIT) != flags ||
      (na > 1 && memcmp(a + 1, m + 1, (na - 1) * sizeof a[0]) != 0))
    atomic_fetch_add(&reentry_differ, 1);
}

static void on_signal_memo(int sig) {
  (void)sig;
  memo_against_plain();
}

__attribute__((noinline)) static unsigned memo_walks_at_depth(int depth) {
  if (depth == 0) {
    memo_against_plain();
    return 1;
  }
  return memo_walks_at_depth(depth - 1) + sink;
}

static void memo_walks_interrupted_by_memo_walks_in_signal_handlers_stay_exact(void **state) {
  (void)state;
  struct sigaction sa = {.sa_handler = on_signal_memo}, old;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
  struct sigevent ev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGALRM};
  ev._sigev_un._tid = gettid();
  timer_t timer;
  assert_int_equal(timer_create(CLOCK_MONOTONIC, &ev, &timer), 0);
  struct itimerspec its = {.it_value = {0, 20000}, .it_interval = {0, 20000}};
  atomic_store(&reentry_walks, 0);
  atomic_store(&reentry_differ, 0);
  assert_int_equal(timer_settime(timer, 0, &its, NULL), 0);
  for (int i = 0; i < 200000 && atomic_load(&reentry_walks) < 50000; i++)
    sink = memo_walks_at_depth(i % 23);
  timer_delete(timer);
  sigaction(SIGALRM, &old, NULL);
  fprintf(stderr, "memo re-entry: %ld walks, %ld differ\n", atomic_load(&reentry_walks),
          atomic_load(&reentry_differ));
  assert_true(atomic_load(&reentry_walks) >= 50000);
  assert_int_equal(atomic_load(&reentry_differ), 0);
}

/* ---- threads, C++, longjmp --------------------------------------------------------------- */

static void *thread_main(void *arg) {
  stack_top = thread_stack_top();
  int seed = (int)(intptr_t)arg;
  for (int depth = 1 + seed; depth <= 200; depth += 9)
    sink = recurse_plain(depth, 3);
  for (int i = 0; i < 5; i++)
    sort_at_depth(i + seed);
  return NULL;
}

static void unwind_matches_libunwind_in_threads_filling_one_cold_cache(void **state) {
  (void)state;
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&t[i], NULL, thread_main, (void *)(intptr_t)i), 0);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  expect_all_matched("threads", 1000, 0);
}

static void unwind_matches_libunwind_through_cxx_exceptions(void **state) {
  (void)state;
  assert_int_equal(ut_cxx_exceptions(200, 40), 200);
  expect_all_matched("c++ exceptions", 1000, 0);
}

/* Allocation callbacks of a Debian library built without frame pointers: libzstd calls them
 * from inside its context creation and compression. std::thread and std::call_once put
 * libstdc++ frames around the checks. */
static void *zstd_alloc(void *opaque, size_t size) {
  (void)opaque;
  ut_check();
  return malloc(size);
}

static void zstd_free(void *opaque, void *p) {
  (void)opaque;
  if (p)
    ut_check();
  free(p);
}

static void unwind_matches_libunwind_in_callbacks_from_libzstd_and_libstdcxx(void **state) {
  (void)state;
  ZSTD_customMem mem = {zstd_alloc, zstd_free, NULL};
  static char src[1 << 16], dst[1 << 17];
  for (size_t i = 0; i < sizeof src; i++)
    src[i] = (char)(i * 131 % 251);
  for (int round = 0; round < 200; round++) {
    ZSTD_CCtx *c = ZSTD_createCCtx_advanced(mem);
    assert_non_null(c);
    size_t n = ZSTD_compressCCtx(c, dst, sizeof dst, src, sizeof src, 1 + round % 5);
    assert_false(ZSTD_isError(n));
    ZSTD_freeCCtx(c);
  }
  assert_int_equal(ut_cxx_library_callbacks(200), 400);
  expect_all_matched("libzstd and libstdc++", 1000, 0);
}

static jmp_buf jump;
static volatile int jump_enabled = 1;

__attribute__((noinline)) static void jump_from_depth(int depth) {
  if (depth == 0) {
    ut_check();
    if (jump_enabled)
      longjmp(jump, 1);
    return;
  }
  jump_from_depth(depth - 1);
  sink = sink + 1;
}

static void unwind_matches_libunwind_after_longjmp(void **state) {
  (void)state;
  for (volatile int i = 0; i < 500; i++) {
    if (setjmp(jump) == 0)
      jump_from_depth(i % 60);
    else
      sink = recurse_plain(i % 10, 2); /* the stack below the jump's target is reused */
  }
  expect_all_matched("longjmp", 1000, 0);
}

/* ---- the walk's contract ------------------------------------------------------------------- */

__attribute__((noinline)) static size_t
walk_at_depth(int depth, uint64_t *pcs, size_t max, unsigned skip, uintptr_t hi, unsigned *flags) {
  if (depth > 0) {
    size_t n = walk_at_depth(depth - 1, pcs, max, skip, hi, flags);
    sink = sink + 1;
    return n;
  }
  size_t n = mt_cfi_unwind(pcs, max, skip, 0, hi, flags);
  sink = sink + 1; /* not a tail call: walk_at_depth(d) is d + 1 frames */
  return n;
}

/* Two walks from one call site (so that even the outermost frames agree), differing in max,
 * skip and stack top as given. */
__attribute__((noinline)) static void two_walks(int depth, uint64_t pcs[2][MAX_FRAMES], size_t n[2],
                                                const size_t max[2], const unsigned skip[2],
                                                const uintptr_t hi[2], unsigned flags[2]) {
  for (volatile int k = 0; k < 2; k++) /* volatile: one call site, the loop is not unrolled */
    n[k] = walk_at_depth(depth, pcs[k], max[k], skip[k], hi[k], &flags[k]);
}

static uint64_t pcs2[2][MAX_FRAMES];

static void unwind_truncated_keeps_innermost_frames_and_says_so(void **state) {
  (void)state;
  size_t n[2];
  unsigned flags[2];
  two_walks(30, pcs2, n, (size_t[]){MAX_FRAMES, 8}, (unsigned[]){0, 0},
            (uintptr_t[]){stack_top, stack_top}, flags);
  assert_int_equal(flags[0] & (MT_CFI_STOP_TRUNCATED | MT_CFI_STOP_INCOMPLETE), 0);
  assert_true(n[0] > 32);
  assert_int_equal(n[1], 8);
  assert_true(flags[1] & MT_CFI_STOP_TRUNCATED);
  assert_memory_equal(pcs2[0], pcs2[1], 8 * sizeof pcs2[0][0]);
}

static void unwind_skips_frames_by_count_and_by_address_range(void **state) {
  (void)state;
  size_t n[2];
  unsigned flags[2];
  const uintptr_t hi[2] = {stack_top, stack_top};
  const size_t max[2] = {MAX_FRAMES, MAX_FRAMES};
  two_walks(10, pcs2, n, max, (unsigned[]){0, 3}, hi, flags);
  assert_int_equal(n[1] + 3, n[0]);
  assert_memory_equal(pcs2[1], pcs2[0] + 3, n[1] * sizeof pcs2[0][0]);
  /* walk_at_depth's own frames: the innermost (after mt_cfi_unwind) and the recursive calls'
   * return addresses (all one PC). A range over exactly those drops all of them. */
  static uint64_t full[MAX_FRAMES];
  size_t n_full = n[0], own = 2;
  memcpy(full, pcs2[0], sizeof full);
  while (own < n_full && full[own] == full[1])
    own++;
  assert_int_equal(own, 11);
  uintptr_t lo = full[0] < full[1] ? full[0] : full[1];
  uintptr_t end = (full[0] < full[1] ? full[1] : full[0]) + 1;
  mt_cfi_set_skip_range(lo, end);
  two_walks(10, pcs2, n, max, (unsigned[]){0, 0}, hi, flags);
  mt_cfi_set_skip_range(0, 0);
  assert_int_equal(n[0] + own, n_full);
  /* The first kept frame is two_walks'; the next differs (another call site of two_walks). */
  assert_int_equal(pcs2[0][0], full[own]);
  assert_memory_equal(pcs2[0] + 2, full + own + 2, (n[0] - 2) * sizeof full[0]);
}

static void unwind_never_reads_past_the_stack_top_it_is_given(void **state) {
  (void)state;
  size_t n[2];
  unsigned flags[2];
  /* A top just below this frame's return address: the walk stops at this function. */
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  two_walks(20, pcs2, n, (size_t[]){MAX_FRAMES, MAX_FRAMES}, (unsigned[]){0, 0},
            (uintptr_t[]){stack_top, here}, flags);
  assert_int_equal(flags[0] & MT_CFI_STOP_INCOMPLETE, 0);
  assert_true(flags[1] & MT_CFI_STOP_BAD_STACK);
  assert_true(n[1] >= 21 && n[1] < n[0]);
  assert_memory_equal(pcs2[1], pcs2[0], n[1] * sizeof pcs2[0][0]);
}

static int find_module_of(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  mt_cfi_module *want = data, m;
  if (mt_cfi_module_from_phdr(info, &m) == 0 && want->text_lo >= m.text_lo &&
      want->text_lo < m.text_hi) {
    *want = m;
    return 1;
  }
  return 0;
}

static void frames_of_a_removed_module_stop_the_walk_until_it_is_added_again(void **state) {
  (void)state;
  uint64_t pcs[MAX_FRAMES];
  unsigned flags;
  mt_cfi_module me = {.text_lo = (uintptr_t)&walk_at_depth};
  assert_int_equal(dl_iterate_phdr(find_module_of, &me), 1);
  size_t n = walk_at_depth(5, pcs, MAX_FRAMES, 0, stack_top, &flags); /* warms the cache */
  assert_true(n > 6);
  mt_cfi_remove_module(me.text_lo);
  size_t m = walk_at_depth(5, pcs, MAX_FRAMES, 0, stack_top, &flags);
  assert_true(flags & MT_CFI_STOP_NO_INFO);
  assert_true(m <= 1);
  assert_int_equal(mt_cfi_add_module(&me), 0);
  m = walk_at_depth(5, pcs, MAX_FRAMES, 0, stack_top, &flags);
  assert_int_equal(m, n);
  assert_int_equal(flags & MT_CFI_STOP_INCOMPLETE, 0);
}

__attribute__((noinline)) static size_t memo_walk_at_depth(int depth, uint64_t *pcs,
                                                           unsigned *flags) {
  if (depth > 0) {
    size_t n = memo_walk_at_depth(depth - 1, pcs, flags);
    sink = sink + 1;
    return n;
  }
  size_t n = mt_cfi_unwind_memo(&memo, pcs, MAX_FRAMES, 0, 0, stack_top, flags);
  sink = sink + 1;
  return n;
}

static void memo_is_reused_on_the_same_stack_and_dropped_when_modules_change(void **state) {
  (void)state;
  uint64_t first[MAX_FRAMES], again[MAX_FRAMES];
  unsigned flags_first, flags_again;
  size_t n = 0, m = 0;
  for (volatile int k = 0; k < 2; k++) /* one call site */
    *(k ? &m : &n) = memo_walk_at_depth(12, k ? again : first, k ? &flags_again : &flags_first);
  assert_int_equal(flags_again, MT_CFI_MEMO_HIT);
  assert_int_equal(m, n);
  assert_memory_equal(first, again, n * sizeof first[0]);
  /* A module added (here: one already there, again) may change rules: the memo is not used. */
  mt_cfi_module me = {.text_lo = (uintptr_t)&walk_at_depth};
  assert_int_equal(dl_iterate_phdr(find_module_of, &me), 1);
  mt_cfi_remove_module(me.text_lo);
  assert_int_equal(mt_cfi_add_module(&me), 0);
  for (volatile int k = 0; k < 2; k++)
    *(k ? &m : &n) = memo_walk_at_depth(12, k ? again : first, k ? &flags_again : &flags_first);
  assert_int_equal(flags_first, 0);
  assert_int_equal(flags_again, MT_CFI_MEMO_HIT);
  assert_int_equal(m, n);
}

/* Two callers of one leaf, called from one place: the memo walk in the leaf starts with the same
 * registers either way, and only the return address into via_a or via_b tells the stacks apart.
 * A memo that took the previous walk as it is without re-reading that word would give the other
 * caller's frames. */
__attribute__((noinline)) static size_t leaf_walks(uint64_t *plain, size_t *n_plain,
                                                   uint64_t *memoed, unsigned *mflags) {
  unsigned flags;
  *n_plain = mt_cfi_unwind(plain, MAX_FRAMES, 0, 0, stack_top, &flags);
  size_t n = mt_cfi_unwind_memo(&memo, memoed, MAX_FRAMES, 0, 0, stack_top, mflags);
  sink = sink + 1;
  return n;
}

__attribute__((noinline)) static size_t via_a(uint64_t *plain, size_t *n_plain, uint64_t *memoed,
                                              unsigned *mflags) {
  size_t n = leaf_walks(plain, n_plain, memoed, mflags);
  sink = sink + 1;
  return n;
}

__attribute__((noinline)) static size_t via_b(uint64_t *plain, size_t *n_plain, uint64_t *memoed,
                                              unsigned *mflags) {
  size_t n = leaf_walks(plain, n_plain, memoed, mflags);
  sink = sink + 2;
  return n;
}

/* Twelve callers of one middle function that calls the leaf: the walks start with the same
 * registers and read the same first two return addresses (into leaf_walks, into mid_walks); only
 * the third tells them apart. More callers than the memo keeps recent walks of, taken in turn. */
__attribute__((noinline)) static size_t mid_walks(uint64_t *plain, size_t *n_plain,
                                                  uint64_t *memoed, unsigned *mflags) {
  size_t n = leaf_walks(plain, n_plain, memoed, mflags);
  sink = sink + 1;
  return n;
}

#define VIA_MID(k)                                                                                 \
  __attribute__((noinline)) static size_t via_mid_##k(uint64_t *plain, size_t *n_plain,            \
                                                      uint64_t *memoed, unsigned *mflags) {        \
    size_t n = mid_walks(plain, n_plain, memoed, mflags);                                          \
    sink = sink + k;                                                                               \
    return n;                                                                                      \
  }
VIA_MID(0)
VIA_MID(1)
VIA_MID(2)
VIA_MID(3)
VIA_MID(4)
VIA_MID(5)
VIA_MID(6)
VIA_MID(7)
VIA_MID(8)
VIA_MID(9)
VIA_MID(10)
VIA_MID(11)

static void memo_tells_apart_more_callers_in_turn_than_it_keeps_walks_of(void **state) {
  (void)state;
  typedef size_t via_fn(uint64_t *, size_t *, uint64_t *, unsigned *);
  static via_fn *const vias[] = {via_mid_0, via_mid_1, via_mid_2,  via_mid_3,
                                 via_mid_4, via_mid_5, via_mid_6,  via_mid_7,
                                 via_mid_8, via_mid_9, via_mid_10, via_mid_11};
  enum { CALLERS = sizeof vias / sizeof vias[0] };
  _Static_assert(CALLERS > MT_CFI_REPEATS, "more callers than repeats kept");
  static uint64_t plain[MAX_FRAMES], memoed[MAX_FRAMES];
  uint64_t ret[CALLERS] = {0};
  /* In turn over 2, 5, 8 (as many as kept) and 12 callers, then in a scrambled order. */
  static const int periods[] = {2, 5, MT_CFI_REPEATS, CALLERS, 0};
  for (int phase = 0; phase < 5; phase++) {
    for (int i = 0; i < 1500; i++) {
      int k = periods[phase] ? i % periods[phase] : (i * 7919 / 3) % CALLERS;
      size_t n_plain;
      unsigned mflags;
      via_fn *volatile via = vias[k];
      size_t n = via(plain, &n_plain, memoed, &mflags);
      assert_int_equal(n, n_plain);
      assert_true(n > 4);
      assert_memory_equal(plain + 1, memoed + 1, (n - 1) * sizeof plain[0]);
      assert_true(ret[k] == 0 || ret[k] == plain[2]); /* into via_mid_k, always the same */
      ret[k] = plain[2];
    }
  }
  for (int k = 0; k < CALLERS; k++)
    for (int j = 0; j < k; j++)
      assert_true(ret[k] && ret[k] != ret[j]); /* every caller seen, each its own */
}

static void memo_tells_callers_apart_when_the_walk_starts_with_the_same_registers(void **state) {
  (void)state;
  static uint64_t plain[MAX_FRAMES], memoed[MAX_FRAMES];
  uint64_t ret_a = 0, ret_b = 0;
  long hits = 0;
  for (int i = 0; i < 2000; i++) {
    size_t n_plain, n;
    unsigned mflags;
    bool a = (i * 7919 / 3) % 5 < 2; /* runs of a and of b of varying lengths */
    /* One call site for both (through a volatile pointer): the leaf's stack pointer is the same. */
    size_t (*volatile via)(uint64_t *, size_t *, uint64_t *, unsigned *) = a ? via_a : via_b;
    n = via(plain, &n_plain, memoed, &mflags);
    assert_int_equal(n, n_plain);
    assert_true(n > 3);
    /* [0] is the return address into leaf_walks from each walker: they differ by call site. */
    assert_memory_equal(plain + 1, memoed + 1, (n - 1) * sizeof plain[0]);
    *(a ? &ret_a : &ret_b) = plain[1]; /* into via_a or via_b */
    hits += (mflags & MT_CFI_MEMO_HIT) != 0;
  }
  assert_true(ret_a && ret_b && ret_a != ret_b); /* the two callers were seen, and differ */
  assert_true(hits > 1000);
}

static void frames_in_a_module_without_unwind_tables_stop_the_walk(void **state) {
  (void)state;
  static const unsigned char text[64]; /* never executed: only its address is looked up */
  mt_cfi_module m = {.text_lo = (uintptr_t)text, .text_hi = (uintptr_t)text + sizeof text};
  assert_int_equal(mt_cfi_add_module(&m), 0);
  uint64_t pcs[4];
  unsigned flags;
  mt_cfi_regs regs = {(uintptr_t)text + 8, (uintptr_t)__builtin_frame_address(0), 0};
  size_t n = mt_cfi_unwind_from(&regs, 1, pcs, 4, 0, 0, stack_top, &flags);
  mt_cfi_remove_module(m.text_lo);
  assert_int_equal(n, 1);
  assert_int_equal(pcs[0], (uintptr_t)text + 8);
  assert_int_equal(flags, MT_CFI_STOP_NO_INFO);
}

/* From a handler's ucontext (exact interrupted PC): the same frames as the walk from inside the
 * handler shows after the signal frame. */
static uint64_t from_context[MAX_FRAMES], from_handler[MAX_FRAMES];
static size_t n_context, n_handler;
static unsigned flags_context, flags_handler;

static void on_signal_info(int sig, siginfo_t *info, void *context) {
  (void)sig, (void)info;
  const ucontext_t *uc = context;
  mt_cfi_regs regs = {(uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
                      (uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
                      (uintptr_t)uc->uc_mcontext.gregs[REG_RBP]};
  n_context =
      mt_cfi_unwind_from(&regs, 1, from_context, MAX_FRAMES, 0, 0, stack_top, &flags_context);
  n_handler = mt_cfi_unwind(from_handler, MAX_FRAMES, 0, 0, stack_top, &flags_handler);
}

static void unwind_from_a_signal_context_matches_the_frames_past_the_signal_frame(void **state) {
  (void)state;
  struct sigaction sa = {.sa_sigaction = on_signal_info, .sa_flags = SA_SIGINFO}, old;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGUSR2, &sa, &old), 0);
  sink = raise_at_depth(7, SIGUSR2);
  sigaction(SIGUSR2, &old, NULL);
  assert_int_equal(flags_handler & MT_CFI_STOP_INCOMPLETE, 0);
  assert_true(flags_handler & MT_CFI_PASSED_SIGNAL);
  assert_int_equal(flags_context & (MT_CFI_STOP_INCOMPLETE | MT_CFI_PASSED_SIGNAL), 0);
  size_t k = 0;
  while (k < n_handler && from_handler[k] != from_context[0])
    k++;
  assert_true(k >= 2 && k < n_handler); /* the handler's frames and the trampoline's before */
  assert_int_equal(n_handler - k, n_context);
  assert_memory_equal(from_handler + k, from_context, n_context * sizeof from_context[0]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(unwind_matches_libunwind_in_deep_recursion_without_frame_pointers,
                             setup),
      cmocka_unit_test_setup(unwind_matches_libunwind_through_qsort_comparator, setup),
      cmocka_unit_test_setup(unwind_matches_libunwind_in_callbacks_from_libc_and_the_loader, setup),
      cmocka_unit_test_setup(unwind_matches_libunwind_in_signal_handler_on_same_stack, setup),
      cmocka_unit_test_setup(reference_walk_by_unw_step_matches_unw_backtrace, setup),
      cmocka_unit_test_setup(unwind_matches_libunwind_at_timer_interrupted_instructions, setup),
      cmocka_unit_test_setup(memo_walks_interrupted_by_memo_walks_in_signal_handlers_stay_exact,
                             setup),
      cmocka_unit_test_setup(unwind_matches_libunwind_in_threads_filling_one_cold_cache, setup),
      cmocka_unit_test_setup(unwind_matches_libunwind_through_cxx_exceptions, setup),
      cmocka_unit_test_setup(unwind_matches_libunwind_in_callbacks_from_libzstd_and_libstdcxx,
                             setup),
      cmocka_unit_test_setup(unwind_matches_libunwind_after_longjmp, setup),
      cmocka_unit_test_setup(unwind_truncated_keeps_innermost_frames_and_says_so, setup),
      cmocka_unit_test_setup(unwind_skips_frames_by_count_and_by_address_range, setup),
      cmocka_unit_test_setup(unwind_never_reads_past_the_stack_top_it_is_given, setup),
      cmocka_unit_test_setup(frames_of_a_removed_module_stop_the_walk_until_it_is_added_again,
                             setup),
      cmocka_unit_test_setup(memo_tells_callers_apart_when_the_walk_starts_with_the_same_registers,
                             setup),
      cmocka_unit_test_setup(memo_tells_apart_more_callers_in_turn_than_it_keeps_walks_of, setup),
      cmocka_unit_test_setup(frames_in_a_module_without_unwind_tables_stop_the_walk, setup),
      cmocka_unit_test_setup(memo_is_reused_on_the_same_stack_and_dropped_when_modules_change,
                             setup),
      cmocka_unit_test_setup(unwind_from_a_signal_context_matches_the_frames_past_the_signal_frame,
                             setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
