/* Internal interfaces between the files of src/record/ (docs/record.md): the decoded event, the
 * merge heap, the address maps, the module table, the symboliser, the output, and the causal
 * ordering stage that ties them together. */
#ifndef MEMTAP_RECORD_INTERNAL_H
#define MEMTAP_RECORD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/file_identity.h"
#include "common/hashmap.h"
#include "record/addrmap.h"
#include "memtap/format.h"
#include "memtap/record.h"
#include "memtap/ring.h"

/* --- events (recorder.c decodes them from ring records) ---------------------------------- */

typedef struct rec_event {
  int64_t time_ns;  /* absolute: ns since the epoch */
  uint64_t order;   /* arrival number: ties and stability */
  uint64_t source;  /* which thread wrote it: (attachment, ring, generation) */
  uint32_t type;    /* MT_TRACER_REC_* */
  uint32_t kind;    /* kind | flags word (allocations and maps) */
  uint64_t addr;    /* ALLOC, FREE, MAP, UNMAP: the address; REALLOC: the old address;
                       THREAD_START: the stack's low end */
  uint64_t addr2;   /* REALLOC: the new address; THREAD_*: the thread id */
  uint64_t size;    /* bytes (ALLOC, REALLOC, MAP, UNMAP, THREAD_START); MODULE_UNLOAD:
                       the serial */
  int64_t nsamples; /* ALLOC, REALLOC */
  uint32_t nframes;
  uint32_t stack_hash;    /* rec_stack_hash of the frames (the codes cache's key) */
  uint64_t stack_serial;  /* equal in two events: their frames are equal (0: not known) */
  const uint64_t *frames; /* return addresses, innermost first: own_frames, or the merge's
                             storage (valid until the next merge call) */
  uint64_t own_frames[];
} rec_event;

/* An event with room for `nframes` frames of its own (frames = own_frames), zeroed. */
rec_event *rec_event_new(uint32_t nframes);
/* A copy of `e` owning a copy of its frames (order.c keeps these while an address is
 * unsettled). */
rec_event *rec_event_clone(const rec_event *e);

static inline uint32_t rec_stack_hash(const uint64_t *frames, uint32_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (uint32_t i = 0; i < n; i++)
    h = (h ^ frames[i]) * 0xff51afd7ed558ccdull;
  return (uint32_t)(h >> 32);
}

/* --- merge.c: k-way merge of the threads' queues ---------------------------------------- */

/* One queued event: rec_event's fields without the links; its frames live in the source's
 * frame buffer at `frames_at` (an absolute position), shared with the previous event's when the
 * stack is the same. */
typedef struct rec_slot {
  int64_t time_ns;
  uint64_t order;
  uint64_t addr, addr2, size;
  int64_t nsamples;
  uint64_t frames_at;
  uint32_t kind;
  uint16_t type, nframes;
  uint32_t stack_hash;
  uint32_t stack_serial; /* rec_event.stack_serial */
} rec_slot;

/* One writing thread: its events in arrival order (a thread stamps its own records in order),
 * in a circular array (absolute positions head <= tail), and their frames in a circular buffer
 * of words, each stack contiguous. */
typedef struct rec_source {
  uint64_t key;
  rec_slot *slots;
  uint64_t slot_mask, head, tail;
  uint64_t *frames;
  uint64_t frame_mask, frames_head, frames_tail;
  uint64_t last_frames_at; /* the stack of the newest event pushed with frames */
  uint32_t last_nframes, last_hash, last_serial;
  size_t queued;
  int64_t newest_ns;  /* stamp of the newest event pushed */
  int64_t seen_at_ns; /* consumer clock when the last event was pushed */
  size_t heap_index;  /* position in the heap + 1, 0 when empty */
  bool retired;       /* its thread released its ring: released once its queue is empty */
} rec_source;

#define REC_MERGE_SPARES 4

/* Arrays of emptied or released sources kept for the next source that needs one (the largest
 * kept): `mask + 1` elements each. */
typedef struct rec_spares {
  void *array[REC_MERGE_SPARES];
  uint64_t mask[REC_MERGE_SPARES];
  size_t count;
} rec_spares;

