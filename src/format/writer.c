/* The trace writer (format.h, FORMAT.md §2.9-2.10): packet 0, per-domain writers with their own
 * caches, MTF tables and id chunks, the begin_event flush rules, location packets staged in miss
 * order, and memtrace's multiplexed-domains switching. Byte-identical to memtrace's Trace.Writer.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file_size_limit.h"
#include "format/backtrace_codec.h"
#include "format/buf.h"
#include "format/location_codec.h"
#include "format/packet.h"
#include "format/writer_fast.h"
#include "memtap/format.h"

#define ID_CHUNK 10000
#define INFO_STRING_MAX 4000    /* keeps packet 0 within one packet */
#define LOCATION_ROOM 4100      /* event header + the largest location payload */
#define EXTEND_MAX_PACKETS 2880 /* a day of empty 30 s packets (mt_writer_extend) */

/* mt_wbuf_vint with the one-byte case inline: most lengths, counts and deltas are below 253. */
static inline void put_vint(mt_wbuf *b, int64_t v) {
  if (v >= 0 && v <= 252 && b->len < b->cap)
    b->data[b->len++] = (uint8_t)v;
  else
    mt_wbuf_vint(b, v);
}

bool mt_sample_rate_is_valid(double rate, int word_size) {
  return rate > 0 && rate <= 1 && isfinite(word_size / 8.0 / rate); /* NaN fails the first */
}

static int fail_writer(mt_writer *w, int code) {
  if (!w->failed)
    w->failed = code;
  return code;
}

/* --- fork detection ----------------------------------------------------------------------------
 * A forked child must write nothing, and should learn so at its first put rather than at a flush
 * (which may never come before it exits). Comparing getpid() on every event would cost a system
 * call per event (glibc no longer caches it), so a pthread_atfork child handler, installed once,
 * bumps a process-wide generation that each put compares with the one its trace was created in:
 * one load. A child made without fork(3) (a raw clone(2)) runs no atfork handler: flush, close
 * and create_domain compare getpid() as well, so such a child buffers but still writes nothing. */

atomic_ulong mt_writer_fork_generation;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void count_fork(void) {
  atomic_fetch_add_explicit(&mt_writer_fork_generation, 1, memory_order_relaxed);
}

static void install_fork_handler(void) {
  /* Fails only for lack of memory; getpid() at flush still keeps a child from writing then. */
  (void)pthread_atfork(NULL, NULL, count_fork);
}

/* The thorough check, before anything is written. */
static bool forked_child(const trace_file *f) {
  return mt_writer_forked_since(f) || getpid() != f->creator;
}

static int forked_error(mt_writer *w, mt_error *err) {
  return fail_writer(w, mt_fail(err, MT_E_FORKED, -1,
                                "the trace writer belongs to process %d, not to this forked "
                                "child; nothing was written",
                                (int)w->file->creator));
}

/* What every put and next_alloc_id checks first. */
static int check_writable(mt_writer *w, mt_error *err) {
  if (mt_writer_forked_since(w->file))
    return forked_error(w, err);
  if (w->failed)
    return mt_fail(err, w->failed, -1, "the writer stopped after an earlier error");
  return MT_OK;
}

/* Called with the file's lock held, so packets of concurrent domain writers never interleave. */
static int write_all(mt_writer *w, const uint8_t *data, size_t len, mt_error *err) {
  if (!mt_file_identity_holds(&w->file->identity, w->file->fd))
    return fail_writer(w, mt_fail(err, MT_E_IO, -1,
                                  "descriptor %d no longer names the trace file (closed by the "
                                  "program?): nothing more is written to it",
                                  w->file->fd));
  if (!mt_file_size_limit_allows(w->file->fd, len))
    return fail_writer(w, mt_fail(err, MT_E_IO, -1,
                                  "the trace would grow past the file size limit (ulimit -f: "
                                  "%llu bytes): nothing more is written to it",
                                  (unsigned long long)mt_file_size_limit()));
  while (len) {
    ssize_t n = write(w->file->fd, data, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      return fail_writer(w, mt_fail_io(err, "writing the trace"));
    }
    data += n;
    len -= (size_t)n;
  }
  return MT_OK;
}

