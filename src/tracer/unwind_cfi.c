/* unwind_cfi: the module table, the per-PC rule cache and the stack walk of the shim's fast
 * unwinder (unwind_cfi.h). Only the walk and the cache are on the hot path; a cache miss looks the
 * PC up in the module table and asks eh_frame.c for its rule, still without lock or allocation. */
#include "tracer/unwind_cfi.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <ucontext.h>

#include "tracer/eh_frame.h"

/* ---- module table -------------------------------------------------------------------------
 * Slots are written under a sequence counter (odd while a writer is inside); fields are atomics
 * so that a reader racing a writer reads old or new words, and retries when the counter moved. */

typedef struct slot {
  _Atomic unsigned seq;
  _Atomic uintptr_t text_lo, text_hi, eh_frame_hdr, eh_lo, eh_hi;
} slot;

static slot slots[MT_CFI_MAX_MODULES];
static _Atomic unsigned slots_used; /* high-water mark */
static atomic_flag writer_lock = ATOMIC_FLAG_INIT;
static _Atomic uintptr_t skip_lo, skip_hi;
/* Bumped by every change of the table, the cache or the skip range: a memo made before is stale
 * (unwind_cfi.h: mt_cfi_repeat reads it). */
_Atomic unsigned mt_cfi_generation;

#define RELAXED memory_order_relaxed
#define ACQUIRE memory_order_acquire
#define RELEASE memory_order_release

/* ---- rule cache ----------------------------------------------------------------------------
 * One 64-bit word per entry, indexed by the low CACHE_BITS of the lookup PC:
 *   bits 0-2 kind (0: empty), 3-8 rbp_slot (signed), 9-30 cfa_offset, 31-63 PC >> CACHE_BITS.
 * eh_frame.c keeps cfa_offset below 2^22 and rbp_slot in [-32, -2]. PCs of 2^48 and above (not
 * user space on x86-64) are never cached. */
#define CACHE_BITS 15
#define CACHE_SIZE (1u << CACHE_BITS)
#define TAG_SHIFT 31
static _Atomic uint64_t cache[CACHE_SIZE];
static _Atomic bool cache_used; /* an entry may have been stored since the last clear */

static uint64_t pack(mt_eh_rule r, uintptr_t key) {
  return (uint64_t)r.kind | (uint64_t)((uint8_t)r.rbp_slot & 0x3f) << 3 |
         (uint64_t)((uint32_t)r.cfa_offset & 0x3fffff) << 9 |
         (uint64_t)(key >> CACHE_BITS) << TAG_SHIFT;
}

static void lock_writers(void) {
  while (atomic_flag_test_and_set_explicit(&writer_lock, ACQUIRE))
    __builtin_ia32_pause();
}

static void unlock_writers(void) {
  atomic_flag_clear_explicit(&writer_lock, RELEASE);
}

/* Clears cached rules for lookup PCs in [lo - 1, hi) (a return address just past the end of a
 * module is looked up one byte lower). */
static void cache_forget(uintptr_t lo, uintptr_t hi) {
  /* Nothing cached since the last clear (the start-up scan adds every module before any walk):
   * nothing to forget. A miss marks the cache before it looks the module table up, and this
   * runs after the table changed, so a miss this skips saw the change. */
  if (!atomic_load_explicit(&cache_used, memory_order_seq_cst))
    return;
  for (uint32_t i = 0; i < CACHE_SIZE; i++) {
    uint64_t e = atomic_load_explicit(&cache[i], RELAXED);
    uintptr_t key = (uintptr_t)(e >> TAG_SHIFT) << CACHE_BITS | i;
    if (e && key + 1 >= lo && key < hi)
      atomic_compare_exchange_strong_explicit(&cache[i], &e, 0, RELAXED, RELAXED);
  }
}

void mt_cfi_cache_clear(void) {
  atomic_fetch_add_explicit(&mt_cfi_generation, 1, RELEASE);
  atomic_store_explicit(&cache_used, false, memory_order_seq_cst);
  for (uint32_t i = 0; i < CACHE_SIZE; i++)
    atomic_store_explicit(&cache[i], 0, RELAXED);
}

