/* The producer's write path (docs/ring.md §4, §6): append a record to the calling thread's ring,
 * reclaiming the oldest whole records when the ring is full (flight recorder) or waiting for the
 * primary consumer (lossless). The fast path reads one clock, stores the record's words as
 * relaxed atomics and publishes the tail with a release store: no lock, no system call, no
 * malloc. A write that interrupts another write on the same thread (a signal handler) finds
 * `busy` set and is dropped and counted. */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "common/cancel_hold.h"
#include "ring/clock.h"
#include "ring/liveness.h"
#include "ring/process.h"
#include "ring/producer.h"
#include "ring/tick.h"
#include "ring/write_fast.h"

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

__thread struct mt_ring_thread mt_ring_self __attribute__((tls_model("initial-exec")));

/* A payload comes from `words`, or, when `bytes` is not NULL, from `length` bytes padded to words
 * (mt_ring_write_bytes). Passed as scalars so that the words-only fast path folds away the test. */
#define SOURCE const uint64_t *src_words, const uint8_t *src_bytes, size_t src_length
#define SOURCE_ARGS src_words, src_bytes, src_length

/* The stamp of a record of the general path: a CLOCK record's is a reading of the clock (it pairs
 * with the record's payload), which the shared tick is raised to; every other record is ordered
 * (ring/tick.h). Per-writer timestamps never decrease, even if the thread migrates to a core whose
 * TSC is a little behind. */
static inline uint64_t now(struct mt_ring_thread *t, unsigned type) {
  uint64_t ts;
  if (type == MT_RING_TYPE_CLOCK) {
    ts = mt_clock_read((mt_ring_clock)t->clock);
    mt_ring_tick_raise(mt_load_relaxed(&mt_ring_session.tick), ts, false);
  } else {
    ts = mt_ring_stamp_slow(t, true);
  }
  if (UNLIKELY(ts < t->last_time))
    ts = t->last_time;
  t->last_time = ts;
  return ts;
}

static void degrade(mt_ring_file_header *h) {
  mt_store_relaxed(&h->degraded, 1);
}

/* A waiting producer spins a little (the consumer may be about to publish), yields, then naps: 50
 * µs first, each nap twice the last, up to `cap_ns`. */
static void backoff(unsigned spins, uint64_t *nap_ns, uint64_t cap_ns) {
  if (spins < 64) {
    __builtin_ia32_pause();
  } else if (spins < 128) {
    sched_yield();
  } else {
    struct timespec ts = {0, (long)*nap_ns};
    nanosleep(&ts, NULL);
    *nap_ns = 2 * *nap_ns < cap_ns ? 2 * *nap_ns : cap_ns;
  }
}

/* Lossless mode: returns the primary consumer's position once it has read up to `target`;
 * UINT64_MAX when the file degrades to a flight recorder; 0 when the session closed under us (the
 * write is dropped). A producer that has to wait at all waits until the consumer has reached
 * `plenty` (a sixteenth of the ring further, as far as the published tail allows), then writes
 * that much without waiting: a producer ahead of a slower consumer that went on as soon as one
 * record fitted would wait, and wake, once per consumer batch and pull the consumer's position line
 * across cores on every try. Async-signal-safe: clock_gettime, sched_yield, nanosleep and the /proc
 * reads of mt_process_alive, with cancellation held off (nanosleep and open are cancellation
 * points, and this runs inside the program's malloc: common/cancel_hold.h). */
#define FAR_WORDS 4096u

