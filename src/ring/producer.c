/* The producer session (docs/ring.md §4): settings from the environment, opening and closing the
 * process's ring file, pause and resume, and fork (the child gets its own file, created inside
 * the fork handler without malloc; the parent's file is left untouched). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/cancel_hold.h"
#include "common/error.h"
#include "common/number_pair.h"
#include "ring/clock.h"
#include "ring/process.h"
#include "ring/producer.h"

struct mt_ring mt_ring_session = {.epoch = 1, .tick = &mt_ring_no_tick}; /* never a NULL tick */

static _Atomic int opening;

bool mt_ring_session_lock(void) {
  return !atomic_exchange(&opening, 1);
}

void mt_ring_session_unlock(void) {
  atomic_store(&opening, 0);
}

/* Private memory over what is left of the file's mapping (every part but the rings given back,
 * whose addresses may be the program's now), so that a write cut short finishes there, unseen. */
static void placeholder_over(const struct mt_ring *s) {
  for (uint64_t at = 0, length; mt_ring_mapped_span(&s->geo, &at, &length); at += length)
    mmap((char *)s->base + at, length, PROT_READ | PROT_WRITE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}
static bool handlers_registered;
static uint64_t pending_fork_number;

/* ----------------------------------------------------------------------------------------------
 * Settings
 * -------------------------------------------------------------------------------------------- */

/* Decimal digits and nothing else, below 2^64. */
static bool parse_decimal(const char *text, uint64_t *out) {
  uint64_t v = 0;
  const char *p = text;
  for (; *p >= '0' && *p <= '9'; p++) {
    uint64_t digit = (uint64_t)(*p - '0');
    if (v > (UINT64_MAX - digit) / 10)
      return false;
    v = v * 10 + digit;
  }
  if (p == text || *p)
    return false;
  *out = v;
  return true;
}

static bool parse_size(const char *text, uint64_t *out) {
  uint64_t v = 0;
  const char *p = text;
  if (*p < '0' || *p > '9')
    return false;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (UINT64_MAX - 9) / 10)
      return false;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  unsigned shift = 0;
  switch (*p) {
  case 'k':
  case 'K':
    shift = 10;
    p++;
    break;
  case 'm':
  case 'M':
    shift = 20;
    p++;
    break;
  case 'g':
  case 'G':
    shift = 30;
    p++;
    break;
  default: break;
  }
  if (shift && (*p == 'i' || *p == 'I'))
    p++;
  if (shift && (*p == 'b' || *p == 'B'))
    p++;
  if (*p || v > (UINT64_MAX >> shift))
    return false;
  *out = v << shift;
  return true;
}

static uint64_t round_up_power_of_two(uint64_t x) {
  uint64_t p = 1;
  while (p < x && p < (1ull << 62))
    p <<= 1;
  return p;
}

