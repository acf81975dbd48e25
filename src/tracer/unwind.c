/* The unwinder behind mt_tracer_unwind (shim.h). First the cached CFI walker (unwind_cfi.h): its
 * own module table (filled by modules.c), rules from .eh_frame cached per PC, reads bounded to the
 * thread's stack, no loader call, no lock, no malloc; it works from the first allocation on, before
 * any constructor. When it meets a frame its rules cannot express (or a PC in no module it knows,
 * or a stack it cannot bound), the stack is walked again with libunwind, the baseline. Debian's
 * libunwind exports the _Unwind_* ABI, so linking it into the shim would let it take over the
 * program's C++ exceptions; it is loaded privately instead (dlopen with RTLD_LOCAL, from the
 * shim's constructor) and called through a function pointer. Before it is loaded a walk the CFI
 * walker could not finish keeps the frames it found and is marked truncated. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tracer/shim.h"
#include "tracer/unwind_cfi.h"

/* libunwind is not reentrant: its one-time set-up runs under pthread_once (and its lookups take
 * the loader's lock), so a signal handler that allocates while its thread is inside libunwind
 * would wait for itself for ever. A walk on a thread already inside libunwind goes without it:
 * a fallback records no stack (flagged, as before libunwind is loaded), and the check mode skips
 * the comparison. (Running the set-up in the constructor instead would cost every traced process
 * about 0.3 ms, and not cover libunwind's other state.) */
static __thread uint32_t in_libunwind __attribute__((tls_model("initial-exec")));

/* The thread's unwind stack (libunwind_walk, below). */
#define MT_UNWIND_STACK_BYTES (256u << 10)
#define MT_UNWIND_GUARD_BYTES 4096u
static __thread char *unwind_stack __attribute__((tls_model("initial-exec")));
static __thread bool unwind_stack_gone __attribute__((tls_model("initial-exec")));

/* Each thread's memo of its previous walk (mt_cfi_unwind_memo: a stack that shares its outer part
 * with the previous one is re-checked, not walked again). About 28 KiB, so not in static TLS (a
 * program's threads may have small stacks, which hold static TLS): mmap'd at the thread's
 * MEMO_AFTER-th walk, so that threads that record once or twice do not pay for one, and unmapped
 * at thread exit (mt_tracer_unwind_thread_done). A thread that exits without passing through the
 * shim's trampoline keeps its memo mapped. */
#define MEMO_AFTER 8u
#define MEMO_GONE UINT32_MAX
static __thread mt_cfi_memo *memo __attribute__((tls_model("initial-exec")));
static __thread uint32_t memo_walks __attribute__((tls_model("initial-exec")));

static mt_cfi_memo *thread_memo(void) {
  mt_cfi_memo *m = memo;
  if (MT_LIKELY(m) || memo_walks == MEMO_GONE)
    return m;
  if (++memo_walks < MEMO_AFTER)
    return NULL;
  void *p = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    memo_walks = MEMO_GONE;
    return NULL;
  }
  memo = p; /* zeroed: an empty memo */
  return p;
}

void mt_tracer_unwind_thread_done(void) {
  if (!in_libunwind) { /* else a handler interrupted a walk on it: left mapped */
    /* Forgotten before it is unmapped: a handler that walks between the two finds none. */
    char *stack = unwind_stack;
    unwind_stack_gone = true;
    unwind_stack = NULL;
    atomic_signal_fence(memory_order_seq_cst);
    if (stack)
      munmap(stack - MT_UNWIND_GUARD_BYTES, MT_UNWIND_STACK_BYTES + MT_UNWIND_GUARD_BYTES);
  }
  mt_cfi_memo *m = memo;
  memo_walks = MEMO_GONE; /* what the thread still records walks without one */
  if (!m || m->busy)
    return; /* busy: a signal handler interrupted a walk; the memo is left mapped */
  memo = NULL;
  munmap(m, sizeof *m);
}

static int (*backtrace_fn)(void **buffer, int size);