typedef struct rec_merge {
  mt_hashmap by_key; /* source key -> index + 1 */
  rec_source *sources;
  size_t count, cap;
  size_t *heap; /* indices of non-empty sources, a min-heap on their head's (time, order) */
  size_t heap_count, heap_cap;
  size_t queued;
  size_t last_index; /* source of the previous push + 1 */
  /* Slot arrays of sources that emptied, and frame buffers of sources released, for the next
   * source that needs one: a thread that exited keeps nothing, and one that empties its queue at
   * every poll, or a new thread, gets an array already grown and touched (not a fresh one
   * page-faulted in, doubling by doubling). */
  rec_spares spare_slots, spare_frames;
  size_t frame_buffers; /* frame buffers allocated, held by sources or spare (for tests) */
  /* The source whose frame buffer the last popped event's frames point into (+ 1, 0: none), and
   * that source again once it is to be released (retired and emptied): the release waits for
   * the next push or pop, until which those frames are valid. */
  size_t popped, pending;
  /* Stack serials (rec_event.stack_serial) handed out, by the merge and by the recorder's direct
   * path alike: a new one for every stack that differs from its thread's previous one. 32 bits,
   * as in a slot, 0 skipped; rec_sites_stack_codes also compares hashes and sizes. */
  uint32_t stack_serials;
} rec_merge;

/* A new stack serial. */
static inline uint32_t rec_merge_new_serial(rec_merge *m) {
  if (!++m->stack_serials)
    m->stack_serials = 1;
  return m->stack_serials;
}

/* Whether two stacks of `n` frames (n >= 1) are the same: the innermost frame first (it is the one
 * that differs when anything does), the rest without early exits. The test of a thread's stack
 * against its previous one, wherever a repeated stack is kept once. */
static inline bool rec_same_frames(const uint64_t *a, const uint64_t *b, uint32_t n) {
  if (a[0] != b[0])
    return false;
  uint64_t diff = 0;
  for (uint32_t i = 1; i < n; i++)
    diff |= a[i] ^ b[i];
  return !diff;
}

/* The slot at the tail of `s` for `e`, every field but the frames' (frames_at, stack_hash,
 * stack_serial: the caller's). */
static inline rec_slot *rec_merge_slot(rec_source *s, const rec_event *e) {
  rec_slot *slot = &s->slots[s->tail & s->slot_mask];
  *slot = (rec_slot){.time_ns = e->time_ns,
                     .order = e->order,
                     .addr = e->addr,
                     .addr2 = e->addr2,
                     .size = e->size,
                     .nsamples = e->nsamples,
                     .kind = e->kind,
                     .type = (uint16_t)e->type,
                     .nframes = (uint16_t)e->nframes};
  return slot;
}

/* The slot filled by rec_merge_slot joins the queue of `s`. */
static inline void rec_merge_enqueued(rec_merge *m, rec_source *s, const rec_event *e,
                                      int64_t now_ns) {
  s->tail++;
  if (e->time_ns > s->newest_ns)
    s->newest_ns = e->time_ns;
  s->seen_at_ns = now_ns;
  s->queued++;
  m->queued++;
}

/* Copies `e` (and its frames, unless they are the source's previous stack) into its source's
 * queue. e->order must increase from push to push. */
bool rec_merge_push(rec_merge *m, const rec_event *e, int64_t now_ns);
/* rec_merge_push of the usual event, inline: of the previous push's thread, which has events
 * queued and room for one more, without frames or with its previous stack again. False, having
 * changed nothing, when rec_merge_push must take it. */
