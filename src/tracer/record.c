/* The records the shim writes (memtap/tracer.h): payload layouts, the stack of the calling code,
 * and the thread's start record before its first record of a session. A record that goes straight
 * into the ring (record_fast: no call that could allocate or change errno) is written as is;
 * anything more (the unwinder, the ring's general path) runs with the thread's depth raised, so
 * that whatever it does passes straight through the interposed functions, and errno kept. */
#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <string.h>
#include <unistd.h>

#include "ring/producer.h"
#include "ring/write_fast.h"
#include "tracer/shim.h"

/* The loader's record of where the main thread's stack began (exported by ld.so). */
extern void *__libc_stack_end;

/* Whether a record of `type` is stamped in exact order against other threads' records
 * (ring/tick.h): every record but allocations and frees, which the consumer's repair can order
 * when two threads' stamps are alike (docs/record.md §3), and which are most of the records. */
static inline bool ordered_type(unsigned type) {
  return type != MT_TRACER_REC_ALLOC && type != MT_TRACER_REC_FREE;
}

/* mt_ring_write, stamped as ordered_type says. */
static int ring_write(unsigned type, unsigned id, const uint64_t *payload, size_t words) {
  if (ordered_type(type))
    return mt_ring_write_ordered(type, id, payload, words);
  return mt_ring_write(mt_shim.ring, type, id, payload, words);
}

/* A start record for a thread whose first record of the session comes before its trampoline's
 * or the constructor's, or that started before the session did (mt_tracer_start): the stack its
 * trampoline noted; else the main thread's is estimated without allocating (from the loader's
 * start-of-stack and the stack limit); other threads' is unknown (0, 0). */
static void lazy_thread_start(void) {
  uint64_t tid = (uint64_t)syscall(SYS_gettid);
  uint64_t start[3] = {tid, mt_shim_self.stack_low, mt_shim_self.stack_high};
  if (!start[2] && tid == (uint64_t)getpid() && __libc_stack_end) {
    struct rlimit rl;
    uint64_t page = 4096, limit = 8u << 20;
    if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      limit = rl.rlim_cur;
    start[2] = ((uintptr_t)__libc_stack_end + page - 1) & ~(page - 1);
    start[1] = start[2] > limit ? start[2] - limit : 0;
    mt_shim_self.stack_low = start[1];
    mt_shim_self.stack_high = start[2];
  }
  ring_write(MT_TRACER_REC_THREAD_START, 0, start, 3);
}

/* Records that a signal handler made while its thread was inside a ring write (or draining
 * earlier such records): the ring would drop a nested write, so they wait in a per-thread buffer
 * and are written, in order, right after the interrupted write. The buffer (16 MiB, reserved: only
 * what is used is touched) is mmap'd the first time a thread needs it (mmap is async-signal-safe)
 * and unmapped at thread exit. Entries are [type | id << 8 | words << 24][payload...]; handlers
 * append at `tail`, the interrupted code drains from `head` and resets both to 0 with a
 * compare-and-swap that fails if a handler appended meanwhile. While anything waits, later records
 * of the thread wait behind it, so that one thread's records stay in program order. */
#define MT_PENDING_WORDS (1u << 21)

typedef struct pending_queue {
  uint64_t *buf;
  _Atomic uint32_t tail;
  uint32_t head;
  volatile uint32_t draining;
} pending_queue;

static __thread pending_queue pending __attribute__((tls_model("initial-exec")));
static _Atomic uint64_t pending_dropped;

static void defer(unsigned type, unsigned id, const uint64_t *payload, size_t words) {
  pending_queue *q = &pending;
  if (!q->buf) {
    void *m = mmap(NULL, MT_PENDING_WORDS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
      atomic_fetch_add_explicit(&pending_dropped, 1, memory_order_relaxed);
      return;
    }
    q->buf = m;
  }
  uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
  if (tail + 1 + words > MT_PENDING_WORDS) {
    atomic_fetch_add_explicit(&pending_dropped, 1, memory_order_relaxed);
    return;
  }
  q->buf[tail] = type | (uint64_t)id << 8 | (uint64_t)words << 24;
  memcpy(q->buf + tail + 1, payload, words * sizeof *payload);
  atomic_signal_fence(memory_order_seq_cst);
  atomic_store_explicit(&q->tail, tail + 1 + (uint32_t)words, memory_order_relaxed);
}

static bool pending_waits(void) {
  return atomic_load_explicit(&pending.tail, memory_order_relaxed) != 0;
}