/* Finishes the packet in `buf` (whose first header_size bytes are reserved) and writes it. */
static int write_packet(mt_writer *w, mt_wbuf *buf, mt_packet_header *h, mt_error *err) {
  if (buf->overflow)
    return fail_writer(w, mt_fail(err, MT_E_STATE, -1, "internal error: packet overflow"));
  h->magic = MT_CTF_MAGIC;
  h->packet_size_bits = (uint32_t)(buf->len * 8);
  h->flush_duration = 0;
  h->version = (uint16_t)w->file->version;
  h->pid = w->file->pid;
  mt_packet_header_encode(h, buf->data);
  pthread_mutex_lock(&w->file->lock);
  int rc = write_all(w, buf->data, buf->len, err);
  pthread_mutex_unlock(&w->file->lock);
  return rc;
}

static void take_chunk(mt_writer *w, domain_writer *d) {
  pthread_mutex_lock(&w->file->lock);
  d->next = w->file->id_counter;
  w->file->id_counter += ID_CHUNK;
  pthread_mutex_unlock(&w->file->lock);
  d->chunk_end = d->next + ID_CHUNK;
}

static void open_events_packet(mt_writer *w, domain_writer *d, bool real_verifier) {
  mt_wbuf_init(&d->buf, d->packet, sizeof d->packet);
  d->buf.len = w->file->header_size;
  d->open.verify_ix = MT_NO_VERIFY;
  d->open.verify_pred = 0;
  d->open.verify_val = 0;
  if (real_verifier) {
    unsigned ix = d->verify_ix;
    d->open.verify_ix = (uint16_t)ix;
    d->open.verify_pred = d->cache.next[ix];
    d->open.verify_val = (int64_t)d->cache.loc[ix];
    d->verify_ix = (ix + MT_VERIFY_STEP) & MT_CACHE_MASK;
  }
}

/* A writer for `domain`, opened at `now` (the trace start for the initial and multiplexed
 * writers). Returns NULL when memory runs out or another writer already has the domain. */
static domain_writer *new_domain_writer(mt_writer *w, uint16_t domain, int64_t now) {
  trace_file *f = w->file;
  pthread_mutex_lock(&f->lock);
  bool taken = f->domains_taken[domain / 64] >> (domain % 64) & 1;
  if (!taken)
    f->domains_taken[domain / 64] |= UINT64_C(1) << (domain % 64);
  pthread_mutex_unlock(&f->lock);
  if (taken)
    return NULL;
  domain_writer *d = calloc(1, sizeof *d);
  domain_writer **grown = d ? realloc(w->domains, (w->ndomains + 1) * sizeof *grown) : NULL;
  if (!grown) {
    free(d);
    return NULL;
  }
  w->domains = grown;
  w->domains[w->ndomains++] = d;
  d->domain = domain;
  d->verify_ix = MT_VERIFY_FIRST;
  d->t0 = d->t1 = now;
  if (f->version >= 3)
    take_chunk(w, d);
  d->start = d->next;
  open_events_packet(w, d, false);
  return d;
}

static void free_domain_writer(domain_writer *d) {
  mt_location_encoder_free(&d->locations);
  free(d->staged);
  free(d->staged_sizes);
  free(d->prev);
  free(d);
}

/* flush(now), FORMAT.md §2.10: location packets, then the events packet (even if empty), then a
 * fresh packet with a real verifier. Not inlined: its 32 KiB stack buffer would make every
 * begin_event pay a large frame's prologue. */
__attribute__((noinline)) static int flush_domain(mt_writer *w, domain_writer *d, int64_t now,
                                                  mt_error *err) {
  if (forked_child(w->file))
    return forked_error(w, err);
  if (w->failed)
    return mt_fail(err, w->failed, -1, "the writer stopped after an earlier error");
  if (d->staged_count) {
    uint8_t packet[MT_PACKET_MAX];
    mt_wbuf buf;
    size_t at = 0;
    for (size_t i = 0; i < d->staged_count;) {
      mt_wbuf_init(&buf, packet, sizeof packet);
      buf.len = w->file->header_size;
      /* memtrace tests `free > 4096` before each event; the room test only matters for events
       * within 3 bytes of the 4100-byte maximum, which no real location reaches. */
      while (i < d->staged_count && sizeof packet - buf.len > MT_LOCATION_EVENT_MAX &&
             sizeof packet - buf.len >= d->staged_sizes[i]) {
        uint32_t size = d->staged_sizes[i++];
        memcpy(buf.data + buf.len, d->staged + at, size);
        buf.len += size;
        at += size;
      }
      mt_packet_header h = {.time_begin = d->t0,
                            .time_end = d->t0,
                            .domain = d->domain,
                            .verify_ix = MT_NO_VERIFY,
                            .alloc_id_begin = d->start,
                            .alloc_id_end = d->start};
      int rc = write_packet(w, &buf, &h, err);
      if (rc)
        return rc;
    }
  }
  mt_packet_header h = {.time_begin = d->t0,
                        .time_end = d->t1,
                        .domain = d->domain,
                        .verify_ix = d->open.verify_ix,
                        .verify_pred = d->open.verify_pred,
                        .verify_val = d->open.verify_val,
                        .alloc_id_begin = d->start,
                        .alloc_id_end = d->next};
  int rc = write_packet(w, &d->buf, &h, err);
  if (rc)
    return rc;
  d->t0 = d->t1 = now;
  d->staged_len = d->staged_count = 0;
  if (mt_writer_chunk_exhausted(w, d))
    take_chunk(w, d);
  d->start = d->next;
  open_events_packet(w, d, true);
  return MT_OK;
}