/* MEMTAP_TEST_UNWIND_CHECK=1 (tests only): every stack the cached walker gives is walked again
 * with libunwind and compared frame by frame; the counts are said on stderr at exit
 * ("memtap: unwind check: ..."), with the first differing stacks. */
static bool check_mode;
static _Atomic uint64_t checked, identical, fell_back, differ;
static _Atomic int shown;

/* Stack libunwind may need below its caller: more than a SIGSTKSZ alternate signal stack holds
 * (unw_backtrace overflowed one of 8 KiB inside a crash handler that allocated). */
#define MT_LIBUNWIND_STACK (16u << 10)

/* Whether the stack the thread runs on now is known to have MT_LIBUNWIND_STACK left below `sp`:
 * the alternate signal stack of a running handler, or the thread's own. A stack the shim knows
 * nothing of (a coroutine's, made by makecontext or a library's own switch, often a few KiB of
 * the heap) has no known room. */
static bool stack_roomy(const mt_shim_thread *t, uintptr_t sp) {
  if (t->alt_high && sp >= t->alt_low && sp < t->alt_high)
    return sp - t->alt_low >= MT_LIBUNWIND_STACK;
  if (t->stack_high && sp >= t->stack_low && sp < t->stack_high)
    return sp - t->stack_low >= MT_LIBUNWIND_STACK;
  return false;
}

/* Elsewhere, libunwind runs on a stack of the thread's own (the unwind stack): mapped at its first
 * need (MAP_NORESERVE, a guard page below it), unmapped at thread exit. The walk still reads the
 * frames of the stack the program was on: mt_unwind_call_on_stack keeps a frame pointer to it, and
 * its CFI says so, so that libunwind steps from the unwind stack back onto the program's. Before,
 * such a walk ran where it was, and 4 KiB coroutine stacks overflowed into the heap (an abort in
 * the program's next realloc) where untraced they sufficed; a short known stack (a handler's
 * SIGSTKSZ alternate stack) got no backtrace.
 *
 * mt_unwind_call_on_stack(fn, buffer, size, top): fn(buffer, size) with the stack pointer at `top`
 * (16-byte aligned), back on the caller's stack after. */
int mt_unwind_call_on_stack(int (*fn)(void **, int), void **buffer, int size, void *top)
    __attribute__((visibility("hidden")));
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".globl mt_unwind_call_on_stack\n"
        ".hidden mt_unwind_call_on_stack\n"
        ".type mt_unwind_call_on_stack, @function\n"
        "mt_unwind_call_on_stack:\n"
        ".cfi_startproc\n"
        "  pushq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "  movq %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "  movq %rdi, %rax\n"
        "  movq %rsi, %rdi\n"
        "  movl %edx, %esi\n"
        "  movq %rcx, %rsp\n"
        "  callq *%rax\n"
        "  movq %rbp, %rsp\n"
        "  popq %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size mt_unwind_call_on_stack, .-mt_unwind_call_on_stack\n"
        ".popsection\n");

/* The top of the thread's unwind stack; NULL when there is none (no memory, after thread exit). */
static void *unwind_stack_top(void) {
  if (MT_LIKELY(unwind_stack))
    return unwind_stack + MT_UNWIND_STACK_BYTES;
  if (unwind_stack_gone)
    return NULL;
  char *p = mmap(NULL, MT_UNWIND_STACK_BYTES + MT_UNWIND_GUARD_BYTES, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) {
    unwind_stack_gone = true;
    return NULL;
  }
  mprotect(p, MT_UNWIND_GUARD_BYTES, PROT_NONE);
  unwind_stack = p + MT_UNWIND_GUARD_BYTES;
  return unwind_stack + MT_UNWIND_STACK_BYTES;
}

/* Marks the thread as inside libunwind (or out of it again). */
static void mark_in_libunwind(uint32_t in) {
  atomic_signal_fence(memory_order_seq_cst);
  in_libunwind = in;
  atomic_signal_fence(memory_order_seq_cst);
}

