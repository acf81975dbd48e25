/* Unwinder benchmark (issue 9: a sampled unwind of about 1 us or less, far less with a warm
 * cache; unw_backtrace 90-170 ns, a frame-pointer walk 20-30 ns for orientation). At a few
 * recursion depths it prints the ns per whole-stack walk of:
 *   - cfi warm:  mt_cfi_unwind with every rule of the stack already cached (the steady state);
 *   - cfi cold:  the first walk after the cache was cleared (every frame a miss: FDE search and
 *                CFA program), timed one walk at a time, median of many;
 *   - memo:      mt_cfi_unwind_memo, the walks alternating between two call sites of the leaf
 *                (two frames walked, the rest re-checked against the thread's memo);
 *   - memo miss: the same with the memo emptied before each walk (a full walk, recorded);
 *   - libunwind: unw_backtrace (its own per-thread cache warm);
 *   - fp:        the rbp chain, on a recursion built with frame pointers (fp_chain.c).
 * cfi and libunwind walk a stack of -O2 code without frame pointers (nofp_chain.c, as Debian
 * builds); the frame-pointer stack (fp_chain.c, and this file, so that the rbp chain reaches the
 * walker) is walked by all three; the chain ends at libc's start code, which has none. Each figure
 * is the median of 7 runs. Prints figures; checks nothing but that the walks found the same frame
 * counts. */
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fp_chain.h"
#include "tracer/unwind_cfi.h"

#define MAX_FRAMES 256
#define RUNS 11

static uintptr_t stack_top;
static volatile unsigned sink;
static uint64_t pcs[MAX_FRAMES];

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The fastest run: on a machine shared with other work, the one least disturbed. */
static double lowest(const double *v, size_t n) {
  double m = v[0];
  for (size_t i = 1; i < n; i++)
    m = v[i] < m ? v[i] : m;
  return m;
}

static double median(double *v, size_t n) {
  qsort(v, n, sizeof v[0], by_value);
  return v[n / 2];
}

typedef enum method {
  CFI_WARM,
  CFI_COLD,
  CFI_MEMO,
  CFI_MEMO_MISS,
  LIBUNWIND,
  FRAME_POINTER,
  METHODS
} method;
static const char *const names[METHODS] = {"cfi warm",  "cfi cold",  "memo",
                                           "memo miss", "libunwind", "fp"};
static mt_cfi_memo memo;
static unsigned long memo_walks, memo_hits;

typedef struct job {
  method m;
  double ns;
  size_t frames;
} job;

static size_t walk_once(method m) {
  unsigned flags;
  switch (m) {
  case CFI_WARM:
  case CFI_COLD: {
    size_t n = mt_cfi_unwind(pcs, MAX_FRAMES, 0, 0, stack_top, &flags);
    if (flags & MT_CFI_STOP_INCOMPLETE) {
      fprintf(stderr, "bench_unwind: the cached walk stopped early (flags %#x)\n", flags);
      exit(1);
    }
    return n;
  }
  case CFI_MEMO:
  case CFI_MEMO_MISS: {
    if (m == CFI_MEMO_MISS)
      memo.start = memo.end = 0;
    size_t n = mt_cfi_unwind_memo(&memo, pcs, MAX_FRAMES, 0, 0, stack_top, &flags);
    memo_walks += m == CFI_MEMO;
    memo_hits += m == CFI_MEMO && (flags & MT_CFI_MEMO_HIT);
    if ((flags & MT_CFI_STOP_INCOMPLETE) || (m == CFI_MEMO_MISS && (flags & MT_CFI_MEMO_HIT))) {
      fprintf(stderr, "bench_unwind: the memo walk went wrong (flags %#x)\n", flags);
      exit(1);
    }
    return n;
  }
  case LIBUNWIND: return (size_t)unw_backtrace((void **)pcs, MAX_FRAMES);
  case FRAME_POINTER: return fp_walk(pcs, MAX_FRAMES, stack_top);
  default: return 0;
  }
}