static inline bool rec_merge_push_quick(rec_merge *m, const rec_event *e, int64_t now_ns) {
  if (!m->last_index)
    return false;
  rec_source *s = &m->sources[m->last_index - 1];
  if (s->key != e->source || !s->queued || s->tail - s->head > s->slot_mask)
    return false;
  uint32_t n = e->nframes;
  if (n && (n != s->last_nframes ||
            !rec_same_frames(&s->frames[s->last_frames_at & s->frame_mask], e->frames, n)))
    return false;
  rec_slot *slot = rec_merge_slot(s, e);
  slot->frames_at = s->last_frames_at; /* read only when nframes > 0 */
  slot->stack_hash = n ? s->last_hash : 0;
  slot->stack_serial = n ? s->last_serial : 0;
  rec_merge_enqueued(m, s, e, now_ns);
  return true;
}
/* Stores `n` frames (n >= 1) in the frame buffer of `s` as its newest stack (last_*), with a new
 * serial; false out of memory. The events pushed after it with that stack refer to it. */
bool rec_merge_new_stack(rec_merge *m, rec_source *s, const uint64_t *frames, uint32_t n);
/* The thread of `key` released its ring (no event of it will come again): its source leaves the
 * merge (m->count, the low-water scan) and gives its memory to the spares once its queue is
 * empty, now or when the pop that empties it is followed by the next push or pop. Events of the
 * key pushed after this make a new source. Out of memory (moving another source into its place
 * in the index) the source stays, empty, as every source did before it was retired. */
void rec_merge_retire(rec_merge *m, uint64_t key);
/* The stamp of the oldest queued event; false when nothing is queued. */
bool rec_merge_peek_time(const rec_merge *m, int64_t *time_ns);
/* Takes the oldest queued event into *out (out->frames valid until the next push or pop, which
 * is when a source emptied by this pop is released if retired). */
bool rec_merge_pop(rec_merge *m, rec_event *out);
/* rec_merge_pop of the oldest event if it is stamped at or before `limit_ns`, or whatever its
 * stamp while more than `max_queued` events are queued; false otherwise. */
bool rec_merge_pop_before(rec_merge *m, int64_t limit_ns, size_t max_queued, rec_event *out);
/* Up to `n` rec_merge_pop_before into out[0..n), in order; returns how many. Their frames all stay
 * valid until the next push or pop: a batch ends early at a pop after which the next one would
 * release a retired source's buffers. */
size_t rec_merge_pop_many(rec_merge *m, int64_t limit_ns, size_t max_queued, rec_event *const *out,
                          size_t n);
/* The oldest newest-stamp among the sources that delivered something since `since_ns` (consumer
 * clock) and whose newest stamp is within `window_ns` of the newest of them all: records still
 * unread in those rings are stamped at or after it. A source further behind is stalled or its
 * clock is off, and must not hold the others back. INT64_MAX if none. */
int64_t rec_merge_low_water(const rec_merge *m, int64_t since_ns, int64_t window_ns);
void rec_merge_free(rec_merge *m);

/* --- objects.c: mapped regions (the address -> object id map is common/hashmap) ---------- */

/* Mapped regions, sorted by start, non-overlapping. */
typedef struct rec_region {
  uint64_t start, end;
  int64_t obj_id;
  int64_t mapped_ns; /* the stamp of the map that made it (of the whole, for a piece left) */
  uint32_t nframes;
  bool thread_stack; /* a thread's stack (THREAD_START), collected at its THREAD_EXIT */
  uint64_t *codes;   /* the backtrace as written (innermost first), for the pieces of a split */
} rec_region;

typedef struct rec_regions {
  rec_region *items;
  size_t count, cap;
} rec_regions;

/* Indices [*first, *last) of the regions overlapping [start, end). */
void rec_regions_overlapping(const rec_regions *rs, uint64_t start, uint64_t end, size_t *first,
                             size_t *last);
bool rec_regions_insert(rec_regions *rs, const rec_region *r); /* takes r->codes */
void rec_regions_remove(rec_regions *rs, size_t index);        /* frees its codes */
void rec_regions_free(rec_regions *rs);

/* --- modules.c: module instances by serial ------------------------------------------------ */

typedef struct rec_module {
  uint64_t serial;
  uint64_t load_bias, low, high;
  uint8_t *build_id;
  size_t build_id_length;
  char *path;
  bool unloaded;
  struct rec_elf *elf; /* the symboliser's view of the file, opened on first use */
  int mapped_fd;       /* the process's mapping of a file gone from disk, opened early, or -1 */
} rec_module;