static int libunwind_walk(void **buf, int max) {
  if (in_libunwind)
    return -1;
  mark_in_libunwind(1); /* before the unwind stack's mmap too: a handler would map a second */
  int got = -1;
  void *top;
  if (stack_roomy(&mt_shim_self, (uintptr_t)__builtin_frame_address(0))) {
    got = backtrace_fn(buf, max);
    mark_in_libunwind(0);
  } else if (!(top = unwind_stack_top())) {
    mark_in_libunwind(0);
  } else {
    /* Signals are held off meanwhile: a handler running on its alternate stack that switched away
     * from it would have the kernel start a nested SA_ONSTACK handler at that stack's top, over
     * the running one's frames (the kernel tells "on the alternate stack" by the stack pointer).
     * Not the synchronous ones: blocked, a fault would kill the process without its own handler
     * (a crash reporter's). The mask comes back after the mark is cleared, so that a handler it
     * lets in may walk with libunwind too. */
    sigset_t held, was;
    sigfillset(&held);
    static const int synchronous[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT};
    for (size_t i = 0; i < sizeof synchronous / sizeof synchronous[0]; i++)
      sigdelset(&held, synchronous[i]);
    bool masked = pthread_sigmask(SIG_SETMASK, &held, &was) == 0;
    if (masked)
      got = mt_unwind_call_on_stack(backtrace_fn, buf, max, top);
    mark_in_libunwind(0);
    if (masked)
      pthread_sigmask(SIG_SETMASK, &was, NULL);
  }
  return got;
}

void mt_tracer_unwind_load(void) {
  if (backtrace_fn)
    return;
  void *(*open)(const char *, int) = (void *(*)(const char *, int))mt_dl_real_open;
  if (!open)
    return;
  const void *mark = mt_own_objects_mark();
  void *h = open("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
  mt_own_objects_note_since(mark);
  backtrace_fn = (int (*)(void **, int))dlsym(h, "unw_backtrace");
  const char *check = mt_shim_getenv(NULL, "MEMTAP_TEST_UNWIND_CHECK");
  check_mode = backtrace_fn && check && check[0] == '1' && !check[1];
}

/* ---- the check mode ---------------------------------------------------------------------- */

static void say(const char *text) {
  size_t n = 0;
  while (text[n])
    n++;
  while (n) {
    ssize_t w = write(2, text, n);
    if (w <= 0)
      return;
    text += w, n -= (size_t)w;
  }
}

/* Appends the decimal or hex form of v to buf at *at (bounded). */
static void put_number(char *buf, size_t size, size_t *at, uint64_t v, unsigned base) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v);
  while (n && *at + 1 < size)
    buf[(*at)++] = digits[--n];
  buf[*at] = 0;
}

static void put_text(char *buf, size_t size, size_t *at, const char *text) {
  while (*text && *at + 1 < size)
    buf[(*at)++] = *text++;
  buf[*at] = 0;
}

static void show_stack(const char *who, const uint64_t *pcs, size_t n) {
  char line[64 * 20 + 64];
  size_t at = 0;
  put_text(line, sizeof line, &at, "  ");
  put_text(line, sizeof line, &at, who);
  put_text(line, sizeof line, &at, ":");
  for (size_t i = 0; i < n && i < 64; i++) {
    put_text(line, sizeof line, &at, " 0x");
    put_number(line, sizeof line, &at, pcs[i], 16);
  }
  put_text(line, sizeof line, &at, "\n");
  say(line);
}

/* libunwind's walk of this stack, the shim's frames removed: what the fallback would give. */
static size_t reference_walk(uint64_t *pcs, size_t max, bool *truncated) {
  int got = libunwind_walk((void **)pcs, (int)(max + MT_UNWIND_SLACK));
  size_t n = 0;
  uintptr_t low = mt_shim.text_low, span = mt_shim.text_high - mt_shim.text_low;
  *truncated = (size_t)got == max + MT_UNWIND_SLACK;
  for (int i = 0; i < got && n < max; i++)
    if ((uintptr_t)pcs[i] - low >= span && pcs[i])
      pcs[n++] = pcs[i];
  return n;
}

