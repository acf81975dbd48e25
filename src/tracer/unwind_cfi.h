/* unwind_cfi: the preload shim's fast stack walker (DESIGN.md §4 "Unwinding"). It walks the
 * calling thread's stack with per-PC rules taken from the modules' .eh_frame (eh_frame.h) and kept
 * in a fixed-size cache, so a warm walk costs a few nanoseconds per frame. It never allocates,
 * never takes a lock, never calls into the dynamic loader and never reads outside the stack bounds
 * its caller gives (or outside a module's table segment). A frame whose call frame information it
 * cannot express stops the walk with MT_CFI_STOP_UNEXPRESSIBLE: the caller then walks the stack
 * again with libunwind.
 *
 * How the shim uses it:
 *   - at start, from dl_iterate_phdr's callback (not on the hot path):
 *       mt_cfi_module m;
 *       if (mt_cfi_module_from_phdr(info, &m) == MT_OK) mt_cfi_add_module(&m);
 *     then mt_cfi_set_skip_range(shim text lo, hi) to drop the shim's own frames;
 *   - after dlopen / dlclose: add the new modules, mt_cfi_remove_module(m.text_lo) the gone ones;
 *   - per sampled event, on the thread's own stack:
 *       unsigned flags;
 *       size_t n = mt_cfi_unwind(pcs, 256, 0, 0, thread_stack_top, &flags);
 *       if (flags & MT_CFI_STOP_INCOMPLETE) n = unw_backtrace(...);   (the fallback)
 *
 * The module table is a fixed array of slots in .bss, each published under a sequence counter:
 * readers never wait and never see a half-written module, and nothing is ever freed. The rule
 * cache is a direct-mapped table of 2^15 single-word entries (256 KiB of .bss, touched lazily);
 * threads fill it on a miss without a lock, one atomic store per entry, so a racing reader sees
 * an old entry or a new one, never a torn one. Adding or removing a module clears the entries of
 * its range. Code that is unmapped while another thread still unwinds through it is the
 * program's bug, not handled here. */
#ifndef MEMTAP_SRC_TRACER_UNWIND_CFI_H
#define MEMTAP_SRC_TRACER_UNWIND_CFI_H

#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "memtap/common.h"

/* A loaded module, in run-time addresses. */
typedef struct mt_cfi_module {
  uintptr_t text_lo, text_hi; /* the span of its executable PT_LOAD segments */
  uintptr_t load_bias;
  uintptr_t eh_frame_hdr; /* PT_GNU_EH_FRAME, 0 when it has none (its frames end a walk) */
  uintptr_t eh_lo, eh_hi; /* the PT_LOAD segment holding the tables: reads stay inside */
} mt_cfi_module;

/* Fills *out from a dl_iterate_phdr entry. Returns MT_OK, or MT_E_INVALID when the module has no
 * executable segment (nothing to register). Pure: reads info only. */
int mt_cfi_module_from_phdr(const struct dl_phdr_info *info, mt_cfi_module *out);

/* Registers a module (MT_CFI_MAX_MODULES at once); adding one whose text_lo is registered
 * replaces it. Returns MT_OK, MT_E_NOMEM when the table is full, MT_E_INVALID for an empty range.
 * Callers may add and remove from several threads (a spin lock serialises them); never from a
 * signal handler that may interrupt another add or remove on its thread. */
#define MT_CFI_MAX_MODULES 1024
int mt_cfi_add_module(const mt_cfi_module *module);

/* Unregisters the module whose text starts at text_lo, and forgets the rules cached for it. */
void mt_cfi_remove_module(uintptr_t text_lo);

/* Frames whose PC is in [lo, hi) are left out wherever they are (after `skip`): the shim's own
 * text, so that a record starts at the program's call and a thread's start trampoline in the shim
 * does not show. 0, 0 leaves none out. */
void mt_cfi_set_skip_range(uintptr_t lo, uintptr_t hi);

/* Why a walk stopped (flags out of mt_cfi_unwind). No flag: it reached the outermost frame (an
 * undefined return address, as _start and a thread's clone say, or a return address of 0). */
enum {
  MT_CFI_STOP_TRUNCATED = 1u << 0,     /* max frames stored and the stack goes on */
  MT_CFI_STOP_UNEXPRESSIBLE = 1u << 1, /* CFI the rules cannot express: fall back */
  MT_CFI_STOP_NO_INFO = 1u << 2,       /* a PC in no module, or with no FDE */
  MT_CFI_STOP_BAD_STACK = 1u << 3,     /* a read would leave the bounds, or sp did not grow */
  MT_CFI_PASSED_SIGNAL = 1u << 4,      /* not a stop: the walk went through a signal frame */
  MT_CFI_MEMO_HIT = 1u << 5,           /* not a stop: mt_cfi_unwind_memo reused its memo */
  MT_CFI_STOP_INCOMPLETE = MT_CFI_STOP_UNEXPRESSIBLE | MT_CFI_STOP_NO_INFO | MT_CFI_STOP_BAD_STACK,
};