/* begin_event(now), FORMAT.md §2.10: flush first when a threshold is crossed, then the header.
 * now >= t1 >= t0 (check_time), so the unsigned difference is exact even for hostile times. */
static int begin_event(mt_writer *w, domain_writer *d, unsigned code, int64_t now, mt_error *err) {
  if (MT_PACKET_MAX - d->buf.len < MT_WRITER_HEADROOM ||
      d->staged_count > MT_WRITER_MAX_NEW_LOCATIONS ||
      (uint64_t)now - (uint64_t)d->t0 > MT_PACKET_MAX_SPAN || mt_writer_chunk_exhausted(w, d)) {
    int rc = flush_domain(w, d, now, err);
    if (rc)
      return rc;
  }
  d->t1 = now;
  mt_wbuf_u32(&d->buf, mt_event_header(code, now));
  return MT_OK;
}

/* Switches the multiplexed writer to `domain`, flushing the previous domain (§2.10). */
static int switch_domain(mt_writer *w, uint16_t domain, domain_writer **out, mt_error *err) {
  *out = NULL; /* set on every path: callers read it only on success, but gcc cannot know that */
  if (w->failed)
    return mt_fail(err, w->failed, -1, "the writer stopped after an earlier error");
  if (w->current->domain != domain) {
    if (w->file->version < 3)
      return mt_fail(err, MT_E_INVALID, -1, "a v2 trace has only domain 0, not domain %u",
                     (unsigned)domain);
    if (!w->multiplexed)
      return mt_fail(err, MT_E_INVALID, -1, "this writer writes domain %u only, not domain %u",
                     (unsigned)w->current->domain, (unsigned)domain);
    int rc = flush_domain(w, w->current, w->current->t1, err);
    if (rc)
      return rc;
    domain_writer *found = NULL;
    for (size_t i = 0; i < w->ndomains; i++)
      if (w->domains[i]->domain == domain)
        found = w->domains[i];
    if (!found && !(found = new_domain_writer(w, domain, w->file->start_time)))
      return mt_fail(err, MT_E_INVALID, -1,
                     "no writer for domain %u: it belongs to another writer of this trace, or "
                     "memory ran out",
                     (unsigned)domain);
    w->current = found;
  }
  *out = w->current;
  return MT_OK;
}

static int check_time(const domain_writer *d, int64_t time, mt_error *err) {
  if (time < d->t1)
    return mt_fail(err, MT_E_INVALID, -1,
                   "event time %lld is before the previous event of domain %u (%lld)",
                   (long long)time, (unsigned)d->domain, (long long)d->t1);
  return MT_OK;
}
/* A trace-info string, cut to INFO_STRING_MAX bytes when longer: then it ends in "..." (at a
 * UTF-8 character's start), so that a reader sees it was cut (a command line of 5,000 bytes as the
 * context once stopped mid-argument, unsaid). */
static void put_info_string(mt_wbuf *b, const char *s) {
  size_t n = s ? strnlen(s, INFO_STRING_MAX + 1) : 0;
  if (n <= INFO_STRING_MAX) {
    mt_wbuf_string(b, s, INFO_STRING_MAX);
    return;
  }
  char cut[INFO_STRING_MAX + 1];
  size_t keep = INFO_STRING_MAX - 3;
  while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80)
    keep--; /* s[keep] would start the dots: not inside a character */
  memcpy(cut, s, keep);
  memcpy(cut + keep, "...", 4);
  mt_wbuf_string(b, cut, INFO_STRING_MAX);
}

