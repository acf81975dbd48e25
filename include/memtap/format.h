/* memtap/format.h: reading and writing memtrace traces (the CTF format of Jane Street's memtrace,
 * versions 1 to 3; docs/FORMAT.md specifies it byte by byte).
 *
 * A trace is a trace_info record (who ran, when, at which sampling rate) followed by a stream of
 * events: allocations (with a backtrace of location codes), promotions and collections of objects.
 * Every location code used by an allocation is described once by a list of source locations.
 *
 *   - mt_writer writes a trace to a file descriptor, byte for byte as memtrace's Trace.Writer does;
 *   - mt_reader reads one (v1, v2, v3, plain or zstd-compressed), checking every rule of the
 * format;
 *   - mt_transcode copies a reader's events into a writer (memtap copy).
 *
 * Handles are opaque, created and destroyed in pairs. Nothing here prints; problems come back as
 * status codes with an mt_error (memtap/common.h), and reader warnings through a callback. */
#ifndef MEMTAP_FORMAT_H
#define MEMTAP_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Vocabulary
 * ------------------------------------------------------------------------------------------- */

/* Where an allocation was made (FORMAT.md §2.7). malloc-family blocks are External. */
typedef enum mt_source {
  MT_SOURCE_MINOR = 0,
  MT_SOURCE_MAJOR = 1,
  MT_SOURCE_EXTERNAL = 2,
} mt_source;

/* One source location. A location code maps to a list of these, one per inlined function,
 * outermost first (FORMAT.md §2.6). Strings are NUL-terminated bytes, not necessarily UTF-8. */
typedef struct mt_location {
  const char *filename;
  const char *defname; /* the function name */
  int32_t line;        /* written clamped to 20 bits */
  int32_t start_char;  /* written clamped to 8 bits */
  int32_t end_char;    /* written clamped to 10 bits */
} mt_location;

/* The trace_info record (FORMAT.md §2.5). */
typedef struct mt_trace_info {
  int version;        /* format version of packet 0 (1, 2 or 3) */
  int64_t start_time; /* microseconds since the Unix epoch */
  double sample_rate; /* lambda, 0 < rate <= 1 */
  int word_size;      /* in bits; 64 for every real trace */
  const char *executable_name;
  const char *host_name;
  const char *ocaml_runtime_params; /* memtap's own traces put "memtap=<version>,..." here */
  int64_t pid;
  const char *context; /* "" when absent (v1, or no context) */
} mt_trace_info;

/* Whether a trace can carry the sample rate `rate` (the reader's rule): 0 < rate <= 1, and the
 * bytes one sample stands for (word_size / 8 / rate) finite, which a denormal rate overflows. */
bool mt_sample_rate_is_valid(double rate, int word_size);

typedef enum mt_event_kind {
  MT_EVENT_ALLOC = 0,
  MT_EVENT_PROMOTE = 1,
  MT_EVENT_COLLECT = 2,
} mt_event_kind;

/* A run of one location code repeated `count` times in a row in a backtrace (deep recursion repeats
 * one code hundreds of times). A backtrace's runs are maximal: two runs in a row have different
 * codes. */
typedef struct mt_backtrace_run {
  int64_t code;   /* as in mt_event.backtrace */
  uint32_t start; /* the position of the run's first frame in the backtrace (0 is the outermost) */
  uint32_t count; /* >= 1 */
} mt_backtrace_run;

/* One decoded event. For promote and collect, the allocation-only fields are zero (backtrace NULL).
 */
typedef struct mt_event {
  mt_event_kind kind;
  int64_t time;    /* microseconds since the Unix epoch (subtract info.start_time) */
  int64_t obj_id;  /* the allocation's object id (FORMAT.md §2.7, §2.9) */
  uint16_t domain; /* the domain of the packet holding the event (0 in v1/v2) */
  int64_t offset;  /* absolute byte offset of the event in the decompressed trace */
  /* Allocations only: */
  int64_t length;   /* size in words, header excluded */
  int64_t nsamples; /* sample points inside the block (>= 1 in valid traces) */
  mt_source source;
  int64_t common_prefix; /* as read from the event (FORMAT.md §6) */
  bool short_form;       /* encoded as alloc01..alloc16 */
  /* The backtrace as location codes, outermost frame first, after the 63-bit conversion of
   * FORMAT.md §2.12. Borrowed: valid until the next call on the reader. NULL/0 when the reader
   * was opened without backtrace decoding. */
  const int64_t *backtrace;
  size_t backtrace_length;
  /* A reader opened with `runs_only` (or switched to it) hands out the backtrace as runs instead,
   * outermost first: `backtrace` is then NULL, `backtrace_length` still the depth. Borrowed like
   * `backtrace`. Decoding runs costs per event what the event's encoding costs, not the
   * backtrace's depth. NULL/0 when the reader hands out flat backtraces or none. */
  const mt_backtrace_run *backtrace_runs;
  size_t backtrace_run_count;
  /* The first `common_runs` runs are equal (code, start, count) to those of the previous
   * allocation of the same domain that this reader returned, so a consumer that keeps state per
   * run of the previous backtrace can reuse that much of it (the runs after may be equal too). */
  size_t common_runs;
} mt_event;