typedef struct rec_modules {
  rec_module **all; /* by registration */
  size_t count, cap;
  rec_module **live; /* sorted by low, loaded ones only */
  size_t live_count, live_cap;
  mt_hashmap by_serial; /* serial -> index in all + 1 */
  uint64_t generation;  /* bumped whenever a module is added or unloaded (never 0 once used) */
} rec_modules;

/* A registry entry MT_TRACER_REGISTRY_MODULE. A serial seen again replaces the description. */
int rec_modules_add(rec_modules *ms, uint64_t serial, const void *bytes, size_t length);
void rec_modules_unload(rec_modules *ms, uint64_t serial);
rec_module *rec_modules_by_serial(const rec_modules *ms, uint64_t serial);
/* The loaded module containing `pc` (the oldest one when unloads are still in flight). */
rec_module *rec_modules_find(const rec_modules *ms, uint64_t pc);
void rec_modules_free(rec_modules *ms);

/* --- sites.c: location codes -------------------------------------------------------------- */

#define REC_CODE_SYNTHETIC (1ull << 61) /* codes of PCs in no module, and markers */
#define REC_CODE_TRUNCATED REC_CODE_SYNTHETIC

/* The location code of the synthetic site of thread stacks, `<thread stack>`. */
#define REC_CODE_THREAD_STACK (REC_CODE_SYNTHETIC + (1ull << 60))
/* The one frame of an allocation the shim could not unwind, made before it was ready (the
 * loader's and early constructors' allocations: MT_TRACER_FLAG_NO_STACK), `<start-up, before
 * backtraces>`, where an empty backtrace would read `<no backtrace>`. */
#define REC_CODE_START_UP (REC_CODE_THREAD_STACK + 1)

/* One stack's codes, cached (direct-mapped by the stack's hash) for as long as the modules do
 * not change: a stack met again costs one comparison of its return addresses. */
typedef struct rec_stack_entry {
  uint64_t generation; /* rec_modules.generation when computed; 0: empty */
  uint32_t hash, nframes;
  uint32_t ncodes;
  bool truncated;
  uint64_t *frames; /* nframes return addresses, then ncodes codes */
  size_t cap;       /* words at frames */
} rec_stack_entry;

#define REC_STACK_CACHE 4096u

typedef struct rec_sites {
  rec_stack_entry *last;  /* the entry of the previous call, for stack serial last_serial */
  uint64_t last_serial;   /* 0: none */
  mt_hashmap unknown_pcs; /* pc -> synthetic code */
  uint64_t *unknown_by_index;
  size_t unknown_count, unknown_cap;
  mt_hashmap wrapper;      /* code -> 1 not a wrapper, 2 an allocator wrapper */
  rec_stack_entry *stacks; /* REC_STACK_CACHE entries, allocated on first use */
  uint64_t *scratch;       /* MT_TRACER_MAX_FRAMES + 2 codes */
} rec_sites;

struct rec_symboliser;

/* Converts return addresses (innermost first) to location codes, drops the innermost frames that
 * are allocator wrappers (operator new and its variants), appends the truncation marker when
 * `truncated`. `codes` has room for nframes + 1. Returns the count, or -1 out of memory. */
long rec_sites_codes(rec_sites *s, const rec_modules *ms, struct rec_symboliser *sym,
                     const uint64_t *frames, uint32_t nframes, bool truncated, uint64_t *codes);
/* rec_sites_codes through the stack cache: *codes (valid until the next call) gets the codes of
 * `frames`, whose rec_stack_hash is `hash`; `serial` (rec_event.stack_serial, 0 if unknown) equal
 * to the previous call's saves comparing the frames. Returns the count, or -1 out of memory. */
long rec_sites_lookup_codes(rec_sites *s, const rec_modules *ms, struct rec_symboliser *sym,
                            const uint64_t *frames, uint32_t nframes, uint32_t hash,
                            uint64_t serial, bool truncated, const uint64_t **codes);
/* The entry of the previous call when this stack is its stack again (a loop allocating from one
 * place): the entry was not touched since, so its codes are still where they were, the same
 * codes as that call returned. NULL otherwise. */