/* Writes the waiting records in order; handlers that run meanwhile append behind them. */
static void drain_pending(void) {
  pending_queue *q = &pending;
  q->draining = 1;
  atomic_signal_fence(memory_order_seq_cst);
  for (;;) {
    uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    while (q->head < tail) {
      uint64_t h = q->buf[q->head];
      uint32_t words = (uint32_t)(h >> 24);
      if (ring_write(h & 0xff, (h >> 8) & 0xffff, q->buf + q->head + 1, words) != MT_OK)
        atomic_fetch_add_explicit(&mt_shim.records_failed, 1, memory_order_relaxed);
      q->head += 1 + words;
    }
    if (atomic_compare_exchange_strong_explicit(&q->tail, &tail, 0, memory_order_relaxed,
                                                memory_order_relaxed)) {
      q->head = 0; /* a handler appending now starts at 0 too */
      break;
    }
  }
  atomic_signal_fence(memory_order_seq_cst);
  q->draining = 0;
}

/* A record built outside the ring (a REALLOC, a MAP, an ALLOC the in-place path did not take) is
 * built in a scratch buffer of the thread: with 256 frames it is over 2 KiB, too much for the
 * stack of a program whose threads have small ones, and too much for static TLS, which glibc
 * carves out of every thread's stack too. A signal handler runs with the thread's depth at 0 and
 * may record while the code it interrupted builds a record, so the buffers are levels: a record
 * takes the next level for as long as it is built. A level is one page, mmap'd the first time the
 * thread reaches it, and unmapped at the thread's exit. Without one (handlers nested deeper than
 * MT_SCRATCH_LEVELS, no memory, after the thread's exit handler) the record is built on the stack
 * with at most MT_SMALL_FRAMES frames, marked truncated if the stack was deeper. */
#define MT_SCRATCH_WORDS (5 + MT_TRACER_MAX_FRAMES + MT_UNWIND_SLACK)
#define MT_SCRATCH_BYTES ((MT_SCRATCH_WORDS * sizeof(uint64_t) + 4095) & ~(size_t)4095)
#define MT_SCRATCH_LEVELS 4u
#define MT_SMALL_FRAMES 32u
static __thread uint64_t *scratch[MT_SCRATCH_LEVELS] __attribute__((tls_model("initial-exec")));
static __thread uint32_t scratch_taken __attribute__((tls_model("initial-exec")));
static __thread bool scratch_gone __attribute__((tls_model("initial-exec")));
bool mt_record_no_scratch;

/* The next level's buffer, taken until scratch_give; NULL (nothing taken) when there is none. The
 * level is taken before its buffer is looked at: a handler meanwhile takes the one after it. */
static uint64_t *scratch_take(void) {
  uint32_t level = scratch_taken;
  if (level >= MT_SCRATCH_LEVELS || scratch_gone || MT_UNLIKELY(mt_record_no_scratch))
    return NULL;
  scratch_taken = level + 1;
  atomic_signal_fence(memory_order_seq_cst);
  uint64_t *b = scratch[level];
  if (MT_UNLIKELY(!b)) {
    void *p =
        mmap(NULL, MT_SCRATCH_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      scratch_taken = level;
      return NULL;
    }
    scratch[level] = b = p;
  }
  return b;
}

static void scratch_give(void) {
  atomic_signal_fence(memory_order_seq_cst);
  scratch_taken--;
}

uint32_t mt_record_scratch_level(void) {
  return scratch_taken;
}

void mt_record_abandon_scratch(uint32_t level) {
  if (level < scratch_taken)
    scratch_taken = level;
  atomic_signal_fence(memory_order_seq_cst);
}

/* At thread exit: what still waits, then the buffers. */
void mt_record_thread_done(void) {
  mt_tracer_unwind_thread_done();
  scratch_gone = true; /* what the thread still records is built on the stack */
  if (!scratch_taken)  /* else a handler interrupted a record: the pages are left mapped */
    for (unsigned i = 0; i < MT_SCRATCH_LEVELS; i++)
      if (scratch[i]) {
        munmap(scratch[i], MT_SCRATCH_BYTES);
        scratch[i] = NULL;
      }
  if (pending_waits() && !mt_ring_self.busy && !pending.draining)
    drain_pending();
  if (pending.buf && !pending_waits()) {
    munmap(pending.buf, MT_PENDING_WORDS * sizeof(uint64_t));
    pending.buf = NULL;
  }
}