/* ---------------------------------------------------------------------------------------------
 * Writer
 * ------------------------------------------------------------------------------------------- */

typedef struct mt_writer mt_writer;

typedef struct mt_writer_options {
  int version; /* 3 (the default when 0) or 2. v2 has no domains and no id chunks */
  /* The pid written in every packet header and in trace_info; 0 means info->pid. It plays no part
   * in fork detection (see mt_writer_create). */
  int64_t pid;
} mt_writer_options;

/* Resolves a location code to its location list, outermost (physically containing) function first.
 * Called at most once per cache miss. The entries must stay valid until the callback is called
 * again or put_alloc returns. Return MT_OK, or a negative status to abort the put_alloc: the
 * allocation is dropped, the events before it are written, and the writer stops (its backtrace
 * cache is already ahead of the file), so put_alloc and later calls return an error. */
typedef int (*mt_resolve_fn)(void *user, uint64_t code, const mt_location **entries, size_t *count);

/* Creates a writer on `fd` (which stays the caller's: close does not close it) and writes packet 0
 * from `info` (info->version and info->start_time are used as the trace's start; version comes from
 * `options`). The initial domain is 0. Strings longer than 4000 bytes are truncated so that
 * packet 0 always fits. `options` may be NULL.
 *
 * Writers belong to the process that created them. In a forked child, every put (and
 * next_alloc_id, flush, create_domain) fails with MT_E_FORKED and writes nothing, and the writer
 * stops; close frees it without writing. Puts detect the fork without a system call: a
 * pthread_atfork child handler, installed with the first writer, bumps a process-wide counter
 * that they compare with its value at creation. Flush, close and create_domain also compare
 * getpid() with the creator's pid, so a child made without fork(3) (a raw clone) that runs no
 * atfork handler buffers its puts but still writes nothing. */
int mt_writer_create(mt_writer **out, int fd, const mt_trace_info *info,
                     const mt_writer_options *options, mt_error *err);

/* Records an allocation at `time` (µs since the epoch, non-decreasing per domain), of `length`
 * words, with `nsamples` >= 1 samples, made at `callstack` (location codes, INNERMOST first: index
 * 0 is the allocation point). Codes are in [1, 2^62), or negative 63-bit values sign-extended as
 * mt_reader returns them; other codes are refused, since 63-bit readers would read them as other
 * codes (FORMAT.md §2.12). Codes not in the writer's backtrace cache are resolved through
 * `resolve` and described in the next location packet. Stores the new object id in `*obj_id` when
 * non-NULL. */
int mt_writer_put_alloc(mt_writer *w, int64_t time, int64_t length, int64_t nsamples,
                        mt_source source, const uint64_t *callstack, size_t callstack_length,
                        mt_resolve_fn resolve, void *resolve_user, int64_t *obj_id, mt_error *err);

/* mt_writer_put_alloc for a caller that knows `callstack` holds the same codes as the writer's
 * previous allocation, which succeeded, with no event of another domain since (a loop allocating
 * from one place): the codes are then not compared with the previous stack's. Same bytes. */
int mt_writer_put_alloc_same(mt_writer *w, int64_t time, int64_t length, int64_t nsamples,
                             mt_source source, const uint64_t *callstack, size_t callstack_length,
                             mt_resolve_fn resolve, void *resolve_user, int64_t *obj_id,
                             mt_error *err);

/* Records that object `obj_id` (allocated earlier by this writer) was promoted / collected. An id
 * the domain has not handed out yet is refused for a promote, and in v2 for a collect too. */
int mt_writer_put_promote(mt_writer *w, int64_t time, int64_t obj_id, mt_error *err);
int mt_writer_put_collect(mt_writer *w, int64_t time, int64_t obj_id, mt_error *err);

