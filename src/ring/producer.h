/* The producer's internal state, shared by its files: the process-wide session (producer.c opens,
 * closes, pauses and re-creates it after fork; create.c makes its file), the per-thread state in
 * initial-exec TLS (thread.c claims and releases rings; write.c appends records). Nothing here
 * is ever allocated with malloc: the session is a static object and the file is mmap'd. */
#ifndef MEMTAP_SRC_RING_PRODUCER_H
#define MEMTAP_SRC_RING_PRODUCER_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "ring/atomics.h"
#include "ring/layout.h"

/* The process's producer: there is one file per process, so one session. `epoch` is even while
 * a file is open and odd while none is; it changes at every open, close and fork, and a thread
 * whose cached epoch differs re-reads everything through the slow path. */
struct mt_ring {
  _Atomic uint32_t epoch;
  _Atomic uint32_t paused;
  _Atomic uint32_t *owner; /* the owner page's word (producer.c): 0 in a copy of the process */
  /* Where writers read the shared clock tick (ring/tick.h): mt_ring_no_tick (always 0) before
   * the first file, then the file header's shared_tick (a closed file's writers stop at the epoch
   * check before they stamp). */
  _Atomic uint64_t *_Atomic tick;
  uint8_t reserved0[MT_RING_LINE - 8 - 2 * sizeof(void *)];

  /* Everything below is set while no thread can be using it (before the epoch is published). */
  dev_t dev;
  ino_t ino;
  void *base; /* the mapping: the whole file */
  uint64_t map_size;
  mt_ring_geometry geo;
  mt_ring_file_header *header;
  mt_ring_options options;    /* dir points into dir_buf */
  mt_ring_clock clock;        /* resolved */
  uint64_t calibration_ticks; /* a CLOCK record per thread at least this often */
  /* The shared clock tick (ring/tick.h), in clock ticks: a writer raises a tick older than
   * `tick_fresh` to its own reading, stops using one further than `tick_ahead` ahead of its clock,
   * and an ordered record's stamp is `tick_step` past it (2 ns at least, so that stamps converted
   * to nanoseconds stay apart). */
  uint64_t tick_fresh, tick_ahead, tick_step;
  uint64_t start_time;    /* of this process */
  bool foreign_namespace; /* in another pid namespace than options.pid_namespace: pids of
                             the consumer's namespace mean nothing here */
  char dir_buf[PATH_MAX];
  char path[PATH_MAX];

  _Atomic uint64_t releases;      /* rings released so far (a ringless thread retries then) */
  _Atomic uint32_t claim_hint;    /* where the next claim starts looking */
  _Atomic uint64_t first_wait_ns; /* lossless: when a write first waited with no primary */
  /* Rings claimed in this file (seq_cst, like the shared tick's word: ring/tick.h): from the
   * second on, ordered records are stamped strictly apart; a process with one writing thread has
   * no other thread's records to order them against. */
  _Atomic uint32_t claims;
  bool unlinked; /* mt_ring_unlink removed the name: close leaves the path */
};

extern _Atomic uint64_t mt_ring_no_tick;

/* Points writers at the shared clock tick of a file just made. */
void mt_ring_tick_arm(struct mt_ring *s);

extern struct mt_ring mt_ring_session;

/* Whether the process locks its future mappings (mlockall(MCL_FUTURE), as the preload shim sees
 * it): mt_ring_close then leaves the file mapped rather than mapping memory over it. */
void mt_ring_set_future_locked(bool on);

/* Asks that the automatic close at process exit (include/memtap/ring.h) run after every shared
 * library's destructor, not among them: for a producer that is never unloaded (the preload shim),
 * and before the first mt_ring_open. An atexit handler of a shared object runs when glibc's
 * _dl_fini finalises that object, so the close ran before the destructors of the libraries
 * finalised after it and their frees were lost (a library that frees what its constructor
 * allocated read as a leak). The close is then registered with no object (__cxa_atexit's NULL
 * handle): made before libc registers _dl_fini (from the shim's constructor), it runs after it. */
void mt_ring_close_after_libraries(void);

/* The ring's fork handlers, for a process made without them: glibc's clone() without CLONE_VM
 * runs no pthread_atfork handler (the shim's clone interposer calls these around it). */
void mt_ring_fork_prepare(void);
void mt_ring_fork_parent(void);
void mt_ring_fork_child(void);

/* A process made from this one without fork handlers (the clone system call without CLONE_VM,
 * called directly: glibc's clone() is interposed by the shim, fork() runs the handlers) has a copy
 * of this memory and the file's shared mapping, with its ring positions: its writes would go into
 * rings that its parent's threads own. The owner page tells it: private memory the kernel zeroes
 * in every child (MADV_WIPEONFORK) and the fork handler sets again. Such a copy closes the
 * session in its own memory, without a word written to the file (mt_ring_leave_copy). */
uint32_t mt_ring_leave_copy(struct mt_ring *s, uint32_t epoch);