/* Walks the calling thread's stack. Stores up to max return addresses in pcs, innermost first:
 * pcs[0] is the return address into mt_cfi_unwind's caller (a PC in the caller's own function),
 * after dropping `skip` frames, without frames in the skip range. After a signal frame the
 * interrupted PC is stored as is (it is not a return address). Stack reads stay in [max(stack_lo,
 * current sp), stack_hi): stack_hi is the top of the thread's stack (exclusive). Returns the count;
 * *flags (may be NULL) gets MT_CFI_STOP_* and MT_CFI_PASSED_SIGNAL bits. Async-signal-safe. */
size_t mt_cfi_unwind(uint64_t *pcs, size_t max, unsigned skip, uintptr_t stack_lo,
                     uintptr_t stack_hi, unsigned *flags);

/* The same walk from given registers, e.g. a signal handler's ucontext. exact_pc: pc is the
 * exact PC of an interrupted instruction (looked up as is, and stored as pcs[0] when not
 * skipped), not a return address. */
typedef struct mt_cfi_regs {
  uintptr_t pc, sp, bp;
} mt_cfi_regs;
size_t mt_cfi_unwind_from(const mt_cfi_regs *regs, int exact_pc, uint64_t *pcs, size_t max,
                          unsigned skip, uintptr_t stack_lo, uintptr_t stack_hi, unsigned *flags);

/* A thread's memo of its previous walk, for mt_cfi_unwind_memo. The caller owns it (the shim
 * keeps one in each thread's state, zeroed: a zeroed memo is empty) and never shares it between
 * threads. About 18 KiB. */
#define MT_CFI_MEMO_HEAD 64
#define MT_CFI_MEMO_FRAMES (MT_CFI_MEMO_HEAD + 320)
typedef struct mt_cfi_memo_frame {
  uintptr_t pc, sp, bp, bp_from; /* a frame's registers, and where bp was read from (or 0) */
  uintptr_t needs_bp;            /* the rest of the walk depends on this frame's bp */
} mt_cfi_memo_frame;
#define MT_CFI_REPEAT_FRAMES 32
/* How many recent walks are kept as repeats: eight, so that a program allocating from a handful
 * of sites in turn (a tree node and its payload; C++ containers' strings, nodes and vectors;
 * sqlite3's paths through its allocation wrappers) repeats them all rather than walking again at
 * every switch. With two, 67% of the bench's C++ program's walks and 88% of sqlite3's were not
 * repeats; with eight, under 0.2%. A power of two. */
#define MT_CFI_REPEATS 8
/* The exact repeat of a recent walk (a shallow one): a walk that starts with the same registers
 * and arguments gives `pcs` if every word in `check` still holds its value. A function of those
 * words alone, so it stays valid whatever the memo's frames become. n 0: none. */
typedef struct mt_cfi_repeat_entry {
  uintptr_t pc, sp, bp, lo, hi;
  uint64_t shape; /* mt_cfi_repeat_shape(drop, max) */
  unsigned generation, n, checks;
  int needs_bp;
  uint64_t pcs[MT_CFI_REPEAT_FRAMES];
  struct {
    uintptr_t at, value;
  } check[2 * MT_CFI_REPEAT_FRAMES + 1];
} mt_cfi_repeat_entry;
typedef struct mt_cfi_memo {
  volatile int busy; /* a walk is using it: a signal handler's walk goes without */
  unsigned generation;
  uintptr_t hi, zero_at;
  uint32_t start, end; /* frames[start, end), outermost last */
  mt_cfi_memo_frame frames[MT_CFI_MEMO_FRAMES];
  mt_cfi_memo_frame scratch[MT_CFI_MEMO_HEAD];
  mt_cfi_repeat_entry repeat[MT_CFI_REPEATS];
  unsigned repeat_next; /* the entry the next kept walk replaces (the oldest kept) */
  unsigned repeat_last; /* the entry that repeated or was kept last: tried first */
} mt_cfi_memo;
_Static_assert((MT_CFI_REPEATS & (MT_CFI_REPEATS - 1)) == 0, "MT_CFI_REPEATS: a power of two");

/* The module table's, the rule cache's and the skip range's generation (unwind_cfi.c). */
extern _Atomic unsigned mt_cfi_generation;