/* The common case, inline: nothing deferred waits or is being drained, the thread's start record
 * is written in this session, and the record goes straight into the ring (write_fast.h). A handler
 * that interrupts the ring write defers its records, which are drained right after. Returns false,
 * having written nothing, when mt_record_write must take the record. It calls nothing that could
 * allocate or change errno (the ring's waits keep errno). Degradation of a lossless file is
 * noticed on the general path, which the ring takes at least once per sixteenth of the ring. */
static inline __attribute__((always_inline)) bool
record_fast(unsigned type, unsigned id, const uint64_t *payload, size_t words) {
  if (MT_UNLIKELY(pending_waits() || pending.draining ||
                  mt_shim_self.session !=
                      atomic_load_explicit(&mt_shim_session, memory_order_relaxed)))
    return false;
  if (MT_UNLIKELY(!mt_ring_write_fast(type, id, payload, words, ordered_type(type))))
    return false;
  if (MT_UNLIKELY(pending_waits()))
    drain_pending();
  return true;
}

bool mt_record_in_write(void) {
  return mt_ring_self.busy || pending.draining;
}

void mt_record_abandon_write(void) {
  mt_ring_abandon_write();
  if (pending.draining) {
    pending.draining = 0; /* the next drain goes on from `head` */
    if (!pending_waits())
      pending.head = 0; /* left between emptying the queue and resetting its head */
  }
  atomic_signal_fence(memory_order_seq_cst);
}

void mt_record_write(unsigned type, unsigned id, const uint64_t *payload, size_t words) {
  mt_shim_thread *t = &mt_shim_self;
  if (MT_UNLIKELY(mt_ring_self.busy || pending.draining)) {
    /* A signal handler that interrupted this thread's ring write, or its draining. */
    defer(type, id, payload, words);
    return;
  }
  if (MT_UNLIKELY(pending_waits()))
    drain_pending();
  uint32_t session = atomic_load_explicit(&mt_shim_session, memory_order_relaxed);
  if (t->session != session) {
    t->session = session;
    if (type != MT_TRACER_REC_THREAD_START)
      lazy_thread_start();
  }
  if (ring_write(type, id, payload, words) != MT_OK) {
    atomic_fetch_add_explicit(&mt_shim.records_failed, 1, memory_order_relaxed);
    if (MT_UNLIKELY(mt_ring_is_copy()))
      mt_shim_leave_copy();
  }
  if (MT_UNLIKELY(pending_waits()))
    drain_pending();
  /* A lossless file degrades when its consumer is gone (or never came): tracing stops. The
   * header is mapped while the session is open (even epoch); after a close it is private zeroed
   * memory, never unmapped under a writer. */
  struct mt_ring *s = &mt_ring_session;
  if (!(atomic_load_explicit(&s->epoch, memory_order_acquire) & 1) &&
      MT_UNLIKELY(atomic_load_explicit(&s->header->degraded, memory_order_relaxed)))
    mt_shim_stop();
}

/* [head words..., frames...] with the stack of the code that called into the shim, at most `max`
 * frames (buf has room for head + max + MT_UNWIND_SLACK words). */
static inline __attribute__((always_inline)) void write_with_stack(const mt_cfi_regs *from,
                                                                   unsigned type, uint64_t *buf,
                                                                   size_t head, size_t max,
                                                                   unsigned kind) {
  unsigned flags = 0;
  size_t n = mt_tracer_unwind(from, buf + head, max, &flags);
  /* Frames the cached walker found rules for are in registered modules: only a pending dlopen
   * needs checking then. */
  if (flags & MT_UNWIND_KNOWN)
    mt_modules_check_pending();
  else
    mt_modules_check(buf + head, n);
  buf[head - 1] = kind | (flags & ~MT_UNWIND_KNOWN);
  if (!record_fast(type, (unsigned)n, buf, head + n))
    mt_record_write(type, (unsigned)n, buf, head + n);
}

/* A record of `head` words (head[0..nhead), the last one the kind and flags) without a scratch
 * buffer: on the stack, with at most MT_SMALL_FRAMES frames, the innermost of `walked` (n frames
 * an in-place walk found, `flags` its flags) when given, else of a walk of its own. */
