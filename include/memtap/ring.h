/* memtap/ring.h: the event transport between a traced process and whoever consumes its events
 * (docs/ring.md describes it byte by byte; ../shared/docs/RING.md says where it comes from).
 *
 * A traced process writes typed records into a memory-mapped file, `<dir>/<pid>.memtap-ring`,
 * with one ring per writing thread. Consumers (`memtap record`, `memtap tap`, `memtap ring-dump`,
 * or a thread of the traced process itself) open a cursor on that file and poll it. The ring
 * knows nothing of malloc or memtrace: a record is a type, an id, a timestamp and up to
 * MT_RING_MAX_PAYLOAD_WORDS 64-bit words; the layer above defines what its own types mean.
 *
 *   Producer (the traced process):  mt_ring_open, mt_ring_write..., mt_ring_register...,
 *                                   mt_ring_pause / mt_ring_resume, mt_ring_close.
 *   Consumer (anyone):              mt_cursor_open..., mt_cursor_set_callbacks, mt_cursor_poll,
 *                                   mt_cursor_set_end, mt_cursor_info, mt_cursor_close.
 *
 * Two modes, chosen when the file is created:
 *   - flight recorder: a full ring overwrites its oldest whole records; the producer never waits.
 *     Consumers that fall behind are told how many records they lost.
 *   - lossless: one consumer registers as the primary (mt_cursor_register_primary) and publishes
 *     how far it has read; a producer whose ring is full waits for it. If the primary's process
 *     dies or closes its cursor (or none registers within the attach timeout), the file degrades
 *     to a flight recorder for good and the overwritten records are counted.
 *
 * Producer guarantees: writing, claiming a thread's ring and re-initialising after fork never
 * call malloc, take no lock and are async-signal-safe. A write from a signal handler that
 * interrupted a write on the same thread is dropped and counted (never torn). The write path
 * makes no system call (except, in lossless mode, while waiting for the consumer, and where the
 * clock is a clock_gettime clock that the kernel's vDSO cannot read: hpet, acpi_pm).
 *
 * Environment (read by mt_ring_options_init; explicit options override it):
 *   MEMTAP_RING_DIR       directory of the ring files (default: $TMPDIR, else /tmp)
 *   MEMTAP_RING_SIZE      bytes per ring, with an optional K/M/G suffix, rounded up to a power of
 *                         two (default 1M; at least MT_RING_MIN_SIZE)
 *   MEMTAP_RING_THREADS   how many rings, i.e. threads writing at the same time (default 4096;
 *                         a ring takes disk space only as its thread writes)
 *   MEMTAP_RING_CLOCK     tsc, monotonic or realtime (default: tsc when invariant and the
 *                         kernel's clock source, else monotonic)
 *   MEMTAP_RING_PRESERVE  when set (and not "0"), the file is kept when the producer closes
 * and, read when a producer opens its file:
 *   MEMTAP_RING_TSC_ANCHOR  an earlier TSC reading, "<tsc>:<CLOCK_MONOTONIC ns>" (memtap record
 *                         sets it), that the TSC calibration measures from instead of waiting */
#ifndef MEMTAP_RING_H
#define MEMTAP_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Records
 * ------------------------------------------------------------------------------------------- */

/* A record is [header word][timestamp word][payload words]; the header packs its length in
 * words (10 bits, header and timestamp included), its type (6 bits), its id (16 bits) and the
 * low 32 bits of the ring's record sequence number. */
#define MT_RING_MAX_RECORD_WORDS 1023u
#define MT_RING_MAX_PAYLOAD_WORDS (MT_RING_MAX_RECORD_WORDS - 2u)
#define MT_RING_MAX_CUSTOM_BYTES (MT_RING_MAX_PAYLOAD_WORDS * 8u - 1u)
#define MT_RING_MAX_ID 0xffffu
/* The smallest ring that holds the largest record, in bytes. */
#define MT_RING_MIN_SIZE 8192u

/* Record types. 0..15 belong to the transport; 16..63 are opaque to it and defined by the layer
 * above (the tracer's allocation records, for instance). */