int mt_writer_create(mt_writer **out, int fd, const mt_trace_info *info,
                     const mt_writer_options *options, mt_error *err) {
  *out = NULL;
  int version = options && options->version ? options->version : 3;
  if (version != 2 && version != 3)
    return mt_fail(err, MT_E_INVALID, -1, "cannot write trace format version %d (only 2 or 3)",
                   version);
  if (!mt_sample_rate_is_valid(info->sample_rate, 64))
    return mt_fail(err, MT_E_INVALID, -1, "sample rate %g is outside (0, 1] or too small",
                   info->sample_rate);
  mt_writer *w = calloc(1, sizeof *w);
  trace_file *f = calloc(1, sizeof *f);
  if (!w || !f) {
    free(w);
    free(f);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  pthread_once(&fork_handler_once, install_fork_handler);
  pthread_mutex_init(&f->lock, NULL);
  f->refs = 1;
  f->fd = fd;
  f->identity = mt_file_identity_of(fd);
  f->version = version;
  f->header_size = mt_header_size((unsigned)version);
  f->pid = options && options->pid ? options->pid : info->pid;
  f->creator = getpid();
  f->fork_generation = atomic_load_explicit(&mt_writer_fork_generation, memory_order_relaxed);
  f->start_time = info->start_time;
  w->file = f;
  w->multiplexed = true;

  /* Packet 0: trace_info alone (§2.5). */
  uint8_t packet[MT_PACKET_MAX];
  mt_wbuf buf;
  mt_wbuf_init(&buf, packet, sizeof packet);
  buf.len = f->header_size;
  mt_wbuf_u32(&buf, mt_event_header(MT_CODE_TRACE_INFO, info->start_time));
  union {
    double f;
    uint64_t u;
  } rate = {.f = info->sample_rate};
  mt_wbuf_u64(&buf, rate.u);
  mt_wbuf_u8(&buf, (uint8_t)(info->word_size ? info->word_size : 64));
  put_info_string(&buf, info->executable_name);
  put_info_string(&buf, info->host_name);
  put_info_string(&buf, info->ocaml_runtime_params);
  mt_wbuf_u64(&buf, (uint64_t)f->pid);
  put_info_string(&buf, info->context);
  mt_packet_header h = {
      .time_begin = info->start_time, .time_end = info->start_time, .verify_ix = MT_NO_VERIFY};
  int rc = write_packet(w, &buf, &h, err);
  if (!rc && !(w->current = new_domain_writer(w, 0, info->start_time)))
    rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  if (rc) {
    mt_writer_close(w, NULL);
    return rc;
  }
  *out = w;
  return MT_OK;
}

/* A cache miss during put_alloc: resolve the code and stage its location event (§2.10 new_locs). */
static bool stage_location(void *user, uint64_t code) {
  mt_writer *w = user;
  domain_writer *d = w->current;
  const mt_location *entries = NULL;
  size_t count = 0;
  if (w->resolve) {
    int rc = w->resolve(w->resolve_user, code, &entries, &count);
    if (rc) {
      w->resolve_status = rc;
      return false;
    }
  }
  if (d->staged_cap - d->staged_len < LOCATION_ROOM) {
    size_t cap = d->staged_cap ? d->staged_cap * 2 : 65536;
    uint8_t *grown = realloc(d->staged, cap);
    if (!grown)
      goto oom;
    d->staged = grown;
    d->staged_cap = cap;
  }
  if (d->staged_count == d->staged_sizes_cap) {
    size_t cap = d->staged_sizes_cap ? d->staged_sizes_cap * 2 : 256;
    uint32_t *grown = realloc(d->staged_sizes, cap * sizeof *grown);
    if (!grown)
      goto oom;
    d->staged_sizes = grown;
    d->staged_sizes_cap = cap;
  }
  mt_wbuf buf;
  mt_wbuf_init(&buf, d->staged + d->staged_len, LOCATION_ROOM);
  mt_wbuf_u32(&buf, mt_event_header(MT_CODE_LOCATION, d->t0));
  if (!mt_location_encode(&d->locations, &buf, code, entries, count) || buf.overflow)
    goto oom;
  d->staged_len += buf.len;
  d->staged_sizes[d->staged_count++] = (uint32_t)buf.len;
  return true;
oom:
  w->resolve_status = MT_E_NOMEM;
  return false;
}

int mt_writer_put_alloc_in(mt_writer *w, uint16_t domain, int64_t time, int64_t length,
                           int64_t nsamples, mt_source source, const uint64_t *callstack,
                           size_t callstack_length, mt_resolve_fn resolve, void *resolve_user,
                           int64_t *obj_id, mt_error *err) {
  int rc = check_writable(w, err);
  if (rc)
    return rc;
  if (length < 0 || nsamples < 1 || (unsigned)source > MT_SOURCE_EXTERNAL)
    return mt_fail(err, MT_E_INVALID, -1,
                   "invalid allocation: length %lld, nsamples %lld, source %d", (long long)length,
                   (long long)nsamples, (int)source);
  domain_writer *d = w->current;
  if (d->domain != domain && (rc = switch_domain(w, domain, &d, err)))
    return rc;
  if ((rc = check_time(d, time, err)))
    return rc;
  if (callstack_length > d->prev_cap) {
    size_t cap = callstack_length * 2;
    uint64_t *grown = realloc(d->prev, cap * sizeof *grown);
    if (!grown)
      return mt_fail(err, MT_E_NOMEM, -1, "out of memory for a %zu-frame call stack",
                     callstack_length);
    d->prev = grown;
    d->prev_cap = cap;
  }

  /* Common prefix with the previous stack, counted from the outermost ends, before begin_event. */
  size_t prefix = 0;
  while (prefix < d->prev_len && prefix < callstack_length &&
         d->prev[prefix] == callstack[callstack_length - 1 - prefix])
    prefix++;
  size_t new_frames = callstack_length - prefix;
  for (size_t i = 0; i < new_frames; i++) { /* frames in the prefix were checked before */
    if (callstack[i] == 0)
      return mt_fail(err, MT_E_INVALID, -1, "location code 0 (frame %zu) cannot be encoded", i);
    /* FORMAT.md §2.12: readers keep 63 bits, so bits 63 and 62 must agree. */
    if ((uint64_t)mt_code63(callstack[i]) != callstack[i])
      return mt_fail(err, MT_E_INVALID, -1,
                     "location code 0x%llx (frame %zu) does not fit in 63 bits: readers would "
                     "read it as another code",
                     (unsigned long long)callstack[i], i);
  }
  bool short_form =
      length >= 1 && length <= 16 && source == MT_SOURCE_MINOR && nsamples == 1 && new_frames < 256;

  rc = begin_event(w, d, short_form ? (unsigned)(100 + length) : MT_CODE_ALLOC, time, err);
  if (rc)
    return rc;
  size_t event_at = d->buf.len - 4, staged_count = d->staged_count, staged_len = d->staged_len;
  int64_t id = d->next;
  size_t count_at;
  if (short_form) {
    put_vint(&d->buf, (int64_t)prefix);
    count_at = d->buf.len;
    mt_wbuf_u8(&d->buf, 0);
  } else {
    put_vint(&d->buf, length);
    put_vint(&d->buf, nsamples);
    mt_wbuf_u8(&d->buf, (uint8_t)source);
    put_vint(&d->buf, (int64_t)prefix);
    count_at = d->buf.len;
    mt_wbuf_u16(&d->buf, 0);
  }
  w->resolve = resolve;
  w->resolve_user = resolve_user;
  w->resolve_status = 0;
  long codewords = new_frames ? mt_backtrace_encode(&d->cache, &d->buf, callstack,
                                                    (long)new_frames - 1, id, stage_location, w)
                              : 0; /* the whole stack is the common prefix */
  if (codewords < 0) {
    /* The cache already holds this backtrace's first frames, which the file will never describe:
     * no later event can be encoded. Drop this one and write out the whole events before it. */
    d->buf.len = event_at;
    d->staged_count = staged_count;
    d->staged_len = staged_len;
    int status = w->resolve_status;
    if ((rc = flush_domain(w, d, d->t1, err)))
      return rc;
    return fail_writer(w, mt_fail(err, status, -1,
                                  "resolving a location code failed (%s); the writer stopped after "
                                  "writing the events before this allocation",
                                  mt_status_name(status)));
  }
  if (short_form)
    d->buf.data[count_at] = (uint8_t)codewords;
  else
    mt_store_u16(d->buf.data + count_at, (uint16_t)codewords);
  d->next++;

  for (size_t i = prefix; i < callstack_length; i++)
    d->prev[i] = callstack[callstack_length - 1 - i];
  d->prev_len = callstack_length;
  if (obj_id)
    *obj_id = id;
  return MT_OK;
}

static int put_object_event(mt_writer *w, uint16_t domain, unsigned code, int64_t time,
                            int64_t obj_id, mt_error *err) {
  int rc = check_writable(w, err);
  if (rc)
    return rc;
  domain_writer *d = w->current;
  if ((d->domain != domain && (rc = switch_domain(w, domain, &d, err))) ||
      (rc = check_time(d, time, err)))
    return rc;
  /* A promote's delta must not be negative (§2.8); nor a collect's in v2, where one counter hands
   * out every id (§2.9), so an id at or past the next one was never allocated. */
  if (obj_id < 0 || (obj_id >= d->next && (code == MT_CODE_PROMOTE || w->file->version < 3)))
    return mt_fail(err, MT_E_INVALID, -1, "object id %lld was not allocated by domain %u",
                   (long long)obj_id, (unsigned)domain);
  rc = begin_event(w, d, code, time, err);
  if (rc)
    return rc;
  put_vint(&d->buf, (d->next - 1) - obj_id);
  return MT_OK;
}

int mt_writer_put_promote_in(mt_writer *w, uint16_t domain, int64_t time, int64_t obj_id,
                             mt_error *err) {
  return put_object_event(w, domain, MT_CODE_PROMOTE, time, obj_id, err);
}

int mt_writer_put_collect_in(mt_writer *w, uint16_t domain, int64_t time, int64_t obj_id,
                             mt_error *err) {
  return put_object_event(w, domain, MT_CODE_COLLECT, time, obj_id, err);
}

/* The general paths, out of line: the fast paths then need no saved registers. */
__attribute__((noinline)) static int
put_alloc_slow(mt_writer *w, int64_t time, int64_t length, int64_t nsamples, mt_source source,
               const uint64_t *callstack, size_t callstack_length, mt_resolve_fn resolve,
               void *resolve_user, int64_t *obj_id, mt_error *err) {
  return mt_writer_put_alloc_in(w, w->current->domain, time, length, nsamples, source, callstack,
                                callstack_length, resolve, resolve_user, obj_id, err);
}

__attribute__((noinline)) static int put_collect_slow(mt_writer *w, int64_t time, int64_t obj_id,
                                                      mt_error *err) {
  return put_object_event(w, w->current->domain, MT_CODE_COLLECT, time, obj_id, err);
}

/* Both entry points: the fast path inline (`same`: the caller knows the stack is the previous
 * one's), else the general one. */
static inline __attribute__((always_inline)) int
put_alloc(mt_writer *w, int64_t time, int64_t length, int64_t nsamples, mt_source source,
          const uint64_t *callstack, size_t callstack_length, bool same, mt_resolve_fn resolve,
          void *resolve_user, int64_t *obj_id, mt_error *err) {
  int64_t id;
  if (mt_writer_alloc_fast(w, time, length, nsamples, source, callstack, callstack_length, same,
                           &id)) {
    if (obj_id)
      *obj_id = id;
    return MT_OK;
  }
  return put_alloc_slow(w, time, length, nsamples, source, callstack, callstack_length, resolve,
                        resolve_user, obj_id, err);
}

int mt_writer_put_alloc_general(mt_writer *w, int64_t time, int64_t length, int64_t nsamples,
                                mt_source source, const uint64_t *callstack,
                                size_t callstack_length, mt_resolve_fn resolve, void *resolve_user,
                                int64_t *obj_id, mt_error *err) {
  return mt_writer_put_alloc_in(w, w->current->domain, time, length, nsamples, source, callstack,
                                callstack_length, resolve, resolve_user, obj_id, err);
}

int mt_writer_put_alloc(mt_writer *w, int64_t time, int64_t length, int64_t nsamples,
                        mt_source source, const uint64_t *callstack, size_t callstack_length,
                        mt_resolve_fn resolve, void *resolve_user, int64_t *obj_id, mt_error *err) {
  return put_alloc(w, time, length, nsamples, source, callstack, callstack_length, false, resolve,
                   resolve_user, obj_id, err);
}

int mt_writer_put_alloc_same(mt_writer *w, int64_t time, int64_t length, int64_t nsamples,
                             mt_source source, const uint64_t *callstack, size_t callstack_length,
                             mt_resolve_fn resolve, void *resolve_user, int64_t *obj_id,
                             mt_error *err) {
  return put_alloc(w, time, length, nsamples, source, callstack, callstack_length, true, resolve,
                   resolve_user, obj_id, err);
}

int mt_writer_put_promote(mt_writer *w, int64_t time, int64_t obj_id, mt_error *err) {
  return put_object_event(w, w->current->domain, MT_CODE_PROMOTE, time, obj_id, err);
}

int mt_writer_put_collect(mt_writer *w, int64_t time, int64_t obj_id, mt_error *err) {
  if (mt_writer_collect_fast(w, time, obj_id))
    return MT_OK;
  return put_collect_slow(w, time, obj_id, err);
}

int mt_writer_next_alloc_id(mt_writer *w, uint16_t domain, int64_t *obj_id, mt_error *err) {
  domain_writer *d;
  int rc = check_writable(w, err);
  if (rc || (rc = switch_domain(w, domain, &d, err)))
    return rc;
  if (mt_writer_chunk_exhausted(w, d) && (rc = flush_domain(w, d, d->t1, err)))
    return rc;
  *obj_id = d->next;
  return MT_OK;
}

int mt_writer_extend(mt_writer *w, int64_t time, mt_error *err) {
  int rc = check_writable(w, err);
  if (rc)
    return rc;
  domain_writer *d = w->current;
  if (!d || time <= d->t1)
    return MT_OK;
  /* No packet may span more than 30 s (§2.4): the open one ends 30 s after it began, and each
   * following 30 s is an empty packet of its own, until `time` fits in the one left open. Up to
   * a day of them: past that the packet left open spans the rest, as memtrace's own close does
   * after a long quiet spell (no event in it needs the 25-bit time). A damaged trace read for a
   * copy can say it lasted 70,000 years: 30 s packets would fill the disk. */
  for (int n = 0; n < EXTEND_MAX_PACKETS && (uint64_t)time - (uint64_t)d->t0 > MT_PACKET_MAX_SPAN;
       n++) {
    d->t1 = d->t0 + MT_PACKET_MAX_SPAN; /* >= t1: the open packet spans at most 30 s */
    if ((rc = flush_domain(w, d, d->t1, err)))
      return rc;
  }
  d->t1 = time; /* events after it must not be older (check_time) */
  return MT_OK;
}

int mt_writer_flush(mt_writer *w, mt_error *err) {
  return flush_domain(w, w->current, w->current->t1, err);
}

int mt_writer_create_domain(mt_writer *trace, uint16_t domain, int64_t now, mt_writer **out,
                            mt_error *err) {
  *out = NULL;
  trace_file *f = trace->file;
  if (f->version < 3)
    return mt_fail(err, MT_E_INVALID, -1, "a v2 trace has no domains other than 0");
  if (now < f->start_time)
    return mt_fail(err, MT_E_INVALID, -1, "domain %u would start before the trace",
                   (unsigned)domain);
  if (forked_child(f)) /* before taking the lock, which fork may have left held */
    return mt_fail(err, MT_E_FORKED, -1,
                   "the trace writer belongs to process %d, not to this forked child",
                   (int)f->creator);
  mt_writer *w = calloc(1, sizeof *w);
  if (!w)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  w->file = f;
  f->refs++;
  if (!(w->current = new_domain_writer(w, domain, now))) {
    mt_writer_close(w, NULL);
    return mt_fail(err, MT_E_INVALID, -1,
                   "domain %u already has a writer in this trace (or memory ran out)",
                   (unsigned)domain);
  }
  *out = w;
  return MT_OK;
}

int mt_writer_close(mt_writer *w, mt_error *err) {
  if (!w)
    return MT_OK;
  int rc = MT_OK;
  if (w->current && !w->failed)
    rc = flush_domain(w, w->current, w->current->t1, err);
  else if (w->failed)
    rc = mt_fail(err, w->failed, -1, "the writer had stopped after an earlier error");
  for (size_t i = 0; i < w->ndomains; i++)
    free_domain_writer(w->domains[i]);
  free(w->domains);
  trace_file *f = w->file;
  if (--f->refs == 0) {
    if (!forked_child(f)) /* in a forked child the lock may be held: leave it be */
      pthread_mutex_destroy(&f->lock);
    free(f);
  }
  free(w);
  return rc;
}
