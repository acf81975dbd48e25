/* memtap/record.h: the consumer that turns the native tracer's rings into a memtrace trace
 * (docs/record.md). It is what `memtap record` runs, and what a process tracing itself would run
 * in a background thread.
 *
 * A recorder reads one traced process's ring file(s) (the records of memtap/tracer.h), merges the
 * threads' records by time, repairs what clock skew and late publishing get out of causal order,
 * assigns object ids in allocation order, symbolises the return addresses with elfutils and
 * writes memtrace v3 (or v2) to a file descriptor, optionally zstd-compressed.
 *
 *   mt_recorder_create, mt_recorder_attach..., mt_recorder_poll... (periodically),
 *   mt_recorder_finish, mt_recorder_stats, mt_recorder_destroy.
 *
 * A recorder is not thread-safe: one thread drives it. */
#ifndef MEMTAP_RECORD_H
#define MEMTAP_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_recorder mt_recorder;

typedef struct mt_recorder_options {
  int version;   /* memtrace format version: 3 (the default when 0) or 2 */
  bool compress; /* write a zstd stream (flushed at every periodic flush) */
  /* Flush the trace this often (milliseconds of the consumer's clock) so that it stays readable up
   * to the last flush if the consumer is killed; 0 means 1000, a negative value never. */
  int64_t flush_interval_ms;
  /* How long a record stays in the merge buffer before it is put in order and written
   * (milliseconds of the consumer's clock after its timestamp): records published later than this
   * after being stamped are repaired, not merged. 0 means 20. */
  int64_t merge_lag_ms;
  /* How far apart in trace time an allocation may be stamped after the free it precedes, on
   * another thread, and still be matched to it (clock skew between CPUs). 0 means 1000 µs. */
  int64_t skew_tolerance_us;
  /* How long (trace time) a free of an address that is not live waits for its allocation before
   * it is counted as unknown, and an allocation at a live address waits for the free in flight
   * before the old object is taken as freed. 0 means 1 s. */
  int64_t hold_bound_us;
  bool no_symbols; /* write location lists naming module+offset only (tests, speed) */
  /* trace_info fields; NULL: from the traced process's own description in its ring (its
   * executable path; its command line, arguments joined by spaces), or "" */
  const char *executable_name;
  const char *context; /* the command line */
  /* Used only when the ring carries no process description: the sampling rate (0 means 1). */
  double sample_rate;
  /* Also ask the debuginfod servers named by $DEBUGINFOD_URLS for the debug info of modules that
   * have none on this machine (libdwfl's standard search; starts libcurl). Off: local files only
   * (the build-id directory and .gnu_debuglink). */
  bool debuginfod;
  /* Where to keep the inflated copies of compressed separate debug files (libc6-dbg's libc: 10 MB
   * inflated from 4.4 MB, at every run otherwise), or NULL for none. Process-wide: the last
   * recorder created decides. Only copies of this user's, exactly as planned, are used. */
  const char *debug_cache_dir;
  /* With `compress`: the zstd level, 0 for the default (3); negative levels are zstd's fast
   * ones. Outside zstd's range, mt_recorder_create fails. */
  int compress_level;
  /* The resolution of the trace's timestamps in microseconds, 0 or 1 for the format's own (1 µs),
   * at most 1 s: every event's time is rounded down to a multiple of it, counted from the trace's
   * start. Coarser stamps cost lifetimes and order within the step nothing else, and let a
   * compressor see repeated events as repeated bytes (docs/record.md §7). Larger values make
   * mt_recorder_create fail. */
  int64_t time_resolution_us;
  /* Told once per module (executable or library) whose file was not on disk as the process loaded
   * it, deleted or replaced (another build-id) while the program ran: `from_process` when its
   * symbols were read from the running process's mapping of it instead (/proc/PID/map_files, or
   * /proc/PID/exe), false when its frames stay module+offset. NULL: not told. */
  void (*module_gone)(void *user, const char *path, bool from_process);
  void *module_gone_user;
} mt_recorder_options;