/* Two call sites, as a program calls malloc from two places of one function: a memoised walk
 * then re-walks two frames and reuses the rest. */
__attribute__((noinline)) static size_t walk_from_a(method m) {
  size_t n = walk_once(m);
  sink = sink + 1;
  return n;
}

__attribute__((noinline)) static size_t walk_from_b(method m) {
  size_t n = walk_once(m);
  sink = sink + 2;
  return n;
}

/* Runs at the bottom of the recursion. */
static void measure(void *arg) {
  job *j = arg;
  double runs[RUNS];
  j->frames = walk_from_a(j->m);
  for (int r = 0; r < RUNS; r++) {
    if (j->m == CFI_COLD) {
      enum { WALKS = 101 };
      double one[WALKS];
      for (int i = 0; i < WALKS; i++) {
        mt_cfi_cache_clear();
        double t0 = now_ns();
        sink = sink + (unsigned)walk_once(j->m);
        one[i] = now_ns() - t0;
      }
      runs[r] = median(one, WALKS);
      continue;
    }
    int iterations = j->m == LIBUNWIND ? 10000 : 50000;
    double t0 = now_ns();
    for (int i = 0; i < iterations; i++)
      sink = sink + (unsigned)(i & 1 ? walk_from_a(j->m) : walk_from_b(j->m));
    runs[r] = (now_ns() - t0) / iterations;
  }
  j->ns = lowest(runs, RUNS);
}

static int add_module(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size, (void)data;
  mt_cfi_module m;
  if (mt_cfi_module_from_phdr(info, &m) == 0 && mt_cfi_add_module(&m) != 0) {
    fprintf(stderr, "bench_unwind: module table full\n");
    exit(1);
  }
  return 0;
}

int main(void) {
  dl_iterate_phdr(add_module, NULL);
  pthread_attr_t attr;
  void *addr;
  size_t size;
  pthread_getattr_np(pthread_self(), &attr);
  pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  stack_top = (uintptr_t)addr + size;

  const int depths[] = {8, 32, 128};
  printf("ns per whole-stack walk (fastest of %d runs); frames = return addresses found\n", RUNS);
  printf("%-28s %6s", "stack", "frames");
  for (int m = 0; m < METHODS; m++)
    printf(" %10s", names[m]);
  printf("\n");
  for (int fp = 0; fp < 2; fp++) {
    for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
      job jobs[METHODS];
      for (int m = 0; m < METHODS; m++) {
        jobs[m] = (job){.m = (method)m};
        if (m == FRAME_POINTER && !fp)
          continue;
        if (fp)
          fp_recurse(depths[d], measure, &jobs[m]);
        else
          nofp_recurse(depths[d], measure, &jobs[m]);
      }
      char label[32];
      snprintf(label, sizeof label, "%s depth %d", fp ? "frame pointers" : "no frame pointers",
               depths[d]);
      printf("%-28s %6zu", label, jobs[CFI_WARM].frames);
      for (int m = 0; m < METHODS; m++) {
        if (m == FRAME_POINTER && !fp)
          printf(" %10s", "-");
        else
          printf(" %10.1f", jobs[m].ns);
      }
      printf("\n");
      /* The walks start one frame apart, and the rbp chain ends at libc's start code (no frame
       * pointers there): a difference beyond that means a broken walk. */
      for (int m = 1; m < METHODS; m++) {
        size_t a = jobs[CFI_WARM].frames, b = jobs[m].frames;
        if ((m != FRAME_POINTER || fp) && (a > b + 4 || b > a + 4))
          fprintf(stderr, "bench_unwind: %s found %zu frames, cfi %zu\n", names[m], b, a);
      }
    }
  }
  printf("memo walks that reused the memo: %lu of %lu\n", memo_hits, memo_walks);
  return (int)(sink & 0);
}