static uint64_t wait_for_consumer(struct mt_ring_thread *t, uint64_t target, uint64_t plenty) {
  struct mt_ring *s = &mt_ring_session;
  mt_ring_file_header *h = s->header;
  int saved_errno = errno;
  int cancel = mt_cancel_hold();
  uint64_t result = UINT64_MAX;
  uint64_t next_check = 0;
  bool counted = false;
  /* The consumer's position and when it last moved, for a liveness this process cannot tell. */
  uint64_t seen_pos = UINT64_MAX, moved_ns = 0;
  /* Naps of up to 1 ms, or less in a small ring: about half the time a consumer that reads 200
   * words a microsecond takes to read the whole ring, so that what the consumer has read by the
   * time a nap ends is rarely all there was. */
  uint64_t nap_ns = 50000, cap_ns = (t->mask + 1) * 2;
  if (cap_ns > 1000000)
    cap_ns = 1000000;
  if (cap_ns < nap_ns)
    cap_ns = nap_ns;
  for (unsigned spins = 0;; spins++) {
    if (mt_load_relaxed(&h->degraded))
      break;
    if (mt_load_relaxed(&s->epoch) != t->epoch) {
      result = 0;
      break;
    }
    /* Acquire: an ATTACHED primary's positions and start time were published before it. */
    uint64_t primary = mt_load_acquire(&h->primary);
    uint32_t state = mt_ring_primary_state(primary);
    if (state == MT_RING_PRIMARY_ATTACHED) {
      uint64_t pos = mt_load_acquire(&t->block->consumer_pos);
      if (pos >= (counted ? plenty : target)) {
        result = pos < t->tail ? pos : t->tail;
        break;
      }
      /* Far from it (more than a consumer batch): no spinning or yielding, which would only
       * burn CPU time, straight to the naps. */
      if (counted && plenty - pos > FAR_WORDS && spins < 128)
        spins = 128;
    } else if (state == MT_RING_PRIMARY_DETACHED) {
      degrade(h);
      break;
    }
    if (!counted) {
      mt_add_relaxed(&t->block->waits, 1);
      counted = true;
    }
    if (spins >= 64 && (spins % 16 == 0 || spins >= 128)) { /* every 16th yield, every nap */
      uint64_t ns = mt_clock_ns(CLOCK_MONOTONIC);
      if (state == MT_RING_PRIMARY_NONE) {
        uint64_t first = 0;
        atomic_compare_exchange_strong(&s->first_wait_ns, &first, ns);
        if (first && ns - first > (uint64_t)s->options.attach_timeout_ms * 1000000u) {
          degrade(h);
          break;
        }
        /* The consumer expected to attach (memtap record, killed before this process's file
         * appeared) will never come: no use waiting out the timeout. In another pid namespace
         * its pid names nobody, or another process: there its lock on the ring directory (which
         * memtap record holds for its whole run) tells, when it can be asked. */
        if (s->options.consumer_pid && ns >= next_check) {
          next_check = ns + 10000000u;
          if (s->foreign_namespace
                  ? mt_ring_directory_lock_held(s->options.dir) == 0
                  : !mt_process_alive(s->options.consumer_pid, s->options.consumer_start_time)) {
            degrade(h);
            break;
          }
        }
      } else if (ns >= next_check) {
        /* A consumer that died (or whose pid now names another process) will never read. One
         * still CLAIMING has not published its start time yet: only its pid is checked. From
         * another pid namespace, its lock on the file is (ring/liveness.h); a file that lost
         * its name was made for a consumer in this process. */
        next_check = ns + 10000000u;
        uint64_t start =
            state == MT_RING_PRIMARY_ATTACHED ? mt_load_relaxed(&h->primary_start_time) : 0;
        bool gone;
        if (s->foreign_namespace && !s->unlinked) {
          /* Its lock; when that cannot be asked (the program changed its user or root since),
           * a consumer that has read nothing for the attach timeout is taken for gone, so that
           * the program never waits for good. */
          int held = mt_ring_primary_lock_held(s->path);
          uint64_t read = mt_load_relaxed(&t->block->consumer_pos);
          if (read != seen_pos) {
            seen_pos = read;
            moved_ns = ns;
          }
          gone = held == 0 ||
                 (held < 0 && ns - moved_ns > (uint64_t)s->options.attach_timeout_ms * 1000000u);
        } else {
          gone = !mt_process_alive(mt_ring_primary_pid(primary), start);
        }
        if (gone) {
          degrade(h);
          break;
        }
      }
    }
    backoff(spins, &nap_ns, cap_ns);
  }
  mt_cancel_release(cancel);
  errno = saved_errno;
  return result;
}

/* The first mark at or after `target` and not beyond `limit`: *pos and *seq. */
static bool find_mark(const struct mt_ring_thread *t, uint64_t target, uint64_t limit,
                      uint64_t *pos, uint64_t *seq) {
  uint64_t chunk = (t->mask + 1) / MT_RING_MARKS;
  for (uint64_t k = (target + chunk - 1) / chunk; k * chunk <= limit; k++) {
    const __typeof__(t->marks[0]) *m = &t->marks[k % MT_RING_MARKS];
    if (m->pos / chunk != k || m->pos < t->marks_from || m->pos < target)
      continue; /* no record of ours started in that sixteenth (or an older lap's) */
    if (m->pos > limit)
      return false;
    *pos = m->pos;
    *seq = m->seq;
    return true;
  }
  return false;
}