int mt_ring_options_parse(mt_ring_options *opts, mt_ring_env_fn lookup, void *user, mt_error *err) {
  memset(opts, 0, sizeof *opts);
  opts->ring_size = 1u << 20;
  opts->max_rings = MT_RING_DEFAULT_RINGS;
  opts->registry_size = 1u << 20;
  opts->mode = MT_RING_FLIGHT_RECORDER;
  opts->clock = MT_RING_CLOCK_AUTO;
  opts->attach_timeout_ms = 10000;
  int rc = MT_OK;
  const char *v;
  if ((v = lookup(user, "MEMTAP_RING_DIR")) && *v)
    opts->dir = v;
  uint64_t size;
  if ((v = lookup(user, "MEMTAP_RING_SIZE")) && *v) {
    if (parse_size(v, &size) && size >= MT_RING_MIN_SIZE && size / 8 <= MT_RING_MAX_WORDS)
      opts->ring_size = size;
    else
      rc = mt_fail(err, MT_E_INVALID, -1,
                   "MEMTAP_RING_SIZE=%s is not a size from %uK to %lluG (like 65536 or 1M)", v,
                   MT_RING_MIN_SIZE >> 10, (unsigned long long)(MT_RING_MAX_WORDS * 8 >> 30));
  }
  uint64_t threads;
  if ((v = lookup(user, "MEMTAP_RING_THREADS")) && *v) {
    if (parse_size(v, &threads) && threads >= 1 && threads <= MT_RING_MAX_RINGS)
      opts->max_rings = (uint32_t)threads;
    else
      rc = mt_fail(err, MT_E_INVALID, -1, "MEMTAP_RING_THREADS=%s is not between 1 and %u", v,
                   MT_RING_MAX_RINGS);
  }
  if ((v = lookup(user, "MEMTAP_RING_CLOCK")) && *v) {
    if (!strcmp(v, "tsc"))
      opts->clock = MT_RING_CLOCK_TSC;
    else if (!strcmp(v, "monotonic"))
      opts->clock = MT_RING_CLOCK_MONOTONIC;
    else if (!strcmp(v, "realtime"))
      opts->clock = MT_RING_CLOCK_REALTIME;
    else if (strcmp(v, "auto"))
      rc = mt_fail(err, MT_E_INVALID, -1,
                   "MEMTAP_RING_CLOCK=%s is not one of tsc, monotonic, realtime, auto", v);
  }
  if ((v = lookup(user, "MEMTAP_RING_PRESERVE")) && *v && strcmp(v, "0"))
    opts->preserve = true;
  if ((v = lookup(user, "MEMTAP_RING_CONSUMER")) && *v) {
    uint64_t pid, start;
    if (mt_number_pair_parse(v, &pid, &start) && pid >= 1 && pid <= INT32_MAX) {
      opts->consumer_pid = (int)pid;
      opts->consumer_start_time = start;
    } else {
      rc = mt_fail(err, MT_E_INVALID, -1,
                   "MEMTAP_RING_CONSUMER=%s is not <pid>:<start time> (like 4242:123456)", v);
    }
  }
  if ((v = lookup(user, "MEMTAP_RING_PID_NS")) && *v) {
    uint64_t ns;
    if (parse_decimal(v, &ns) && ns >= 1)
      opts->pid_namespace = ns;
    else
      rc = mt_fail(err, MT_E_INVALID, -1,
                   "MEMTAP_RING_PID_NS=%s is not a pid namespace (the inode number of "
                   "/proc/PID/ns/pid, like 4026531836)",
                   v);
  }
  return rc;
}

static const char *from_environment(void *user, const char *name) {
  (void)user;
  return getenv(name);
}

int mt_ring_options_init(mt_ring_options *opts, mt_error *err) {
  return mt_ring_options_parse(opts, from_environment, NULL, err);
}

static const char *default_dir(void) {
  const char *v = getenv("MEMTAP_RING_DIR");
  if (v && *v)
    return v;
  v = getenv("TMPDIR");
  return v && *v ? v : "/tmp";
}

/* ----------------------------------------------------------------------------------------------
 * Fork and exit
 * -------------------------------------------------------------------------------------------- */

/* Whether this process has a file open; never in a copy made without fork handlers (producer.h),
 * whose session closes here: close, pause and the fork handlers must not touch the parent's file
 * (its header, its path) either. */
static bool session_open(void) {
  return !(mt_ring_writer_epoch(&mt_ring_session) & 1);
}

/* The owner page (producer.h): made at the first open. Where the kernel cannot wipe it (before
 * Linux 4.14) or no page can be had, a static word stands in, and copies go undetected. */
static _Atomic uint32_t owner_fallback;

static void arm_owner(struct mt_ring *s) {
  if (!s->owner) {
    long page = sysconf(_SC_PAGESIZE);
    size_t size = page > 0 ? (size_t)page : 4096;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED && madvise(p, size, MADV_WIPEONFORK) != 0) {
      munmap(p, size);
      p = MAP_FAILED;
    }
    s->owner = p == MAP_FAILED ? &owner_fallback : p;
  }
  mt_store_relaxed(s->owner, 1);
}

uint32_t mt_ring_leave_copy(struct mt_ring *s, uint32_t epoch) {
  /* Only the thread that cloned exists in the copy, but a signal handler may race it here. */
  if (atomic_compare_exchange_strong(&s->epoch, &epoch, epoch + 1)) {
    /* Private memory over the parent's mapping, as mt_ring_close leaves: a write cut short by
     * the clone (a handler's) finishes there, unseen. The parent's file is not unlinked. */
    placeholder_over(s);
    return epoch + 1;
  }
  return epoch; /* the value found: odd, someone closed it */
}

bool mt_ring_is_copy(void) {
  _Atomic uint32_t *owner = mt_ring_session.owner;
  return owner && !mt_load_relaxed(owner);
}

void mt_ring_note_signal(int sig) {
  mt_ring_file_header *h = mt_ring_session.header;
  if (h && sig > 0 && sig < MT_RING_SIGNALS && !mt_ring_is_copy())
    atomic_fetch_add_explicit(&h->signals_handled[sig], 1, memory_order_relaxed);
}

void mt_ring_fork_prepare(void) {
  if (session_open())
    pending_fork_number = mt_add_relaxed(&mt_ring_session.header->forks, 1) + 1;
}