static void slot_write(slot *s, const mt_cfi_module *m) {
  unsigned seq = atomic_load_explicit(&s->seq, RELAXED);
  atomic_store_explicit(&s->seq, seq + 1, RELAXED);
  /* Release stores: a reader that sees any new field also sees the odd counter. */
  atomic_store_explicit(&s->text_lo, m->text_lo, RELEASE);
  atomic_store_explicit(&s->text_hi, m->text_hi, RELEASE);
  atomic_store_explicit(&s->eh_frame_hdr, m->eh_frame_hdr, RELEASE);
  atomic_store_explicit(&s->eh_lo, m->eh_lo, RELEASE);
  atomic_store_explicit(&s->eh_hi, m->eh_hi, RELEASE);
  atomic_store_explicit(&s->seq, seq + 2, RELEASE);
}

int mt_cfi_add_module(const mt_cfi_module *m) {
  if (m->text_lo >= m->text_hi)
    return MT_E_INVALID;
  lock_writers();
  /* The slot of the same module added again (start-up scan and a dlopen hook may both see it),
   * else the first free one. */
  unsigned used = atomic_load_explicit(&slots_used, RELAXED), i, free_slot = used;
  for (i = 0; i < used; i++) {
    uintptr_t hi = atomic_load_explicit(&slots[i].text_hi, RELAXED);
    if (hi && atomic_load_explicit(&slots[i].text_lo, RELAXED) == m->text_lo)
      break;
    if (!hi && free_slot == used)
      free_slot = i;
  }
  if (i == used)
    i = free_slot;
  if (i == MT_CFI_MAX_MODULES) {
    unlock_writers();
    return MT_E_NOMEM;
  }
  slot_write(&slots[i], m);
  if (i == used)
    atomic_store_explicit(&slots_used, used + 1, RELEASE);
  atomic_fetch_add_explicit(&mt_cfi_generation, 1, RELEASE);
  unlock_writers();
  cache_forget(m->text_lo, m->text_hi); /* "no module here" entries made before it came */
  return MT_OK;
}

void mt_cfi_remove_module(uintptr_t text_lo) {
  lock_writers();
  unsigned used = atomic_load_explicit(&slots_used, RELAXED);
  for (unsigned i = 0; i < used; i++) {
    if (atomic_load_explicit(&slots[i].text_hi, RELAXED) == 0 ||
        atomic_load_explicit(&slots[i].text_lo, RELAXED) != text_lo)
      continue;
    uintptr_t hi = atomic_load_explicit(&slots[i].text_hi, RELAXED);
    slot_write(&slots[i], &(mt_cfi_module){0});
    atomic_fetch_add_explicit(&mt_cfi_generation, 1, RELEASE);
    unlock_writers();
    cache_forget(text_lo, hi);
    return;
  }
  unlock_writers();
}

void mt_cfi_set_skip_range(uintptr_t lo, uintptr_t hi) {
  atomic_store_explicit(&skip_lo, lo, RELAXED);
  atomic_store_explicit(&skip_hi, hi, RELAXED);
  atomic_fetch_add_explicit(&mt_cfi_generation, 1, RELEASE); /* repeats kept the old range's pcs */
}

int mt_cfi_module_from_phdr(const struct dl_phdr_info *info, mt_cfi_module *out) {
  *out = (mt_cfi_module){.load_bias = info->dlpi_addr};
  uintptr_t hdr_vaddr = 0;
  for (size_t i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
      hdr_vaddr = info->dlpi_phdr[i].p_vaddr;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (ph->p_flags & PF_X) {
      if (!out->text_hi || lo < out->text_lo)
        out->text_lo = lo;
      if (hi > out->text_hi)
        out->text_hi = hi;
    }
    /* The tables' segment: file-backed bytes only (p_filesz), all of them readable. */
    if (hdr_vaddr && (ph->p_flags & PF_R) && hdr_vaddr >= ph->p_vaddr &&
        hdr_vaddr < ph->p_vaddr + ph->p_filesz) {
      out->eh_frame_hdr = info->dlpi_addr + hdr_vaddr;
      out->eh_lo = lo;
      out->eh_hi = lo + ph->p_filesz;
    }
  }
  return out->text_hi ? MT_OK : MT_E_INVALID;
}