/* A repeat's drop and max in one word. */
static inline uint64_t mt_cfi_repeat_shape(unsigned drop, size_t max) {
  return (uint64_t)max << 32 | drop;
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MT_CFI_ASAN 1
#endif
#endif

/* A word of this thread's stack in [sp, hi), in another function's frame: a plain load that no
 * sanitizer instruments (under ASan, an older repeat's words may lie in a live frame's redzone:
 * readable memory, only poisoned). */
__attribute__((always_inline)) static inline uint64_t mt_cfi_stack_word(uintptr_t at) {
  uint64_t v;
#if defined(__SANITIZE_ADDRESS__) || defined(MT_CFI_ASAN)
  __asm__("movq (%1), %0" : "=r"(v) : "r"(at) : "memory");
#else
  __builtin_memcpy(&v, (const void *)at, sizeof v);
#endif
  return v;
}

/* Whether entry `e` holds the walk from these registers and arguments, as far as they go (its
 * stack words are checked by mt_cfi_repeat). */
__attribute__((always_inline)) static inline bool
mt_cfi_repeat_starts(const mt_cfi_repeat_entry *e, uintptr_t pc, uintptr_t sp, uintptr_t bp,
                     uint64_t shape, uintptr_t lo, uintptr_t hi, unsigned generation) {
  return e->n && e->pc == pc && e->sp == sp && (!e->needs_bp || e->bp == bp) && e->lo == lo &&
         e->hi == hi && e->shape == shape && e->generation == generation;
}

/* The walk mt_cfi_unwind_memo_from would do, if it is the exact repeat of one of the memo's recent
 * ones (the same start registers, bounds and arguments, the same generation, and every stack word
 * that walk read still holding its value): its count, the pcs stored, else 0 (then the caller
 * walks). Inline, so that the usual call (a program allocating from a loop) costs no more than
 * these comparisons and the copy. A repeat's walk reached the outermost frame with every rule
 * known. */
__attribute__((always_inline, no_sanitize("address"))) static inline size_t
mt_cfi_repeat(mt_cfi_memo *m, uintptr_t pc, uintptr_t sp, uintptr_t bp, unsigned drop,
              uint64_t *pcs, size_t max, uintptr_t lo, uintptr_t hi) {
  if (sp > lo)
    lo = sp;
  if (m->busy)
    return 0;
  uint64_t shape = mt_cfi_repeat_shape(drop, max);
  unsigned generation = atomic_load_explicit(&mt_cfi_generation, memory_order_acquire);
  size_t n = 0;
  m->busy = 1; /* a signal handler's walk meanwhile goes without the memo */
  atomic_signal_fence(memory_order_seq_cst);
  /* The last one first: a loop allocating from one site repeats it at the first try. */
  for (unsigned r = 0, i = m->repeat_last; r < MT_CFI_REPEATS && !n;
       r++, i = (i + 1) & (MT_CFI_REPEATS - 1)) {
    const mt_cfi_repeat_entry *e = &m->repeat[i];
    if (!mt_cfi_repeat_starts(e, pc, sp, bp, shape, lo, hi, generation))
      continue;
    /* Walks from one place at one depth (an interposed function's frame) differ first in their
     * caller's return address, the first word checked: tried alone before the rest. */
    if (e->checks && mt_cfi_stack_word(e->check[0].at) != e->check[0].value)
      continue;
    uint64_t differ = 0;
    for (unsigned k = 1; k < e->checks; k++)
      differ |= mt_cfi_stack_word(e->check[k].at) ^ e->check[k].value;
    if (!differ) {
      n = e->n;
      for (size_t k = 0; k < n; k++)
        pcs[k] = e->pcs[k];
      m->repeat_last = i;
    }
  }
  atomic_signal_fence(memory_order_seq_cst);
  m->busy = 0;
  return n;
}

/* mt_cfi_unwind, same arguments and results, faster on a stack that shares its outer part with
 * the thread's previous walk (the usual case: a program calling malloc from a loop): once the walk
 * reaches a frame of the memo (same pc and sp, and rbp if the rest depends on it), it re-reads the
 * words the previous walk read from there on, at their known addresses, and if every one still
 * holds its value the rest of the walk is the memo's (MT_CFI_MEMO_HIT). Exact, not a guess: the
 * walk is a function of those words. Walks through signal frames, truncated or incomplete ones are
 * not memoised. A walk from a signal handler that interrupted one on the same memo goes without it.
 */
size_t mt_cfi_unwind_memo(mt_cfi_memo *memo, uint64_t *pcs, size_t max, unsigned skip,
                          uintptr_t stack_lo, uintptr_t stack_hi, unsigned *flags);

/* mt_cfi_unwind_memo from given registers (regs->pc an exact PC, as mt_cfi_unwind_from with
 * exact_pc), e.g. captured with MT_CFI_HERE by a caller further out on the same stack: the frames
 * between it and the walk are then not walked at all. The registers must belong to a frame that is
 * still live. */
size_t mt_cfi_unwind_memo_from(mt_cfi_memo *memo, const mt_cfi_regs *regs, uint64_t *pcs,
                               size_t max, unsigned skip, uintptr_t stack_lo, uintptr_t stack_hi,
                               unsigned *flags);

/* Stores the current PC (exact), rsp and rbp in *(r): a starting point for mt_cfi_unwind_from or
 * mt_cfi_unwind_memo_from that is valid as long as the function that took it has not returned. */
#define MT_CFI_HERE(r)                                                                             \
  __asm__ volatile("leaq 0(%%rip), %0\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2"                         \
                   : "=r"((r)->pc), "=r"((r)->sp), "=r"((r)->bp))

/* Forgets every cached rule (tests, and a consumer that wants cold-cache numbers). */
void mt_cfi_cache_clear(void);

#endif