/* Multiplexed domains (memtrace's Writer.Multiplexed_domains): the same three events for an
 * explicit domain. Switching to another domain than the previous event's flushes the previous
 * domain's packets first; each domain has its own caches and takes object ids in chunks of 10 000
 * (v3). v2 writers accept only domain 0. */
int mt_writer_put_alloc_in(mt_writer *w, uint16_t domain, int64_t time, int64_t length,
                           int64_t nsamples, mt_source source, const uint64_t *callstack,
                           size_t callstack_length, mt_resolve_fn resolve, void *resolve_user,
                           int64_t *obj_id, mt_error *err);
int mt_writer_put_promote_in(mt_writer *w, uint16_t domain, int64_t time, int64_t obj_id,
                             mt_error *err);
int mt_writer_put_collect_in(mt_writer *w, uint16_t domain, int64_t time, int64_t obj_id,
                             mt_error *err);

/* Writers for further domains sharing one file (memtrace's live tracer: one writer per domain,
 * each flushing on its own schedule, packets interleaved in the file). Creates a writer for
 * `domain` (v3 only; not used by any other writer of this trace) whose packets start at `now` and
 * go to the same descriptor, with its own caches and id chunks from the trace's shared counter. Use
 * the plain put_alloc / put_promote / put_collect on it; close it with mt_writer_close (it flushes
 * its domain). Writers of one trace may be used from different threads, one thread per writer at a
 * time: packet writes and id chunks are serialised by a lock inside. The writers may be closed in
 * any order; the shared state goes with the last one. In a forked child (see mt_writer_create),
 * closing any of them never waits for that lock (another thread of the parent may have held it at
 * the fork), and creating one fails with MT_E_FORKED. */
int mt_writer_create_domain(mt_writer *trace, uint16_t domain, int64_t now, mt_writer **out,
                            mt_error *err);

/* The id `domain`'s next allocation will get. Like memtrace's next_alloc_id, it first switches to
 * `domain` and, if that domain's id chunk is used up, flushes it (at its last event's time). */
int mt_writer_next_alloc_id(mt_writer *w, uint16_t domain, int64_t *obj_id, mt_error *err);

/* Says that the current domain's part of the trace lasts until `time` (µs since the epoch) even
 * if its last event came earlier: the packet now open ends there (its timestamp_end), so that a
 * reader's duration is the traced program's, not its last sampled allocation's. A packet spans
 * at most 30 s (FORMAT.md §2.4): a longer extension ends the open packet 30 s after it began and
 * covers the rest with empty packets of at most 30 s each (the last one left open), up to a day
 * of them (2880, about 200 KB); the packet left open then spans the rest, as memtrace's close
 * does after a long quiet spell, so that a damaged end time cannot fill the disk. A time
 * before the domain's last event changes nothing; later events must not be older than `time`. */
int mt_writer_extend(mt_writer *w, int64_t time, mt_error *err);

/* Writes out everything buffered for the current domain (location packets, then the events packet,
 * even if empty), as memtrace's flush does. */
int mt_writer_flush(mt_writer *w, mt_error *err);

/* Flushes the current domain and frees the writer. Safe on NULL. Returns the flush's status; the
 * writer is freed either way. A writer that failed (I/O error, fork) writes nothing more. */
int mt_writer_close(mt_writer *w, mt_error *err);

/* ---------------------------------------------------------------------------------------------
 * Reader
 * ------------------------------------------------------------------------------------------- */

typedef struct mt_reader mt_reader;

/* Called for every recoverable problem: a packet with a foreign pid, a truncated last packet, a
 * file cut inside a packet header. The reader skips what it names and goes on. Packets of other
 * processes are named for the first MT_READER_FOREIGN_SAID of them only (the last of those says
 * so), then skipped unsaid: a file holding many (traces concatenated) would otherwise print a line
 * per packet. mt_reader_warning_count counts them all. */
#define MT_READER_FOREIGN_SAID 5
typedef void (*mt_warning_fn)(void *user, int64_t offset, const char *message);

typedef struct mt_reader_options {
  bool backtraces;          /* decode backtraces (and check the cache verifier); default false */
  mt_warning_fn on_warning; /* may be NULL: warnings are then only counted */
  void *warning_user;
  /* With backtraces: hand them out as runs (mt_event.backtrace_runs) instead of flat arrays,
   * sparing the work proportional to each backtrace's depth that the flat array costs. */
  bool runs_only;
} mt_reader_options;

/* Opens a trace file, plain or zstd-compressed (detected by its magic number, whatever its name),
 * and reads packet 0. `options` may be NULL (no backtraces, no warning callback). */
