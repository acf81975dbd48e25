/* The interposed malloc family (docs/tracer.md, "What is interposed"). Each function has a fast
 * path that touches only the thread's countdown (and, for free, one filter byte) before calling
 * the next allocator, and a slow path that resolves the next allocator, starts tracing, samples
 * and writes the record. Order (memtap/tracer.h): a FREE is written before the block goes back
 * to the allocator, an ALLOC after the allocator returned it. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

static size_t page_size(void) {
  static size_t cached;
  if (!cached)
    cached = (size_t)sysconf(_SC_PAGESIZE);
  return cached;
}

/* The block pvalloc(size) gives: whole pages, one at least (pvalloc checks the overflow first). */
static size_t pvalloc_block(size_t size) {
  size_t ps = page_size();
  size_t rounded = (size + ps - 1) & ~(ps - 1);
  return rounded ? rounded : ps;
}

/* prepare()'s answer when the bootstrap arena must serve the call. */
#define MT_USE_ARENA (-1)
/* prepare()'s answer for a call from inside the shim with full tracing: pass through, and
 * remember the block as the shim's (internal_block). */
#define MT_INTERNAL (-2)

/* ---------------------------------------------------------------------------------------------
 * The free gate: what free's fast path reads instead of the mode, the sampled set and the arena
 * bounds. `filter` is a table of 2^MT_GATE_BITS one-byte counters indexed like the sampled set's
 * filter (the pointer's 256-byte granule): zero means "hand the block straight to `next`", non-zero
 * sends free to free_slow. `next` is the next allocator's free, or free_full with full tracing,
 * or free_unresolved before the next allocator is known. Every table a gate may hold has the same
 * size, so a free that reads an old filter with a new `next` (or the reverse) while the mode
 * changes stays in bounds; the block it frees was allocated under one mode or the other.
 *   - off, and full tracing: the static `arena_gate`, which marks the bootstrap arena's blocks;
 *   - sampled: the sampled set's filter, into which the arena's blocks are inserted.
 * So a free that was not sampled costs one load of the gate, one of its byte, a predictable
 * branch and a tail call through `next`.
 * ------------------------------------------------------------------------------------------- */
#define MT_GATE_BITS 20
#define MT_GATE_MASK (((uintptr_t)1 << MT_GATE_BITS) - 1)

static void free_unresolved(void *p);
static void free_full(void *p);

static _Atomic uint8_t arena_gate[(size_t)1 << MT_GATE_BITS];
static _Alignas(64) struct {
  _Atomic(const _Atomic uint8_t *) filter;
  _Atomic(void (*)(void *)) next;
} gate = {arena_gate, free_unresolved};

static inline uintptr_t gate_bucket(const void *p) {
  return ((uintptr_t)p >> 8) & MT_GATE_MASK;
}

/* The bootstrap arena's blocks, for the sampled set of a later session (arena blocks are made only
 * while the next allocator is being resolved: a handful). */
#define MT_ARENA_BLOCKS 1024
static _Atomic(void *) arena_blocks[MT_ARENA_BLOCKS];
static _Atomic unsigned arena_count;

/* Marks an arena block in every gate: free must never hand it to the next allocator. */
static void *arena_block(void *p) {
  if (!p)
    return p;
  atomic_store_explicit(&arena_gate[gate_bucket(p)], 1, memory_order_relaxed);
  unsigned i = atomic_fetch_add(&arena_count, 1);
  if (i < MT_ARENA_BLOCKS)
    atomic_store(&arena_blocks[i], p);
  atomic_thread_fence(memory_order_seq_cst); /* against mt_shim_set_mode's publication */
  if (atomic_load(&gate.filter) == mt_shim.set.filter && mt_shim.set.filter)
    mt_sampled_set_insert(&mt_shim.set, p);
  return p;
}

/* The gate for `mode`; publishes it before the mode, so that a block allocated under the new mode
 * and freed by another thread meets the new gate. */