typedef enum mt_ring_type {
  MT_RING_TYPE_PADDING = 0,         /* fills the end of a ring; never delivered */
  MT_RING_TYPE_LIFECYCLE = 1,       /* id: mt_ring_lifecycle; payload below */
  MT_RING_TYPE_CLOCK = 2,           /* id: mt_ring_clock; payload [monotonic ns, realtime ns] */
  MT_RING_TYPE_COUNTER = 3,         /* id: counter; payload [value] */
  MT_RING_TYPE_SPAN_BEGIN = 4,      /* id: span */
  MT_RING_TYPE_SPAN_END = 5,        /* id: span */
  MT_RING_TYPE_USER_UNIT = 6,       /* id: user event (name in the registry) */
  MT_RING_TYPE_USER_INT = 7,        /* id: user event; payload [value] */
  MT_RING_TYPE_USER_SPAN_BEGIN = 8, /* id: user event */
  MT_RING_TYPE_USER_SPAN_END = 9,   /* id: user event */
  MT_RING_TYPE_USER_CUSTOM = 10,    /* id: user event; payload: bytes, see mt_ring_write_bytes */
  MT_RING_TYPE_OPAQUE_FIRST = 16,
  MT_RING_TYPE_OPAQUE_LAST = 63,
} mt_ring_type;

/* Lifecycle record ids and their payloads. */
typedef enum mt_ring_lifecycle {
  MT_RING_LIFECYCLE_START = 0,        /* [pid]: the file was opened */
  MT_RING_LIFECYCLE_STOP = 1,         /* []: the producer closed the file */
  MT_RING_LIFECYCLE_PAUSE = 2,        /* [] */
  MT_RING_LIFECYCLE_RESUME = 3,       /* [] */
  MT_RING_LIFECYCLE_FORK_PARENT = 4,  /* [fork number]: this process forked */
  MT_RING_LIFECYCLE_FORK_CHILD = 5,   /* [parent pid, fork number]: first record of a child */
  MT_RING_LIFECYCLE_THREAD_START = 6, /* [generation, tid]: a thread claimed this ring */
  MT_RING_LIFECYCLE_THREAD_EXIT = 7,  /* [generation, how]: the thread released it (how: 0 exit,
                                         1 recovered by another thread after the owner vanished) */
} mt_ring_lifecycle;

/* Clocks a producer can stamp records with. */
typedef enum mt_ring_clock {
  MT_RING_CLOCK_AUTO = 0,      /* TSC when the CPU's is invariant and the kernel keeps time
                                  with it (so every CPU's reads alike), else CLOCK_MONOTONIC */
  MT_RING_CLOCK_TSC = 1,       /* rdtsc ticks; mt_cursor_timestamp_ns converts */
  MT_RING_CLOCK_MONOTONIC = 2, /* CLOCK_MONOTONIC nanoseconds */
  MT_RING_CLOCK_REALTIME = 3,  /* CLOCK_REALTIME nanoseconds */
} mt_ring_clock;

typedef enum mt_ring_mode {
  MT_RING_FLIGHT_RECORDER = 0,
  MT_RING_LOSSLESS = 1,
} mt_ring_mode;

/* Registry kinds: entries (kind, id) -> bytes that ring wrap-around never overwrites. Kinds
 * from 16 up belong to the layer above. */
enum {
  MT_RING_REGISTRY_NAME = 1, /* id: user event id; bytes: its name */
  MT_RING_REGISTRY_FIRST_USER_KIND = 16,
  MT_RING_REGISTRY_MAX_KIND = 0xffff,
};
#define MT_RING_REGISTRY_MAX_BYTES 65536u

/* ---------------------------------------------------------------------------------------------
 * Producer
 * ------------------------------------------------------------------------------------------- */

typedef struct mt_ring mt_ring;

typedef struct mt_ring_options {
  const char *dir;              /* directory of the file */
  uint64_t ring_size;           /* bytes per ring: rounded up to a power of two */
  uint32_t max_rings;           /* rings in the file: threads that can write at the same time */
  uint64_t registry_size;       /* bytes of the registry region (default 1 MiB) */
  mt_ring_mode mode;            /* default MT_RING_FLIGHT_RECORDER */
  mt_ring_clock clock;          /* default MT_RING_CLOCK_AUTO */
  bool preserve;                /* keep the file when the producer closes */
  uint32_t attach_timeout_ms;   /* lossless: how long a full ring waits for a primary consumer to
                                   register before the file degrades (default 10000) */
  bool fork_untraced;           /* a forked child gets no file of its own: the session is closed
                                   in the child (its writes are dropped) and the parent's file is
                                   left alone (default false: the child gets its own file) */
  int consumer_pid;             /* lossless: the process expected to attach as primary, and its */
  uint64_t consumer_start_time; /* start time (/proc/PID/stat field 22, 0: any); while no primary
                                   has attached, a full ring whose expected consumer has died
                                   degrades at once rather than after attach_timeout_ms (0: none
                                   expected) */
  uint64_t pid_namespace;       /* the pid namespace whose pids name the files in `dir` (the inode
                                   of /proc/PID/ns/pid of the consumer that reads them; 0: not
                                   said). A process in another namespace, whose pid may be another
                                   process's there (unshare --pid, containers), names its file
                                   `<pid>-pidns<its namespace>.memtap-ring`, and does not judge
                                   the consumer's liveness by a pid it cannot see */
} mt_ring_options;