/* The tables of the module holding pc. Returns 1 found, 0 none, -1 a writer kept the slot busy
 * (possibly this very thread, interrupted by the signal we run in): the caller must not cache. */
static int find_module(uintptr_t pc, mt_eh_tables *t) {
  unsigned used = atomic_load_explicit(&slots_used, ACQUIRE);
  int busy = 0;
  for (unsigned i = 0; i < used; i++) {
    slot *s = &slots[i];
    for (int tries = 0;; tries++) {
      unsigned seq = atomic_load_explicit(&s->seq, ACQUIRE);
      uintptr_t lo = atomic_load_explicit(&s->text_lo, ACQUIRE);
      uintptr_t hi = atomic_load_explicit(&s->text_hi, ACQUIRE);
      t->eh_frame_hdr = atomic_load_explicit(&s->eh_frame_hdr, ACQUIRE);
      t->lo = atomic_load_explicit(&s->eh_lo, ACQUIRE);
      t->hi = atomic_load_explicit(&s->eh_hi, ACQUIRE);
      if (!(seq & 1) && seq == atomic_load_explicit(&s->seq, ACQUIRE)) {
        if (pc >= lo && pc < hi)
          return 1;
        break;
      }
      if (tries == 100) {
        busy = 1;
        break;
      }
      __builtin_ia32_pause();
    }
  }
  return busy ? -1 : 0;
}

/* Out of line: keeps the walk's hot loop small enough to stay in registers. */
__attribute__((noinline, cold)) static mt_eh_rule rule_miss(uintptr_t key,
                                                            _Atomic uint64_t *entry) {
  mt_eh_tables t;
  if (!atomic_load_explicit(&cache_used, RELAXED))
    atomic_store_explicit(&cache_used, true, memory_order_seq_cst); /* before the lookup */
  int found = find_module(key, &t);
  mt_eh_rule r = {.kind = MT_EH_NO_MODULE};
  if (found < 0)
    return (mt_eh_rule){.kind = MT_EH_UNEXPRESSIBLE};
  if (found)
    r = mt_eh_rule_at(&t, key);
  if (key >> 48 == 0)
    atomic_store_explicit(entry, pack(r, key), RELAXED);
  return r;
}

/* ---- the walk ---------------------------------------------------------------------------- */

/* Stack reads are of other functions' frames: exempt from AddressSanitizer's redzone checks. */
__attribute__((no_sanitize("address"))) static inline uint64_t load_word(uintptr_t at) {
  uint64_t v;
  __builtin_memcpy(&v, (const void *)at, sizeof v);
  return v;
}

/* A signal trampoline's frame: r->sp is the ucontext the kernel pushed (the handler's return
 * into the trampoline popped the return address), the interrupted registers are in its gregs. */
__attribute__((no_sanitize("address"))) static bool step_signal(mt_cfi_regs *r, uintptr_t lo,
                                                                uintptr_t hi) {
  uintptr_t gregs = r->sp + offsetof(ucontext_t, uc_mcontext.gregs);
  uintptr_t end = gregs + 8 * (REG_RIP + 1);
  if (r->sp < lo || end > hi || end < gregs)
    return false;
  mt_cfi_regs next = {load_word(gregs + 8 * REG_RIP), load_word(gregs + 8 * REG_RSP),
                      load_word(gregs + 8 * REG_RBP)};
  if (next.sp <= r->sp || next.sp > hi)
    return false;
  *r = next;
  return true;
}

enum step_result { STEP_FRAME, STEP_SIGNAL, STEP_END };

/* One frame up. A cache entry holds the frame's whole rule in one word: the common case (CFA from
 * rsp or rbp, a hit) is a load of the entry, a tag compare, an add and the load of the return
 * address; everything else goes through rule_miss or the switch. *bp_from gets the address the
 * caller's rbp was read from (0: unchanged), *used_bp whether the CFA came from rbp. At STEP_END
 * *flags says why, if not the end of the stack. */