void mt_ring_fork_parent(void) {
  if (session_open()) {
    uint64_t payload[1] = {pending_fork_number};
    mt_ring_write_transport(MT_RING_TYPE_LIFECYCLE, MT_RING_LIFECYCLE_FORK_PARENT, payload, 1);
  }
}

/* Copies the parent's committed registry entries: the child knows the same names. An entry
 * still being filled is left out (its writer, another thread, does not exist in the child). */
static void inherit_registry(struct mt_ring *s, void *old_base, const mt_ring_geometry *old) {
  _Atomic uint64_t *from = mt_ring_registry_at(old_base, old);
  _Atomic uint64_t *to = mt_ring_registry_at(s->base, &s->geo);
  uint64_t used = mt_load_acquire(&mt_ring_header_at(old_base)->registry_used);
  uint64_t pos = 0, out = 0;
  while (pos + 2 <= used && pos + 2 <= old->registry_words) {
    uint64_t w = mt_load_acquire(&from[pos]);
    uint64_t words = mt_registry_entry_words(w & 0xffffffffu);
    if (w == 0 || pos + words > used || pos + words > old->registry_words)
      break;
    if (!(w & MT_REGISTRY_RESERVED)) {
      if (out + words > s->geo.registry_words)
        break;
      for (uint64_t i = 1; i < words; i++)
        mt_store_relaxed(&to[out + i], mt_load_relaxed(&from[pos + i]));
      mt_store_relaxed(&to[out], w);
      out += words;
    }
    pos += words;
  }
  mt_store_relaxed(&s->header->registry_used, out);
}

/* The parent's mapping (at `base`, of geometry `old`) in a forked child: a private copy of the file
 * at the same addresses when a write is under way (a signal handler interrupted it and will return
 * into it), else nothing. Rings given back are left alone: their addresses may be the program's.
 * `fd` (the parent's file, or -1) is closed. */