static void gate_set(int mode) {
  const _Atomic uint8_t *filter = arena_gate;
  void (*next)(void *) = mt_shim_real.free;
  if (atomic_load_explicit(&mt_shim.resolve, memory_order_acquire) != MT_RESOLVE_DONE || !next)
    next = free_unresolved;
  if (mode == MT_SHIM_FULL)
    next = free_full;
  bool sampled = mode == MT_SHIM_SAMPLED && mt_shim.set.filter;
  if (sampled && mt_shim.set.filter_mask == MT_GATE_MASK &&
      atomic_load(&arena_count) <= MT_ARENA_BLOCKS) {
    unsigned n = atomic_load(&arena_count);
    for (unsigned i = 0; i < n && i < MT_ARENA_BLOCKS; i++) {
      void *b = atomic_load(&arena_blocks[i]);
      if (b)
        mt_sampled_set_insert(&mt_shim.set, b);
    }
    filter = mt_shim.set.filter;
  } else if (sampled) {
    next = free_full; /* a set the gate cannot read: every free goes through the mode check */
  }
  atomic_store_explicit(&gate.next, next, memory_order_release);
  atomic_store_explicit(&gate.filter, filter, memory_order_release);
  atomic_thread_fence(memory_order_seq_cst);
  if (filter != arena_gate) { /* arena blocks made while the gate changed */
    unsigned n = atomic_load(&arena_count);
    for (unsigned i = 0; i < n && i < MT_ARENA_BLOCKS; i++) {
      void *b = atomic_load(&arena_blocks[i]);
      if (b)
        mt_sampled_set_insert(&mt_shim.set, b);
    }
  }
}

void mt_shim_set_mode(int mode) {
  gate_set(mode);
  atomic_store_explicit(&mt_shim.mode, mode, memory_order_release);
}

/* Sets the thread up to allocate: resolves, starts tracing if it has not started. Returns the
 * tracing mode (MT_SHIM_OFF: pass through; the countdown is then idle once start-up is over),
 * MT_USE_ARENA or MT_INTERNAL. */
static inline __attribute__((always_inline)) int prepare(mt_shim_thread *t) {
  if (MT_UNLIKELY(atomic_load_explicit(&mt_shim.resolve, memory_order_acquire) !=
                  MT_RESOLVE_DONE)) {
    mt_shim_resolve();
    if (atomic_load_explicit(&mt_shim.resolve, memory_order_acquire) != MT_RESOLVE_DONE)
      return MT_USE_ARENA;
  }
  if (MT_UNLIKELY(atomic_load_explicit(&gate.next, memory_order_relaxed) == free_unresolved)) {
    /* Resolved now: frees go straight to the next allocator, unless a mode change has put
     * something else there meanwhile. */
    void (*expected)(void *) = free_unresolved;
    atomic_compare_exchange_strong(&gate.next, &expected, mt_shim_real.free);
  }
  if (t->depth)
    return atomic_load_explicit(&mt_shim.mode, memory_order_acquire) == MT_SHIM_FULL ? MT_INTERNAL
                                                                                     : MT_SHIM_OFF;
  if (MT_UNLIKELY(atomic_load_explicit(&mt_shim.init, memory_order_acquire) != 2))
    mt_shim_init();
  int mode = atomic_load_explicit(&mt_shim.mode, memory_order_acquire);
  if (mode == MT_SHIM_OFF) {
    if (atomic_load_explicit(&mt_shim.init, memory_order_acquire) == 2)
      t->countdown = MT_SHIM_COUNTDOWN_IDLE;
    return MT_SHIM_OFF;
  }
  if (MT_UNLIKELY(!mt_shim_thread_current(t))) {
    t->depth++;
    mt_shim_thread_refresh(t);
    t->depth--;
  }
  return mode;
}

/* A block the shim's own code got (MT_INTERNAL): its free is not the program's. */
static void *internal_block(void *p) {
  if (p)
    mt_sampled_set_insert(&mt_shim.internal, p);
  return p;
}

/* Whether `p` is such a block; forgets it. */
static bool forget_internal(void *p) {
  return mt_sampled_set_maybe(&mt_shim.internal, p) && mt_sampled_set_remove(&mt_shim.internal, p);
}