__attribute__((always_inline, no_sanitize("address"))) static inline enum step_result
step(uintptr_t *pc, uintptr_t *sp, uintptr_t *bp, bool *exact, uintptr_t lo, uintptr_t hi,
     unsigned *flags, uintptr_t *bp_from, bool *used_bp) {
  uintptr_t key = *pc - !*exact;
  _Atomic uint64_t *entry = &cache[key & (CACHE_SIZE - 1)];
  uint64_t e = atomic_load_explicit(entry, RELAXED);
  /* Hit: the tag (bits 31-63) is key >> CACHE_BITS, i.e. key << (TAG_SHIFT - CACHE_BITS). */
  if (((e ^ ((uint64_t)key << (TAG_SHIFT - CACHE_BITS))) >> TAG_SHIFT) != 0 || !(e & 7) ||
      key >> 48)
    e = pack(rule_miss(key, entry), key);
  uint64_t kind = e & 7;
  if (__builtin_expect(kind > MT_EH_CFA_RBP, 0)) {
    switch (kind) {
    case MT_EH_SIGNAL: {
      /* A copy: the registers must not escape, or the hot loop keeps them in memory. */
      mt_cfi_regs next = {*pc, *sp, *bp};
      if (!step_signal(&next, lo, hi)) {
        *flags |= MT_CFI_STOP_BAD_STACK;
        return STEP_END;
      }
      *pc = next.pc, *sp = next.sp, *bp = next.bp;
      *flags |= MT_CFI_PASSED_SIGNAL;
      *exact = true; /* the interrupted PC is not a return address */
      return *pc ? STEP_SIGNAL : STEP_END;
    }
    case MT_EH_OUTERMOST: return STEP_END;
    case MT_EH_NO_FDE:
    case MT_EH_NO_MODULE: *flags |= MT_CFI_STOP_NO_INFO; return STEP_END;
    default: *flags |= MT_CFI_STOP_UNEXPRESSIBLE; return STEP_END;
    }
  }
  *used_bp = kind == MT_EH_CFA_RBP;
  uintptr_t cfa = (kind == MT_EH_CFA_RSP ? *sp : *bp) + ((e >> 9) & 0x3fffff);
  /* The return address at cfa - 8 and the walk only moving up: cfa in [sp + 8, hi]. */
  if (cfa < *sp + 8 || cfa > hi) {
    *flags |= MT_CFI_STOP_BAD_STACK;
    return STEP_END;
  }
  int rbp_slot = (int8_t)((int8_t)(e >> 1) >> 2); /* bits 3-8, sign-extended */
  *bp_from = 0;
  if (rbp_slot) {
    uintptr_t at = cfa + (uintptr_t)(intptr_t)(8 * rbp_slot);
    if (at < lo) {
      *flags |= MT_CFI_STOP_BAD_STACK;
      return STEP_END;
    }
    *bp = load_word(at);
    *bp_from = at;
  }
  uintptr_t ra = load_word(cfa - 8);
  /* Both stay in general registers: GCC would otherwise pair them in a vector register, adding
   * moves to the loop's one dependency chain. */
  __asm__("" : "+r"(ra), "+r"(cfa));
  *pc = ra;
  *sp = cfa;
  *exact = false;
  return ra ? STEP_FRAME : STEP_END;
}

/* Where walked frames go: `drop` frames first; frames in the skip range (the shim's own, wherever
 * they are: a thread's start trampoline is outermost) are left out; then up to max stored. */
typedef struct emitter {
  unsigned drop;
  uintptr_t range_lo, range_span;
  uint64_t *pcs;
  size_t max, n;
} emitter;

static emitter emitter_make(unsigned drop, uint64_t *pcs, size_t max) {
  emitter em = {.drop = drop, .pcs = pcs, .max = max};
  em.range_lo = atomic_load_explicit(&skip_lo, RELAXED);
  uintptr_t hi = atomic_load_explicit(&skip_hi, RELAXED);
  em.range_span = hi > em.range_lo ? hi - em.range_lo : 0;
  return em;
}

/* Takes one frame; false when pcs is full (the frame is not stored). */
__attribute__((always_inline)) static inline bool emit(emitter *em, uintptr_t pc) {
  if (em->drop) {
    em->drop--;
  } else if (pc - em->range_lo >= em->range_span) {
    if (em->n == em->max)
      return false;
    em->pcs[em->n++] = pc;
  }
  return true;
}