static __attribute__((noinline)) void write_small(const mt_cfi_regs *from, unsigned type,
                                                  const uint64_t *head, size_t nhead, unsigned kind,
                                                  const uint64_t *walked, size_t n,
                                                  unsigned flags) {
  uint64_t buf[5 + MT_SMALL_FRAMES + MT_UNWIND_SLACK];
  memcpy(buf, head, nhead * sizeof *head);
  if (!walked) {
    write_with_stack(from, type, buf, nhead, MT_SMALL_FRAMES, kind);
    return;
  }
  if (n > MT_SMALL_FRAMES) {
    n = MT_SMALL_FRAMES;
    flags |= MT_TRACER_FLAG_TRUNCATED;
  }
  memcpy(buf + nhead, walked, n * sizeof *walked);
  mt_ring_cancel_fast();
  buf[nhead - 1] = kind | flags;
  mt_modules_check(buf + nhead, n);
  if (!record_fast(type, (unsigned)n, buf, nhead + n))
    mt_record_write(type, (unsigned)n, buf, nhead + n);
}

/* An ALLOC the in-place path (alloc_in_place) did not publish: through a buffer, walking the stack
 * unless `walked` (frames of a walk that was not every frame known, still in the reserved ring
 * words: copied before the reservation is given up) is given. Out of line: the usual ALLOC sets
 * up no buffer. */
static __attribute__((noinline)) void alloc_general(const mt_cfi_regs *from, void *p, size_t size,
                                                    uint64_t nsamples, unsigned kind,
                                                    const uint64_t *walked, size_t n,
                                                    unsigned flags) {
  uint64_t *buf = scratch_take();
  uint64_t head[4] = {(uintptr_t)p, size, nsamples, 0};
  if (MT_UNLIKELY(!buf)) {
    write_small(from, MT_TRACER_REC_ALLOC, head, 4, kind, walked, n, flags);
    return;
  }
  memcpy(buf, head, sizeof head);
  if (!walked) {
    write_with_stack(from, MT_TRACER_REC_ALLOC, buf, 4, MT_TRACER_MAX_FRAMES, kind);
  } else {
    memcpy(buf + 4, walked, n * sizeof *walked);
    mt_ring_cancel_fast();
    buf[3] = kind | flags;
    mt_modules_check(buf + 4, n);
    if (!record_fast(MT_TRACER_REC_ALLOC, (unsigned)n, buf, 4 + n))
      mt_record_write(MT_TRACER_REC_ALLOC, (unsigned)n, buf, 4 + n);
  }
  scratch_give();
}

/* The usual ALLOC, built in place in the ring: room reserved for the deepest record, the frames
 * walked straight into it (one copy less than through a buffer), published once the walk found
 * every frame in a registered module; anything else goes to alloc_general, with the frames walked
 * if it got that far. mt_modules_check comes before the walk: a module record it writes goes
 * before the ALLOC, as on the general path. */
static inline __attribute__((always_inline)) void
alloc_in_place(const mt_cfi_regs *from, void *p, size_t size, uint64_t nsamples, unsigned kind) {
  if (MT_UNLIKELY(pending_waits() || pending.draining ||
                  mt_shim_self.session !=
                      atomic_load_explicit(&mt_shim_session, memory_order_relaxed))) {
    alloc_general(from, p, size, nsamples, kind, NULL, 0, 0);
    return;
  }
  mt_modules_check_pending();
  mt_ring_slot slot;
  if (MT_UNLIKELY(!mt_ring_reserve_fast(4 + MT_TRACER_MAX_FRAMES + MT_UNWIND_SLACK, &slot))) {
    alloc_general(from, p, size, nsamples, kind, NULL, 0, 0);
    return;
  }
  /* The ring's words, not yet published, are written as plain memory by the walk (x86-64: the
   * same 8-byte stores); the release store of the tail at the commit publishes them. */
  uint64_t *w = (uint64_t *)(slot.d + 2);
  w[0] = (uintptr_t)p; /* before the walk: fewer values to keep across its call */
  w[1] = size;
  w[2] = nsamples;
  unsigned flags = 0;
  size_t n = mt_tracer_unwind(from, w + 4, MT_TRACER_MAX_FRAMES, &flags);
  if (MT_UNLIKELY(!(flags & MT_UNWIND_KNOWN))) {
    alloc_general(from, (void *)(uintptr_t)w[0], w[1], w[2], kind, w + 4, n, flags);
    return;
  }
  w[3] = kind | (flags & ~MT_UNWIND_KNOWN);
  mt_ring_commit_fast(slot, MT_TRACER_REC_ALLOC, (unsigned)n, 4 + n, false);
  if (MT_UNLIKELY(pending_waits()))
    drain_pending();
}

void mt_record_alloc(void *p, size_t size, uint64_t nsamples, unsigned kind) {
  mt_record_alloc_from(NULL, p, size, nsamples, kind);
}

