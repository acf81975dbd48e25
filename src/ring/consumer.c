/* The consumer (docs/ring.md §7): a cursor maps a ring file read-only, validates its header once
 * (layout.c) and then reads the rings round-robin through that validated geometry only.
 *
 * Reading a ring follows RING.md part B: acquire-load the tail, copy a batch of words (relaxed
 * atomic loads), acquire fence, re-load the head. Every word at or after that head was intact
 * when copied; anything before it may be torn and is skipped. The number of records lost is
 * told by the records' sequence numbers, never guessed from word counts, and a race with the
 * producer is never reported as corruption: only a record that was intact and still breaks the
 * format is. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/map_unlocked.h"
#include "ring/atomics.h"
#include "ring/clock.h"
#include "ring/consumer.h"
#include "ring/layout.h"
#include "ring/liveness.h"
#include "ring/process.h"
#include "ring/tick.h"

#define BATCH_WORDS 4096u

struct ring_state {
  uint64_t pos;          /* next word to read */
  uint64_t expected;     /* sequence number of the record at pos */
  uint64_t pending_lost; /* lost records not yet reported */
  uint64_t published;    /* primary: the consumer_pos last stored */
  uint64_t end;          /* mt_cursor_set_end: the tail then ... */
  uint64_t end_seq;      /* ... and the next sequence number read after it */
  uint32_t generation;
  bool expected_known; /* false until the first record: `expected` is then a lower bound */
  bool gap;            /* pos jumped forward over overwritten records */
  bool generation_known;
  bool broken;
  /* A time-ordered poll's view of the ring: its tail at the poll's start, the stamp of its next
   * unread record (valid while unread). */
  uint64_t poll_tail, poll_stamp;
  bool poll_unread;
};

struct registry_entry {
  unsigned kind;
  uint64_t id;
  uint64_t pos; /* word position: of two entries for one key, the later one wins */
  uint8_t *bytes;
  size_t length;
};

/* An entry found reserved (being filled) and stepped over: read again once committed. */
struct registry_pending {
  uint64_t pos;
  uint64_t word; /* its reserved first word */
};

struct mt_cursor {
  void *base;
  uint64_t size;
  bool mapped;
  void *rw_base; /* primary: writable mapping of header and ring blocks */
  uint64_t rw_size;
  bool primary;
  int primary_fd;      /* primary of a producer in another pid namespace: the file, open while the
                          cursor lives, holding the primary's lock (mt_ring_primary_lock); else -1 */
  bool tick;           /* mt_cursor_set_clock_tick: the primary stores a clock tick at every poll */
  bool ticked;         /* one is stored (to withdraw) */
  int8_t clock_shared; /* whether the producer's clock is this process's: -1 not yet asked */
  mt_ring_geometry geo;
  struct ring_state *rings;
  uint64_t *buf;
  mt_cursor_callbacks cb;
  mt_cursor_run_fn run; /* consumer.h; NULL: one callback per record */
  void *user;
  uint32_t next_ring;
  bool time_order;        /* mt_cursor_set_time_order */
  uint32_t rings_in_poll; /* mt_cursor_rings_in_poll */
  uint32_t *order; /* a time-ordered poll's heap of rings with records unread, oldest first */
  _Atomic int busy;
  uint64_t lost_total;
  uint64_t lapped_copies; /* batches found overwritten after they were copied */
  bool end_set;           /* mt_cursor_set_end was called */
  uint64_t registry_end;  /* with end_set: the registry words reserved then */
  uint64_t registry_pos;  /* every entry before it was reported, or is pending */
  bool registry_broken;
  struct registry_pending *pending;
  size_t pending_count, pending_cap;
  uint64_t commits_seen; /* registry_commits when the pending entries were last read */
  struct registry_entry *entries;
  size_t entry_count, entry_cap;
  size_t *index; /* open addressing: entry number + 1, 0 = empty */
  size_t index_cap;
  char path[PATH_MAX];
};

void (*mt_cursor_test_after_copy)(void *user, uint32_t ring, uint64_t *copy,
                                  const _Atomic uint64_t *live, size_t words);
void *mt_cursor_test_after_copy_user;

static mt_ring_block *block(const mt_cursor *c, uint32_t ring) {
  return mt_ring_block_at(c->base, &c->geo, ring);
}

/* Where ring `ring` can be read up to now: its published tail, or the end mt_cursor_set_end set
 * before it. */
static uint64_t readable_tail(const mt_cursor *c, uint32_t ring) {
  uint64_t tail = mt_load_acquire(&block(c, ring)->tail);
  return c->end_set && tail > c->rings[ring].end ? c->rings[ring].end : tail;
}

static int64_t record_offset(const mt_cursor *c, uint32_t ring, uint64_t pos) {
  return (int64_t)(c->geo.data_offset + (uint64_t)ring * c->geo.ring_words * 8 +
                   (pos & (c->geo.ring_words - 1)) * 8);
}

/* ----------------------------------------------------------------------------------------------
 * Opening
 * -------------------------------------------------------------------------------------------- */

/* The rings some thread ever claimed: those below the header's rings_high, which a claim raises
 * before its first record. A ring above it is as the file was made (every word 0): its state in
 * a cursor is the zeroed one, exactly what start_ring would give it, so a file planned for
 * thousands of threads costs a cursor what its threads used, not a page fault per four rings. */
static uint32_t rings_used(const mt_cursor *c) {
  uint32_t high = mt_load_acquire(&mt_ring_header_at(c->base)->rings_high);
  return high < c->geo.ring_count ? high : c->geo.ring_count;
}

/* Where a new cursor starts on a ring: its head, the oldest record still there. The sequence
 * number found there is a floor: if that record is overwritten before we read it, the records
 * lost are counted from it, and never anything older (that history predates the cursor). */
static void start_ring(mt_cursor *c, uint32_t i) {
  struct ring_state *rs = &c->rings[i];
  mt_ring_block *b = block(c, i);
  _Atomic uint64_t *data = mt_ring_data_at(c->base, &c->geo, i);
  for (int attempt = 0;; attempt++) {
    uint64_t tail = mt_load_acquire(&b->tail);
    uint64_t head = mt_load_acquire(&b->head);
    uint64_t next = mt_load_relaxed(&b->next_seq);
    rs->pos = head;
    rs->expected = next;
    if (head >= tail || attempt == 16)
      break;
    uint64_t w = mt_load_relaxed(&data[head & (c->geo.ring_words - 1)]);
    mt_fence_acquire();
    if (mt_load_relaxed(&b->head) != head)
      continue;
    if (mt_ring_header_type(w) == MT_RING_TYPE_PADDING)
      break; /* the next record's number is the padding's: same result */
    rs->expected = next - 1 - (uint32_t)((uint32_t)(next - 1) - mt_ring_header_seq(w));
    if (next == 0 || rs->expected > next)
      rs->expected = next;
    break;
  }
  rs->published = rs->pos;
}