/* Registers as three scalars, not a struct: GCC would carry a struct's pair in a vector register
 * through the loop. */
static size_t walk(uintptr_t pc, uintptr_t sp, uintptr_t bp, bool exact, unsigned drop,
                   uint64_t *pcs, size_t max, uintptr_t lo, uintptr_t hi, unsigned *flags_out) {
  emitter em = emitter_make(drop, pcs, max);
  unsigned flags = 0;
  uintptr_t bp_from;
  bool used_bp;
  if (sp > lo)
    lo = sp;
  for (;;) {
    if (!emit(&em, pc)) {
      flags |= MT_CFI_STOP_TRUNCATED;
      break;
    }
    if (step(&pc, &sp, &bp, &exact, lo, hi, &flags, &bp_from, &used_bp) == STEP_END)
      break;
  }
  if (flags_out)
    *flags_out = flags;
  return em.n;
}

size_t mt_cfi_unwind_from(const mt_cfi_regs *regs, int exact_pc, uint64_t *pcs, size_t max,
                          unsigned skip, uintptr_t stack_lo, uintptr_t stack_hi, unsigned *flags) {
  return walk(regs->pc, regs->sp, regs->bp, exact_pc != 0, skip, pcs, max, stack_lo, stack_hi,
              flags);
}

__attribute__((noinline)) size_t mt_cfi_unwind(uint64_t *pcs, size_t max, unsigned skip,
                                               uintptr_t stack_lo, uintptr_t stack_hi,
                                               unsigned *flags) {
  uintptr_t pc, sp, bp;
  /* The walk starts here: this PC, with the CFI row of this very point of this function. */
  __asm__ volatile("leaq 0(%%rip), %0\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2"
                   : "=r"(pc), "=r"(sp), "=r"(bp));
  return walk(pc, sp, bp, true, skip + 1, pcs, max, stack_lo, stack_hi, flags);
}

/* ---- the memo: re-checking the previous walk instead of redoing it -------------------------
 * A walk is a function of its start registers, the rules (fixed while the module table's
 * generation is) and the stack words it reads. So once this walk reaches a frame with the pc, sp
 * and rbp of a frame of the memo, the rest is the memo's rest if every word the memo's walk read
 * from there on still holds the value it read: those reads go to known addresses, independent
 * of each other, instead of a chain of dependent loads and lookups. */

typedef mt_cfi_memo_frame memo_frame;

/* Failed re-checks allowed per walk (each reads the rest of the memo): bounds a walk's cost. */
#define MEMO_TRIES 4

/* Whether all remaining reads of the memo's walk after frame j give what they gave: 0 if they
 * do, else the outermost frame whose reads differ (a match at a frame below it cannot hold). */
__attribute__((no_sanitize("address"))) static uint32_t memo_differs(const mt_cfi_memo *m,
                                                                     uint32_t j, uintptr_t lo) {
  uint32_t bad = 0;
  for (uint32_t k = j + 1; k < m->end; k++) {
    const memo_frame *f = &m->frames[k];
    uint64_t differ = load_word(f->sp - 8) ^ f->pc;
    if (f->bp_from && f->needs_bp) /* a saved rbp that no rule uses may hold anything */
      differ |= (f->bp_from < lo) | (load_word(f->bp_from) ^ f->bp);
    bad = differ ? k : bad;
  }
  if (m->zero_at && (m->zero_at < lo || load_word(m->zero_at)))
    bad = m->end;
  return bad;
}

/* Where frame i of this walk is recorded: the scratch prefix while a match may come, then (past
 * MT_CFI_MEMO_HEAD frames) straight into the new memo. NULL when the walk is too deep to keep. */
static memo_frame *memo_put(mt_cfi_memo *m, size_t i, memo_frame f, bool *fresh, bool *keep) {
  if (i < MT_CFI_MEMO_HEAD)
    return (m->scratch[i] = f, &m->scratch[i]);
  if (i == MT_CFI_MEMO_HEAD) { /* no match near the top: this walk becomes the memo */
    __builtin_memcpy(&m->frames[MT_CFI_MEMO_HEAD], m->scratch, sizeof m->scratch);
    *fresh = true;
  }
  if (MT_CFI_MEMO_HEAD + i < MT_CFI_MEMO_FRAMES)
    return (m->frames[MT_CFI_MEMO_HEAD + i] = f, &m->frames[MT_CFI_MEMO_HEAD + i]);
  *keep = false;
  return NULL;
}