static void check_walk(const uint64_t *pcs, size_t n, bool complete, bool truncated) {
  if (in_libunwind)
    return; /* a handler interrupted libunwind on this thread: no reference */
  uint64_t ref[MT_TRACER_MAX_FRAMES + MT_UNWIND_SLACK];
  bool ref_truncated;
  size_t m = reference_walk(ref, MT_TRACER_MAX_FRAMES, &ref_truncated);
  atomic_fetch_add_explicit(&checked, 1, memory_order_relaxed);
  if (!complete) {
    atomic_fetch_add_explicit(&fell_back, 1, memory_order_relaxed);
    return;
  }
  bool same = n == m || ((truncated || ref_truncated) && n > 0 && m > 0);
  size_t common = n < m ? n : m;
  for (size_t i = 0; same && i < common; i++)
    same = pcs[i] == ref[i];
  if (same) {
    atomic_fetch_add_explicit(&identical, 1, memory_order_relaxed);
    return;
  }
  atomic_fetch_add_explicit(&differ, 1, memory_order_relaxed);
  if (atomic_fetch_add_explicit(&shown, 1, memory_order_relaxed) < 3) {
    say("memtap: unwind check: the cached walk differs from libunwind's\n");
    show_stack("cfi", pcs, n);
    show_stack("libunwind", ref, m);
  }
}

__attribute__((destructor)) static void check_report(void) {
  if (!check_mode)
    return;
  char line[256];
  size_t at = 0;
  put_text(line, sizeof line, &at, "memtap: unwind check: ");
  put_number(line, sizeof line, &at, atomic_load(&checked), 10);
  put_text(line, sizeof line, &at, " stacks, ");
  put_number(line, sizeof line, &at, atomic_load(&identical), 10);
  put_text(line, sizeof line, &at, " identical to libunwind's, ");
  put_number(line, sizeof line, &at, atomic_load(&fell_back), 10);
  put_text(line, sizeof line, &at, " fell back, ");
  put_number(line, sizeof line, &at, atomic_load(&differ), 10);
  put_text(line, sizeof line, &at, " differ\n");
  say(line);
}

void mt_tracer_unwind_init(void) {
  mt_cfi_set_skip_range(mt_shim.text_low, mt_shim.text_high);
}

/* What a walk with the cached rules that stopped with `stop` after `n` frames gives: the count, or
 * -1 to fall back. */
static long walk_result(size_t n, unsigned stop, unsigned *flags) {
  if (stop & MT_CFI_STOP_INCOMPLETE) {
    if (backtrace_fn)
      return -1;
    *flags |= MT_TRACER_FLAG_TRUNCATED; /* what it found, and the stack goes on */
  }
  if (stop & MT_CFI_STOP_TRUNCATED)
    *flags |= MT_TRACER_FLAG_TRUNCATED;
  else if (!(stop & MT_CFI_STOP_INCOMPLETE))
    *flags |= MT_UNWIND_KNOWN; /* every frame's rule came from a registered module */
  if (!n)
    *flags |= MT_TRACER_FLAG_NO_STACK;
  return (long)n;
}

/* The walk with the cached rules, when the thread's stack is known and the walk starts on it (not
 * on a sigaltstack): the count, or -1 to fall back. From `from` when given (the registers of the
 * interposed function's frame: the shim's frames in between are not walked), else from here. */
static long cfi_walk(const mt_cfi_regs *from, uint64_t *pcs, size_t max, unsigned *flags) {
  mt_shim_thread *t = &mt_shim_self;
  uintptr_t sp = from ? from->sp : (uintptr_t)__builtin_frame_address(0);
  if (!t->stack_high || sp < t->stack_low || sp >= t->stack_high)
    return -1;
  unsigned stop = 0;
  mt_cfi_memo *m = thread_memo();
  size_t n;
  if (from)
    n = m ? mt_cfi_unwind_memo_from(m, from, pcs, max, 0, t->stack_low, t->stack_high, &stop)
          : mt_cfi_unwind_from(from, 1, pcs, max, 0, t->stack_low, t->stack_high, &stop);
  else
    n = m ? mt_cfi_unwind_memo(m, pcs, max, 0, t->stack_low, t->stack_high, &stop)
          : mt_cfi_unwind(pcs, max, 0, t->stack_low, t->stack_high, &stop);
  return walk_result(n, stop, flags);
}