/* Frees [tail, tail + need) by moving head past whole records. The advanced head is published
 * before any of the freed words is overwritten, with a release fence in between (RING.md part
 * B, ocaml/ocaml#15016): a consumer that copies words and then re-reads head sees the move if it
 * read anything newer. About a sixteenth of the ring is freed at once (up to the next mark), so
 * this runs, and fences, once per many records when a flight recorder runs full; and the marks
 * spare it from reading the old records' headers. Returns false if the write must be dropped. */
static bool make_room(struct mt_ring_thread *t, uint64_t need) {
  uint64_t size = t->mask + 1;
  uint64_t target = t->tail + need - size;
  uint64_t limit = t->tail;
  bool count = true;
  mt_ring_file_header *h = mt_ring_session.header;
  if (mt_ring_session.geo.mode == MT_RING_LOSSLESS && !mt_load_relaxed(&h->degraded)) {
    uint64_t plenty = target + (size >> 4) < t->tail ? target + (size >> 4) : t->tail;
    uint64_t consumer = wait_for_consumer(t, target, plenty > target ? plenty : target);
    if (consumer == 0)
      return false;
    if (consumer != UINT64_MAX) {
      count = false;
      limit = consumer;
    }
  }
  uint64_t head, head_seq;
  if (!find_mark(t, target, limit, &head, &head_seq)) {
    /* Records this thread did not write (or not in marked places): walk their headers. */
    uint64_t want = target + (size >> 4);
    if (want > limit)
      want = limit;
    head = t->head;
    head_seq = t->head_seq;
    while (head < want) {
      uint64_t w = mt_load_relaxed(&t->data[head & t->mask]);
      uint32_t len = mt_ring_header_length(w);
      if (UNLIKELY(len == 0 || len > MT_RING_MAX_RECORD_WORDS || (head & t->mask) + len > size)) {
        /* Not our records (the file was damaged behind our back): give up the whole ring. */
        head = t->tail;
        head_seq = t->seq;
        break;
      }
      head_seq += mt_ring_header_type(w) != MT_RING_TYPE_PADDING;
      head += len;
    }
  }
  if (head == t->tail)
    head_seq = t->seq;
  mt_store_relaxed(&t->block->head, head);
  mt_store_relaxed(&t->block->head_seq, head_seq);
  mt_fence_release();
  if (count && head_seq > t->head_seq)
    mt_bump_single_writer(&t->block->overwritten, head_seq - t->head_seq);
  t->head = head;
  t->head_seq = head_seq;
  return true;
}

static inline uint64_t source_word(SOURCE, size_t i, size_t words) {
  if (LIKELY(!src_bytes))
    return src_words[i];
  /* Bytes padded to whole words; the last byte says how many pad bytes (1..8) were added. */
  uint64_t w = 0;
  size_t at = i * 8;
  if (at < src_length) {
    size_t n = src_length - at < 8 ? src_length - at : 8;
    memcpy(&w, src_bytes + at, n);
  }
  if (i == words - 1)
    w |= (uint64_t)(words * 8 - src_length) << 56;
  return w;
}

void (*mt_ring_test_before_publish)(void);

/* Stores the record at `off` (room made, no padding needed) and publishes it. */
static inline __attribute__((always_inline)) void store_record(struct mt_ring_thread *t,
                                                               uint64_t off, unsigned type,
                                                               unsigned id, SOURCE, size_t words) {
  _Atomic uint64_t *d = t->data + off;
  uint64_t len = words + 2;
  uint64_t ts = now(t, type);
  mt_store_relaxed(&d[0], mt_ring_header_word(len, type, id, t->seq));
  mt_store_relaxed(&d[1], ts);
  for (size_t i = 0; i < words; i++)
    mt_store_relaxed(&d[2 + i], source_word(SOURCE_ARGS, i, words));
  t->seq++;
  t->tail += len;
  if (UNLIKELY(mt_ring_test_before_publish != NULL))
    mt_ring_test_before_publish();
  mt_store_relaxed(&t->block->next_seq, t->seq);
  mt_store_release(&t->block->tail, t->tail);
  if (UNLIKELY(ts >= t->next_calibration))
    mt_ring_write_calibration(t);
}