int mt_reader_open(mt_reader **out, const char *path, const mt_reader_options *options,
                   mt_error *err);

/* The same on an open descriptor (a file, a pipe), which stays the caller's. */
int mt_reader_open_fd(mt_reader **out, int fd, const mt_reader_options *options, mt_error *err);

/* The same on bytes in memory, which must outlive the reader. */
int mt_reader_open_memory(mt_reader **out, const void *data, size_t size,
                          const mt_reader_options *options, mt_error *err);

/* The trace_info of packet 0. Owned by the reader. */
const mt_trace_info *mt_reader_info(const mt_reader *r);

/* Decodes the next event into `*event`. Returns 1 when an event was stored, 0 at the end of the
 * trace, or a negative status (MT_E_MALFORMED with the byte offset and the rule broken). After an
 * error the reader stays failed: further calls return the same error. */
int mt_reader_next(mt_reader *r, mt_event *event, mt_error *err);

/* Switches `runs_only` (mt_reader_options) from the next event on, converting the previous
 * backtraces the reader keeps (once, in their depth): MT_E_NOMEM when memory runs out, the setting
 * then unchanged. */
int mt_reader_set_runs_only(mt_reader *r, bool runs_only, mt_error *err);
bool mt_reader_runs_only(const mt_reader *r);

/* With backtraces: from the next event on, fail with MT_E_MALFORMED ("invalid location code", at
 * the allocation) on a backtrace holding a code the trace has not described by then (FORMAT.md
 * §2.10: every cache miss is described by a location event before the events packet that holds
 * it). Codes are looked up where they enter the decoder's cache, and code 0 (a bucket no miss has
 * filled) where it is handed out, not at every use: this costs little more than reading. Codes
 * handed out before the switch are not checked again. Off by default. */
void mt_reader_set_check_codes(mt_reader *r, bool check);
bool mt_reader_check_codes(const mt_reader *r);

/* Calls `fn` for every remaining event; stops early when fn returns non-zero, and returns that
 * value. Returns MT_OK at the end of the trace, or the negative status of a reading error. */
typedef int (*mt_event_fn)(void *user, const mt_event *event);
int mt_reader_iter(mt_reader *r, mt_event_fn fn, void *user, mt_error *err);

/* The location list of `code` (63-bit converted, as in mt_event.backtrace), as the trace described
 * it so far. Returns false if the trace has not described this code. Borrowed from the reader. */
bool mt_reader_lookup_location(const mt_reader *r, int64_t code, const mt_location **entries,
                               size_t *count);

/* Bytes consumed so far (of the decompressed trace) and, when known, the total (-1 for pipes and
 * compressed input). */
int64_t mt_reader_position(const mt_reader *r);
int64_t mt_reader_size(const mt_reader *r);
/* The modification time (ns since the epoch) of the trace file when the reader opened it, for
 * readers of an uncompressed regular file (the ones with a size): what tells a file changed in
 * place from the one it was. False for bytes in memory, pipes and compressed input. */
bool mt_reader_file_mtime(const mt_reader *r, int64_t *mtime_ns);

/* How far in time the packets decoded whole so far reach (µs since the epoch; the start time before
 * any): as far as their events, or further when the writer said the trace went on past its last
 * event (a packet's timestamp_end: memtap's recorder ends the last packet when the program ended,
 * whatever it allocated last). A trace ends at the later of this and its last event. */
int64_t mt_reader_end_time(const mt_reader *r);

/* How many packets were skipped with a warning (foreign pid, truncated). */
uint64_t mt_reader_warning_count(const mt_reader *r);

/* Whether the trace ended in a partial packet or a partial header (the writer was killed). The
 * offset of the cut is stored in `*offset` when non-NULL. Meaningful once next returned 0. */
bool mt_reader_truncated(const mt_reader *r, int64_t *offset);

/* Frees the reader. Safe on NULL. */
void mt_reader_close(mt_reader *r);

/* ---------------------------------------------------------------------------------------------
 * Checkpoints: resuming a reader in the middle of a trace
 *
 * Decoding event N needs the state left by events 0 .. N-1: per domain, the MTF tables of the
 * location codec, the backtrace cache and the previous backtrace (FORMAT.md §2.6, §2.7). Between
 * two packets that state can be saved, and restored into another reader of the same trace, which
 * then goes on from there without decoding what came before (memtap's checkpoint index,
 * TRACE.idx, is made of these). The location codes the trace described are saved apart, in
 * increments, because they accumulate over the whole trace. Only readers whose whole
 * uncompressed input is in memory (a mapped file, or bytes) can save or restore: not pipes or zstd
 * streams.
 * ------------------------------------------------------------------------------------------- */