/* needs_bp of frames [from, to) (to > from), walking outwards in: whether the rest of the walk
 * from a frame depends on its rbp (its CFA comes from rbp, or its caller's unchanged rbp is
 * needed further out). Frames whose rbp does not matter match on pc and sp alone: code without
 * frame pointers uses rbp as any other register. */
static void memo_mark_bp(mt_cfi_memo *m, uint32_t from, uint32_t to) {
  for (uint32_t k = to; k-- > from;) {
    memo_frame *f = &m->frames[k];
    bool outer = k + 1 < m->end && !m->frames[k + 1].bp_from && m->frames[k + 1].needs_bp;
    f->needs_bp = f->needs_bp /* its own rule, recorded by the walk */ || outer;
  }
}

/* After a walk that left a valid memo of frames[start, end) and stored `n` pcs: the repeat
 * check, when the walk is shallow enough to keep, in place of the older of the recent ones (the
 * newer one stays: it is a function of its own stack words, whatever the memo became). */
static void repeat_keep(mt_cfi_memo *m, const emitter *em, uintptr_t lo, unsigned drop) {
  uint32_t frames = m->end - m->start;
  mt_cfi_repeat_entry *e = &m->repeat[m->repeat_next];
  e->n = 0;
  if (em->n == 0 || em->n > MT_CFI_REPEAT_FRAMES || frames > MT_CFI_REPEAT_FRAMES)
    return;
  const memo_frame *first = &m->frames[m->start];
  unsigned c = 0;
  for (uint32_t k = m->start + 1; k < m->end; k++) {
    const memo_frame *f = &m->frames[k];
    e->check[c].at = f->sp - 8;
    e->check[c++].value = f->pc;
    if (f->bp_from && f->needs_bp) {
      if (f->bp_from < lo)
        return;
      e->check[c].at = f->bp_from;
      e->check[c++].value = f->bp;
    }
  }
  if (m->zero_at) {
    if (m->zero_at < lo)
      return;
    e->check[c].at = m->zero_at;
    e->check[c++].value = 0;
  }
  e->pc = first->pc;
  e->sp = first->sp;
  e->bp = first->bp;
  e->needs_bp = first->needs_bp != 0;
  e->lo = lo;
  e->hi = m->hi;
  e->shape = mt_cfi_repeat_shape(drop, em->max);
  e->generation = m->generation;
  e->checks = c;
  __builtin_memcpy(e->pcs, em->pcs, em->n * sizeof em->pcs[0]);
  e->n = (unsigned)em->n;
  m->repeat_last = m->repeat_next;
  m->repeat_next = (m->repeat_next + 1) % MT_CFI_REPEATS;
}