/* Everything the fast path leaves out: padding at the end of the ring, making room, marks. */
static __attribute__((noinline)) int append(struct mt_ring_thread *t, unsigned type, unsigned id,
                                            SOURCE, size_t words) {
  uint64_t len = words + 2;
  uint64_t size = t->mask + 1;
  uint64_t off = t->tail & t->mask;
  /* A record never straddles the end of the ring: a padding record fills the rest. */
  uint64_t pad = size - off < len ? size - off : 0;
  _Atomic uint64_t *d = t->data;
  /* On the ring's first lap, the words written must have disk space (mt_ring_thread_reserve):
   * a padding record reaches the end of the ring, so it reserves the rest. */
  if (UNLIKELY(t->tail + pad + len > t->reserved_end) &&
      !mt_ring_thread_reserve(t, t->tail + pad + len)) {
    mt_add_relaxed(&mt_ring_session.header->records_no_ring, 1);
    return MT_E_NOMEM;
  }
  if (t->tail + pad + len - t->head > size) {
    if (pad + len > size) {
      /* Large record, small ring: the padding goes first, on its own. */
      if (t->tail + pad - t->head > size && !make_room(t, pad))
        return MT_E_STATE;
      mt_store_relaxed(&d[off], mt_ring_header_word(pad, MT_RING_TYPE_PADDING, 0, t->seq));
      t->tail += pad;
      off = 0;
      pad = 0;
    }
    if (t->tail + pad + len - t->head > size && !make_room(t, pad + len))
      return MT_E_STATE;
  }
  if (pad) {
    mt_store_relaxed(&d[off], mt_ring_header_word(pad, MT_RING_TYPE_PADDING, 0, t->seq));
    t->tail += pad;
    off = 0;
  }
  if (t->tail >= t->next_mark) {
    uint64_t chunk = size / MT_RING_MARKS;
    t->marks[(t->tail / chunk) % MT_RING_MARKS].pos = t->tail;
    t->marks[(t->tail / chunk) % MT_RING_MARKS].seq = t->seq;
    t->next_mark = (t->tail / chunk + 1) * chunk;
  }
  store_record(t, off, type, id, SOURCE_ARGS, words);
  mt_ring_thread_set_limit(t);
  return MT_OK;
}

/* The common case inline: the record fits before the end of the ring, in free space, inside the
 * current sixteenth and the space reserved on disk. */
static inline __attribute__((always_inline)) int
append_fast(struct mt_ring_thread *t, unsigned type, unsigned id, SOURCE, size_t words) {
  uint64_t len = words + 2;
  uint64_t tail = t->tail;
  uint64_t off = tail & t->mask;
  if (UNLIKELY(off + len > t->mask + 1 || tail + len - t->head > t->mask + 1 ||
               tail >= t->next_mark || tail + len > t->reserved_end))
    return append(t, type, id, SOURCE_ARGS, words);
  store_record(t, off, type, id, SOURCE_ARGS, words);
  return MT_OK;
}

void mt_ring_write_calibration(struct mt_ring_thread *t) {
  mt_clock_pair p;
  mt_clock_sample((mt_ring_clock)t->clock, &p);
  t->next_calibration = p.raw + mt_ring_session.calibration_ticks;
  uint64_t payload[2] = {p.monotonic_ns, p.realtime_ns};
  append(t, MT_RING_TYPE_CLOCK, t->clock, payload, NULL, 0, 2);
}

int mt_ring_append_internal(struct mt_ring_thread *t, unsigned type, unsigned id,
                            const uint64_t *payload, size_t words) {
  return append(t, type, id, payload, NULL, 0, words);
}

static int nested_write(struct mt_ring_thread *t) {
  struct mt_ring *s = &mt_ring_session;
  uint32_t epoch = mt_ring_writer_epoch(s);
  if (epoch & 1)
    return MT_E_STATE;
  if (t->status == MT_THREAD_CLAIMED && t->epoch == epoch)
    mt_add_relaxed(&t->block->nested, 1);
  else
    mt_add_relaxed(&s->header->records_nested, 1);
  return MT_E_STATE;
}

/* Everything but the fast path: the first write of a thread (claim), a new session (after close
 * and open, or fork), pause, a thread without a ring. */