/* Fills `opts` with the defaults, overridden by the MEMTAP_RING_* environment variables. Returns
 * MT_E_INVALID (and fills `err`) when a variable cannot be parsed; `opts` then holds the
 * defaults for that setting. */
int mt_ring_options_init(mt_ring_options *opts, mt_error *err);

/* Creates `<dir>/<pid>.memtap-ring` (or, in another pid namespace than opts->pid_namespace,
 * `<dir>/<pid>-pidns<namespace>.memtap-ring`) for the current process (mode 0600, O_EXCL,
 * O_NOFOLLOW; a stale file left by a dead process whose pid we now have is replaced), maps it and
 * writes a START record from the calling thread. `opts` NULL means mt_ring_options_init's. One
 * producer per process: a second open fails with MT_E_STATE until mt_ring_close. A ring size below
 * MT_RING_MIN_SIZE is refused with MT_E_INVALID, naming the minimum. *out is the process's
 * producer handle; it must not be freed. Never calls malloc; registers a pthread key, fork
 * handlers and an exit handler the first time it is called. */
int mt_ring_open(mt_ring **out, const mt_ring_options *opts, mt_error *err);

/* Appends a record to the calling thread's ring, claiming one on the thread's first write.
 * `type` is MT_RING_TYPE_COUNTER..MT_RING_TYPE_OPAQUE_LAST (lifecycle and clock records are the
 * transport's own), `id` <= MT_RING_MAX_ID, `words` <= MT_RING_MAX_PAYLOAD_WORDS.
 * Returns MT_OK when the record was written; otherwise it was dropped:
 *   MT_E_INVALID  bad arguments;
 *   MT_E_STATE    the producer is closed or paused, or this write interrupted another write on
 *                 the same thread (a signal handler; counted in the ring's nested drops);
 *   MT_E_NOMEM    no ring for this thread: all are taken, or reserving its disk space failed
 *                 (counted in the file's header). */
int mt_ring_write(mt_ring *ring, unsigned type, unsigned id, const uint64_t *payload, size_t words);

/* A record whose payload is `length` bytes (<= MT_RING_MAX_CUSTOM_BYTES), padded to whole words;
 * the last byte of the last word is the number of pad bytes (1..8), so consumers recover the
 * exact length (mt_ring_event.bytes / .length). */
int mt_ring_write_bytes(mt_ring *ring, unsigned type, unsigned id, const void *bytes,
                        size_t length);

static inline int mt_ring_write_counter(mt_ring *ring, unsigned id, uint64_t value) {
  return mt_ring_write(ring, MT_RING_TYPE_COUNTER, id, &value, 1);
}
static inline int mt_ring_write_span(mt_ring *ring, unsigned id, bool begin) {
  return mt_ring_write(ring, begin ? MT_RING_TYPE_SPAN_BEGIN : MT_RING_TYPE_SPAN_END, id, NULL, 0);
}
static inline int mt_ring_write_user_unit(mt_ring *ring, unsigned id) {
  return mt_ring_write(ring, MT_RING_TYPE_USER_UNIT, id, NULL, 0);
}
static inline int mt_ring_write_user_int(mt_ring *ring, unsigned id, uint64_t value) {
  return mt_ring_write(ring, MT_RING_TYPE_USER_INT, id, &value, 1);
}
static inline int mt_ring_write_user_span(mt_ring *ring, unsigned id, bool begin) {
  return mt_ring_write(ring, begin ? MT_RING_TYPE_USER_SPAN_BEGIN : MT_RING_TYPE_USER_SPAN_END, id,
                       NULL, 0);
}
static inline int mt_ring_write_user_custom(mt_ring *ring, unsigned id, const void *bytes,
                                            size_t length) {
  return mt_ring_write_bytes(ring, MT_RING_TYPE_USER_CUSTOM, id, bytes, length);
}