/* Counts so far (final after mt_recorder_finish). */
typedef struct mt_recorder_stats {
  uint64_t allocations; /* alloc events written (regions and region pieces included) */
  /* The bytes they stand for, estimated as the trace's analyses do: their sample points over
   * the sampling rate (with full tracing, the blocks' sizes rounded up to words). */
  double allocated_bytes;
  uint64_t samples;       /* the sample points of those alloc events (nsamples, summed) */
  uint64_t frees;         /* collect events written */
  uint64_t unknown_frees; /* frees of addresses never seen allocated: counted, not written */
  uint64_t implied_frees; /* an allocation at a live address whose free never arrived: the
                             old object was collected when the new one was written */
  uint64_t lost_records;  /* records the producer overwrote or dropped before we read them, and
                             records given up when the recorder ran out of memory */
  /* Why a thread of the traced process had no ring, and dropped its records: its ring's space
   * could not be reserved in the ring file (the file system is full), every ring was taken, or
   * every ring kept when the program lowered its address-space limit was taken (the others were
   * given back to make room). */
  uint64_t claims_failed_space, claims_failed_full, claims_failed_limit;
  uint64_t records;   /* tracer records read */
  uint64_t reordered; /* records that arrived after later-stamped ones had been written */
  uint64_t bytes;     /* bytes written to the descriptor */
  int64_t pid;        /* the traced process, from its ring file (0 before any attach) */
  uint64_t forks;     /* fork() calls it made while traced (its ring file's count) */
  /* A lossless ring file degraded while read: its tracer took this consumer for gone (or
   * waited for it longer than its attach timeout) and stopped tracing, so the trace ends early
   * with no record counted lost. */
  bool tracer_stopped;
  bool failed;    /* writing the trace failed: the rings are still drained */
  mt_error error; /* what failed, when `failed` */
} mt_recorder_stats;

/* Creates a recorder writing to `fd` (which stays the caller's). Nothing is written until the
 * traced process's description arrives (or finish). `options` may be NULL. */
int mt_recorder_create(mt_recorder **out, int fd, const mt_recorder_options *options,
                       mt_error *err);

/* Opens a cursor on the ring file at `path` and reads from it from now on. With `primary`, the
 * cursor registers as the file's primary consumer (a lossless producer waits for it). A file still
 * being created gives MT_E_STATE (try again). */
int mt_recorder_attach(mt_recorder *r, const char *path, bool primary, mt_error *err);

/* Reads what the attached rings hold now, writes what is old enough to be in order, and flushes
 * when the flush interval has passed. Returns MT_OK, or MT_E_MALFORMED when a ring file breaks
 * its format (that ring is skipped from then on). A failure to write the trace is not returned:
 * the recorder stops writing, keeps draining the rings, and says so in its stats. *progress (if
 * non-NULL) is set when any record was read. */
int mt_recorder_poll(mt_recorder *r, bool *progress, mt_error *err);

/* Offers (on) or withdraws (off) the clock tick of every file this recorder is the primary
 * consumer of, now and for files attached later (mt_cursor_set_clock_tick): a traced process with
 * one writing thread then stamps its records with the recorder's clock instead of reading its
 * own, up to one polling period early. For a caller that polls often: withdraw it before any
 * sleep longer than about a millisecond. Off by default. */
void mt_recorder_set_clock_tick(mt_recorder *r, bool on);

/* Whether every attached file's producer has closed it and everything in it was read. */
bool mt_recorder_done(const mt_recorder *r);

/* Reads every attached ring to its end, writes everything still held (frees never matched are
 * counted unknown), and closes the trace. Returns MT_OK, or the error that stopped the writing
 * (also in the stats). Poll must not be called afterwards. */
int mt_recorder_finish(mt_recorder *r, mt_error *err);

/* The traced program had ended by `realtime_ns` (CLOCK_REALTIME ns; memtap record passes when it
 * saw the process gone): mt_recorder_finish ends the trace's last packet there, so that the
 * trace's duration is the program's even when its last event, a sampled trace's last sample,
 * came long before. A time after the finish, or before the last event, counts as either. Not
 * called: the trace ends at its last event, as memtrace's traces do. */
void mt_recorder_set_end(mt_recorder *r, int64_t realtime_ns);

/* When the trace starts (CLOCK_REALTIME ns): the ring file's creation, or a forked child's fork.
 * Before the process has described itself in its ring, the file's creation. */
int64_t mt_recorder_start_time(const mt_recorder *r);

void mt_recorder_stats_get(const mt_recorder *r, mt_recorder_stats *out);

/* The executable of the traced process as its tracer named it in the ring (its /proc/self/exe
 * when tracing started), or NULL before that entry was read. Valid until the recorder is
 * destroyed. */
const char *mt_recorder_executable(const mt_recorder *r);

/* The fingerprint of the image the tracer started in (mt_tracer_process.image), or 0 before that
 * entry was read or when the tracer could not take it. A process whose fingerprint differs now
 * has exec'd since, even into the same program. */