static int init_cursor(mt_cursor *c, mt_error *err) {
  c->clock_shared = -1;
  int rc = mt_ring_layout_check(c->base, c->size, &c->geo, err);
  if (rc != MT_OK)
    return rc;
  c->rings = calloc(c->geo.ring_count, sizeof *c->rings);
  c->order = malloc(c->geo.ring_count * sizeof *c->order);
  c->buf = malloc(BATCH_WORDS * sizeof *c->buf);
  if (!c->rings || !c->order || !c->buf)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory for a cursor on %u rings",
                   c->geo.ring_count);
  for (uint32_t i = 0, n = rings_used(c); i < n; i++)
    start_ring(c, i);
  return MT_OK;
}

int mt_cursor_open_memory(mt_cursor **out, void *file, size_t size, mt_error *err) {
  *out = NULL;
  mt_cursor *c = calloc(1, sizeof *c);
  if (!c)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  c->base = file;
  c->size = size;
  int rc = init_cursor(c, err);
  if (rc != MT_OK) {
    mt_cursor_close(c);
    return rc;
  }
  *out = c;
  return MT_OK;
}

/* Whether `path` is exactly /proc/PID/map_files/START-END: a link the kernel makes to a file a
 * process maps, not one a user could plant in a directory (nor a longer path through one). */
static bool mapped_file_link(const char *path) {
  const char *p = path;
  if (strncmp(p, "/proc/", 6) != 0)
    return false;
  p += 6;
  if (!isdigit((unsigned char)*p))
    return false;
  while (isdigit((unsigned char)*p))
    p++;
  if (strncmp(p, "/map_files/", 11) != 0)
    return false;
  p += 11;
  for (int part = 0; part < 2; part++) {
    if (!isxdigit((unsigned char)*p))
      return false;
    while (isxdigit((unsigned char)*p))
      p++;
    if (part == 0 && *p++ != '-')
      return false;
  }
  return *p == 0;
}

int mt_cursor_open_file(mt_cursor **out, const char *path, mt_error *err) {
  *out = NULL;
  if (strlen(path) >= PATH_MAX)
    return mt_fail(err, MT_E_INVALID, -1, "path too long");
  int fd =
      open(path, O_RDONLY | (mapped_file_link(path) ? 0 : O_NOFOLLOW) | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP)
      return mt_fail(err, MT_E_IO, -1,
                     "is a symbolic link (ring files are never opened through one)");
    return mt_fail_io(err, "cannot open the ring file");
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int rc = mt_fail_io(err, "cannot stat the ring file");
    close(fd);
    return rc;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return mt_fail(err, MT_E_MALFORMED, -1, "not a regular file");
  }
  if (st.st_size == 0) {
    close(fd);
    return mt_fail(err, MT_E_STATE, -1, "the ring file is empty (still being created?)");
  }
  void *base = mt_map_unlocked((size_t)st.st_size, PROT_READ, MAP_SHARED, fd);
  int saved = errno;
  close(fd);
  if (base == MAP_FAILED) {
    errno = saved;
    return mt_fail_io(err, "cannot map the ring file");
  }
  /* As the producer's mapping (create.c): no read-ahead. Reading the ring headers of a file whose
   * blocks are reserved but unwritten otherwise fills the page cache around each with zeroed
   * pages, which the final unlink then has to drop (a third of memtap record's CPU around an
   * empty program). */
  madvise(base, (size_t)st.st_size, MADV_RANDOM);
  mt_cursor *c = calloc(1, sizeof *c);
  if (!c) {
    munmap(base, (size_t)st.st_size);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  c->base = base;
  c->size = (uint64_t)st.st_size;
  c->mapped = true;
  memcpy(c->path, path, strlen(path) + 1);
  int rc = init_cursor(c, err);
  if (rc != MT_OK) {
    mt_cursor_close(c);
    return rc;
  }
  *out = c;
  return MT_OK;
}

int mt_cursor_open(mt_cursor **out, const char *dir, int pid, mt_error *err) {
  char path[PATH_MAX];
  *out = NULL;
  if (mt_ring_file_path(path, sizeof path, dir, pid) != MT_OK)
    return mt_fail(err, MT_E_INVALID, -1, "ring directory path is too long");
  return mt_cursor_open_file(out, path, err);
}

