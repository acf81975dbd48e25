/* Rings and threads (docs/ring.md §3): a thread claims a free ring on its first record and
 * releases it when it exits; the next thread to claim it gets the next generation, so consumers
 * keep thread identity as (ring, generation). Claiming is a compare-and-swap on the ring's owner
 * word, malloc-free and async-signal-safe.
 *
 * Thread exit is detected with a pthread key destructor: pthread_key_create is called once, and
 * pthread_setspecific on a key below PTHREAD_KEY_2NDLEVEL_SIZE (glibc: 32) only stores into the
 * thread descriptor, so neither allocates. A thread that writes again after its destructor ran
 * (from a later key destructor) claims a ring again and sets the key again; if glibc has no
 * destructor round left, that ring is left claimed by a thread that is about to vanish. Such
 * rings are recovered: a thread that finds no free ring takes over the rings whose owner thread
 * no longer exists (tgkill(pid, tid, 0) fails with ESRCH), writing THREAD_EXIT on its behalf. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cancel_hold.h"
#include "ring/producer.h"

int mt_ring_test_fail_reserve;
void (*mt_ring_test_before_claim)(uint32_t ring);

static pthread_key_t exit_key;
static bool exit_key_created;

static void thread_exit(void *value) {
  (void)value;
  struct mt_ring_thread *t = &mt_ring_self;
  if (t->busy)
    return;
  int saved_errno = errno;
  t->busy = 1;
  atomic_signal_fence(memory_order_seq_cst);
  if (t->status == MT_THREAD_CLAIMED && t->epoch == mt_ring_writer_epoch(&mt_ring_session))
    mt_ring_thread_release(t);
  atomic_signal_fence(memory_order_seq_cst);
  t->busy = 0;
  errno = saved_errno;
}

int mt_ring_thread_init_key(void) {
  if (exit_key_created)
    return 0;
  if (pthread_key_create(&exit_key, thread_exit) != 0)
    return -1;
  exit_key_created = true;
  return 0;
}

/* Reserves words [from, to) of the ring's data on disk before they are written, so that a full
 * disk fails here instead of raising SIGBUS inside the traced program later. Through the file
 * opened again by its path (mt_ring_file_open); when it cannot be (unlinked, privileges dropped,
 * chroot), by faulting those pages in, which reports a full disk as an error rather than a
 * signal. Done piecewise (mt_ring_thread_reserve), so that a file planned for thousands of
 * threads takes on disk about what they write, not ring size times threads. */
static bool reserve_space(struct mt_ring *s, uint32_t ring, uint64_t from, uint64_t to) {
  if (mt_ring_test_fail_reserve)
    return false;
  uint64_t bytes = (to - from) * 8,
           at = s->geo.data_offset + (uint64_t)ring * s->geo.ring_words * 8 + from * 8;
  int cancel = mt_cancel_hold(); /* open, posix_fallocate and close inside the program's malloc */
  int fd = mt_ring_file_open(s);
  bool ok;
  if (fd < 0) {
#ifdef MADV_POPULATE_WRITE /* Linux 5.14, glibc 2.35 */
    ok = madvise((char *)s->base + at, bytes, MADV_POPULATE_WRITE) == 0;
#else
    ok = false;
#endif
  } else {
    ok = posix_fallocate(fd, (off_t)at, (off_t)bytes) == 0;
    close(fd);
  }
  mt_cancel_release(cancel);
  return ok;
}

/* A free ring, claimed; -1 if there is none. A ring this process gave back (give_back.c) is never
 * taken: its data is not mapped here. The bar is checked again once the ring is won, since the
 * ring may have been barred between the first check and the compare-and-swap. */
static int find_free(struct mt_ring *s) {
  uint32_t n = s->geo.ring_count;
  uint32_t start = mt_load_relaxed(&s->claim_hint) % n;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = (start + k) % n;
    if (mt_ring_given_back(i))
      continue;
    mt_ring_block *b = mt_ring_block_at(s->base, &s->geo, i);
    uint32_t expected = MT_RING_FREE;
    if (mt_ring_test_before_claim && mt_load_relaxed(&b->owner_state) == MT_RING_FREE)
      mt_ring_test_before_claim(i);
    if (mt_load_relaxed(&b->owner_state) == MT_RING_FREE &&
        atomic_compare_exchange_strong(&b->owner_state, &expected, MT_RING_CLAIMED)) {
      if (!mt_ring_given_back(i))
        return (int)i;
      mt_store_release(&b->owner_state, MT_RING_FREE);
    }
  }
  return -1;
}