static inline const rec_stack_entry *rec_sites_repeat(const rec_sites *s, const rec_modules *ms,
                                                      uint32_t nframes, uint32_t hash,
                                                      uint64_t serial, bool truncated) {
  const rec_stack_entry *e = s->last;
  if (serial && serial == s->last_serial && e->generation == ms->generation + 1 &&
      e->hash == hash && e->nframes == nframes && e->truncated == truncated)
    return e;
  return NULL;
}
static inline long rec_sites_stack_codes(rec_sites *s, const rec_modules *ms,
                                         struct rec_symboliser *sym, const uint64_t *frames,
                                         uint32_t nframes, uint32_t hash, uint64_t serial,
                                         bool truncated, const uint64_t **codes) {
  const rec_stack_entry *e = rec_sites_repeat(s, ms, nframes, hash, serial, truncated);
  if (e) {
    *codes = e->frames + nframes;
    return e->ncodes;
  }
  return rec_sites_lookup_codes(s, ms, sym, frames, nframes, hash, serial, truncated, codes);
}
/* The pc of a synthetic code (0 for the truncation marker); false if it is not one. */
bool rec_sites_synthetic_pc(const rec_sites *s, uint64_t code, uint64_t *pc);
void rec_sites_free(rec_sites *s);

/* --- symbolise.c -------------------------------------------------------------------------- */

typedef struct rec_symboliser rec_symboliser;

/* `debuginfod`: separate debug info may be fetched from $DEBUGINFOD_URLS (else local files only).
 */
rec_symboliser *rec_symboliser_new(bool no_symbols, bool debuginfod);
/* Told, once per module file, that it was not on disk as the process loaded it (deleted, or
 * replaced: another build-id) and whether it was read from the live process instead. */
typedef void (*rec_symboliser_gone_fn)(void *user, const char *path, bool from_process);
/* The traced process: a module file gone from disk is read from its mappings while it lives. */
void rec_symboliser_set_process(rec_symboliser *s, int64_t pid, rec_symboliser_gone_fn gone,
                                void *user);
/* A module just registered by process `pid` (started at `since_ns`, CLOCK_REALTIME): if its file
 * is gone from disk or was changed since, its mapping is opened now, while the process is likely
 * still there to read it from (symbolisation comes later, at a flush). */
void rec_symboliser_watch_module(rec_symboliser *s, rec_module *m, int64_t pid, int64_t since_ns);
/* A module registered by a relative path (LD_LIBRARY_PATH=., dlopen("./plugin.so")) gets its
 * absolute path: the one the kernel shows for the mapping at the module's address in process
 * `pid` (/proc/PID/maps) while it lives, else the file at that path from memtap's own working
 * directory, if there is one (the build-id check then says whether it is the one loaded). Names
 * with no file (the vDSO's) stay as they are. Nothing with no_symbols. */
void rec_symboliser_resolve_path(rec_symboliser *s, rec_module *m, int64_t pid);
/* Called before work that may take milliseconds (reading files: ELF, DWARF, /proc), so that the
 * recorder withdraws what it offered the program only while it polls (its clock tick). */
void rec_symboliser_set_stall_hook(rec_symboliser *s, void (*hook)(void *user), void *user);
void rec_symboliser_free(rec_symboliser *s);
/* Whether the symbol at `vaddr` (an ELF address) in `m` is an allocator wrapper (operator new,
 * new[] and their aligned and nothrow variants). */
bool rec_symboliser_is_wrapper(rec_symboliser *s, rec_module *m, uint64_t vaddr);
/* The location list of a code (mt_resolve_fn contract: valid until the next call). */
int rec_symboliser_resolve(rec_symboliser *s, const rec_modules *ms, const rec_sites *sites,
                           uint64_t code, const mt_location **entries, size_t *count);
/* For the scope index's tests: the DWARF location list of `vaddr` (an ELF address) in `m`,
 * innermost first, uncached, valid until the next call; its scopes found by the module's index
 * (scopes.c) when `indexed`, else by libdw's walks alone. Returns the count, 0 when DWARF has no
 * answer. *stats (if non-NULL) gets the index's counts. */