/* Whether `r` stands between packets: every event of the last packet was returned (or no event
 * was), the trace did not end and nothing failed. The state can be saved only then. */
bool mt_reader_between_packets(const mt_reader *r);

/* Saves the decoder state and the position of the next packet, with a copy of that packet's header
 * by which a restore checks that it resumes the same trace. `*data` is malloc'd: the caller frees
 * it. MT_E_INVALID when not between packets or the input cannot seek; MT_E_MALFORMED when the
 * packet just finished fails its alloc-id check (the reader then fails as mt_reader_next would). */
int mt_reader_save_state(mt_reader *r, void **data, size_t *size, mt_error *err);

/* Saves the location codes described since `*mark` (0 the first time) and advances `*mark`.
 * `*data` is malloc'd: the caller frees it. */
int mt_reader_save_locations(const mt_reader *r, size_t *mark, void **data, size_t *size,
                             mt_error *err);

/* Adds saved location codes. A code the reader knows with another description, or damaged data, is
 * MT_E_MALFORMED, the offset being in `data`. */
int mt_reader_load_locations(mt_reader *r, const void *data, size_t size, mt_error *err);

/* Replaces the decoder state by a saved one and moves to its position. Every length and index is
 * checked, and the packet header at the position must be the saved copy: a state of another trace
 * (or a damaged one) is MT_E_MALFORMED with the offset in `data`, and leaves the reader as it was.
 * The location codes described before that position must be loaded too
 * (mt_reader_load_locations), or lookups of them fail. */
int mt_reader_load_state(mt_reader *r, const void *data, size_t size, mt_error *err);

/* A place to take a reader back to: a pass that restored a state it later finds wrong (the trace
 * does not decode past it) starts again from where it stood before, as if it had never moved. */
typedef struct mt_reader_mark mt_reader_mark;

/* Marks where `r` stands, between packets (mt_reader_between_packets): its saved state, and the
 * location codes it knows, how far its packets reach and the warnings it counted. `*mark` is
 * malloc'd: free it with mt_reader_mark_free. MT_E_INVALID as mt_reader_save_state. */
int mt_reader_mark_take(mt_reader *r, mt_reader_mark **mark, mt_error *err);

/* Takes `r` back to `mark`, which must have been taken of `r`: its position and decoder state, the
 * location codes it knew (those described or loaded since are forgotten), mt_reader_end_time and
 * the warning count are those of then, and a failure since is forgotten. What it reads again
 * after the position it last began reading at (the trace's start, or the last restored state) is
 * warned of again in the count, not through the callback. MT_E_NOMEM leaves it failed. */
int mt_reader_rewind(mt_reader *r, const mt_reader_mark *mark, mt_error *err);

/* Frees a mark. Safe on NULL. */
void mt_reader_mark_free(mt_reader_mark *mark);

/* ---------------------------------------------------------------------------------------------
 * Transcoding
 * ------------------------------------------------------------------------------------------- */

/* Copies every remaining event of `r` (opened with backtraces) into `w`, domain for domain, mapping
 * object ids so that collects and promotes name the right objects whatever ids the writer hands
 * out. A promote or collect of an object whose allocation the reader did not return (its packet
 * skipped as another process's, with a warning) keeps its id; when that id is another object's in
 * the copy, or one the writer refuses, the event is left out (mt_transcode_options.on_left_out).
 * Returns MT_OK or the first error of either side. */
int mt_transcode(mt_reader *r, mt_writer *w, mt_error *err);

typedef struct mt_transcode_options {
  /* Rounds every event's time down to a whole multiple of this many microseconds after the
   * trace's start time (0 or 1: times unchanged). Times stay in order within each domain; an
   * event stamped before the start (it happens in damaged clocks) keeps its time. */
  int64_t time_resolution_us;
  /* Called for each promote or collect left out of the copy (see mt_transcode), with its offset
   * in the input; may be NULL. */
  mt_warning_fn on_left_out;
  void *left_out_user;
} mt_transcode_options;

/* mt_transcode with options (NULL: mt_transcode's behaviour). MT_E_INVALID for a negative
 * resolution. */
int mt_transcode_with(mt_reader *r, mt_writer *w, const mt_transcode_options *options,
                      mt_error *err);

#ifdef __cplusplus
}
#endif
#endif
