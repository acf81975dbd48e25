/* The checkpoint index (TRACE.idx, docs/analysis.md "Checkpoint index"): checkpoints taken by a
 * pass between packets, each holding what a later pass needs to start there instead of at the
 * trace's start: the reader's decoder state (format.h, "Checkpoints"), the location codes
 * described since the previous checkpoint, and the pass's own state before a window opens — the
 * live objects with their backtraces as location codes (the code trie, so that the index does not
 * depend on --hide or folding) and each domain's last allocation.
 *
 * File layout, little-endian:
 *   header   magic "MTAPIDX1", u32 version, u64 trace size, i64 trace start time, i64 pid,
 *            i64 trace file's modification time in ns (INT64_MIN: not a file),
 *            i64 time of the trace's last event (INT64_MIN until a pass read it all),
 *            u32 checkpoint count
 *   table    per checkpoint: u64 trace offset, i64 latest event time before it (µs since the
 *            start), u64 location codes described before it, u64 body offset, u64 body size
 *   bodies   u64 + reader state, u64 + location increment, i64 time of the last event read,
 *            u32 domains × (u16 domain, i64 last allocation id),
 *            u32 nodes × (u32 parent, i64 code, u32 count)   node i + 1 adds `count` times
 *                                             `code` to its parent (0 is the root); parents first
 *            u64 live × (i64 id, i64 time, i64 words, u64 samples, u16 domain, u8 source, u32 node)
 *   u64 checksum of everything before it
 * The index is untrusted input like a trace: every count, offset and index is checked before use,
 * and one that fails a check is ignored (and replaced), never trusted. */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/model.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/grow.h"

#define INDEX_MAGIC "MTAPIDX1"
#define INDEX_VERSION 2
#define HEADER_SIZE (8 + 4 + 8 + 8 + 8 + 8 + 8 + 4)
#define ENTRY_SIZE (5 * 8)
#define NODE_SIZE (4 + 8 + 4)
#define LIVE_SIZE (8 + 8 + 8 + 8 + 2 + 1 + 4)
#define DOMAIN_SIZE (2 + 8)

typedef struct checkpoint {
  int64_t offset;     /* of the next packet in the trace */
  int64_t max_time;   /* latest event time before it, µs since the start; -1 if none */
  uint64_t locations; /* location codes described before it */
  const uint8_t *body;
  size_t body_size;
  uint8_t *owned; /* a body this pass made */
} checkpoint;

typedef struct mt_index {
  char *path;
  uint8_t *file; /* the index as read, which loaded bodies point into */
  checkpoint *c;
  size_t count, cap;
  int64_t trace_size, start_time, pid;
  int64_t trace_mtime;  /* the trace file's modification time in ns; INT64_MIN: not a file */
  int64_t trace_end;    /* time of the trace's last event; INT64_MIN when not known */
  bool end_learnt;      /* this pass learnt it */
  bool replace;         /* the file there is an unfit index: written anew even with no checkpoint */
  bool foreign;         /* the file there is not an index at all: never written over */
  int64_t interval;     /* least trace bytes between checkpoints */
  size_t location_mark; /* reader location codes saved so far */
} mt_index;

typedef struct saved_object {
  int64_t id, time, words;
  uint64_t samples;
  uint16_t domain;
  uint8_t source;
  uint32_t node;
} saved_object;

/* A checkpoint's pass state, parsed and checked before anything is applied. */
typedef struct parsed_body {
  const uint8_t *state, *locations;
  size_t state_size, locations_size;
  int64_t end_time;
  uint32_t ndomains, nnodes;
  uint64_t nlive;
  const uint8_t *domains, *nodes, *live; /* raw records, checked */
} parsed_body;

/* Why the index was not used or written, into `problem` (index_use.problem's size): `fmt` takes
 * the index's path, then `detail`. */
#define PROBLEM_SIZE sizeof(((mt_index_use *)0)->problem)
static void say(char *problem, const mt_index *ix, const char *fmt, const char *detail) {
  snprintf(problem, PROBLEM_SIZE, fmt, ix->path, detail);
}