static void private_copy(void *base, const mt_ring_geometry *old, int fd, bool busy) {
  for (uint64_t at = 0, length; mt_ring_mapped_span(old, &at, &length); at += length) {
    char *p = (char *)base + at;
    if (busy && fd >= 0)
      mmap(p, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, (off_t)at);
    else if (busy) /* the file is gone: zeroed memory rather than a fault */
      mmap(p, length, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    else
      munmap(p, length);
  }
  if (fd >= 0)
    close(fd);
}

/* In the child, only the forking thread exists. It may even be inside a signal handler that
 * interrupted a write: that write will finish when the handler returns, through pointers into
 * the parent's mapping, so the mapping is then replaced by a private copy instead of removed. */
void mt_ring_fork_child(void) {
  struct mt_ring *s = &mt_ring_session;
  if (s->owner)
    mt_store_relaxed(s->owner, 1); /* made with the handlers: not a copy (its page was wiped) */
  /* A thread of the parent that was opening, closing or giving rings back does not exist here:
   * its lock would stay taken for good (the child's exit could not close its file). The forking
   * thread itself holds it in none of those. */
  atomic_store(&opening, 0);
  if (!session_open())
    return;
  int saved_errno = errno;
  int cancel = mt_cancel_hold(); /* the parent's file opened again and closed (private_copy) */
  void *old_base = s->base;
  /* The parent's file, opened again only when a write is under way (private_copy). */
  int old_fd = mt_ring_self.busy ? mt_ring_file_open(s) : -1;
  mt_ring_geometry old_geo = s->geo;
  uint64_t fork_number = pending_fork_number;
  int parent = getppid();
  uint32_t epoch = mt_load_relaxed(&s->epoch);

  mt_store_relaxed(&s->epoch, epoch + 1); /* closed while we rebuild */
  if (s->options.fork_untraced) {
    /* The session stays closed in this child; the file is the parent's, so it is not unlinked. */
    private_copy(old_base, &old_geo, old_fd, mt_ring_self.busy);
    mt_ring_given_back_reset();
    mt_cancel_release(cancel);
    errno = saved_errno;
    return;
  }
  s->first_wait_ns = 0;
  s->claim_hint = 0;
  s->start_time = 0; /* not the parent's, if /proc cannot tell */
  mt_process_stat(0, &s->start_time, NULL);
  int rc = mt_ring_file_create(s, parent, fork_number, NULL);
  if (rc == MT_OK) {
    inherit_registry(s, old_base, &old_geo);
    mt_store_relaxed(&s->header->paused, mt_load_relaxed(&s->paused));
    mt_store_release(&s->header->magic, MT_RING_MAGIC);
  }
  private_copy(old_base, &old_geo, old_fd, mt_ring_self.busy);
  mt_ring_given_back_reset(); /* the new file's rings are all there */
  if (rc == MT_OK) {
    mt_store_release(&s->epoch, epoch + 2);
    uint64_t payload[2] = {(uint64_t)parent, fork_number};
    mt_ring_write_transport(MT_RING_TYPE_LIFECYCLE, MT_RING_LIFECYCLE_FORK_CHILD, payload, 2);
  }
  /* else: tracing stays off in this child. */
  mt_cancel_release(cancel);
  errno = saved_errno;
}

static void at_exit(void) {
  if (session_open())
    mt_ring_close(&mt_ring_session);
}

/* glibc's: `dso` NULL ties the handler to no shared object (docs in producer.h). */
int __cxa_atexit(void (*function)(void *), void *argument, void *dso);

static void at_exit_of_process(void *unused) {
  (void)unused;
  at_exit();
}

static bool close_after_libraries;

void mt_ring_close_after_libraries(void) {
  close_after_libraries = true;
}

/* ----------------------------------------------------------------------------------------------
 * Open, close, pause
 * -------------------------------------------------------------------------------------------- */

static int open_session(struct mt_ring *s, const mt_ring_options *opts, mt_error *err) {
  mt_ring_options o;
  if (opts)
    o = *opts;
  else {
    int rc = mt_ring_options_init(&o, err);
    if (rc != MT_OK)
      return rc;
  }
  const char *dir = o.dir && *o.dir ? o.dir : default_dir();
  size_t dlen = strlen(dir);
  if (dlen + 1 > sizeof s->dir_buf)
    return mt_fail(err, MT_E_INVALID, -1, "ring directory path is too long");
  if (o.mode != MT_RING_FLIGHT_RECORDER && o.mode != MT_RING_LOSSLESS)
    return mt_fail(err, MT_E_INVALID, -1, "unknown ring mode %d", (int)o.mode);
  if ((unsigned)o.clock > MT_RING_CLOCK_REALTIME)
    return mt_fail(err, MT_E_INVALID, -1, "unknown ring clock %d", (int)o.clock);
  uint64_t ring_size = o.ring_size ? o.ring_size : 1u << 20;
  if (ring_size >= MT_RING_MIN_SIZE)
    ring_size = round_up_power_of_two(ring_size);
  memset(&s->geo, 0, sizeof s->geo);
  int rc = mt_ring_layout_plan(&s->geo, o.max_rings ? o.max_rings : MT_RING_DEFAULT_RINGS,
                               ring_size, o.registry_size ? o.registry_size : 1u << 20, err);
  if (rc != MT_OK)
    return rc;
  memcpy(s->dir_buf, dir, dlen + 1);
  o.dir = s->dir_buf;
  if (!o.attach_timeout_ms)
    o.attach_timeout_ms = 10000;
  s->options = o;

  if (!handlers_registered) {
    if (mt_ring_thread_init_key() != 0 ||
        pthread_atfork(mt_ring_fork_prepare, mt_ring_fork_parent, mt_ring_fork_child))
      return mt_fail(err, MT_E_NOMEM, -1, "cannot register the thread-exit and fork handlers");
    if (close_after_libraries)
      __cxa_atexit(at_exit_of_process, NULL, NULL);
    else
      atexit(at_exit);
    handlers_registered = true;
  }

  s->clock = mt_clock_resolve(o.clock);
  uint64_t hz = mt_clock_hz_anchored(s->clock, getenv(MT_CLOCK_ANCHOR_ENV));
  mt_clock_pair base;
  mt_clock_sample(s->clock, &base);
  s->geo.mode = o.mode;
  s->geo.clock = s->clock;
  s->geo.clock_hz = hz;
  s->geo.clock_base = base.raw;
  s->geo.monotonic_base_ns = base.monotonic_ns;
  s->geo.realtime_base_ns = base.realtime_ns;
  s->calibration_ticks = hz; /* one CLOCK record per thread per second of writing */
  s->start_time = 0;
  mt_process_stat(0, &s->start_time, NULL);
  s->first_wait_ns = 0;
  s->claim_hint = 0;
  mt_ring_given_back_reset();
  rc = mt_ring_file_create(s, 0, 0, err);
  if (rc != MT_OK)
    return rc;
  arm_owner(s);
  mt_store_relaxed(&s->paused, 0);
  mt_store_release(&s->header->magic, MT_RING_MAGIC);
  return MT_OK;
}

int mt_ring_open(mt_ring **out, const mt_ring_options *opts, mt_error *err) {
  struct mt_ring *s = &mt_ring_session;
  if (atomic_exchange(&opening, 1))
    return mt_fail(err, MT_E_STATE, -1, "another thread is opening or closing the ring file");
  int rc;
  if (session_open())
    rc = mt_fail(err, MT_E_STATE, -1, "this process already has a ring file open (%s)", s->path);
  else
    rc = open_session(s, opts, err);
  if (rc == MT_OK) {
    mt_store_release(&s->epoch, mt_load_relaxed(&s->epoch) + 1);
    uint64_t payload[1] = {(uint64_t)getpid()};
    mt_ring_write_transport(MT_RING_TYPE_LIFECYCLE, MT_RING_LIFECYCLE_START, payload, 1);
    *out = s;
  }
  atomic_store(&opening, 0);
  return rc;
}

static _Atomic bool future_locked;

void mt_ring_set_future_locked(bool on) {
  atomic_store(&future_locked, on);
}

int mt_ring_close(mt_ring *ring) {
  struct mt_ring *s = &mt_ring_session;
  if (ring != s)
    return MT_E_INVALID;
  if (atomic_exchange(&opening, 1))
    return MT_E_STATE;
  if (!session_open()) {
    atomic_store(&opening, 0);
    return MT_E_STATE;
  }
  mt_ring_write_transport(MT_RING_TYPE_LIFECYCLE, MT_RING_LIFECYCLE_STOP, NULL, 0);
  struct mt_ring_thread *t = &mt_ring_self;
  if (!t->busy && t->status == MT_THREAD_CLAIMED && t->epoch == mt_load_relaxed(&s->epoch)) {
    t->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    mt_ring_thread_release(t);
    atomic_signal_fence(memory_order_seq_cst);
    t->busy = 0;
  }
  mt_store_release(&s->header->state, MT_RING_STATE_STOPPED);
  mt_store_release(&s->epoch, mt_load_relaxed(&s->epoch) + 1);
  if (!s->options.preserve && !s->unlinked)
    unlink(s->path);
  /* Threads that were mid-write keep writing through their cached pointers: give them private
   * memory at the same addresses rather than a fault. Not in a process that locks its future
   * mappings (mlockall(MCL_FUTURE)): the kernel would fault in and pin the whole placeholder; the
   * file's mapping stays (its file is gone from the directory) until the process ends. */
  if (!atomic_load(&future_locked))
    placeholder_over(s);
  atomic_store(&opening, 0);
  return MT_OK;
}

static int set_paused(mt_ring *ring, uint32_t from, uint32_t to, unsigned lifecycle) {
  struct mt_ring *s = &mt_ring_session;
  if (ring != s)
    return MT_E_INVALID;
  if (!session_open() || !atomic_compare_exchange_strong(&s->paused, &from, to))
    return MT_E_STATE;
  mt_store_relaxed(&s->header->paused, to);
  mt_ring_write_transport(MT_RING_TYPE_LIFECYCLE, lifecycle, NULL, 0);
  return MT_OK;
}

int mt_ring_pause(mt_ring *ring) {
  return set_paused(ring, 0, 1, MT_RING_LIFECYCLE_PAUSE);
}

int mt_ring_resume(mt_ring *ring) {
  return set_paused(ring, 1, 0, MT_RING_LIFECYCLE_RESUME);
}

int mt_ring_unlink(mt_ring *ring) {
  struct mt_ring *s = &mt_ring_session;
  if (ring != s)
    return MT_E_INVALID;
  if (!session_open())
    return MT_E_STATE;
  if (s->options.preserve)
    return MT_E_UNSUPPORTED;
#ifdef MADV_POPULATE_WRITE
  /* The header's first page is reserved already: this only asks whether the kernel knows it. */
  if (madvise(s->base, 4096, MADV_POPULATE_WRITE) != 0)
    return MT_E_UNSUPPORTED;
#else
  return MT_E_UNSUPPORTED;
#endif
  if (unlink(s->path) != 0)
    return MT_E_IO;
  s->unlinked = true;
  return MT_OK;
}

const char *mt_ring_path(const mt_ring *ring) {
  return ring == &mt_ring_session ? mt_ring_session.path : NULL;
}

int mt_ring_file_path(char *buf, size_t size, const char *dir, int pid) {
  const char *d = dir && *dir ? dir : default_dir();
  int n = snprintf(buf, size, "%s/%d%s", d, pid < 0 ? (int)getpid() : pid, MT_RING_FILE_SUFFIX);
  return n < 0 || (size_t)n >= size ? MT_E_INVALID : MT_OK;
}