/* Adds (kind, id) -> bytes to the registry, which ring wrap-around never overwrites: names of
 * user events, and whatever ids the layer above needs to survive wrap-around. Entries are never
 * removed; registering the same (kind, id) again adds a newer entry that consumers prefer.
 * MT_E_NOMEM when the registry is full. Malloc-free and async-signal-safe. */
int mt_ring_register(mt_ring *ring, unsigned kind, uint64_t id, const void *bytes, size_t length);

/* mt_ring_register(ring, MT_RING_REGISTRY_NAME, id, name, strlen(name)). */
int mt_ring_register_name(mt_ring *ring, unsigned id, const char *name);

/* Pause: writes a PAUSE record, then drops every write (uncounted) until mt_ring_resume, which
 * writes RESUME. MT_E_STATE if already in that state or closed. */
int mt_ring_pause(mt_ring *ring);
int mt_ring_resume(mt_ring *ring);

/* The file's path (valid until mt_ring_close). */
const char *mt_ring_path(const mt_ring *ring);

/* Removes the file's name now, once every consumer that will read it has mapped it (a consumer in
 * the same process): the file then goes with the last mapping, however the process ends (exec,
 * _exit, a fatal signal), instead of staying in the ring directory. The producer reserves its
 * rings' disk space through the path (posix_fallocate); without it, it faults the pages in
 * (MADV_POPULATE_WRITE), so this is refused (MT_E_UNSUPPORTED) on a kernel without that (before
 * Linux 5.14), and with `preserve`. MT_OK, MT_E_UNSUPPORTED, MT_E_IO (unlink failed), or
 * MT_E_INVALID / MT_E_STATE for no open file. */
int mt_ring_unlink(mt_ring *ring);

/* Writes STOP from the calling thread, marks the file stopped and removes it unless `preserve`.
 * Threads still writing afterwards are harmless: their writes are dropped. The address range
 * stays reserved (mapped to private memory) so that a racing writer never faults. Called
 * automatically at process exit if the program did not call it. */
int mt_ring_close(mt_ring *ring);

/* Whether the file `name` in the directory `dirfd` is a ring file that nothing will write
 * again: a regular file (not a symbolic link) named `<pid>.memtap-ring` whose producer is gone (a
 * dead process, or one whose pid another process now has: the start times differ). A file whose
 * producer died before writing its header (all zeros) is judged by the pid of its name. False for
 * a live producer's file, one whose producer cannot be inspected, and anything else. For
 * cleaners of ring directories (memtap record's sweep, docs/record.md §8); the caller decides
 * what to delete. Malloc-free. */
bool mt_ring_file_abandoned(int dirfd, const char *name);

/* ---------------------------------------------------------------------------------------------
 * Consumer
 * ------------------------------------------------------------------------------------------- */

typedef struct mt_cursor mt_cursor;

/* One record, as delivered to a callback. Everything it points to is borrowed until the callback
 * returns. A thread is identified by (ring, generation): a ring released by an exiting thread and
 * claimed by another gets the next generation. */
typedef struct mt_ring_event {
  uint32_t ring;       /* ring index */
  uint32_t generation; /* which thread of that ring (>= 1) */
  uint32_t type;       /* mt_ring_type */
  uint32_t id;
  uint64_t seq;       /* the ring's record sequence number */
  uint64_t timestamp; /* raw clock value; mt_cursor_timestamp_ns converts */
  const uint64_t *payload;
  size_t words;         /* payload words */
  const uint8_t *bytes; /* MT_RING_TYPE_USER_CUSTOM: the bytes without their padding; other */
  size_t length;        /* types: the payload itself, words * 8 bytes (an opaque type written
                           with mt_ring_write_bytes decodes its last byte itself) */
} mt_ring_event;

/* A record callback returns MT_CURSOR_NEXT to go on, or MT_CURSOR_STOP to end the poll before
 * this record: it is not consumed and the next poll delivers it again. */
enum { MT_CURSOR_NEXT = 0, MT_CURSOR_STOP = 1 };
typedef int (*mt_ring_event_fn)(void *user, const mt_ring_event *event);