int mt_cursor_register_primary(mt_cursor *c, mt_error *err) {
  if (!c->mapped)
    return mt_fail(err, MT_E_STATE, -1, "a cursor on memory cannot be the primary consumer");
  if (c->primary)
    return MT_OK;
  int fd = open(c->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return mt_fail_io(err, "cannot open the ring file for writing");
  uint64_t rw_size = c->geo.registry_offset; /* header and ring blocks */
  struct stat st;
  void *rw = MAP_FAILED;
  /* A producer in another pid namespace (its file's name says so) cannot see our pid: it judges
   * us by a lock, which we take before it could find us claiming and keep while the cursor lives
   * (ring/liveness.h). Any other keeps no descriptor: one per file adds up in a consumer of many
   * processes, and an in-process consumer's would show in the program's descriptor table. */
  const char *slash = strrchr(c->path, '/');
  bool foreign = strstr(slash ? slash + 1 : c->path, MT_RING_FILE_PIDNS) != NULL;
  if (foreign)
    mt_ring_primary_lock(fd);
  if (fstat(fd, &st) == 0 && (uint64_t)st.st_size >= rw_size)
    rw = mt_map_unlocked(rw_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
  int saved = errno;
  if (rw == MAP_FAILED || !foreign) {
    close(fd);
    fd = -1;
  }
  if (rw == MAP_FAILED) {
    errno = saved;
    return mt_fail_io(err, "cannot map the ring file for writing");
  }
  /* The file we validated must be the one we just mapped (same header). */
  if (memcmp(rw, c->base, 256) != 0) {
    munmap(rw, rw_size);
    if (fd >= 0)
      close(fd);
    return mt_fail(err, MT_E_STATE, -1, "the ring file was replaced since the cursor opened it");
  }
  mt_ring_file_header *h = mt_ring_header_at(rw);
  int32_t self = getpid();
  uint64_t start = 0;
  mt_process_stat(0, &start, NULL);
  /* Claim first, publish after: the compare-and-swap of (pid, state) to (self, CLAIMING) is the
   * only write a consumer makes before it has won, so a loser never touches what the winner
   * publishes, and a producer reads positions and start time only once they are ATTACHED. */
  uint64_t current = mt_load_acquire(&h->primary);
  for (int attempt = 0;; attempt++) {
    uint32_t state = mt_ring_primary_state(current);
    int32_t pid = mt_ring_primary_pid(current);
    /* One still CLAIMING has not published its start time: only its pid can be checked. */
    uint64_t their_start =
        state == MT_RING_PRIMARY_ATTACHED ? mt_load_relaxed(&h->primary_start_time) : 0;
    if ((state == MT_RING_PRIMARY_ATTACHED || state == MT_RING_PRIMARY_CLAIMING) && pid != 0 &&
        mt_process_alive(pid, their_start)) {
      munmap(rw, rw_size);
      if (fd >= 0)
        close(fd);
      return mt_fail(err, MT_E_STATE, -1, "process %d already is the primary consumer", pid);
    }
    if (attempt == 16) { /* the word keeps changing under us: only a hostile file does that */
      munmap(rw, rw_size);
      if (fd >= 0)
        close(fd);
      return mt_fail(err, MT_E_STATE, -1, "the primary consumer keeps changing");
    }
    if (atomic_compare_exchange_strong(&h->primary, &current,
                                       mt_ring_primary_word(self, MT_RING_PRIMARY_CLAIMING)))
      break;
    /* Someone else changed it since we looked (another claimer): judge the new value. */
  }
  /* Rings above rings_high hold 0 there, and nothing of theirs has been read. */
  for (uint32_t i = 0, n = rings_used(c); i < n; i++) {
    mt_store_release(&mt_ring_block_at(rw, &c->geo, i)->consumer_pos, c->rings[i].pos);
    c->rings[i].published = c->rings[i].pos;
  }
  mt_store_relaxed(&h->primary_start_time, start);
  mt_store_release(&h->primary, mt_ring_primary_word(self, MT_RING_PRIMARY_ATTACHED));
  c->rw_base = rw;
  c->rw_size = rw_size;
  c->primary_fd = fd;
  c->primary = true;
  return MT_OK;
}

void mt_cursor_set_callbacks(mt_cursor *c, const mt_cursor_callbacks *callbacks, void *user) {
  if (callbacks)
    c->cb = *callbacks;
  else
    memset(&c->cb, 0, sizeof c->cb);
  c->user = user;
}

void mt_cursor_set_run_callback(mt_cursor *c, mt_cursor_run_fn fn) {
  c->run = fn;
}

void mt_cursor_set_time_order(mt_cursor *c, bool on) {
  c->time_order = on;
}

/* ----------------------------------------------------------------------------------------------
 * Registry
 * -------------------------------------------------------------------------------------------- */

static size_t hash_key(unsigned kind, uint64_t id) {
  uint64_t x = id * 0x9e3779b97f4a7c15ull ^ (uint64_t)kind * 0xc2b2ae3d27d4eb4full;
  return (size_t)(x ^ x >> 29);
}

/* Makes the index name entry `entry` for its key, unless it already names a later entry (entries
 * are reported in commit order, which is not always their order in the registry). */
static void index_place(size_t *index, size_t cap, const struct registry_entry *entries,
                        size_t entry) {
  const struct registry_entry *n = &entries[entry];
  size_t at = hash_key(n->kind, n->id) & (cap - 1);
  while (index[at] &&
         !(entries[index[at] - 1].kind == n->kind && entries[index[at] - 1].id == n->id))
    at = (at + 1) & (cap - 1);
  if (!index[at] || entries[index[at] - 1].pos < n->pos)
    index[at] = entry + 1;
}

static bool index_put(mt_cursor *c, size_t entry) {
  if ((c->entry_count + 1) * 2 > c->index_cap) {
    size_t cap = c->index_cap ? c->index_cap * 2 : 64;
    size_t *index = calloc(cap, sizeof *index);
    if (!index)
      return false;
    for (size_t e = 0; e < c->entry_count; e++)
      index_place(index, cap, c->entries, e);
    free(c->index);
    c->index = index;
    c->index_cap = cap;
  }
  index_place(c->index, c->index_cap, c->entries, entry);
  return true;
}

static int registry_malformed(mt_cursor *c, uint64_t pos, unsigned kind, uint64_t length,
                              mt_error *err) {
  c->registry_broken = true;
  int64_t at = (int64_t)(c->geo.registry_offset + pos * 8);
  return mt_fail(err, MT_E_MALFORMED, at,
                 "malformed ring file at byte %lld: registry entry of kind %u, %llu bytes",
                 (long long)at, kind, (unsigned long long)length);
}

/* Copies the committed entry at `pos` (first word `w`, already validated) and reports it. */
static int report_entry(mt_cursor *c, uint64_t pos, uint64_t w, mt_error *err) {
  _Atomic uint64_t *reg = mt_ring_registry_at(c->base, &c->geo);
  unsigned kind = (unsigned)(w >> 48);
  uint64_t length = w & 0xffffffffu;
  uint64_t words = mt_registry_entry_words(length);
  if (c->entry_count == c->entry_cap) {
    size_t ncap = c->entry_cap ? c->entry_cap * 2 : 16;
    struct registry_entry *e = realloc(c->entries, ncap * sizeof *e);
    if (!e)
      return mt_fail(err, MT_E_NOMEM, -1, "out of memory for the registry");
    c->entries = e;
    c->entry_cap = ncap;
  }
  uint8_t *bytes = malloc(length + 1);
  if (!bytes)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory for the registry");
  for (uint64_t i = 0; i + 2 < words; i++) {
    uint64_t v = mt_load_relaxed(&reg[pos + 2 + i]);
    size_t at = (size_t)i * 8;
    memcpy(bytes + at, &v, length - at < 8 ? length - at : 8);
  }
  bytes[length] = 0;
  struct registry_entry *e = &c->entries[c->entry_count];
  e->kind = kind;
  e->id = mt_load_relaxed(&reg[pos + 1]);
  e->pos = pos;
  e->bytes = bytes;
  e->length = length;
  if (!index_put(c, c->entry_count)) {
    free(bytes);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory for the registry");
  }
  c->entry_count++;
  if (c->cb.registry)
    c->cb.registry(c->user, kind, e->id, e->bytes, e->length);
  return MT_OK;
}

/* Reports every registry entry committed so far, each once. Entries still being filled are
 * stepped over (their reserved first word gives their length) and kept pending, so that an
 * entry committed after one another thread has not finished yet is not hidden behind it; the
 * pending ones are read again whenever the producer's commit count has moved. */
static int poll_registry(mt_cursor *c, mt_error *err) {
  if (c->registry_broken)
    return MT_OK;
  _Atomic uint64_t *reg = mt_ring_registry_at(c->base, &c->geo);
  uint64_t cap = c->geo.registry_words;
  if (c->pending_count) {
    /* The count first: a commit after this load moves it again, so none is missed. */
    uint64_t commits = mt_load_acquire(&mt_ring_header_at(c->base)->registry_commits);
    if (commits != c->commits_seen) {
      c->commits_seen = commits;
      size_t kept = 0;
      for (size_t i = 0; i < c->pending_count; i++) {
        struct registry_pending p = c->pending[i];
        uint64_t w = mt_load_acquire(&reg[p.pos]);
        if (w == p.word) {
          c->pending[kept++] = p;
          continue;
        }
        if (w != (p.word & ~MT_REGISTRY_RESERVED)) {
          c->pending_count = kept;
          return registry_malformed(c, p.pos, (unsigned)(w >> 48), w & 0xffffffffu, err);
        }
        int rc = report_entry(c, p.pos, w, err);
        if (rc != MT_OK) {
          /* Keep this one and the rest pending for the next poll. */
          memmove(&c->pending[kept], &c->pending[i], (c->pending_count - i) * sizeof p);
          c->pending_count = kept + (c->pending_count - i);
          return rc;
        }
      }
      c->pending_count = kept;
    }
  }
  uint64_t limit = c->end_set && c->registry_end < cap ? c->registry_end : cap;
  while (c->registry_pos < limit && c->registry_pos + 2 <= cap) {
    uint64_t pos = c->registry_pos;
    if (!c->pending_count)
      c->commits_seen = mt_load_acquire(&mt_ring_header_at(c->base)->registry_commits);
    uint64_t w = mt_load_acquire(&reg[pos]);
    if (w == 0)
      break;
    unsigned kind = (unsigned)(w >> 48);
    uint64_t length = w & 0xffffffffu;
    uint64_t words = mt_registry_entry_words(length);
    if (kind == 0 || (w >> 32 & 0x7fffu) || length > MT_RING_REGISTRY_MAX_BYTES ||
        words > cap - pos)
      return registry_malformed(c, pos, kind, length, err);
    if (w & MT_REGISTRY_RESERVED) {
      if (c->pending_count == c->pending_cap) {
        size_t ncap = c->pending_cap ? c->pending_cap * 2 : 8;
        struct registry_pending *p = realloc(c->pending, ncap * sizeof *p);
        if (!p)
          return mt_fail(err, MT_E_NOMEM, -1, "out of memory for the registry");
        c->pending = p;
        c->pending_cap = ncap;
      }
      c->pending[c->pending_count++] = (struct registry_pending){pos, w};
    } else {
      int rc = report_entry(c, pos, w, err);
      if (rc != MT_OK)
        return rc;
    }
    c->registry_pos = pos + words;
  }
  return MT_OK;
}

int mt_cursor_lookup(const mt_cursor *c, unsigned kind, uint64_t id, const void **bytes,
                     size_t *length) {
  if (!c->index_cap)
    return MT_E_INVALID;
  size_t at = hash_key(kind, id) & (c->index_cap - 1);
  while (c->index[at]) {
    const struct registry_entry *e = &c->entries[c->index[at] - 1];
    if (e->kind == kind && e->id == id) {
      *bytes = e->bytes;
      *length = e->length;
      return MT_OK;
    }
    at = (at + 1) & (c->index_cap - 1);
  }
  return MT_E_INVALID;
}

/* ----------------------------------------------------------------------------------------------
 * Reading records
 * -------------------------------------------------------------------------------------------- */

/* Which generation wrote the record at `pos`: the newest generation that started at or before
 * it, among those the ring block remembers. False if that generation has been forgotten. */
static bool history_lookup(const mt_ring_block *b, uint64_t pos, uint32_t *generation) {
  bool found = false;
  uint64_t best = 0;
  for (uint32_t k = 0; k < MT_RING_HISTORY; k++) {
    uint64_t g1 = mt_load_acquire(&b->history[k].generation);
    uint64_t start = mt_load_relaxed(&b->history[k].start);
    mt_fence_acquire();
    uint64_t g2 = mt_load_relaxed(&b->history[k].generation);
    if (g1 == 0 || g1 != g2 || g1 > UINT32_MAX || g1 % MT_RING_HISTORY != k)
      continue;
    if (start <= pos && g1 > best) {
      best = g1;
      found = true;
    }
  }
  *generation = (uint32_t)best;
  return found;
}

static void report_lost(mt_cursor *c, uint32_t ring, struct ring_state *rs) {
  if (!rs->pending_lost)
    return;
  uint64_t n = rs->pending_lost;
  rs->pending_lost = 0;
  c->lost_total += n;
  if (c->cb.lost)
    c->cb.lost(c->user, ring, n);
}

static int malformed(mt_cursor *c, uint32_t ring, uint64_t pos, mt_error *err, const char *why) {
  c->rings[ring].broken = true;
  int64_t at = record_offset(c, ring, pos);
  return mt_fail(err, MT_E_MALFORMED, at, "malformed ring file at byte %lld (ring %u): %s",
                 (long long)at, ring, why);
}

/* The least payload each transport record carries; NULL if the record is valid. */
static const char *check_record(uint32_t type, uint32_t id, const uint64_t *payload, size_t words) {
  static const uint8_t lifecycle_words[] = {1, 0, 0, 0, 1, 2, 2, 2};
  switch (type) {
  case MT_RING_TYPE_LIFECYCLE:
    if (id > MT_RING_LIFECYCLE_THREAD_EXIT)
      return "unknown lifecycle record";
    if (words < lifecycle_words[id])
      return "lifecycle record too short";
    if ((id == MT_RING_LIFECYCLE_THREAD_START || id == MT_RING_LIFECYCLE_THREAD_EXIT) &&
        (payload[0] == 0 || payload[0] > UINT32_MAX))
      return "thread record with an impossible generation";
    return NULL;
  case MT_RING_TYPE_CLOCK: return words < 2 ? "clock record too short" : NULL;
  case MT_RING_TYPE_COUNTER:
  case MT_RING_TYPE_USER_INT: return words < 1 ? "value record without its value" : NULL;
  case MT_RING_TYPE_USER_CUSTOM:
    if (words < 1)
      return "custom record without bytes";
    if ((payload[words - 1] >> 56) < 1 || (payload[words - 1] >> 56) > 8)
      return "custom record with an impossible pad count";
    return NULL;
  case MT_RING_TYPE_SPAN_BEGIN:
  case MT_RING_TYPE_SPAN_END:
  case MT_RING_TYPE_USER_UNIT:
  case MT_RING_TYPE_USER_SPAN_BEGIN:
  case MT_RING_TYPE_USER_SPAN_END: return NULL;
  default: return type >= MT_RING_TYPE_OPAQUE_FIRST ? NULL : "record of an unknown type";
  }
}

static mt_ring_event_fn pick_callback(const mt_cursor_callbacks *cb, uint32_t type) {
  mt_ring_event_fn fn = NULL;
  switch (type) {
  case MT_RING_TYPE_LIFECYCLE: fn = cb->lifecycle; break;
  case MT_RING_TYPE_CLOCK: fn = cb->clock; break;
  case MT_RING_TYPE_COUNTER: fn = cb->counter; break;
  case MT_RING_TYPE_SPAN_BEGIN: fn = cb->span_begin; break;
  case MT_RING_TYPE_SPAN_END: fn = cb->span_end; break;
  case MT_RING_TYPE_USER_UNIT: fn = cb->user_unit; break;
  case MT_RING_TYPE_USER_INT: fn = cb->user_int; break;
  case MT_RING_TYPE_USER_SPAN_BEGIN: fn = cb->user_span_begin; break;
  case MT_RING_TYPE_USER_SPAN_END: fn = cb->user_span_end; break;
  case MT_RING_TYPE_USER_CUSTOM: fn = cb->user_custom; break;
  default: fn = cb->opaque; break;
  }
  return fn ? fn : cb->other;
}

enum { DELIVERED, SKIPPED, STOPPED };

/* One intact record at `pos`: sequence accounting, thread identity, the callback. */
static int deliver(mt_cursor *c, uint32_t ring, const uint64_t *rec, uint32_t len, uint64_t pos,
                   int *outcome, mt_error *err) {
  struct ring_state *rs = &c->rings[ring];
  mt_ring_block *b = block(c, ring);
  uint64_t w = rec[0];
  uint32_t type = mt_ring_header_type(w), id = mt_ring_header_id(w);
  uint32_t seq32 = mt_ring_header_seq(w);
  uint64_t seq;
  if (rs->gap || !rs->expected_known) {
    /* Widen the 32-bit number against the producer's next one (published before the tail we
     * read, so at least this record's + 1); the ring holds far fewer than 2^32 records. */
    uint64_t next = mt_load_relaxed(&b->next_seq);
    seq = next - 1 - (uint32_t)((uint32_t)(next - 1) - seq32);
  } else {
    /* Without a gap the number should be exactly the expected one: read the difference as
     * signed, so that a number going backwards is seen as such. */
    seq = rs->expected + (uint64_t)(int64_t)(int32_t)(seq32 - (uint32_t)rs->expected);
  }
  if (rs->expected_known || rs->gap) {
    if (seq < rs->expected) {
      if (rs->expected_known)
        return malformed(c, ring, pos, err, "record sequence number goes backwards");
    } else {
      rs->pending_lost += seq - rs->expected;
    }
  }
  rs->expected = seq;
  rs->expected_known = true;
  rs->gap = false;

  const uint64_t *payload = rec + 2;
  size_t words = len - 2;
  const char *why = check_record(type, id, payload, words);
  if (why)
    return malformed(c, ring, pos, err, why);
  uint32_t generation = rs->generation;
  bool known = rs->generation_known;
  if (type == MT_RING_TYPE_LIFECYCLE && id == MT_RING_LIFECYCLE_THREAD_START) {
    generation = (uint32_t)payload[0];
    known = true;
  } else if (!known) {
    known = history_lookup(b, pos, &generation);
  }
  if (!known) {
    /* Its thread's identity was overwritten with its first records: counted as lost. */
    rs->pending_lost++;
    rs->expected = seq + 1;
    *outcome = SKIPPED;
    return MT_OK;
  }
  rs->generation = generation;
  rs->generation_known = true;
  report_lost(c, ring, rs);

  mt_ring_event_fn fn = pick_callback(&c->cb, type);
  if (fn) {
    mt_ring_event ev = {
        ring,     generation, type, id, seq, rec[1], payload, words, (const uint8_t *)payload,
        words * 8};
    if (type == MT_RING_TYPE_USER_CUSTOM)
      ev.length = words * 8 - (payload[words - 1] >> 56);
    if (fn(c->user, &ev) != MT_CURSOR_NEXT) {
      *outcome = STOPPED;
      return MT_OK;
    }
  }
  rs->expected = seq + 1;
  *outcome = DELIVERED;
  return MT_OK;
}

static void note_gap(struct ring_state *rs, uint64_t head) {
  rs->pos = head;
  rs->gap = true;
  rs->generation_known = false;
}

/* A ring lapped past its end (mt_cursor_set_end): no record after the jump is ours to deliver,
 * so the loss is counted up to the end's sequence number instead of from the next record's. The
 * gap stays open: if a later end lets reading resume, the next record counts the rest. */
static void finish_at_end(const mt_cursor *c, struct ring_state *rs) {
  if (c->end_set && rs->gap && rs->pos >= rs->end && rs->end_seq > rs->expected) {
    rs->pending_lost += rs->end_seq - rs->expected;
    rs->expected = rs->end_seq;
  }
}

static void publish_position(mt_cursor *c, uint32_t ring) {
  struct ring_state *rs = &c->rings[ring];
  if (c->primary && rs->pos != rs->published) {
    mt_store_release(&mt_ring_block_at(c->rw_base, &c->geo, ring)->consumer_pos, rs->pos);
    rs->published = rs->pos;
  }
}

/* Copies `n` words out of the ring: relaxed loads (the producer may be writing them), through
 * local pointers and four at a time, since the loads keep the compiler from keeping anything in
 * registers across them. */
static void copy_words(uint64_t *restrict to, const _Atomic uint64_t *restrict from, uint64_t n) {
  uint64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    uint64_t a = mt_load_relaxed(&from[k]), b = mt_load_relaxed(&from[k + 1]);
    uint64_t x = mt_load_relaxed(&from[k + 2]), y = mt_load_relaxed(&from[k + 3]);
    to[k] = a, to[k + 1] = b, to[k + 2] = x, to[k + 3] = y;
  }
  for (; k < n; k++)
    to[k] = mt_load_relaxed(&from[k]);
}

bool mt_cursor_test_in_place;

/* Whether a batch of ring `ring` can be read in place rather than copied out first: in lossless
 * mode the producer overwrites unread words only once the primary's consumer_pos has passed them
 * (RING.md, part B), so the primary's unread records hold still while it reads them, as long as
 * the file is not degraded (then the ring overwrites as a flight recorder does). Only the run
 * callback reads in place: it takes each record's length once and checks it against the batch,
 * so words changed under it by a producer that broke the protocol give wrong values, never a read
 * outside the batch; records for the other callbacks are still copied. */
static bool read_in_place(const mt_cursor *c) {
  return c->run && !mt_cursor_test_after_copy &&
         (mt_cursor_test_in_place || (c->primary && c->geo.mode == MT_RING_LOSSLESS &&
                                      !mt_load_relaxed(&mt_ring_header_at(c->base)->degraded)));
}

/* Reads ring `ring` up to `tail`, delivering at most `budget` records. */
static int drain(mt_cursor *c, uint32_t ring, uint64_t tail, size_t budget, size_t *got,
                 bool *stopped, mt_error *err) {
  struct ring_state *rs = &c->rings[ring];
  mt_ring_block *b = block(c, ring);
  _Atomic uint64_t *data = mt_ring_data_at(c->base, &c->geo, ring);
  uint64_t size = c->geo.ring_words, mask = size - 1;
  int rc = MT_OK;
  mt_ring_event_fn opaque = c->cb.opaque ? c->cb.opaque : c->cb.other;
  while (rs->pos < tail && *got < budget) {
    uint64_t start = rs->pos;
    uint64_t head = mt_load_acquire(&b->head);
    if (head < tail && tail - head > size) {
      /* The producer never lets them drift a ring apart (head only grows, so a later head is
       * even closer to our tail). Reading on would lap the same words forever. */
      return malformed(c, ring, start, err, "head and tail are more than a ring apart");
    }
    if (head > start) {
      note_gap(rs, head);
      continue;
    }
    uint64_t off = start & mask;
    uint64_t n = tail - start;
    if (n > size - off)
      n = size - off;
    if (n > BATCH_WORDS)
      n = BATCH_WORDS;
    bool in_place = read_in_place(c);
    const uint64_t *batch = in_place ? (const uint64_t *)&data[off] : c->buf;
    if (!in_place) {
      copy_words(c->buf, &data[off], n);
      if (mt_cursor_test_after_copy)
        mt_cursor_test_after_copy(mt_cursor_test_after_copy_user, ring, c->buf, &data[off], n);
      mt_fence_acquire();
      head = mt_load_relaxed(&b->head);
    }
    uint64_t p = start, end = start + n;
    if (head > start) {
      /* Lapped while copying: what lies before the new head may be torn. */
      c->lapped_copies++;
      note_gap(rs, head);
      if (head >= end)
        continue;
      p = head;
    }
    while (p < end && *got < budget) {
      const uint64_t *rec = &batch[p - start];
      uint64_t word = rec[0]; /* read once: in place, the words may change under a bad producer */
      uint32_t len = mt_ring_header_length(word);
      if (len == 0 || len > MT_RING_MAX_RECORD_WORDS || (p & mask) + len > size) {
        rs->pos = p;
        return malformed(c, ring, p, err, "impossible record length");
      }
      if (p + len > end) {
        if (end == tail) {
          rs->pos = p;
          return malformed(c, ring, p, err, "record runs past the published tail");
        }
        break; /* cut by the batch: read it whole next time round */
      }
      if (mt_ring_header_type(word) == MT_RING_TYPE_PADDING) {
        if ((p & mask) + len != size) {
          rs->pos = p;
          return malformed(c, ring, p, err, "padding record that does not end the ring");
        }
        p += len;
        continue;
      }
      if (len < 2) {
        rs->pos = p;
        return malformed(c, ring, p, err, "record shorter than its header and timestamp");
      }
      uint32_t type = mt_ring_header_type(word);
      if (type >= MT_RING_TYPE_OPAQUE_FIRST && opaque && rs->expected_known && !rs->gap &&
          rs->generation_known && !rs->pending_lost &&
          mt_ring_header_seq(word) == (uint32_t)rs->expected) {
        /* The usual record: an opaque one (no format of the transport's to check), numbered as
         * expected, from the thread already known. What deliver() does, in short. */
        if (c->run) {
          /* With it, the run that starts here, up to the budget, at once; the callback checks the
           * records after this one itself (mt_cursor_run_record). A record that ends within the
           * batch also ends within the ring (a batch never wraps), and a length field cannot
           * exceed MT_RING_MAX_RECORD_WORDS. */
          _Static_assert(MT_RING_MAX_RECORD_WORDS >= (1u << 10) - 1, "10-bit record lengths");
          size_t used = 0, limit = budget - *got;
          size_t took =
              c->run(c->user, ring, rs->generation, rs->expected, rec, end - p, limit, &used);
          rs->expected += took;
          *got += took;
          p += used;
          if (took < limit &&
              mt_cursor_run_record(&batch[p - start], end - p, (uint32_t)rs->expected)) {
            rs->pos = p;
            *stopped = true;
            publish_position(c, ring);
            return MT_OK;
          }
          continue;
        }
        mt_ring_event ev = {
            ring,   rs->generation, type,    mt_ring_header_id(rec[0]),  rs->expected,
            rec[1], rec + 2,        len - 2, (const uint8_t *)(rec + 2), ((size_t)len - 2) * 8};
        if (opaque(c->user, &ev) != MT_CURSOR_NEXT) {
          rs->pos = p;
          *stopped = true;
          publish_position(c, ring);
          return MT_OK;
        }
        rs->expected++;
        ++*got;
        p += len;
        continue;
      }
      if (in_place) { /* a snapshot for the other callbacks, as when the batch is copied */
        copy_words(c->buf, &data[off + (p - start)], len);
        rec = c->buf;
      }
      int outcome;
      rc = deliver(c, ring, rec, len, p, &outcome, err);
      if (rc != MT_OK) {
        rs->pos = p;
        return rc;
      }
      if (outcome == STOPPED) {
        rs->pos = p;
        *stopped = true;
        publish_position(c, ring);
        return MT_OK;
      }
      *got += outcome == DELIVERED;
      p += len;
    }
    rs->pos = p;
    publish_position(c, ring);
  }
  finish_at_end(c, rs);
  report_lost(c, ring, rs);
  publish_position(c, ring);
  return rc;
}

/* A ring read to where it stands: losses at an end mt_cursor_set_end set are counted, and every
 * loss not yet reported is. */
static void ring_at_end(mt_cursor *c, uint32_t ring) {
  finish_at_end(c, &c->rings[ring]);
  report_lost(c, ring, &c->rings[ring]);
}

/* The stamp of the record at ring `ring`'s read position, read from the file without copying it:
 * only which ring to read next depends on it, so a word the producer is overwriting meanwhile
 * costs order, not correctness. 0 (read it first) for a padding record or a position too close
 * to the ring's end to hold a stamp. */
static uint64_t next_stamp(const mt_cursor *c, uint32_t ring) {
  const _Atomic uint64_t *data = mt_ring_data_at(c->base, &c->geo, ring);
  uint64_t off = c->rings[ring].pos & (c->geo.ring_words - 1);
  if (off + 1 >= c->geo.ring_words ||
      mt_ring_header_type(mt_load_relaxed(&data[off])) == MT_RING_TYPE_PADDING)
    return 0;
  return mt_load_relaxed(&data[off + 1]);
}

uint32_t mt_cursor_rings_in_poll(const mt_cursor *c) {
  return c->rings_in_poll;
}

bool mt_cursor_oldest_unread(mt_cursor *c, uint64_t *stamp) {
  uint32_t n = rings_used(c);
  bool any = false;
  for (uint32_t ring = 0; ring < n; ring++) {
    if (c->rings[ring].broken || c->rings[ring].pos >= readable_tail(c, ring))
      continue;
    uint64_t t = next_stamp(c, ring);
    if (!any || t < *stamp)
      *stamp = t;
    any = true;
  }
  return any;
}

/* A time-ordered poll (mt_cursor_set_time_order): chunks of TIME_ORDER_CHUNK records, each from
 * the ring whose next unread record is the oldest, so that the rings' read positions stay close
 * in time, until the budget is spent or every ring is read to where it stood at the start. Each
 * ring's tail is loaded once per poll (a line its producer keeps writing) and its next stamp read
 * again only after a chunk of it. The rings with records unread are kept in a heap by that stamp:
 * a program whose threads come and go uses rings by the hundred, and picking the oldest costs
 * log(rings) per chunk, so that a poll of many rings holding a few records each costs about one
 * pass over them. */
#define TIME_ORDER_CHUNK 1024

static inline bool ring_older(const mt_cursor *c, uint32_t a, uint32_t b) {
  return c->rings[a].poll_stamp < c->rings[b].poll_stamp;
}

static void order_sift_down(mt_cursor *c, uint32_t count, uint32_t i) {
  uint32_t ring = c->order[i];
  for (;;) {
    uint32_t child = 2 * i + 1;
    if (child >= count)
      break;
    if (child + 1 < count && ring_older(c, c->order[child + 1], c->order[child]))
      child++;
    if (!ring_older(c, c->order[child], ring))
      break;
    c->order[i] = c->order[child];
    i = child;
  }
  c->order[i] = ring;
}

static int poll_in_time_order(mt_cursor *c, uint32_t *rings, size_t budget, size_t *got,
                              bool *stopped, mt_error *err) {
  uint32_t count = 0, n = *rings, from = 0;
  for (;;) {
    for (uint32_t ring = from; ring < n; ring++) {
      struct ring_state *rs = &c->rings[ring];
      rs->poll_tail = readable_tail(c, ring);
      rs->poll_unread = !rs->broken && rs->pos < rs->poll_tail;
      if (rs->poll_unread) {
        rs->poll_stamp = next_stamp(c, ring);
        c->order[count++] = ring;
      }
    }
    /* A record below a tail just loaded may have been written after another thread claimed a
     * ring and wrote there, stamped earlier (a block it handed over): the tail's acquire makes
     * that claim visible now, and its ring joins this poll, so that the older records come
     * first (a consumer that processes one thread's records as they come, with nothing to merge,
     * would otherwise take the newer one's before it knows of the other thread). */
    uint32_t now = rings_used(c);
    if (now <= n)
      break;
    from = n;
    n = now;
  }
  *rings = n;
  c->rings_in_poll = count;
  for (uint32_t i = count / 2; i-- > 0;)
    order_sift_down(c, count, i);
  /* The registry after the tails, as in mt_cursor_poll. */
  int rc = poll_registry(c, err);
  while (rc == MT_OK && *got < budget && count > 0) {
    uint32_t best = c->order[0];
    struct ring_state *rs = &c->rings[best];
    size_t chunk = budget - *got < TIME_ORDER_CHUNK ? budget : *got + TIME_ORDER_CHUNK;
    rc = drain(c, best, rs->poll_tail, chunk, got, stopped, err);
    if (rc != MT_OK || *stopped)
      break;
    rs->poll_unread = rs->pos < rs->poll_tail;
    if (rs->poll_unread)
      rs->poll_stamp = next_stamp(c, best);
    else
      c->order[0] = c->order[--count];
    if (count > 0)
      order_sift_down(c, count, 0);
  }
  return rc;
}

/* A poll that reads the rings in turn, from the one after the ring the last poll stopped in. */
static int poll_in_turn(mt_cursor *c, uint32_t n, size_t budget, size_t *got, bool *stopped,
                        mt_error *err) {
  int rc = MT_OK;
  uint32_t first = n ? c->next_ring % n : 0;
  for (uint32_t k = 0; k < n && rc == MT_OK; k++) {
    uint32_t ring = (first + k) % n;
    if (c->rings[ring].broken)
      continue;
    uint64_t tail = readable_tail(c, ring);
    /* The registry is read after the tail: a record is never delivered before the entries its
     * writer registered before writing it. */
    rc = poll_registry(c, err);
    if (rc != MT_OK)
      break;
    if (c->rings[ring].pos < tail)
      rc = drain(c, ring, tail, budget, got, stopped, err);
    else
      ring_at_end(c, ring);
    if (*stopped) {
      c->next_ring = ring;
      break;
    }
    if (*got >= budget) {
      c->next_ring = (ring + 1) % n;
      break;
    }
  }
  if (rc == MT_OK && !*stopped && *got < budget)
    rc = poll_registry(c, err);
  return rc;
}

/* Raises the shared clock tick to a reading of the file's clock (ring/tick.h). The first offer
 * goes through the withdrawn state: until then writers stamped their own clock readings without
 * raising the word, so the word first takes a reading withdrawn (from then on every writer raises
 * it to its own readings), and only a reading taken after that store, no smaller than any stamp a
 * writer took before seeing it, is offered. */
static void offer_tick(mt_cursor *c) {
  _Atomic uint64_t *word = &mt_ring_header_at(c->rw_base)->shared_tick;
  uint64_t first = 0;
  if (mt_load_relaxed(word) == 0) {
    uint64_t reading = mt_ring_tick_value(mt_clock_read((mt_ring_clock)c->geo.clock));
    atomic_compare_exchange_strong(word, &first, (reading ? reading : 1) | MT_RING_TICK_WITHDRAWN);
  }
  mt_ring_tick_raise(word, mt_clock_read((mt_ring_clock)c->geo.clock), true);
  c->ticked = true;
}

int mt_cursor_poll(mt_cursor *c, size_t max_records, size_t *delivered, mt_error *err) {
  if (delivered)
    *delivered = 0;
  if (atomic_exchange(&c->busy, 1))
    return mt_fail(err, MT_E_STATE, -1, "the cursor is already being polled");
  size_t budget = max_records ? max_records : SIZE_MAX, got = 0;
  if (c->tick)
    offer_tick(c);
  /* Only rings some thread ever claimed (rings_high, stored before a claim's first record): a
   * file planned for thousands of threads costs a poll what the program's threads use. */
  uint32_t n = rings_used(c);
  int rc;
  bool stopped = false;
  if (c->time_order) {
    rc = poll_in_time_order(c, &n, budget, &got, &stopped, err);
    /* Rings at their end: finished and their losses reported, as a poll in turn does. */
    for (uint32_t ring = 0; ring < n && rc == MT_OK && !stopped && got < budget; ring++)
      if (!c->rings[ring].broken)
        ring_at_end(c, ring);
  } else {
    rc = poll_in_turn(c, n, budget, &got, &stopped, err);
  }
  if (delivered)
    *delivered = got;
  atomic_store(&c->busy, 0);
  return rc;
}

/* ----------------------------------------------------------------------------------------------
 * Information
 * -------------------------------------------------------------------------------------------- */

void mt_cursor_set_end(mt_cursor *c) {
  uint32_t used = rings_used(c);
  for (uint32_t i = 0; i < c->geo.ring_count; i++) {
    struct ring_state *rs = &c->rings[i];
    if (i >= used) { /* nothing written there before this end */
      rs->end = rs->end_seq = 0;
      continue;
    }
    mt_ring_block *b = block(c, i);
    rs->end = mt_load_acquire(&b->tail);
    /* Stored before the tail: at least the number of the record at the end. */
    rs->end_seq = mt_load_relaxed(&b->next_seq);
  }
  /* After the tails: covers every entry committed before a record up to an end. */
  c->registry_end = mt_load_acquire(&mt_ring_header_at(c->base)->registry_used);
  c->end_set = true;
}

bool mt_cursor_drained(const mt_cursor *c) {
  for (uint32_t i = 0, n = rings_used(c); i < n; i++) {
    if (!c->rings[i].broken && c->rings[i].pos < readable_tail(c, i))
      return false;
  }
  return true;
}

uint64_t mt_cursor_lapped_copies(const mt_cursor *c) {
  return c->lapped_copies;
}

uint64_t mt_cursor_lost_records(const mt_cursor *c) {
  return c->lost_total;
}

uint64_t mt_cursor_forks(const mt_cursor *c) {
  return mt_load_relaxed(&mt_ring_header_at(c->base)->forks);
}

uint32_t mt_cursor_signals_handled(const mt_cursor *c, int sig) {
  if (sig <= 0 || sig >= MT_RING_SIGNALS)
    return 0;
  return mt_load_relaxed(&mt_ring_header_at(c->base)->signals_handled[sig]);
}

int mt_cursor_info(const mt_cursor *c, mt_ring_file_info *info) {
  memset(info, 0, sizeof *info);
  const mt_ring_geometry *g = &c->geo;
  mt_ring_file_header *h = mt_ring_header_at(c->base);
  info->pid = g->pid;
  info->parent_pid = g->parent_pid;
  info->fork_number = g->fork_number;
  info->start_time = g->start_time;
  info->mode = (mt_ring_mode)g->mode;
  info->clock = (mt_ring_clock)g->clock;
  info->clock_hz = g->clock_hz;
  info->created_realtime_ns = (int64_t)g->realtime_base_ns;
  info->created_ns =
      (int64_t)(g->clock == MT_RING_CLOCK_REALTIME ? g->realtime_base_ns : g->monotonic_base_ns);
  info->ring_count = g->ring_count;
  info->ring_size = g->ring_words * 8;
  info->registry_size = g->registry_words * 8;
  info->stopped = mt_load_acquire(&h->state) == MT_RING_STATE_STOPPED;
  info->paused = mt_load_relaxed(&h->paused) != 0;
  info->degraded = mt_load_relaxed(&h->degraded) != 0;
  uint64_t primary = mt_load_relaxed(&h->primary);
  info->primary_pid =
      mt_ring_primary_state(primary) == MT_RING_PRIMARY_ATTACHED ? mt_ring_primary_pid(primary) : 0;
  info->rings_in_use = mt_load_relaxed(&h->rings_in_use);
  info->records_no_ring = mt_load_relaxed(&h->records_no_ring);
  info->records_nested = mt_load_relaxed(&h->records_nested);
  info->claims_failed_full = mt_load_relaxed(&h->claims_failed_full);
  info->claims_failed_space = mt_load_relaxed(&h->claims_failed_space);
  info->rings_recovered = mt_load_relaxed(&h->rings_recovered);
  info->rings_given_back = mt_load_relaxed(&h->rings_given_back);
  info->claims_failed_limit = mt_load_relaxed(&h->claims_failed_limit);
  for (uint32_t i = 0, n = rings_used(c); i < n; i++) {
    mt_ring_block *b = block(c, i);
    info->records_written += mt_load_relaxed(&b->next_seq);
    info->records_overwritten += mt_load_relaxed(&b->overwritten);
    info->records_nested += mt_load_relaxed(&b->nested);
  }
  info->lost_records = c->lost_total;
  return MT_OK;
}

int64_t mt_cursor_timestamp_ns(const mt_cursor *c, uint64_t timestamp) {
  if (c->geo.clock != MT_RING_CLOCK_TSC)
    return (int64_t)timestamp;
  /* Unsigned arithmetic: a hostile header may hold anything, and wrapping is harmless here. */
  __int128 ticks = (__int128)timestamp - (__int128)c->geo.clock_base;
  __int128 ns = ticks * 1000000000 / (__int128)c->geo.clock_hz;
  return (int64_t)(c->geo.monotonic_base_ns + (uint64_t)ns);
}

/* Whether the producer reads the clock this process reads: the TSC, or CLOCK_MONOTONIC in the same
 * time namespace (a time namespace offsets it). CLOCK_REALTIME can be set back: never shared. */
static bool clock_shared(const mt_cursor *c) {
  if (c->geo.clock == MT_RING_CLOCK_TSC)
    return true;
  if (c->geo.clock != MT_RING_CLOCK_MONOTONIC)
    return false;
  char theirs[64], ours[64], path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/time", (int)c->geo.pid);
  ssize_t n = readlink(path, theirs, sizeof theirs - 1);
  ssize_t m = readlink("/proc/self/ns/time", ours, sizeof ours - 1);
  if (n < 0 || m < 0)
    return n < 0 && m < 0 && errno == ENOENT; /* no time namespaces in this kernel */
  return n == m && !memcmp(theirs, ours, (size_t)n);
}

int mt_cursor_set_clock_tick(mt_cursor *c, bool on) {
  if (on && !c->primary)
    return MT_E_STATE;
  if (on && c->clock_shared < 0)
    c->clock_shared = clock_shared(c); /* once: the recorder offers and withdraws at every nap */
  if (on && !c->clock_shared)
    on = false;
  c->tick = on;
  if (!on && c->ticked) {
    mt_ring_tick_flag(&mt_ring_header_at(c->rw_base)->shared_tick, MT_RING_TICK_WITHDRAWN);
    c->ticked = false;
  }
  return MT_OK;
}

void mt_cursor_close(mt_cursor *c) {
  if (!c)
    return;
  mt_cursor_set_clock_tick(c, false);
  if (c->primary) {
    /* Only if we still are the primary (a forked copy of this cursor has another pid). */
    mt_ring_file_header *h = mt_ring_header_at(c->rw_base);
    int32_t self = getpid();
    uint64_t attached = mt_ring_primary_word(self, MT_RING_PRIMARY_ATTACHED);
    atomic_compare_exchange_strong(&h->primary, &attached,
                                   mt_ring_primary_word(self, MT_RING_PRIMARY_DETACHED));
    if (c->primary_fd >= 0)
      close(c->primary_fd); /* the lock goes with it */
  }
  if (c->rw_base)
    munmap(c->rw_base, c->rw_size);
  if (c->mapped)
    munmap(c->base, c->size);
  for (size_t i = 0; i < c->entry_count; i++)
    free(c->entries[i].bytes);
  free(c->entries);
  free(c->pending);
  free(c->index);
  free(c->rings);
  free(c->order);
  free(c->buf);
  free(c);
}