/* How many sample points a new block of `size` bytes holds (0: not sampled), advancing the
 * thread's countdown. */
static inline __attribute__((always_inline)) uint64_t sample(mt_shim_thread *t, int mode,
                                                             size_t size) {
  if (mode == MT_SHIM_FULL) {
    t->countdown = 0; /* every allocation takes the slow path */
    return size ? (size + 7) / 8 : 1;
  }
  /* No allocation of 2^62 bytes or more can succeed on x86-64 (47-bit addresses): such a request
   * is not sampled and leaves the countdown alone. The countdown stays in [0, 2^63) (0 with full
   * tracing, a gap otherwise), which is what lets the fast paths compare it with an unsigned
   * size: a request of 2^63 bytes or more once turned the subtraction positive and silenced the
   * thread's tracing for good. */
  if (size >= (size_t)1 << 62)
    return 0;
  int64_t c = t->countdown - (int64_t)size;
  if (c > 0) {
    t->countdown = c;
    return 0;
  }
  uint64_t n = mt_sampler_count(&mt_shim.sampler, &t->rng, &c);
  t->countdown = c;
  return n;
}

/* After the next allocator returned `p`: remembers a sampled block for its free and writes the
 * ALLOC. */
static inline __attribute__((always_inline)) void allocated(const mt_cfi_regs *from, int mode,
                                                            void *p, size_t size, uint64_t nsamples,
                                                            unsigned kind) {
  if (!p || !nsamples)
    return;
  if (mode == MT_SHIM_FULL)
    forget_internal(p); /* a stale entry: that block went back without passing through free */
  if (mode == MT_SHIM_SAMPLED && !mt_sampled_set_insert(&mt_shim.set, p))
    return; /* no room to remember it: it counts as not sampled */
  mt_record_alloc_from(from, p, size, nsamples, kind);
}

/* ---------------------------------------------------------------------------------------------
 * malloc, calloc
 * ------------------------------------------------------------------------------------------- */

static __attribute__((noinline)) void *malloc_slow(mt_shim_thread *t, size_t size) {
  int mode = prepare(t);
  if (mode == MT_USE_ARENA)
    return arena_block(mt_bootstrap_alloc(size, 16));
  if (mode == MT_INTERNAL)
    return internal_block(mt_shim_real.malloc(size));
  if (mode == MT_SHIM_OFF)
    return mt_shim_real.malloc(size);
  uint64_t n = sample(t, mode, size);
  t->in_allocator++;
  void *p = mt_shim_real.malloc(size);
  t->in_allocator--;
  mt_cfi_regs here; /* the stack walk starts in this frame: the shim's deeper ones are not walked */
  MT_CFI_HERE(&here);
  allocated(&here, mode, p, size, n, MT_TRACER_KIND_MALLOC);
  return p;
}

MT_EXPORT void *malloc(size_t size) {
  mt_shim_thread *t = &mt_shim_self;
  uint64_t c = (uint64_t)t->countdown; /* in [0, 2^63): see sample() */
  if (MT_LIKELY(size < c)) {
    t->countdown = (int64_t)(c - size);
    return mt_shim_real.malloc(size);
  }
  return malloc_slow(t, size);
}

static __attribute__((noinline)) void *calloc_slow(mt_shim_thread *t, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  int mode = prepare(t);
  if (mode == MT_USE_ARENA) {
    void *p = arena_block(mt_bootstrap_alloc(total, 16));
    if (p)
      memset(p, 0, total); /* the arena is never reused, but say it */
    return p;
  }
  if (mode == MT_INTERNAL)
    return internal_block(mt_shim_real.calloc(count, size));
  if (mode == MT_SHIM_OFF)
    return mt_shim_real.calloc(count, size);
  uint64_t n = sample(t, mode, total);
  t->in_allocator++;
  void *p = mt_shim_real.calloc(count, size);
  t->in_allocator--;
  mt_cfi_regs here;
  MT_CFI_HERE(&here);
  allocated(&here, mode, p, total, n, MT_TRACER_KIND_CALLOC);
  return p;
}