/* After the cached walk (`walked` frames, or -1): the check mode's comparison, and libunwind when
 * the cached walk could not finish. */
static __attribute__((noinline)) size_t unwind_rest(long walked, uint64_t *pcs, size_t max,
                                                    unsigned *flags) {
  if (MT_UNLIKELY(check_mode))
    check_walk(pcs, walked > 0 ? (size_t)walked : 0, walked >= 0,
               walked >= 0 && (*flags & MT_TRACER_FLAG_TRUNCATED));
  if (walked >= 0)
    return (size_t)walked;
  if (!backtrace_fn) {
    *flags |= MT_TRACER_FLAG_NO_STACK;
    return 0;
  }
  /* libunwind fills the caller's buffer (MT_UNWIND_SLACK words longer than `max`) with void *,
   * the same 8 bytes as a uint64_t here; the shim's frames are then squeezed out in place. One
   * buffer on the stack instead of two: the program's thread may have a small stack. */
  _Static_assert(sizeof(void *) == sizeof(uint64_t), "x86-64");
  int got = libunwind_walk((void **)pcs, (int)(max + MT_UNWIND_SLACK));
  if (got <= 0) {
    *flags |= MT_TRACER_FLAG_NO_STACK;
    return 0;
  }
  size_t n = 0;
  uintptr_t low = mt_shim.text_low, span = mt_shim.text_high - mt_shim.text_low;
  for (int i = 0; i < got; i++) {
    uintptr_t pc = (uintptr_t)pcs[i];
    if (pc - low < span || pc == 0)
      continue; /* the shim's own frame (the trampoline of a thread, too) */
    if (n == max) {
      *flags |= MT_TRACER_FLAG_TRUNCATED;
      break;
    }
    pcs[n++] = pc;
  }
  if ((size_t)got == max + MT_UNWIND_SLACK && n == max)
    *flags |= MT_TRACER_FLAG_TRUNCATED;
  return n;
}

static __attribute__((noinline)) size_t unwind_general(const mt_cfi_regs *from, uint64_t *pcs,
                                                       size_t max, unsigned *flags) {
  return unwind_rest(cfi_walk(from, pcs, max, flags), pcs, max, flags);
}

/* The usual call when it is not a repeat: the memo's walk, libunwind when it could not finish.
 * Out of line, so that a repeat saves no registers for it. */
static __attribute__((noinline)) size_t unwind_memo(mt_cfi_memo *m, const mt_cfi_regs *from,
                                                    uint64_t *pcs, size_t max, unsigned *flags) {
  mt_shim_thread *t = &mt_shim_self;
  unsigned stop = 0;
  size_t n = mt_cfi_unwind_memo_from(m, from, pcs, max, 0, t->stack_low, t->stack_high, &stop);
  if (MT_LIKELY(n && !(stop & (MT_CFI_STOP_INCOMPLETE | MT_CFI_STOP_TRUNCATED)))) {
    *flags |= MT_UNWIND_KNOWN;
    return n;
  }
  return unwind_rest(walk_result(n, stop, flags), pcs, max, flags);
}

size_t mt_tracer_unwind(const mt_cfi_regs *from, uint64_t *pcs, size_t max, unsigned *flags) {
  /* The usual call: from the interposed function's registers, on the thread's known stack, with
   * its memo, not checking; a walk that found every frame's rule is the answer. */
  mt_shim_thread *t = &mt_shim_self;
  mt_cfi_memo *m = memo;
  if (MT_LIKELY(from && m && !check_mode && from->sp >= t->stack_low && from->sp < t->stack_high)) {
    size_t n =
        mt_cfi_repeat(m, from->pc, from->sp, from->bp, 0, pcs, max, t->stack_low, t->stack_high);
    if (MT_LIKELY(n)) { /* the previous walk again: complete, every rule known */
      *flags |= MT_UNWIND_KNOWN;
      return n;
    }
    return unwind_memo(m, from, pcs, max, flags);
  }
  return unwind_general(from, pcs, max, flags);
}