static int write_slow(struct mt_ring_thread *t, unsigned type, unsigned id, SOURCE, size_t words,
                      bool transport) {
  struct mt_ring *s = &mt_ring_session;
  uint32_t epoch = mt_ring_writer_epoch(s);
  if (epoch & 1)
    return MT_E_STATE;
  if (!transport && mt_load_relaxed(&s->paused))
    return MT_E_STATE;
  if (t->session_epoch != epoch) {
    t->session_epoch = epoch;
    t->status = MT_THREAD_NONE;
    t->epoch = 0;
  }
  int saved_errno = errno;
  int rc = MT_OK;
  switch (t->status) {
  case MT_THREAD_CLAIMED: break;
  case MT_THREAD_NO_RING:
    if (mt_load_relaxed(&s->releases) == t->releases_seen) {
      mt_add_relaxed(&s->header->records_no_ring, 1);
      rc = MT_E_NOMEM;
      break;
    }
    t->status = MT_THREAD_NONE;
    /* fall through */
  case MT_THREAD_NONE: rc = mt_ring_thread_claim(t, epoch); break;
  default:
    mt_add_relaxed(&s->header->records_no_ring, 1);
    rc = MT_E_NOMEM;
    break;
  }
  errno = saved_errno;
  if (rc != MT_OK)
    return rc;
  return append(t, type, id, SOURCE_ARGS, words);
}

static inline bool user_type(unsigned type) {
  return (type >= MT_RING_TYPE_COUNTER && type <= MT_RING_TYPE_USER_CUSTOM) ||
         (type >= MT_RING_TYPE_OPAQUE_FIRST && type <= MT_RING_TYPE_OPAQUE_LAST);
}

/* Any write: nested-write detection, then the fast append or the slow path. */
static __attribute__((noinline)) int write_record(mt_ring *ring, unsigned type, unsigned id, SOURCE,
                                                  size_t words, bool transport) {
  struct mt_ring_thread *t = &mt_ring_self;
  if (UNLIKELY(t->busy))
    return nested_write(t);
  t->busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  int rc;
  if (LIKELY(t->epoch == mt_load_relaxed(&ring->epoch) && mt_load_relaxed(ring->owner) &&
             (transport || !mt_load_relaxed(&ring->paused))))
    rc = append_fast(t, type, id, SOURCE_ARGS, words);
  else
    rc = write_slow(t, type, id, SOURCE_ARGS, words, transport);
  atomic_signal_fence(memory_order_seq_cst);
  t->busy = 0;
  return rc;
}

void mt_ring_abandon_write(void) {
  struct mt_ring_thread *t = &mt_ring_self;
  if (!t->busy)
    return;
  if (t->block) {
    /* A write publishes by storing its record's words, then the local seq and tail, then the
     * block's next_seq and (release) tail. Cut short before the local tail moved, nothing of it
     * counts: the local seq goes back to the published one. Cut short after, every word is in
     * place: it is published (a padding record alone is a valid record too). */
    uint64_t published = mt_load_relaxed(&t->block->tail);
    if (t->tail == published) {
      t->seq = mt_load_relaxed(&t->block->next_seq);
    } else {
      mt_store_relaxed(&t->block->next_seq, t->seq);
      mt_store_release(&t->block->tail, t->tail);
    }
  }
  atomic_signal_fence(memory_order_seq_cst);
  t->busy = 0;
}

_Atomic uint64_t mt_ring_no_tick;

void mt_ring_tick_arm(struct mt_ring *s) {
  uint64_t hz = s->geo.clock_hz;
  s->tick_fresh = hz / 20000; /* 50 us */
  s->tick_ahead = hz / 500;   /* 2 ms */
  s->tick_step = 2 * ((hz + 999999999u) / 1000000000u);
  atomic_store(&s->claims, 0);
  mt_store_relaxed(&s->tick, &s->header->shared_tick);
}