static size_t walk_memo(mt_cfi_memo *m, uintptr_t pc, uintptr_t sp, uintptr_t bp, unsigned drop,
                        uint64_t *pcs, size_t max, uintptr_t lo, uintptr_t hi,
                        unsigned *flags_out) {
  /* The generation before the skip range (emitter_make): a new range is seen with its new
   * generation, so a memo never keeps pcs of an old range under a new generation. */
  unsigned flags = 0, gen = atomic_load_explicit(&mt_cfi_generation, ACQUIRE);
  emitter em = emitter_make(drop, pcs, max);
  if (sp > lo)
    lo = sp;
  if (m->busy) /* a signal handler interrupted a walk of this thread: walk without the memo */
    return walk(pc, sp, bp, true, drop, pcs, max, lo, hi, flags_out);
  m->busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  bool use = m->generation == gen && m->hi == hi && m->start < m->end;
  bool keep = true, fresh = false, exact = true;
  uint32_t j = m->start, floor = 0, tries = 0;
  uintptr_t bp_from = 0;
  size_t i = 0;
  for (;; i++) {
    if (!emit(&em, pc)) {
      flags |= MT_CFI_STOP_TRUNCATED;
      keep = false;
      break;
    }
    if (use) {
      while (j < m->end && m->frames[j].sp < sp)
        j++;
      if (j < m->end && j >= floor && m->frames[j].sp == sp && m->frames[j].pc == pc &&
          (!m->frames[j].needs_bp || m->frames[j].bp == bp)) {
        uint32_t bad = j >= i ? memo_differs(m, j, lo) : m->end;
        if (!bad) {
          __builtin_memcpy(&m->frames[j - i], m->scratch, i * sizeof m->scratch[0]);
          m->frames[j].bp = bp;
          m->frames[j].bp_from = bp_from;
          m->start = (uint32_t)(j - i);
          if (i)
            memo_mark_bp(m, m->start, (uint32_t)j);
          size_t k = j + 1;
          while (k < m->end && emit(&em, m->frames[k].pc))
            k++;
          flags |= MT_CFI_MEMO_HIT | (k < m->end ? MT_CFI_STOP_TRUNCATED : 0);
          if (k == m->end)
            repeat_keep(m, &em, lo, drop);
          goto done;
        }
        floor = bad; /* a match further out may still hold */
        if (++tries == MEMO_TRIES)
          use = false;
      }
    }
    memo_frame *rec = memo_put(m, i, (memo_frame){pc, sp, bp, bp_from, 0}, &fresh, &keep);
    if (fresh)
      use = false;
    bool used_bp = false;
    enum step_result s = step(&pc, &sp, &bp, &exact, lo, hi, &flags, &bp_from, &used_bp);
    if (rec)
      rec->needs_bp = used_bp;
    if (s == STEP_SIGNAL)
      keep = false, use = false; /* frames past a signal frame are not kept */
    if (s == STEP_END)
      break;
  }
  /* A new memo from this walk: frames 0..i at MT_CFI_MEMO_HEAD, room before them for a later
   * walk that starts deeper. */
  if (keep && !(flags & (MT_CFI_STOP_INCOMPLETE | MT_CFI_PASSED_SIGNAL))) {
    size_t n = i + 1;
    if (!fresh)
      __builtin_memcpy(&m->frames[MT_CFI_MEMO_HEAD], m->scratch, n * sizeof m->scratch[0]);
    m->start = MT_CFI_MEMO_HEAD;
    m->end = (uint32_t)(MT_CFI_MEMO_HEAD + n);
    memo_mark_bp(m, m->start, m->end);
    m->zero_at = pc ? 0 : sp - 8; /* ended on a return address of 0, or on an outermost rule */
    m->generation = gen;
    m->hi = hi;
    repeat_keep(m, &em, lo, drop);
  } else {
    m->start = m->end = 0;
  }
done:
  atomic_signal_fence(memory_order_seq_cst);
  m->busy = 0;
  if (flags_out)
    *flags_out = flags;
  return em.n;
}

__attribute__((noinline)) size_t mt_cfi_unwind_memo(mt_cfi_memo *memo, uint64_t *pcs, size_t max,
                                                    unsigned skip, uintptr_t stack_lo,
                                                    uintptr_t stack_hi, unsigned *flags) {
  uintptr_t pc, sp, bp;
  __asm__ volatile("leaq 0(%%rip), %0\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2"
                   : "=r"(pc), "=r"(sp), "=r"(bp));
  size_t n = mt_cfi_repeat(memo, pc, sp, bp, skip + 1, pcs, max, stack_lo, stack_hi);
  if (n) {
    if (flags)
      *flags = MT_CFI_MEMO_HIT;
    return n;
  }
  return walk_memo(memo, pc, sp, bp, skip + 1, pcs, max, stack_lo, stack_hi, flags);
}

size_t mt_cfi_unwind_memo_from(mt_cfi_memo *memo, const mt_cfi_regs *regs, uint64_t *pcs,
                               size_t max, unsigned skip, uintptr_t stack_lo, uintptr_t stack_hi,
                               unsigned *flags) {
  size_t n = mt_cfi_repeat(memo, regs->pc, regs->sp, regs->bp, skip, pcs, max, stack_lo, stack_hi);
  if (n) {
    if (flags)
      *flags = MT_CFI_MEMO_HIT;
    return n;
  }
  return walk_memo(memo, regs->pc, regs->sp, regs->bp, skip, pcs, max, stack_lo, stack_hi, flags);
}