/* One callback per record type; `other` receives the records whose own callback is NULL
 * (opaque types included when `opaque` is NULL). Records with no callback at all are consumed
 * silently. `lost` reports records that were overwritten before this cursor read them (a count
 * of records, never words); `registry` reports each registry entry once, and never after a
 * record that its writer wrote after registering it (even while another thread has not finished
 * registering an earlier entry). Entries registered at the same time by different threads may be
 * reported in either order; mt_cursor_lookup prefers the one placed later in the registry. */
typedef struct mt_cursor_callbacks {
  mt_ring_event_fn lifecycle, clock, counter, span_begin, span_end;
  mt_ring_event_fn user_unit, user_int, user_span_begin, user_span_end, user_custom;
  mt_ring_event_fn opaque;
  mt_ring_event_fn other;
  void (*lost)(void *user, uint32_t ring, uint64_t records);
  void (*registry)(void *user, unsigned kind, uint64_t id, const void *bytes, size_t length);
} mt_cursor_callbacks;

/* Opens a cursor on `<dir>/<pid>.memtap-ring` (`dir` NULL: MEMTAP_RING_DIR, else $TMPDIR, else
 * /tmp; `pid` < 0: the current process). The cursor starts at the oldest record still present:
 * history overwritten before it existed is not reported as lost. A file that is not a valid ring
 * file (bad magic or version, offsets outside the file, a truncated file, a symbolic link) is
 * rejected with MT_E_MALFORMED, MT_E_UNSUPPORTED or MT_E_IO and a message saying why; a file
 * still being created gives MT_E_STATE. The cursor only reads the file unless it becomes the
 * primary. Several cursors may read one file at once. */
int mt_cursor_open(mt_cursor **out, const char *dir, int pid, mt_error *err);
/* The same for the file at `path`. The one symbolic link followed is a process's own link to a
 * file it maps, /proc/PID/map_files/START-END: a ring file its process deleted
 * (mt_record_find_ring). */
int mt_cursor_open_file(mt_cursor **out, const char *path, mt_error *err);

/* Makes this cursor the file's primary consumer: it publishes its read positions and its pid in
 * the file so that a lossless producer waits for it. Fails with MT_E_STATE if a live process
 * already is the primary or is registering as it (a dead one is replaced). Of consumers that
 * register at the same time, exactly one succeeds, and the others write nothing to the file. */
int mt_cursor_register_primary(mt_cursor *cursor, mt_error *err);

/* Offers (on) or withdraws (off) the primary's clock tick (docs/ring.md §5): while offered, every
 * poll stores a reading of the file's clock in the file, and a producer with a single writing
 * thread stamps its records with the latest tick instead of reading the clock itself, which saves
 * it a clock reading per record (10-30 ns) at the price of times up to one polling period early.
 * Only for a consumer that polls often: withdraw the tick before any longer sleep, since a
 * producer checks a tick against its own clock only once every 16 records (withdrawing one more
 * than 2 ms away from it, either way: a clock stepped back, or a program in another time
 * namespace). MT_E_STATE when turning it on for a cursor that is not the primary.
 * mt_cursor_close withdraws it. */
int mt_cursor_set_clock_tick(mt_cursor *cursor, bool on);

/* Sets the callbacks (copied) and the pointer passed to them. */
void mt_cursor_set_callbacks(mt_cursor *cursor, const mt_cursor_callbacks *callbacks, void *user);

/* Reads up to `max_records` records (0: no limit), visiting the rings round-robin from the one
 * after where the previous poll stopped, and calls the callbacks. *delivered (if non-NULL)
 * receives how many records were consumed. A record whose bytes were overwritten while being
 * read is skipped and counted as lost, never reported as corruption. Returns MT_E_MALFORMED for
 * a record that breaks the format (the ring is then skipped by later polls), MT_E_STATE if this
 * cursor is already being polled. */
int mt_cursor_poll(mt_cursor *cursor, size_t max_records, size_t *delivered, mt_error *err);

/* Ends the cursor where the file is now: every ring's end becomes its current tail, and the
 * registry's its entries reserved so far. Later polls deliver only the records that start before
 * their ring's end (and registry entries before the registry's end), and mt_cursor_drained is
 * true once every ring has been read up to its end. For a one-shot read of a live file (memtap
 * ring-dump without --follow): without an end, a producer that writes faster than the consumer
 * reads keeps it polling forever. If the producer laps the cursor past a ring's end, the records
 * it overwrote up to the end are reported lost; this count uses the ring's next sequence number
 * read just after its tail, so it may include one record the producer was in the middle of
 * writing when the end was set. Calling it again moves the ends to the present. */