uint64_t mt_ring_stamp_slow(struct mt_ring_thread *t, bool ordered) {
  struct mt_ring *s = &mt_ring_session;
  _Atomic uint64_t *word = mt_load_relaxed(&s->tick);
  uint64_t clock = mt_clock_read((mt_ring_clock)t->clock);
  uint64_t w = atomic_load(word);
  ordered = ordered && mt_ring_tick_ordering(s);
  t->tick_uses = 0;
  if (w == 0 || (w & MT_RING_TICK_DISABLED))
    return clock;
  uint64_t tick = mt_ring_tick_value(w);
  if (tick > clock && tick - clock > s->tick_ahead) {
    /* The clock was read before the word (the first offer's argument, tick.h): this thread may
     * have lost its CPU, or run a signal handler, in between while the primary raised the word.
     * A reading after the load tells. */
    clock = mt_clock_read((mt_ring_clock)t->clock);
    if (tick > clock && tick - clock > s->tick_ahead) {
      /* Far ahead of this thread's clock: a clock stepped back, or a primary whose clock is not
       * this process's (another time namespace). Stamps would stand still until the clock
       * caught up: every writer reads its clock from now on. */
      mt_ring_tick_flag(word, MT_RING_TICK_DISABLED);
      return clock;
    }
  }
  uint64_t floor = clock > t->last_time ? clock : t->last_time;
  if (ordered) {
    uint64_t stamp = mt_ring_tick_take(word, floor, s->tick_step);
    return stamp ? stamp : clock;
  }
  if ((w & MT_RING_TICK_WITHDRAWN) || (clock > tick && clock - tick > s->tick_fresh)) {
    /* Nobody keeps it moving (the primary naps, reads files, lost its CPU): this record takes
     * its own reading, and leaves the word there for the records after it. */
    uint64_t raised = mt_ring_tick_raise(word, floor, false);
    if (!(w & MT_RING_TICK_WITHDRAWN))
      t->tick_uses = MT_RING_TICK_USES;
    return raised ? raised : clock;
  }
  /* The thread's last stamp may be a clock reading from before the tick was offered (or this
   * thread's previous ordered stamp): the word goes at least there, so that no other thread is
   * stamped below what this one wrote. */
  if (t->last_time > tick)
    tick = mt_ring_tick_raise(word, t->last_time, false);
  t->tick_uses = MT_RING_TICK_USES;
  return tick;
}

int mt_ring_calibrate_due(void) {
  struct mt_ring_thread *t = &mt_ring_self;
  if (t->busy)
    return MT_OK;
  t->busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  mt_ring_write_calibration(t);
  atomic_signal_fence(memory_order_seq_cst);
  t->busy = 0;
  return MT_OK;
}

/* The fast path (write_fast.h), a leaf on the TSC (the other clocks add the vDSO's call): anything
 * unusual (no ring yet, paused, closed, the end of the ring or of a sixteenth, a full ring, a
 * nested write, the test hook) leaves through a tail call. */
int mt_ring_write(mt_ring *ring, unsigned type, unsigned id, const uint64_t *payload,
                  size_t words) {
  if (UNLIKELY(ring != &mt_ring_session || !user_type(type) || id > MT_RING_MAX_ID ||
               words > MT_RING_MAX_PAYLOAD_WORDS || (words && !payload)))
    return MT_E_INVALID;
  if (LIKELY(mt_ring_write_fast(type, id, payload, words, false)))
    return MT_OK;
  return write_record(ring, type, id, payload, NULL, 0, words, false);
}

int mt_ring_write_ordered(unsigned type, unsigned id, const uint64_t *payload, size_t words) {
  if (UNLIKELY(!user_type(type) || id > MT_RING_MAX_ID || words > MT_RING_MAX_PAYLOAD_WORDS ||
               (words && !payload)))
    return MT_E_INVALID;
  if (LIKELY(mt_ring_write_fast(type, id, payload, words, true)))
    return MT_OK;
  return write_record(&mt_ring_session, type, id, payload, NULL, 0, words, false);
}

int mt_ring_write_bytes(mt_ring *ring, unsigned type, unsigned id, const void *bytes,
                        size_t length) {
  if (ring != &mt_ring_session || !user_type(type) || id > MT_RING_MAX_ID ||
      length > MT_RING_MAX_CUSTOM_BYTES || (length && !bytes))
    return MT_E_INVALID;
  return write_record(ring, type, id, NULL, bytes ? bytes : (const uint8_t *)"", length,
                      length / 8 + 1, false);
}

int mt_ring_write_transport(unsigned type, unsigned id, const uint64_t *payload, size_t words) {
  return write_record(&mt_ring_session, type, id, payload, NULL, 0, words, true);
}