/* The session's epoch as a writer must take it: odd (closed) while no file is open, and in a copy
 * of the process made without fork handlers, whose session it closes on the way. */
static inline uint32_t mt_ring_writer_epoch(struct mt_ring *s) {
  uint32_t epoch = mt_load_acquire(&s->epoch);
  if (!(epoch & 1) && __builtin_expect(!mt_load_relaxed(s->owner), 0))
    epoch = mt_ring_leave_copy(s, epoch);
  return epoch;
}

/* Whether this process is a copy made without fork handlers of one whose session was open. */
bool mt_ring_is_copy(void);

/* Counts a delivery of `sig` to the program's handler in the file's header (signals_handled),
 * for a consumer that forwards signals. Async-signal-safe; nothing when no file was ever open or
 * `sig` is not counted. After a close the header is private memory, so a late count is lost. */
void mt_ring_note_signal(int sig);

/* Thread status. */
enum {
  MT_THREAD_NONE = 0, /* no ring yet in the current session */
  MT_THREAD_CLAIMED,  /* owns ring `ring_index` */
  MT_THREAD_NO_RING,  /* every ring was taken: drop and count until one is released */
  MT_THREAD_DISABLED, /* reserving its ring's space failed: tracing is off for this thread */
};

/* Per-thread producer state. `epoch` equals the session's only while the thread owns a ring in
 * the open file, so the fast path tests one word; `busy` is set for the whole of a write so that
 * a signal handler's write on the same thread is detected. */
/* Reclaim marks: for each sixteenth of the ring, where the first record this thread started in
 * it begins, and that record's sequence number. Reclaiming jumps the head to a mark instead of
 * walking record headers written a ring ago (cold memory); drops are counted by sequence
 * difference. */
#define MT_RING_MARKS 16

struct mt_ring_thread {
  _Atomic uint64_t *data; /* the ring's words */
  mt_ring_block *block;
  uint64_t mask; /* ring words - 1 */
  uint64_t head, tail, seq;
  uint64_t head_seq;   /* sequence number of the record at head */
  uint64_t next_mark;  /* the first position of the next sixteenth */
  uint64_t marks_from; /* marks are valid for positions from here (this claim's start) */
  struct {
    uint64_t pos, seq;
  } marks[MT_RING_MARKS];
  uint64_t limit;        /* the fast path's one bound: see mt_ring_thread_set_limit */
  uint64_t reserved_end; /* positions below this have disk space (UINT64_MAX: the whole ring) */
  uint64_t last_time;
  uint64_t next_calibration;
  uint32_t tick_uses;     /* records left to stamp with the clock tick before reading the clock */
  uint32_t epoch;         /* == session epoch when claimed */
  uint32_t session_epoch; /* the session epoch `status` refers to */
  uint32_t ring_index;
  uint32_t generation;
  uint8_t status;
  uint8_t clock;
  volatile uint8_t busy;
  uint64_t releases_seen;
};

extern __thread struct mt_ring_thread mt_ring_self __attribute__((tls_model("initial-exec")));

/* Where a record written by the fast path (write_fast.h) may end at most: the next mark (so that a
 * record that starts or crosses a sixteenth goes through append, which notes the mark; a mark is
 * never past the end of the ring, so no record there straddles it), the free space (head + ring
 * size) and the space reserved on disk (on the ring's first lap, positions are offsets). Called
 * wherever head, next_mark or the reservation change. */
static inline void mt_ring_thread_set_limit(struct mt_ring_thread *t) {
  uint64_t room = t->head + t->mask + 1;
  uint64_t limit = t->next_mark < room ? t->next_mark : room;
  if (t->reserved_end < limit)
    limit = t->reserved_end;
  t->limit = limit;
}

/* producer.c */
/* How mt_ring_options_parse reads a MEMTAP_RING_* variable: its value, or NULL when unset. */
typedef const char *(*mt_ring_env_fn)(void *user, const char *name);
/* mt_ring_options_init's parsing, without the environment: the defaults, overridden by every
 * variable `lookup` gives a non-empty value. Pure, so that it can be fuzzed
 * (tests/fuzz/fuzz_env.c). `opts->dir` points into the value `lookup` returned. */
int mt_ring_options_parse(mt_ring_options *opts, mt_ring_env_fn lookup, void *user, mt_error *err);

/* thread.c */
/* Gives the calling thread a ring (status CLAIMED and epoch set) or records why not. Writes the
 * THREAD_START and CLOCK records. Called with `busy` set. */
int mt_ring_thread_claim(struct mt_ring_thread *t, uint32_t epoch);
/* Reserves disk space for the thread's ring up to position `end` at least (on its first lap):
 * doubling what is reserved, the whole ring once `end` reaches its end. False when the space
 * cannot be had (a full disk): the thread is then disabled (status DISABLED, its epoch cleared, so
 * that its later writes are dropped and counted) and the ring stays claimed. Called with `busy`
 * set. */