MT_EXPORT void *calloc(size_t count, size_t size) {
  mt_shim_thread *t = &mt_shim_self;
  size_t total;
  if (MT_LIKELY(!__builtin_mul_overflow(count, size, &total))) {
    uint64_t c = (uint64_t)t->countdown;
    if (MT_LIKELY(total < c)) {
      t->countdown = (int64_t)(c - total);
      return mt_shim_real.calloc(count, size);
    }
  }
  return calloc_slow(t, count, size);
}

/* ---------------------------------------------------------------------------------------------
 * free
 * ------------------------------------------------------------------------------------------- */

/* A gate byte was non-zero: an arena block, maybe a sampled one, or a filter alias. */
static __attribute__((noinline)) void free_slow(void *p) {
  if (!p || mt_bootstrap_owns(p))
    return;
  mt_shim_thread *t = &mt_shim_self;
  int mode = atomic_load_explicit(&mt_shim.mode, memory_order_acquire);
  if (mode == MT_SHIM_FULL) {
    if (!forget_internal(p) && !t->depth)
      mt_record_free(p);
  } else if (mode == MT_SHIM_SAMPLED && !t->depth && mt_sampled_set_remove(&mt_shim.set, p)) {
    mt_record_free(p);
  }
  if (MT_UNLIKELY(!mt_shim_real.free))
    return;
  t->in_allocator++;
  mt_shim_real.free(p);
  t->in_allocator--;
}

/* `next` with full tracing: every free is recorded. The mode is checked again, in case tracing
 * stopped since the gate was read; anything unusual goes through free_slow. */
static void free_full(void *p) {
  mt_shim_thread *t = &mt_shim_self;
  if (MT_UNLIKELY(!p || mt_bootstrap_owns(p) || t->depth || !mt_shim_real.free ||
                  atomic_load_explicit(&mt_shim.mode, memory_order_acquire) != MT_SHIM_FULL)) {
    free_slow(p);
    return;
  }
  if (!forget_internal(p))
    mt_record_free(p);
  t->in_allocator++;
  mt_shim_real.free(p);
  t->in_allocator--;
}

/* `next` before the next allocator is known: only arena blocks (and NULL) exist. */
static void free_unresolved(void *p) {
  if (!p || mt_bootstrap_owns(p) || !mt_shim_real.free)
    return;
  mt_shim_real.free(p);
}

MT_EXPORT void free(void *p) {
  /* Acquire: the filter was mapped and filled before the gate pointed at it (a plain load on
   * x86-64). */
  const _Atomic uint8_t *f = atomic_load_explicit(&gate.filter, memory_order_acquire);
  if (MT_LIKELY(!atomic_load_explicit(&f[gate_bucket(p)], memory_order_relaxed))) {
    atomic_load_explicit(&gate.next, memory_order_relaxed)(p);
    return;
  }
  free_slow(p);
}

/* ---------------------------------------------------------------------------------------------
 * realloc, reallocarray
 * ------------------------------------------------------------------------------------------- */

/* realloc of a bootstrap arena block: copy it out (arena blocks are never freed). */
static void *realloc_from_arena(void *p, size_t size) {
  void *q = malloc(size ? size : 1);
  if (q) {
    size_t old = mt_bootstrap_size(p);
    memcpy(q, p, old < size ? old : size);
  }
  return q;
}