/* Takes over a ring whose owner thread no longer exists; *old_generation is its generation. */
static int recover_orphan(struct mt_ring *s, uint32_t *old_generation) {
  pid_t pid = getpid();
  for (uint32_t i = 0; i < s->geo.ring_count; i++) {
    mt_ring_block *b = mt_ring_block_at(s->base, &s->geo, i);
    int32_t tid = mt_load_relaxed(&b->owner_tid);
    if (mt_load_relaxed(&b->owner_state) != MT_RING_CLAIMED || tid <= 0)
      continue;
    if (syscall(SYS_tgkill, pid, tid, 0) == 0 || errno != ESRCH)
      continue;
    if (atomic_compare_exchange_strong(&b->owner_tid, &tid, -1)) {
      *old_generation = mt_load_relaxed(&b->generation);
      mt_add_relaxed(&s->header->rings_recovered, 1);
      atomic_fetch_sub_explicit(&s->header->rings_in_use, 1, memory_order_relaxed);
      return (int)i;
    }
  }
  return -1;
}

int mt_ring_thread_claim(struct mt_ring_thread *t, uint32_t epoch) {
  struct mt_ring *s = &mt_ring_session;
  mt_ring_file_header *h = s->header;
  /* Before this thread's first record, which is ordered (ring/tick.h): from the second claim on,
   * ordered records of every thread are stamped strictly apart. */
  atomic_fetch_add(&s->claims, 1);
  t->tick_uses = 0;
  uint64_t releases = mt_load_relaxed(&s->releases);
  uint32_t orphan_generation = 0;
  int ring = find_free(s);
  if (ring < 0)
    ring = recover_orphan(s, &orphan_generation);
  if (ring < 0) {
    /* With rings given back, the pool is short for that reason, not for the file's size. */
    mt_add_relaxed(mt_ring_given_back_any() ? &h->claims_failed_limit : &h->claims_failed_full, 1);
    mt_add_relaxed(&h->records_no_ring, 1);
    t->status = MT_THREAD_NO_RING;
    t->releases_seen = releases;
    return MT_E_NOMEM;
  }
  mt_ring_block *b = mt_ring_block_at(s->base, &s->geo, (uint32_t)ring);
  uint64_t ring_words = s->geo.ring_words;
  uint64_t reserved = mt_load_relaxed(&b->reserved_words);
  uint64_t tail_at_claim = mt_load_relaxed(&b->tail);
  if (reserved > ring_words || (tail_at_claim >= ring_words && reserved < ring_words))
    reserved = 0; /* not what this file's producers write: reserve again from the start */
  if (!reserved) {
    uint64_t first =
        ring_words < MT_RING_FIRST_RESERVE_WORDS ? ring_words : MT_RING_FIRST_RESERVE_WORDS;
    if (tail_at_claim >= ring_words)
      first = ring_words;
    if (!reserve_space(s, (uint32_t)ring, 0, first)) {
      mt_store_release(&b->owner_state, MT_RING_FREE);
      mt_add_relaxed(&h->claims_failed_space, 1);
      mt_add_relaxed(&h->records_no_ring, 1);
      t->status = MT_THREAD_DISABLED;
      return MT_E_NOMEM;
    }
    reserved = first;
    mt_store_relaxed(&b->reserved_words, (uint32_t)reserved);
  }
  /* The consumers' bound on the rings they poll: one past the highest index ever claimed. */
  uint32_t high = mt_load_relaxed(&h->rings_high);
  while (high < (uint32_t)ring + 1 &&
         !atomic_compare_exchange_weak(&h->rings_high, &high, (uint32_t)ring + 1)) {
  }
  int32_t tid = (int32_t)syscall(SYS_gettid);
  mt_store_relaxed(&b->owner_tid, tid);
  mt_add_relaxed(&h->rings_in_use, 1);
  mt_store_relaxed(&s->claim_hint, (uint32_t)ring + 1);

  t->data = mt_ring_data_at(s->base, &s->geo, (uint32_t)ring);
  t->block = b;
  t->mask = s->geo.ring_words - 1;
  t->head = mt_load_relaxed(&b->head);
  t->tail = mt_load_relaxed(&b->tail);
  t->seq = mt_load_relaxed(&b->next_seq);
  t->head_seq = mt_load_relaxed(&b->head_seq);
  t->marks_from = t->tail;
  t->next_mark = t->tail; /* the first record marks its sixteenth */
  for (unsigned k = 0; k < MT_RING_MARKS; k++)
    t->marks[k].pos = UINT64_MAX;
  t->ring_index = (uint32_t)ring;
  t->reserved_end = reserved >= ring_words ? UINT64_MAX : reserved;
  t->clock = (uint8_t)s->clock;
  t->last_time = 0;
  t->next_calibration = 0; /* the first record is followed by a CLOCK record */
  mt_ring_thread_set_limit(t);
  t->status = MT_THREAD_CLAIMED;
  t->epoch = epoch;

  if (orphan_generation) {
    uint64_t payload[2] = {orphan_generation, 1};
    mt_ring_append_internal(t, MT_RING_TYPE_LIFECYCLE, MT_RING_LIFECYCLE_THREAD_EXIT, payload, 2);
  }
  uint32_t generation = mt_load_relaxed(&b->generation) + 1;
  if (generation == 0)
    generation = 1;
  t->generation = generation;
  /* History entry, seqlock-style: 0 while in flux, so a consumer never pairs a generation with
   * another generation's start. */
  __typeof__(b->history[0]) *e = &b->history[generation % MT_RING_HISTORY];
  mt_store_relaxed(&e->generation, 0);
  mt_fence_release();
  mt_store_relaxed(&e->start, t->tail);
  mt_store_release(&e->generation, generation);
  mt_store_release(&b->generation, generation);

  if (exit_key_created)
    pthread_setspecific(exit_key, (void *)1);
  uint64_t payload[2] = {generation, (uint64_t)(uint32_t)tid};
  mt_ring_append_internal(t, MT_RING_TYPE_LIFECYCLE, MT_RING_LIFECYCLE_THREAD_START, payload, 2);
  return MT_OK;
}