uint64_t mt_recorder_image(const mt_recorder *r);

/* Finds the ring file of process `pid`, a running process memtap traces (under `memtap record`,
 * or tracing itself: MEMTAP=, mt_tracer_start), from the mapping its tracer keeps of it
 * (/proc/PID/maps): writes a path that opens it into `path` (of `size` bytes), its own path or,
 * when the file was deleted (a process tracing itself unlinks it), /proc/PID/map_files/..., which
 * only root may open. For mt_recorder_attach as a second consumer. MT_E_INVALID for no such
 * process, MT_E_STATE for a process that maps no ring file (not traced), MT_E_IO when its
 * mappings or its deleted file cannot be read (another user's process). */
int mt_record_find_ring(int pid, char *path, size_t size, mt_error *err);

/* Whether process `pid` maps the file at `path` (same device and inode): its program, a library,
 * its ring file. False when either cannot be read. */
bool mt_record_process_maps(int pid, const char *path);

/* Deliveries of `sig` to the traced program's signal handlers so far, as its tracer counted them
 * (mt_cursor_signals_handled of its own ring file); 0 before a file is attached. */
uint32_t mt_recorder_signals_handled(const mt_recorder *r, int sig);

/* Frees the recorder (closing its cursors: a lossless producer then degrades). Writes nothing
 * more if finish was not called. Safe on NULL. */
void mt_recorder_destroy(mt_recorder *r);

/* The settings of the MEMTAP_* variables the shim reads, parsed as the shim parses them, so that a
 * launcher can refuse a malformed one before starting the program. */
typedef struct mt_record_settings {
  bool full;
  double rate;       /* lambda: samples per 8-byte word */
  uint64_t interval; /* mean gap in bytes: 8 / rate */
  bool has_seed;
  uint64_t seed;
  uint64_t time_resolution_us; /* MEMTAP_TIME_RESOLUTION, 0 when unset */
} mt_record_settings;

/* Reads MEMTAP_FULL, MEMTAP_SAMPLE_INTERVAL, MEMTAP_RATE, MEMTRACE_RATE, MEMTAP_SEED and
 * MEMTAP_TIME_RESOLUTION (with the
 * precedence of docs/tracer.md) through `get` (getenv when NULL). MT_E_INVALID naming the variable
 * when one is malformed. */
int mt_record_settings_from_env(mt_record_settings *out, const char *(*get)(const char *name),
                                mt_error *err);

/* Parsers shared with the command line: "512K", "1M", "4096" (K/M/G are powers of 1024, result
 * in [8, 2^40]) and a rate in (0, 1]. */
int mt_record_parse_interval(const char *text, uint64_t *out);
int mt_record_parse_rate(const char *text, double *out);
/* A time resolution: digits and a unit, us, ms or s ("10us", "1ms"), from 1us to 1s; in µs. */
int mt_record_parse_time_resolution(const char *text, uint64_t *out_us);

/* Whether the tracer can enter the program at `path` (an ELF file, or a script whose interpreter
 * is checked instead): MT_E_UNSUPPORTED with the reason in `err` for a statically linked program
 * (no PT_INTERP: no dynamic loader reads LD_PRELOAD), a setuid or setgid file or one with file
 * capabilities (the loader ignores LD_PRELOAD in secure mode), and a sanitizer build (it needs
 * libasan/libtsan/libmsan/liblsan or defines __asan_init, __tsan_init, __msan_init or
 * __lsan_init: the sanitizer's runtime owns malloc). MT_E_IO when it cannot be read. A file that
 * is neither ELF nor a script is left for exec to judge (MT_OK). */
int mt_record_check_program(const char *path, mt_error *err);

/* What the program file at `path` needs in order to run: the interpreter its #! line names, or
 * the dynamic loader its ELF header names (PT_INTERP), copied into `out` (of `size` bytes).
 * Returns which of the two it is, as words for a message ("the interpreter its #! line names"),
 * or NULL when it names neither or cannot be read. */
const char *mt_record_program_needs(const char *path, char *out, size_t size);

/* For a Go program (an ELF file with Go's .go.buildinfo or .note.go.buildid section), which the
 * tracer enters when it is dynamically linked but whose Go heap never calls malloc: a sentence
 * saying where that heap is traced instead (a Go execution trace, docs/go.md), for a message (a
 * static string). NULL for any other file, or one that cannot be read. */
const char *mt_record_program_go_advice(const char *path);

#ifdef __cplusplus
}
#endif
#endif