static __attribute__((noinline)) void *realloc_slow(mt_shim_thread *t, void *p, size_t size) {
  if (mt_bootstrap_owns(p))
    return realloc_from_arena(p, size);
  int mode = prepare(t);
  if (mode == MT_USE_ARENA)
    return p ? NULL : arena_block(mt_bootstrap_alloc(size, 16));
  if (mode == MT_INTERNAL) {
    bool was_internal = !p || forget_internal(p);
    void *q = mt_shim_real.realloc(p, size);
    if (!q && was_internal && p && size)
      internal_block(p); /* failed: the old block lives on */
    if (q && was_internal)
      internal_block(q);
    return q;
  }
  if (mode == MT_SHIM_OFF)
    return mt_shim_real.realloc(p, size);
  mt_cfi_regs here;
  MT_CFI_HERE(&here);
  bool internal = mode == MT_SHIM_FULL && p && forget_internal(p);
  bool old_traced = p && !internal &&
                    (mode == MT_SHIM_FULL || (mt_sampled_set_maybe(&mt_shim.set, p) &&
                                              mt_sampled_set_remove(&mt_shim.set, p)));
  if (p && size == 0) {
    /* May free p (glibc) or return a new minimal block (jemalloc): the FREE goes first, and a
     * block that comes back is recorded as realloc(NULL, 0). */
    if (old_traced)
      mt_record_free(p);
    t->in_allocator++;
    void *q = mt_shim_real.realloc(p, 0);
    t->in_allocator--;
    if (q) {
      uint64_t n = sample(t, mode, 0);
      if (n && (mode == MT_SHIM_FULL || mt_sampled_set_insert(&mt_shim.set, q)))
        mt_record_realloc_from(&here, NULL, q, 0, n);
    }
    return q;
  }
  uint64_t n = sample(t, mode, size);
  t->in_allocator++;
  void *q = mt_shim_real.realloc(p, size);
  t->in_allocator--;
  if (!q) {
    if (old_traced && mode == MT_SHIM_SAMPLED)
      mt_sampled_set_insert(&mt_shim.set, p); /* failed: the old block lives on */
    return NULL;
  }
  if (n && mode == MT_SHIM_SAMPLED && !mt_sampled_set_insert(&mt_shim.set, q))
    n = 0;
  if (mode == MT_SHIM_FULL && q != p)
    forget_internal(q);
  if (old_traced || n)
    mt_record_realloc_from(&here, old_traced ? p : NULL, q, size, n);
  return q;
}

MT_EXPORT void *realloc(void *p, size_t size) {
  mt_shim_thread *t = &mt_shim_self;
  /* The gate says p is neither sampled nor an arena block; full tracing keeps the countdown at 0
   * and a thread that has not started yet has 0 too, so both take the slow path. */
  const _Atomic uint8_t *f = atomic_load_explicit(&gate.filter, memory_order_acquire);
  if (MT_LIKELY(!atomic_load_explicit(&f[gate_bucket(p)], memory_order_relaxed)) && !t->depth) {
    uint64_t c = (uint64_t)t->countdown;
    if (MT_LIKELY(size < c)) {
      t->countdown = (int64_t)(c - size);
      return mt_shim_real.realloc(p, size);
    }
  }
  return realloc_slow(t, p, size);
}

MT_EXPORT void *reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, total);
}

/* ---------------------------------------------------------------------------------------------
 * Aligned allocators
 * ------------------------------------------------------------------------------------------- */

/* real_aligned's *error when the next allocator's own function failed: errno is as it left it
 * (jemalloc's memalign with an alignment that is no power of two sets none), and stays so. */
#define MT_ERRNO_AS_LEFT (-1)

/* The next allocator's aligned allocation of the given kind, or an emulation with one it has.
 * Returns the block or NULL with *error set (posix_memalign's convention, or MT_ERRNO_AS_LEFT).
 * `size` is the program's argument: the next allocator's pvalloc rounds it itself (glibc's own way:
 * its pvalloc(0) is one small chunk), the emulation as pvalloc_block does. */