bool mt_ring_thread_reserve(struct mt_ring_thread *t, uint64_t end) {
  struct mt_ring *s = &mt_ring_session;
  uint64_t size = t->mask + 1, reserved = t->reserved_end;
  if (end <= reserved)
    return true;
  uint64_t want = 2 * reserved > end ? 2 * reserved : end;
  want = (want + 511) & ~(uint64_t)511; /* whole pages */
  if (want > size || end > size)
    want = size; /* a record that wraps: the rest of the ring */
  if (!reserve_space(s, t->ring_index, reserved, want)) {
    mt_add_relaxed(&s->header->claims_failed_space, 1);
    t->status = MT_THREAD_DISABLED;
    t->epoch = 0; /* the fast path's check fails: every later write is dropped and counted */
    return false;
  }
  mt_store_relaxed(&t->block->reserved_words, (uint32_t)want);
  t->reserved_end = want >= size ? UINT64_MAX : want;
  mt_ring_thread_set_limit(t);
  return true;
}

void mt_ring_thread_release(struct mt_ring_thread *t) {
  struct mt_ring *s = &mt_ring_session;
  mt_ring_block *b = t->block;
  uint64_t payload[2] = {t->generation, 0};
  mt_ring_append_internal(t, MT_RING_TYPE_LIFECYCLE, MT_RING_LIFECYCLE_THREAD_EXIT, payload, 2);
  t->status = MT_THREAD_NONE;
  t->epoch = 0;
  mt_store_relaxed(&b->owner_tid, 0);
  atomic_fetch_sub_explicit(&s->header->rings_in_use, 1, memory_order_relaxed);
  mt_store_release(&b->owner_state, MT_RING_FREE);
  mt_add_relaxed(&s->releases, 1);
  /* The next claim starts here when this ring comes before the hint: a program that starts and
   * ends threads one after another reuses a ring whose space is reserved and whose pages are
   * mapped in, instead of reserving and faulting in a new one for every thread (1,500 threads
   * once went through 1,500 rings, 6 GB into the file, an open and fallocate each). */
  uint32_t hint = mt_load_relaxed(&s->claim_hint), n = s->geo.ring_count;
  while (hint % n > t->ring_index &&
         !atomic_compare_exchange_weak(&s->claim_hint, &hint, t->ring_index)) {
  }
}