void mt_record_alloc_from(const mt_cfi_regs *from, void *p, size_t size, uint64_t nsamples,
                          unsigned kind) {
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  int *errno_at = t->errno_at;
  if (MT_UNLIKELY(!errno_at))
    errno_at = t->errno_at = &errno;
  int saved_errno = *errno_at;
  alloc_in_place(from, p, size, nsamples, kind);
  *errno_at = saved_errno;
  t->depth--;
}

void mt_record_realloc(void *old, void *p, size_t size, uint64_t nsamples) {
  mt_record_realloc_from(NULL, old, p, size, nsamples);
}

void mt_record_realloc_from(const mt_cfi_regs *from, void *old, void *p, size_t size,
                            uint64_t nsamples) {
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  int saved_errno = errno;
  uint64_t head[5] = {(uintptr_t)old, (uintptr_t)p, size, nsamples, 0};
  uint64_t *buf = scratch_take();
  if (MT_LIKELY(buf)) {
    memcpy(buf, head, sizeof head);
    write_with_stack(from, MT_TRACER_REC_REALLOC, buf, 5, MT_TRACER_MAX_FRAMES,
                     MT_TRACER_KIND_REALLOC);
    scratch_give();
  } else {
    write_small(from, MT_TRACER_REC_REALLOC, head, 5, MT_TRACER_KIND_REALLOC, NULL, 0, 0);
  }
  errno = saved_errno;
  t->depth--;
}

void mt_record_map(void *p, size_t length, int prot, int flags, unsigned kind) {
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  int saved_errno = errno;
  uint64_t head[4] = {(uintptr_t)p, length,
                      (uint64_t)(uint32_t)prot | ((uint64_t)(uint32_t)flags << 32), 0};
  uint64_t *buf = scratch_take();
  if (MT_LIKELY(buf)) {
    memcpy(buf, head, sizeof head);
    write_with_stack(NULL, MT_TRACER_REC_MAP, buf, 4, MT_TRACER_MAX_FRAMES, kind);
    scratch_give();
  } else {
    write_small(NULL, MT_TRACER_REC_MAP, head, 4, kind, NULL, 0, 0);
  }
  errno = saved_errno;
  t->depth--;
}

/* mt_record_free's general path, out of line: the usual free saves no registers and sets up no
 * frame for it. */
static __attribute__((noinline)) void record_free_general(void *p) {
  uint64_t payload[1] = {(uintptr_t)p};
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  int saved_errno = errno;
  mt_record_write(MT_TRACER_REC_FREE, 0, payload, 1);
  errno = saved_errno;
  t->depth--;
}

void mt_record_free(void *p) {
  uint64_t payload[1] = {(uintptr_t)p};
  if (MT_LIKELY(record_fast(MT_TRACER_REC_FREE, 0, payload, 1)))
    return;
  record_free_general(p);
}

void mt_record_unmap(void *p, size_t length) {
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  int saved_errno = errno;
  uint64_t payload[2] = {(uintptr_t)p, length};
  mt_record_write(MT_TRACER_REC_UNMAP, 0, payload, 2);
  errno = saved_errno;
  t->depth--;
}

void mt_record_process_end(void) {
  if (atomic_load_explicit(&mt_shim.mode, memory_order_relaxed) == MT_SHIM_OFF)
    return;
  /* Only in the process the ring file is for: a vfork child, or a clone(CLONE_VM) one running
   * beside its parent, has its parent's memory and thread state, and would write into the
   * parent's ring (a clone child at the same time as the parent's thread: never). A closed
   * session's header is zeroed memory: pid 0. */
  struct mt_ring *s = &mt_ring_session;
  pid_t pid = getpid();
  if (!s->header || s->header->pid != pid)
    return;
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  int saved_errno = errno;
  uint64_t word = (uint64_t)pid;
  mt_record_write(MT_TRACER_REC_PROCESS_END, 0, &word, 1);
  errno = saved_errno;
  t->depth--;
}

void mt_record_thread(unsigned type, uint64_t tid, uint64_t low, uint64_t high) {
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  int saved_errno = errno;
  uint64_t payload[3] = {tid, low, high};
  if (type == MT_TRACER_REC_THREAD_START)
    t->session = atomic_load_explicit(&mt_shim_session, memory_order_relaxed);
  mt_record_write(type, 0, payload, type == MT_TRACER_REC_THREAD_START ? 3 : 1);
  errno = saved_errno;
  t->depth--;
}