void mt_cursor_set_end(mt_cursor *cursor);

/* What the file says about its producer and its rings, read now. */
typedef struct mt_ring_file_info {
  int pid;              /* the producer */
  int parent_pid;       /* for a file created after fork, else 0 */
  uint64_t fork_number; /* which fork of the parent created it, else 0 */
  uint64_t start_time;  /* the producer's start time, in clock ticks since boot */
  mt_ring_mode mode;
  mt_ring_clock clock;
  uint64_t clock_hz;           /* ticks per second of the timestamps */
  int64_t created_realtime_ns; /* CLOCK_REALTIME when the file was created */
  int64_t created_ns;          /* the same moment, as mt_cursor_timestamp_ns gives times */
  uint32_t ring_count;
  uint64_t ring_size;     /* bytes per ring */
  uint64_t registry_size; /* bytes */
  bool stopped;           /* the producer closed it */
  bool paused;
  bool degraded;                /* lossless file that fell back to flight recorder */
  int primary_pid;              /* the registered primary consumer, or 0 */
  uint32_t rings_in_use;        /* claimed by a live thread */
  uint64_t records_written;     /* by every ring, since creation */
  uint64_t records_overwritten; /* by the producer before the primary had read them (or in
                                   flight-recorder mode, before anyone had) */
  uint64_t records_nested;      /* dropped: interrupted another write on the same thread */
  uint64_t records_no_ring;     /* dropped: the thread had no ring */
  uint64_t rings_recovered;     /* taken over from threads that vanished without releasing */
  uint64_t claims_failed_full;  /* a thread found every ring taken */
  uint64_t claims_failed_space; /* reserving a ring's disk space failed */
  uint64_t rings_given_back;    /* the program lowered its address-space limit: free rings the
                                   producer unmapped and took out of its pool for good */
  uint64_t claims_failed_limit; /* a thread found no ring free after some were given back */
  uint64_t lost_records;        /* reported lost to this cursor so far */
} mt_ring_file_info;

int mt_cursor_info(const mt_cursor *cursor, mt_ring_file_info *info);

/* Whether every record the producer published (up to the ends, after mt_cursor_set_end) has been
 * consumed by this cursor, now. */
bool mt_cursor_drained(const mt_cursor *cursor);

/* Records reported lost to this cursor so far. */
uint64_t mt_cursor_lost_records(const mt_cursor *cursor);

/* fork() calls the producer made while its file was open (counted as each starts). */
uint64_t mt_cursor_forks(const mt_cursor *cursor);

/* Signals below MT_RING_SIGNALS (SIGHUP .. SIGTERM) whose deliveries to the traced program's own
 * handlers the tracer counts in its ring file, so that `memtap record` can tell a signal sent to
 * it alone (which it passes on) from one the program got too (sent to their process group). */
#define MT_RING_SIGNALS 16

/* Deliveries of `sig` to the producer's signal handlers so far (counted by libmemtap-preload's
 * trampoline; 0 for a signal it does not count or a process that does not trace). Wraps at 2^32. */
uint32_t mt_cursor_signals_handled(const mt_cursor *cursor, int sig);

/* Converts a record's raw timestamp to nanoseconds of the producer's CLOCK_MONOTONIC (of
 * CLOCK_REALTIME for a realtime file). */
int64_t mt_cursor_timestamp_ns(const mt_cursor *cursor, uint64_t timestamp);

/* The newest registry entry (kind, id) this cursor has seen (the poll reads the registry), or
 * MT_E_INVALID if none. *bytes is borrowed until the cursor is closed. */
int mt_cursor_lookup(const mt_cursor *cursor, unsigned kind, uint64_t id, const void **bytes,
                     size_t *length);

/* The path of a process's ring file: "<dir>/<pid>.memtap-ring", `dir` as mt_cursor_open's.
 * MT_E_INVALID if it does not fit in `size`. */
int mt_ring_file_path(char *buf, size_t size, const char *dir, int pid);

/* Unregisters a primary cursor (its lossless producer degrades) and frees everything. */
void mt_cursor_close(mt_cursor *cursor);

#ifdef __cplusplus
}
#endif
#endif