bool mt_ring_thread_reserve(struct mt_ring_thread *t, uint64_t end);
/* Writes THREAD_EXIT and frees the thread's ring. Called with `busy` set. */
void mt_ring_thread_release(struct mt_ring_thread *t);
/* Registers the thread-exit destructor (pthread key) once. */
int mt_ring_thread_init_key(void);
/* A ring's first claim reserves this many words of its data (64 KiB), or the whole ring if
 * smaller; the rest is reserved as it is first written. */
#define MT_RING_FIRST_RESERVE_WORDS 8192u
/* Test hook: when set, reserving a ring's space fails as on a full disk. */
extern int mt_ring_test_fail_reserve;
/* Test hook: when set, a claim calls it with the free ring it is about to take, between its check
 * of the bar (give_back.c) and its compare-and-swap, so that a test can give the ring back there.
 * NULL (inert) in normal use. */
extern void (*mt_ring_test_before_claim)(uint32_t ring);

/* give_back.c: rings this process gave back under a lowered address-space limit. */
/* Unmaps the data of free rings of the open file from this process's mapping, all but `keep` of
 * them (those a thread has had first), and bars them from this process's claims for the rest of
 * the file's life; counts them in the header's rings_given_back. Rings held by a thread (or by one
 * that vanished) stay. Returns how many were given back (0 with no file open, or while another
 * thread opens or closes it). Malloc-free. */
uint32_t mt_ring_give_back(uint32_t keep);
/* Whether this process gave ring `ring` of its open file back (a claim must not take it). */
bool mt_ring_given_back(uint32_t ring);
/* Whether this process gave any ring of its open file back. */
bool mt_ring_given_back_any(void);
/* Forgets every ring given back: for a new file, once the old mapping is disposed of. */
void mt_ring_given_back_reset(void);
/* The next part of a file mapping of geometry `geo` (this process's) still mapped, as offsets
 * [*at, *at + *length) from the mapping's start, at or after *at; false when none is left. Start
 * with *at = 0 and add *length after each part. One part, the whole file, until a ring is given
 * back. */
bool mt_ring_mapped_span(const mt_ring_geometry *geo, uint64_t *at, uint64_t *length);
/* Whether [start, end) overlaps what is still mapped of the session's file. */
bool mt_ring_mapping_overlaps(const struct mt_ring *s, uint64_t start, uint64_t end);
/* Bytes of ring data the session's mapping still holds (0 with no file open). */
uint64_t mt_ring_mapped_data_bytes(void);

/* producer.c: the lock that opening, closing and giving rings back take (never waits: false when
 * another thread holds it). */
bool mt_ring_session_lock(void);
void mt_ring_session_unlock(void);

/* registry.c */
/* Test hook: when set, mt_ring_register calls it after taking an entry's place and before filling
 * and committing the entry, so that a test can hold one entry unfinished while others are
 * registered. NULL (inert) in normal use. */
extern void (*mt_ring_test_registry_reserved)(void *user);
extern void *mt_ring_test_registry_reserved_user;

/* write.c */
/* Test hook: when set, every record write calls it after the record's stamp and bytes are stored
 * and before its tail is published, so that a test can widen the window in which a record is
 * stamped but not yet visible to consumers (the preload shim sets it under
 * MEMTAP_TEST_PUBLISH_DELAY). NULL (inert) in normal use. */
extern void (*mt_ring_test_before_publish)(void);

/* Appends one of the transport's own records (any type) for a thread that owns a ring and has
 * `busy` set; pause does not apply. */
int mt_ring_append_internal(struct mt_ring_thread *t, unsigned type, unsigned id,
                            const uint64_t *payload, size_t words);
/* Writes one of the transport's own records from the calling thread, claiming a ring if needed;
 * pause does not apply. Sets and clears `busy`. */
int mt_ring_write_transport(unsigned type, unsigned id, const uint64_t *payload, size_t words);
/* Writes a CLOCK record now (thread owns a ring, `busy` set). */
void mt_ring_write_calibration(struct mt_ring_thread *t);
/* The calling thread's write (busy set) will never resume: a signal handler that interrupted it is
 * leaving by longjmp. A record it had not published yet is given up, one whose words were all in
 * place is published, and the thread can write again. Async-signal-safe; for the preload shim. */
void mt_ring_abandon_write(void);

/* create.c */
/* Creates, sizes and maps the file for the current process into the session (fd, base, geo,
 * header, path), the header filled but its magic not yet stored. `parent_pid`/`fork_number`
 * are 0 except in a forked child. Malloc-free (the fork child calls it). */
int mt_ring_file_create(struct mt_ring *s, int parent_pid, uint64_t fork_number, mt_error *err);
/* The session's ring file opened again by its path (the caller closes it), or -1 when it cannot
 * be or another file stands there now. The session keeps no descriptor of the file once it is
 * mapped (mt_ring_file_create): a program may close every descriptor it inherited (daemons and
 * sandboxes do), and sees none of memtap's. Async-signal-safe. */
int mt_ring_file_open(const struct mt_ring *s);

#endif