static void note(mt_analysis *a, const char *fmt, const char *detail) {
  say(a->index_use.problem, a->index, fmt, detail);
}

/* The trace an index must match: its path, and the reader's size, start time and pid, and the
 * trace file's modification time to the nanosecond. The time is what tells a trace changed in place
 * (damaged, rewritten, appended to and cut back) from the one the index was made of, whose size,
 * start and pid it keeps; the file's device and inode are not taken, so that a copy keeping its
 * time (cp -p, rsync -t) or a move keeps its index. */
static void identify(mt_index *ix, const char *path, const mt_reader *r) {
  ix->path = (char *)path;
  if (!mt_reader_file_mtime(r, &ix->trace_mtime))
    ix->trace_mtime = INT64_MIN;
  ix->trace_size = mt_reader_size(r);
  ix->start_time = mt_reader_info(r)->start_time;
  ix->pid = mt_reader_info(r)->pid;
  ix->trace_end = INT64_MIN;
}

/* --- reading the file --------------------------------------------------------------------- */

static void get_live(const uint8_t *p, saved_object *o) {
  mt_bytes_reader in;
  mt_bytes_reader_init(&in, p, LIVE_SIZE);
  mt_bytes_get_i64(&in, &o->id);
  mt_bytes_get_i64(&in, &o->time);
  mt_bytes_get_i64(&in, &o->words);
  mt_bytes_get_u64(&in, &o->samples);
  mt_bytes_get_u16(&in, &o->domain);
  mt_bytes_get_u8(&in, &o->source);
  mt_bytes_get_u32(&in, &o->node);
}

static bool parse_body(const uint8_t *data, size_t size, parsed_body *b) {
  mt_bytes_reader in;
  mt_bytes_reader_init(&in, data, size);
  uint64_t n;
  if (!mt_bytes_get_u64(&in, &n) || !mt_bytes_get_data(&in, (size_t)n, &b->state) || n > size)
    return false;
  b->state_size = (size_t)n;
  if (!mt_bytes_get_u64(&in, &n) || n > size || !mt_bytes_get_data(&in, (size_t)n, &b->locations))
    return false;
  b->locations_size = (size_t)n;
  if (!mt_bytes_get_i64(&in, &b->end_time) || !mt_bytes_get_u32(&in, &b->ndomains) ||
      b->ndomains > mt_bytes_reader_left(&in) / DOMAIN_SIZE ||
      !mt_bytes_get_data(&in, (size_t)b->ndomains * DOMAIN_SIZE, &b->domains))
    return false;
  if (!mt_bytes_get_u32(&in, &b->nnodes) || b->nnodes > mt_bytes_reader_left(&in) / NODE_SIZE)
    return false;
  b->nodes = in.p;
  for (uint32_t i = 0; i < b->nnodes; i++) {
    uint32_t parent, count;
    int64_t code;
    mt_bytes_get_u32(&in, &parent);
    mt_bytes_get_i64(&in, &code);
    mt_bytes_get_u32(&in, &count);
    /* Nodes are numbered from 1: a parent comes before its children. */
    if (parent > i || count == 0)
      return false;
  }
  if (!mt_bytes_get_u64(&in, &b->nlive) || b->nlive > mt_bytes_reader_left(&in) / LIVE_SIZE)
    return false;
  b->live = in.p;
  if (mt_bytes_reader_left(&in) != b->nlive * LIVE_SIZE)
    return false;
  for (uint64_t i = 0; i < b->nlive; i++) {
    saved_object o;
    get_live(b->live + i * LIVE_SIZE, &o);
    if (o.source > MT_SOURCE_EXTERNAL || o.node > b->nnodes || o.words < 0)
      return false;
  }
  return true;
}

/* Reads and checks the index file of the trace `ix` identifies. false with `problem` set when it
 * exists but cannot be used; true (with no checkpoints) when there is none. */