struct rec_scopes_stats;
size_t rec_symboliser_dwarf_at(rec_symboliser *s, rec_module *m, uint64_t vaddr, bool indexed,
                               const mt_location **entries, struct rec_scopes_stats *stats);
/* Demangles a C++ or Rust (legacy or v0) symbol name: malloc'd, without Rust's hash suffix, or
 * NULL when it is not a mangled name (or memory ran out). */
char *rec_demangle(const char *name);
/* Cuts a location list to fit one location event (FORMAT.md §2.6: 4 KiB, 255 entries): long
 * names are shortened into `scratch` (room for count * 2 * 1024 bytes), and inner-middle entries
 * dropped, keeping the outermost function and the innermost call site. */
size_t rec_fit_locations(mt_location *entries, size_t count, char *scratch);

/* --- output.c: the writer, and the zstd stream behind it ----------------------------------- */

typedef struct rec_compressor rec_compressor;

typedef struct rec_output {
  int fd;
  mt_file_identity identity; /* fd's file when the recorder was given it (mt_recorder_create) */
  bool compress;
  int level; /* zstd level; 0: COMPRESS_LEVEL (set before rec_output_open) */
  int wfd;   /* the writer's own duplicate of fd */
  int memfd; /* compress: the writer writes here, a thread compresses the bytes to fd */
  mt_file_identity memfd_identity;
  rec_compressor *compressor;
  mt_writer *writer;
  uint64_t bytes; /* written to fd (with compression: as of the last pump) */
  int64_t start_offset;
  bool failed;
  mt_error error;
} rec_output;

int rec_output_open(rec_output *o, int fd, bool compress, const mt_trace_info *info, int version);
/* Hands what the writer wrote to the compressor thread (compress only), and takes in its byte
 * count and failure. `flush`: make every byte so far decodable in the file (waits for it);
 * `end`: finish the stream and the thread. Waits too when the compressor is far behind. */
void rec_output_pump(rec_output *o, bool flush, bool end);
void rec_output_flush(rec_output *o);
void rec_output_close(rec_output *o);
/* Frees everything without writing another byte. */
void rec_output_discard(rec_output *o);
/* Records a failure of the writer (first one wins). */
void rec_output_fail(rec_output *o, const mt_error *err);

/* --- unsettled.c: an address whose records arrived out of causal order -------------------- */

/* At most this many records of one address wait to be paired: past it, they are written as
 * they are paired (a record was lost; see rec_order_expire). */
#define REC_UNSETTLED_MAX 128

typedef struct rec_unsettled_item {
  rec_event *event; /* an owned copy (rec_event_clone); NULL for the block already written and
                       live when the address unsettled */
  int64_t time_ns;
  uint64_t order, source;
  int64_t live_id; /* that block's object id */
  int32_t match;   /* index of the item it is paired with, or -1 */
  bool alloc;      /* an allocation (or the live block), else a free */
  bool written;    /* a block and its free written already (rec_order.recent), paired anew
                      here only if the address's new records need one of them */
} rec_unsettled_item;

typedef struct rec_unsettled {
  uint64_t addr;
  rec_unsettled_item *items;
  uint32_t count;
  size_t cap;
  uint32_t unmatched_allocs, unmatched_frees;
  int64_t since_ns;                  /* stamp of the record that unsettled the address */
  uint64_t epoch;                    /* rec_order.epoch then */
  struct rec_unsettled *prev, *next; /* rec_order's expiry list, oldest first */
} rec_unsettled;

/* Adds `item` (its match is ignored) and keeps the pairing maximal: false when the address holds
 * REC_UNSETTLED_MAX items already or memory ran out (nothing added). */
bool rec_unsettled_add(rec_unsettled *u, const rec_unsettled_item *item, int64_t skew_ns);
/* The items explain each other: every free paired, at most one allocation left (then live). */
static inline bool rec_unsettled_explained(const rec_unsettled *u) {
  return u->unmatched_frees == 0 && u->unmatched_allocs <= 1;
}
/* Frees the items and their copies; `u` is empty after. */
void rec_unsettled_clear(rec_unsettled *u);