static void *real_aligned(unsigned kind, size_t align, size_t size, int *error) {
  const mt_real *r = &mt_shim_real;
  void *p = NULL;
  *error = 0;
  switch (kind) {
  case MT_TRACER_KIND_POSIX_MEMALIGN:
    if (r->posix_memalign) {
      *error = r->posix_memalign(&p, align, size);
      return *error ? NULL : p;
    }
    break;
  case MT_TRACER_KIND_ALIGNED_ALLOC:
    if (r->aligned_alloc)
      p = r->aligned_alloc(align, size);
    else
      goto emulate;
    *error = p ? 0 : MT_ERRNO_AS_LEFT;
    return p;
  case MT_TRACER_KIND_MEMALIGN:
    if (r->memalign)
      p = r->memalign(align, size);
    else
      goto emulate;
    *error = p ? 0 : MT_ERRNO_AS_LEFT;
    return p;
  case MT_TRACER_KIND_VALLOC:
    if (r->valloc)
      p = r->valloc(size);
    else
      goto emulate;
    *error = p ? 0 : MT_ERRNO_AS_LEFT;
    return p;
  case MT_TRACER_KIND_PVALLOC:
    if (r->pvalloc)
      p = r->pvalloc(size);
    else
      goto emulate;
    *error = p ? 0 : MT_ERRNO_AS_LEFT;
    return p;
  default: break;
  }
emulate:
  if (kind == MT_TRACER_KIND_PVALLOC)
    size = pvalloc_block(size);
  if (r->posix_memalign) {
    size_t a = align < sizeof(void *) ? sizeof(void *) : align;
    *error = r->posix_memalign(&p, a, size);
  } else if (r->aligned_alloc) {
    p = r->aligned_alloc(align, size);
    *error = p ? 0 : ENOMEM;
  } else if (r->memalign) {
    p = r->memalign(align, size);
    *error = p ? 0 : ENOMEM;
  } else {
    *error = ENOMEM;
  }
  return *error ? NULL : p;
}

static void *aligned(unsigned kind, size_t align, size_t size, int *error) {
  mt_shim_thread *t = &mt_shim_self;
  int mode = prepare(t);
  /* What the program may use: for pvalloc, whole pages (the next allocator gets `size`). */
  size_t block = kind == MT_TRACER_KIND_PVALLOC ? pvalloc_block(size) : size;
  if (mode == MT_USE_ARENA) {
    void *p = arena_block(mt_bootstrap_alloc(block, align));
    *error = p ? 0 : ENOMEM;
    return p;
  }
  if (mode == MT_INTERNAL)
    return internal_block(real_aligned(kind, align, size, error));
  if (mode == MT_SHIM_OFF)
    return real_aligned(kind, align, size, error);
  uint64_t n = sample(t, mode, block);
  t->in_allocator++;
  void *p = real_aligned(kind, align, size, error);
  t->in_allocator--;
  mt_cfi_regs here;
  MT_CFI_HERE(&here);
  allocated(&here, mode, p, block, n, kind);
  return p;
}

MT_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  int error;
  void *p = aligned(MT_TRACER_KIND_POSIX_MEMALIGN, align, size, &error);
  if (!error)
    *out = p;
  return error;
}

static void *aligned_errno(unsigned kind, size_t align, size_t size) {
  int error;
  void *p = aligned(kind, align, size, &error);
  if (!p && error != MT_ERRNO_AS_LEFT)
    errno = error ? error : ENOMEM;
  return p;
}

MT_EXPORT void *aligned_alloc(size_t align, size_t size) {
  return aligned_errno(MT_TRACER_KIND_ALIGNED_ALLOC, align, size);
}

MT_EXPORT void *memalign(size_t align, size_t size) {
  return aligned_errno(MT_TRACER_KIND_MEMALIGN, align, size);
}

MT_EXPORT void *valloc(size_t size) {
  return aligned_errno(MT_TRACER_KIND_VALLOC, page_size(), size);
}

MT_EXPORT void *pvalloc(size_t size) {
  size_t ps = page_size(), rounded;
  if (__builtin_add_overflow(size, ps - 1, &rounded)) {
    errno = ENOMEM;
    return NULL;
  }
  /* The program's size goes to the next allocator, which rounds it its own way (rounding it here
   * first made glibc's blocks a page longer); the block recorded is pvalloc_block(size). */
  return aligned_errno(MT_TRACER_KIND_PVALLOC, ps, size);
}

MT_EXPORT size_t malloc_usable_size(void *p) {
  if (!p)
    return 0;
  if (mt_bootstrap_owns(p))
    return mt_bootstrap_size(p);
  if (!mt_shim_real.malloc_usable_size)
    return 0;
  return mt_shim_real.malloc_usable_size(p);
}