static bool load(mt_index *ix, char *problem) {
  /* (O_NONBLOCK: a FIFO of that name would wait for a writer) */
  int fd = open(ix->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  ix->foreign = true; /* until it reads as one of ours: never written over */
  if (fd < 0) {
    if (errno == ENOENT) {
      ix->foreign = false;
      return true;
    }
    say(problem, ix, "%s: cannot read the checkpoint index: %s", strerror(errno));
    return false;
  }
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  /* Ours: empty (cut before its first byte), or starting with the magic as far as it goes. */
  uint8_t head[8];
  ssize_t n_head = ok ? pread(fd, head, sizeof head, 0) : -1;
  if (n_head >= 0 && !memcmp(head, INDEX_MAGIC, (size_t)n_head))
    ix->foreign = false;
  if (ix->foreign) { /* someone's file, or not a file */
    close(fd);
    say(problem, ix, "%s: %s",
        ok ? "is not a memtap checkpoint index: left as it is, and no index used"
           : "is not a regular file: left as it is, and no index used");
    return false;
  }
  /* An index holds at most about a quarter of its trace: anything far larger is not one. */
  if ((uint64_t)st.st_size > (uint64_t)ix->trace_size / 2 + (64u << 20)) {
    close(fd);
    say(problem, ix, "%s: %s", "is far larger than a checkpoint index of this trace could be");
    return false;
  }
  size_t size = (size_t)st.st_size;
  uint8_t *data = malloc(size ? size : 1);
  size_t got = 0;
  while (data && got < size) {
    ssize_t n = read(fd, data + got, size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  close(fd);
  if (!data || got != size) {
    free(data);
    say(problem, ix, "%s: cannot read the checkpoint index: %s",
        data ? "short read" : "out of memory");
    return false;
  }
  ix->file = data;
  mt_bytes_reader in;
  mt_bytes_reader_init(&in, data, size);
  const uint8_t *magic;
  uint32_t version, count;
  if (size < HEADER_SIZE + 8 || !mt_bytes_get_data(&in, 8, &magic) ||
      memcmp(magic, INDEX_MAGIC, 8)) {
    say(problem, ix, "%s: %s", "is damaged (cut short)");
    return false;
  }
  uint64_t stored = 0;
  for (int i = 0; i < 8; i++)
    stored |= (uint64_t)data[size - 8 + i] << (8 * i);
  if (stored != mt_bytes_checksum(data, size - 8)) {
    say(problem, ix, "%s: %s", "is damaged (its checksum does not match)");
    return false;
  }
  int64_t trace_size, start_time, pid, trace_mtime, trace_end;
  mt_bytes_get_u32(&in, &version);
  mt_bytes_get_i64(&in, &trace_size);
  mt_bytes_get_i64(&in, &start_time);
  mt_bytes_get_i64(&in, &pid);
  mt_bytes_get_i64(&in, &trace_mtime);
  mt_bytes_get_i64(&in, &trace_end);
  mt_bytes_get_u32(&in, &count);
  if (version != INDEX_VERSION) {
    say(problem, ix, "%s: %s", "has a version this memtap does not read");
    return false;
  }
  if (trace_size != ix->trace_size || start_time != ix->start_time || pid != ix->pid ||
      trace_mtime != ix->trace_mtime) {
    say(problem, ix, "%s: %s", "was made for another trace, or an earlier state of this one");
    return false;
  }
  if (trace_end != INT64_MIN && trace_end < start_time) {
    say(problem, ix, "%s: %s", "is damaged (the trace ends before it starts)");
    return false;
  }
  size_t bodies = HEADER_SIZE + (size_t)count * ENTRY_SIZE;
  if (count > (size - 8 - HEADER_SIZE) / ENTRY_SIZE ||
      !(ix->c = calloc(count + 1, sizeof *ix->c))) {
    say(problem, ix, "%s: %s", "is damaged (bad checkpoint count)");
    return false;
  }
  ix->cap = count + 1;
  for (uint32_t i = 0; i < count; i++) {
    checkpoint *c = &ix->c[i];
    uint64_t body_offset, body_size;
    mt_bytes_get_i64(&in, &c->offset);
    mt_bytes_get_i64(&in, &c->max_time);
    mt_bytes_get_u64(&in, &c->locations);
    mt_bytes_get_u64(&in, &body_offset);
    mt_bytes_get_u64(&in, &body_size);
    bool ordered =
        i == 0 || (c->offset > ix->c[i - 1].offset && c->max_time >= ix->c[i - 1].max_time &&
                   c->locations >= ix->c[i - 1].locations);
    if (!ordered || c->offset <= 0 || c->offset >= trace_size || body_offset < bodies ||
        body_offset > size - 8 || body_size > size - 8 - body_offset) {
      say(problem, ix, "%s: %s", "is damaged (a checkpoint out of order or outside the file)");
      return false;
    }
    c->body = data + body_offset;
    c->body_size = (size_t)body_size;
  }
  ix->count = count;
  ix->trace_end = trace_end;
  return true;
}

/* --- resuming ----------------------------------------------------------------------------- */

/* Rebuilds the live set of a checked body: every saved node becomes a frame trie node (and a code
 * trie node when checkpoints are kept), parents first, so the cost is one step per node. */
static int apply_body(mt_analysis *a, const parsed_body *b, mt_error *err) {
  uint32_t *fnode = malloc(((size_t)b->nnodes + 1) * sizeof *fnode);
  uint32_t *cnode = malloc(((size_t)b->nnodes + 1) * sizeof *cnode);
  int rc = MT_OK;
  if (!fnode || !cnode)
    goto nomem;
  fnode[0] = 0;
  cnode[0] = 0;
  mt_bytes_reader in;
  mt_bytes_reader_init(&in, b->nodes, (size_t)b->nnodes * NODE_SIZE);
  for (uint32_t i = 1; i <= b->nnodes; i++) {
    uint32_t parent, count;
    int64_t code;
    mt_bytes_get_u32(&in, &parent);
    mt_bytes_get_i64(&in, &code);
    mt_bytes_get_u32(&in, &count);
    uint32_t f = fnode[parent];
    for (uint32_t j = 0; j < count; j++) {
      uint32_t next = mt_stacks_extend(a, f, code);
      if (next == UINT32_MAX && a->undescribed) {
        char detail[64];
        snprintf(detail, sizeof detail, "0x%" PRIx64, (uint64_t)code);
        note(a, "%s: does not match the trace: location code %s was never described", detail);
        rc = MT_INDEX_START_OVER;
        goto done;
      }
      if (next == UINT32_MAX)
        goto nomem;
      if (next == f) /* folded onto itself: the rest of the run lands here too */
        break;
      f = next;
    }
    fnode[i] = f;
    cnode[i] = UINT32_MAX;
    if (a->keep_checkpoints &&
        (cnode[i] = mt_code_trie_child(&a->code_trie, cnode[parent], code, count)) == UINT32_MAX)
      goto nomem;
  }
  for (uint64_t i = 0; i < b->nlive; i++) {
    saved_object s;
    get_live(b->live + i * LIVE_SIZE, &s);
    uint32_t stack = mt_stacks_of_fnode(a, fnode[s.node]);
    live_obj o = {.time = s.time,
                  .words = s.words,
                  .samples = s.samples,
                  .stack = stack,
                  .domain = s.domain,
                  .source = s.source,
                  .before = true,
                  .code_node = cnode[s.node]};
    if (stack == UINT32_MAX || !mt_live_insert(a, s.id, &o))
      goto nomem;
  }
  mt_bytes_reader_init(&in, b->domains, (size_t)b->ndomains * DOMAIN_SIZE);
  for (uint32_t i = 0; i < b->ndomains; i++) {
    uint16_t id;
    int64_t last_alloc;
    mt_bytes_get_u16(&in, &id);
    mt_bytes_get_i64(&in, &last_alloc);
    domain_state *d = mt_domain_of(a, id);
    if (!d)
      goto nomem;
    d->last_alloc = last_alloc;
  }
  a->summary.end_time = b->end_time;
  goto done;
nomem:
  rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory restoring a checkpoint");
done:
  free(fnode);
  free(cnode);
  return rc;
}

/* Resumes from checkpoint k. Returns MT_OK, MT_INDEX_START_OVER when the checkpoint does not fit
 * the trace (noted: the reader, its location codes and the pass may have changed), or an error
 * (out of memory). The index checks the reader cannot make show later, as the trace read on from
 * the checkpoint fails to decode (mt_index_distrust). */
static int resume(mt_analysis *a, mt_reader *r, size_t k, int64_t *last, mt_error *err) {
  mt_index *ix = a->index;
  parsed_body b;
  if (!parse_body(ix->c[k].body, ix->c[k].body_size, &b)) {
    note(a, "%s: %s", "is damaged (a checkpoint's contents do not add up)");
    return MT_INDEX_START_OVER;
  }
  mt_error e = {0};
  int rc = mt_reader_load_state(r, b.state, b.state_size, &e);
  if (rc == MT_E_NOMEM)
    return mt_fail(err, rc, -1, "%s", e.message);
  if (rc) {
    note(a, "%s: does not match the trace: %s", e.message);
    return MT_INDEX_START_OVER;
  }
  if (mt_reader_position(r) != ix->c[k].offset) {
    char detail[96];
    snprintf(detail, sizeof detail, "checkpoint %zu is at byte %lld, its reader state at %lld", k,
             (long long)ix->c[k].offset, (long long)mt_reader_position(r));
    note(a, "%s: does not match the trace: %s", detail);
    return MT_INDEX_START_OVER;
  }
  for (size_t j = 0; j <= k; j++) {
    parsed_body inc;
    e.message[0] = 0;
    rc = parse_body(ix->c[j].body, ix->c[j].body_size, &inc)
             ? mt_reader_load_locations(r, inc.locations, inc.locations_size, &e)
             : MT_E_MALFORMED;
    if (rc == MT_E_NOMEM)
      return mt_fail(err, rc, -1, "%s", e.message);
    if (rc) {
      snprintf(a->index_use.problem, PROBLEM_SIZE, "%s: is damaged: checkpoint %zu: %.200s",
               ix->path, j, e.message[0] ? e.message : "its contents do not add up");
      return MT_INDEX_START_OVER;
    }
  }
  rc = apply_body(a, &b, err);
  if (rc)
    return rc;
  *last = ix->c[k].max_time;
  a->index_use.resumed = true;
  a->index_use.resumed_offset = ix->c[k].offset;
  a->index_use.resumed_time = ix->c[k].max_time;
  return MT_OK;
}

static bool directory_writable(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    return access(".", W_OK) == 0;
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  char *dir = strndup(path, n);
  bool ok = dir && access(dir, W_OK) == 0;
  free(dir);
  return ok;
}

/* Checkpoints are at least four times their own size apart, so the index stays under a quarter
 * of the trace. */
static int64_t spacing(const mt_index *ix, size_t previous_body) {
  int64_t grown = (int64_t)previous_body * 4;
  return grown > ix->interval ? grown : ix->interval;
}

int mt_index_begin(mt_analysis *a, mt_reader *r, const mt_analysis_options *options, bool resumable,
                   const char *distrusted, int64_t *last, mt_error *err) {
  if (!options->index_path)
    return MT_OK;
  if (mt_reader_size(r) < 0) {
    snprintf(a->index_use.problem, sizeof a->index_use.problem,
             "%s: not used: the trace is compressed or not a file", options->index_path);
    return MT_OK;
  }
  mt_index *ix = calloc(1, sizeof *ix);
  if (!ix || !(ix->path = strdup(options->index_path))) {
    free(ix);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  a->index = ix;
  identify(ix, ix->path, r);
  ix->interval = options->index_interval > 0 ? options->index_interval : MT_INDEX_INTERVAL;
  if (distrusted)
    snprintf(a->index_use.problem, sizeof a->index_use.problem, "%s", distrusted);
  if (distrusted || !load(ix, a->index_use.problem)) { /* start a new index from scratch */
    /* replaced even if this trace is too short for a checkpoint, or its message would come back
     * at every command */
    ix->replace = !ix->foreign && directory_writable(ix->path);
    free(ix->file);
    free(ix->c);
    ix->file = NULL;
    ix->c = NULL;
    ix->count = ix->cap = 0;
  }
  int64_t from = options->from == MT_TIME_UNBOUNDED ? 0 : options->from;
  int64_t to = options->to == MT_TIME_UNBOUNDED ? INT64_MAX : options->to;
  const checkpoint *frontier = ix->count ? &ix->c[ix->count - 1] : NULL;
  /* The pass can add checkpoints only if it may read past the index's last one. */
  a->keep_checkpoints =
      (!frontier || to > frontier->max_time) && !ix->foreign && directory_writable(ix->path);
  if (!a->keep_checkpoints && !frontier && !a->index_use.problem[0])
    note(a, "%s: %s", "cannot be written: its directory is not writable");
  ix->location_mark = frontier ? (size_t)frontier->locations : 0;
  a->checkpoint_due =
      frontier ? frontier->offset + spacing(ix, frontier->body_size) : spacing(ix, 0);
  if (a->checkpoint_due >= ix->trace_size)
    a->keep_checkpoints = false; /* no checkpoint can come before the trace ends */
  size_t best = SIZE_MAX;
  for (size_t k = 0; k < ix->count && ix->c[k].max_time < from; k++)
    best = k;
  if (from > 0 && best != SIZE_MAX && resumable) {
    int rc = resume(a, r, best, last, err);
    if (rc != MT_OK)
      return rc;
  }
  a->index_use.checkpoints = ix->count;
  return MT_OK;
}

void mt_index_distrust(mt_analysis *a, const mt_error *failure) {
  snprintf(a->index_use.problem, PROBLEM_SIZE,
           "%s: not used (the trace was read from its start instead): reading on from its "
           "checkpoint at byte %lld failed: %.160s",
           a->index->path, (long long)a->index_use.resumed_offset, failure->message);
}

/* --- keeping checkpoints ------------------------------------------------------------------ */

uint32_t mt_index_track(mt_analysis *a, domain_state *d, const mt_event *ev) {
  mt_code_trie *t = &a->code_trie;
  const mt_backtrace_run *runs = ev->backtrace_runs;
  size_t n = runs ? ev->backtrace_run_count : 0;
  /* The runs shared with the domain's previous backtrace keep their code trie nodes. */
  size_t k = ev->common_runs < d->code_runs ? ev->common_runs : d->code_runs;
  if (k > n)
    k = n;
  if (k > 0) {
    const mt_code_node *last = &t->node[d->code_run[k - 1].node];
    if (last->code != runs[k - 1].code || last->count != runs[k - 1].count ||
        d->code_run[k - 1].start != runs[k - 1].start)
      k = 0;
  }
  if (!MT_GROW(d->code_run, d->code_run_cap, n + 1))
    return UINT32_MAX;
  uint32_t node = k ? d->code_run[k - 1].node : 0;
  for (size_t i = k; i < n; i++) {
    if ((node = mt_code_trie_child(t, node, runs[i].code, runs[i].count)) == UINT32_MAX)
      return UINT32_MAX;
    d->code_run[i] = (struct code_run){.node = node, .start = runs[i].start};
  }
  d->code_runs = n;
  return node;
}

static int save_checkpoint(mt_analysis *a, mt_reader *r, int64_t last, mt_error *err) {
  mt_index *ix = a->index;
  int64_t offset = mt_reader_position(r);
  void *state, *locations = NULL;
  size_t state_size, locations_size;
  int rc = mt_reader_save_state(r, &state, &state_size, err);
  if (rc == MT_E_INVALID) { /* the trace ends here: nothing to resume */
    a->checkpoint_due = INT64_MAX;
    return MT_OK;
  }
  if (rc)
    return rc;
  offset = mt_reader_position(r); /* past the packet just finished */
  size_t mark = ix->location_mark;
  rc = mt_reader_save_locations(r, &mark, &locations, &locations_size, err);
  mt_bytes b = {0};
  uint8_t *reached = rc ? NULL : calloc(a->code_trie.nodes + 1, 1);
  uint32_t *renumber = reached ? malloc((a->code_trie.nodes + 1) * sizeof *renumber) : NULL;
  if (!renumber) {
    rc = rc ? rc : mt_fail(err, MT_E_NOMEM, -1, "out of memory taking a checkpoint");
    goto done;
  }
  mt_bytes_u64(&b, state_size);
  mt_bytes_data(&b, state, state_size);
  mt_bytes_u64(&b, locations_size);
  mt_bytes_data(&b, locations, locations_size);
  mt_bytes_u64(&b, (uint64_t)a->summary.end_time);
  mt_bytes_u32(&b, (uint32_t)a->ndomains);
  for (size_t i = 0; i < a->ndomains; i++) {
    mt_bytes_u16(&b, (uint16_t)i);
    mt_bytes_u64(&b, (uint64_t)a->domains[i].last_alloc);
  }
  /* The nodes the live objects need, numbered anew in trie order (parents first). */
  const mt_code_trie *t = &a->code_trie;
  for (size_t i = 0; i < a->nlive; i++)
    for (uint32_t n = a->live[i].stack == UINT32_MAX ? 0 : a->live[i].code_node;
         n != 0 && n < t->nodes && !reached[n]; n = t->node[n].parent)
      reached[n] = 1;
  uint32_t nodes = 0;
  for (size_t i = 1; i < t->nodes; i++)
    if (reached[i])
      renumber[i] = ++nodes;
  renumber[0] = 0;
  mt_bytes_u32(&b, nodes);
  for (size_t i = 1; i < t->nodes; i++)
    if (reached[i]) {
      mt_bytes_u32(&b, renumber[t->node[i].parent]);
      mt_bytes_u64(&b, (uint64_t)t->node[i].code);
      mt_bytes_u32(&b, t->node[i].count);
    }
  mt_bytes_u64(&b, a->live_index.count);
  for (size_t i = 0; a->live_index.slots && i <= a->live_index.mask; i++) {
    const mt_idmap_slot *slot = &a->live_index.slots[i];
    if (slot->value == MT_IDMAP_EMPTY)
      continue;
    const live_obj *o = &a->live[slot->value];
    mt_bytes_u64(&b, (uint64_t)slot->id);
    mt_bytes_u64(&b, (uint64_t)o->time);
    mt_bytes_u64(&b, (uint64_t)o->words);
    mt_bytes_u64(&b, o->samples);
    mt_bytes_u16(&b, o->domain);
    mt_bytes_u8(&b, o->source);
    mt_bytes_u32(&b, o->code_node < t->nodes ? renumber[o->code_node] : 0);
  }
  if (ix->count == ix->cap) {
    size_t cap = ix->cap ? 2 * ix->cap : 16;
    checkpoint *grown = realloc(ix->c, cap * sizeof *grown);
    if (!grown)
      b.failed = true;
    else
      ix->c = grown, ix->cap = cap;
  }
  if (b.failed) {
    mt_bytes_free(&b);
    rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory taking a checkpoint");
    goto done;
  }
  ix->c[ix->count++] = (checkpoint){.offset = offset,
                                    .max_time = last,
                                    .locations = mark,
                                    .body = b.data,
                                    .body_size = b.len,
                                    .owned = b.data};
  ix->location_mark = mark;
  a->index_use.added++;
  a->checkpoint_due = offset + spacing(ix, b.len);
done:
  free(state);
  free(locations);
  free(reached);
  free(renumber);
  return rc;
}

int mt_index_step(mt_analysis *a, mt_reader *r, int64_t last, mt_error *err) {
  if (mt_reader_position(r) < a->checkpoint_due || !mt_reader_between_packets(r))
    return MT_OK;
  return save_checkpoint(a, r, last, err);
}

static bool write_all(int fd, const void *data, size_t n) {
  const uint8_t *p = data;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

static void write_index(mt_analysis *a) {
  mt_index *ix = a->index;
  mt_bytes b = {0};
  mt_bytes_data(&b, INDEX_MAGIC, 8);
  mt_bytes_u32(&b, INDEX_VERSION);
  mt_bytes_u64(&b, (uint64_t)ix->trace_size);
  mt_bytes_u64(&b, (uint64_t)ix->start_time);
  mt_bytes_u64(&b, (uint64_t)ix->pid);
  mt_bytes_u64(&b, (uint64_t)ix->trace_mtime);
  mt_bytes_u64(&b, (uint64_t)ix->trace_end);
  mt_bytes_u32(&b, (uint32_t)ix->count);
  uint64_t body = HEADER_SIZE + (uint64_t)ix->count * ENTRY_SIZE;
  for (size_t i = 0; i < ix->count; i++) {
    mt_bytes_u64(&b, (uint64_t)ix->c[i].offset);
    mt_bytes_u64(&b, (uint64_t)ix->c[i].max_time);
    mt_bytes_u64(&b, ix->c[i].locations);
    mt_bytes_u64(&b, body);
    mt_bytes_u64(&b, ix->c[i].body_size);
    body += ix->c[i].body_size;
  }
  for (size_t i = 0; i < ix->count; i++)
    mt_bytes_data(&b, ix->c[i].body, ix->c[i].body_size);
  mt_bytes_u64(&b, mt_bytes_checksum(b.data, b.len));
  if (b.failed) {
    note(a, "%s: cannot be written: %s", "out of memory");
    mt_bytes_free(&b);
    return;
  }
  size_t n = strlen(ix->path) + 32;
  char *tmp = malloc(n);
  if (tmp)
    snprintf(tmp, n, "%s.tmp.%ld", ix->path, (long)getpid());
  int fd = tmp ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
  bool ok = fd >= 0 && write_all(fd, b.data, b.len);
  int saved = errno;
  if (fd >= 0 && close(fd) != 0 && ok)
    ok = false, saved = errno;
  if (ok && rename(tmp, ix->path) != 0)
    ok = false, saved = errno;
  if (!ok) {
    note(a, "%s: cannot be written: %s", strerror(saved));
    if (fd >= 0)
      unlink(tmp);
  }
  a->index_use.written = ok;
  free(tmp);
  mt_bytes_free(&b);
}

void mt_index_end(mt_analysis *a, bool write, int64_t trace_end) {
  mt_index *ix = a->index;
  if (!ix)
    return;
  if (write && trace_end != INT64_MIN && ix->trace_end == INT64_MIN &&
      (ix->count || a->keep_checkpoints || ix->replace)) {
    ix->trace_end = trace_end; /* worth keeping in an index that exists or may */
    ix->end_learnt = true;
  }
  if (write && (a->index_use.added || ix->end_learnt))
    write_index(a);
  a->index_use.checkpoints = ix->count;
  for (size_t i = 0; i < ix->count; i++)
    free(ix->c[i].owned);
  free(ix->c);
  free(ix->file);
  free(ix->path);
  free(ix);
  a->index = NULL;
  mt_code_trie_free(&a->code_trie);
}

int64_t mt_index_trace_duration(const char *index_path, const mt_reader *r) {
  mt_index ix = {0};
  identify(&ix, index_path, r);
  char problem[PROBLEM_SIZE];
  int64_t duration = -1;
  if (ix.trace_size >= 0 && load(&ix, problem) && ix.trace_end != INT64_MIN)
    duration = ix.trace_end - ix.start_time;
  free(ix.file);
  free(ix.c);
  return duration;
}

const mt_index_use *mt_analysis_index_use(const mt_analysis *a) {
  return &a->index_use;
}