/* --- order.c: causal repair and emission --------------------------------------------------- */

/* A block freed by another thread than the one that allocated it, kept for a while: clock skew
 * may have made that free look like this block's when it was a newer one's (docs/record.md). */
typedef struct rec_recent_free {
  uint64_t addr;
  int64_t alloc_ns, free_ns;
  uint64_t alloc_source, free_source;
} rec_recent_free;

#define REC_RECENT_SLOTS 4096 /* direct-mapped by address: an older pair is overwritten */

typedef struct rec_order {
  rec_addrmap live;               /* address -> the live malloc block there (settled addresses) */
  rec_recent_free *recent;        /* REC_RECENT_SLOTS of them */
  mt_hashmap unsettled;           /* address -> rec_unsettled *: records waiting to be paired */
  rec_unsettled *oldest, *newest; /* the unsettled addresses, in the order they unsettled */
  rec_regions regions;
  /* Regions whose map arrived after a region mapped later (by stamp) over the same range: they
   * lived and ended before it (their unmap is on its way), outside `regions`. Rare: the first
   * records of a new thread, a ring read late. */
  rec_regions late_regions;
  mt_hashmap stacks;    /* thread id -> start of its stack's region */
  int64_t main_tid;     /* the process's pid: its main thread, whose stack is not a region */
  int64_t last_time_ns; /* of the last event written */
  /* Counts the polls after which every ring had been read to where it stood: an address
   * unsettled at epoch E may be given up at E + 2, once every record published before it was
   * read. */
  uint64_t epoch;
  int64_t skew_ns, bound_ns;
  double rate;
  bool full;
  uint64_t rng; /* region sampling */
  /* The last allocation written had the codes of the codes cache's last call (write_block):
   * when the next one's stack is that call's again (rec_sites_repeat), the writer need not
   * compare its codes with the previous stack's (mt_writer_put_alloc_same). */
  bool wrote_last_codes;
  /* Records given up for want of memory (an address's pairing, a live block's entry): counted
   * with the lost records, so that a trace short of them never claims to be whole. */
  uint64_t lost_nomem;
} rec_order;

/* What order.c needs from the recorder to write. */
typedef struct rec_sink {
  rec_output *out;
  rec_modules *modules;
  rec_sites *sites;
  rec_symboliser *symboliser;
  mt_recorder_stats *stats;
  int64_t start_us;      /* the trace's start time */
  int64_t resolution_us; /* times are rounded down to multiples of this after start_us (>= 1) */
  /* Creates the writer if it does not exist yet (recorder.c). */
  void (*ensure_writer)(void *user);
  void *user;
} rec_sink;

bool rec_order_init(rec_order *o, int64_t skew_ns, int64_t bound_ns);
/* Processes `e`; keeps a copy (rec_event_clone) while its address is unsettled. The caller
 * keeps `e`. */
void rec_order_process(rec_order *o, rec_sink *sink, const rec_event *e);
/* rec_order_process of `n` events in order, the usual allocations and frees without a call. */
void rec_order_process_many(rec_order *o, rec_sink *sink, rec_event *const *events, size_t n);
/* Writes the addresses unsettled for longer than the bound at trace time `now_ns` (or all of
 * them when `all`) as far as their records pair up: a free left alone is of an unknown block
 * (counted, not written), allocations left over but the newest were freed unseen (implied). */
void rec_order_expire(rec_order *o, rec_sink *sink, int64_t now_ns, bool all);
/* The end of the trace: the stacks of threads still running are collected (the process is
 * gone), so that they do not look like leaks. */
void rec_order_end_threads(rec_order *o, rec_sink *sink);
void rec_order_free(rec_order *o);

/* --- recorder.c ----------------------------------------------------------------------------- */

/* Reads from a cursor the caller opened (the fuzzer's cursor over a file in memory); the recorder
 * takes it and closes it. */
int rec_recorder_attach_cursor(mt_recorder *r, mt_cursor *cursor, mt_error *err);

#endif
