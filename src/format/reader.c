/* The trace reader (format.h): packet 0 and trace_info, packet headers with every check of
 * FORMAT.md §2.11, per-domain decoder state (MTF tables, backtrace cache, previous backtrace, last
 * time), the event loop (backtraces are decoded by reader_backtrace.c), and the tolerant end:
 * packets with a foreign pid, a truncated last packet and a cut header are warnings, not errors. */
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "format/backtrace_codec.h"
#include "format/buf.h"
#include "format/location_codec.h"
#include "format/location_table.h"
#include "format/input.h"
#include "format/packet.h"
#include "format/reader_internal.h"
#include "memtap/format.h"

/* --- errors and warnings ----------------------------------------------------------------- */

int mt_reader_malformed(mt_reader *r, int64_t offset, const char *fmt, ...) {
  char reason[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  r->failed = mt_fail(&r->failure, MT_E_MALFORMED, offset, "malformed trace at byte %lld: %s",
                      (long long)offset, reason);
  mt_reader_stop_fast(r);
  return r->failed;
}

static int reader_fail(mt_reader *r, const mt_error *e) {
  r->failure = *e;
  r->failed = e->code;
  mt_reader_stop_fast(r);
  return r->failed;
}

int mt_reader_out_of_memory(mt_reader *r, int64_t offset, const char *what) {
  r->failed = mt_fail(&r->failure, MT_E_NOMEM, offset, "at byte %lld: out of memory for %s",
                      (long long)offset, what);
  mt_reader_stop_fast(r);
  return r->failed;
}

static bool warn(mt_reader *r, int64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Counts a warning and reports it unless it was reported before a rewind. Returns whether it was
 * reported. */
static bool warn(mt_reader *r, int64_t offset, const char *fmt, ...) {
  r->warnings++;
  if (!r->options.on_warning || offset == 0) /* packet 0 cannot be skipped: open fails instead */
    return false;
  if (offset >= r->quiet_from && offset < r->quiet_to) /* said before a rewind */
    return false;
  char message[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  r->options.on_warning(r->options.warning_user, offset, message);
  return true;
}

/* A packet of another process: named while fewer than MT_READER_FOREIGN_SAID were, counted
 * always. (Not undone by a rewind: what was said stays said, whichever part came first.) */
static void warn_foreign(mt_reader *r, const mt_packet_header *h) {
  if (r->foreign_said >= MT_READER_FOREIGN_SAID) {
    r->warnings++;
    return;
  }
  bool last = r->foreign_said + 1 == MT_READER_FOREIGN_SAID;
  if (warn(r, r->packet_offset,
           "skipping packet at byte %lld: its pid %lld is not the trace's %lld%s",
           (long long)r->packet_offset, (long long)h->pid, (long long)r->info.pid,
           last ? " (further packets of other processes are skipped without a warning)" : ""))
    r->foreign_said++;
}

/* --- domains ------------------------------------------------------------------------------ */

/* Whether the bound on decoder state (reader_internal.h) leaves room for one more domain. */
static bool domain_memory_allows_one_more(const mt_reader *r) {
  return r->domain_memory + DOMAIN_COST <=
         mt_reader_domain_memory_allowed(mt_input_position(r->source));
}

domain_state *mt_reader_find_domain(mt_reader *r, uint16_t id) {
  if (r->domain && r->domain->id == id)
    return r->domain;
  for (size_t i = 0; i < r->ndomains; i++)
    if (r->domains[i]->id == id)
      return r->domains[i];
  if (!domain_memory_allows_one_more(r))
    return NULL;
  domain_state *d = calloc(1, sizeof *d);
  domain_state **grown = d ? realloc(r->domains, (r->ndomains + 1) * sizeof *grown) : NULL;
  if (!grown) {
    free(d);
    return NULL;
  }
  r->domains = grown;
  r->domains[r->ndomains++] = d;
  r->domain_memory += DOMAIN_COST;
  d->id = id;
  d->last_time = r->info.start_time;
  return d;
}

void mt_reader_free_domain(domain_state *d) {
  mt_location_decoder_free(&d->locations);
  free(d->cache);
  mt_reader_free_runs(d->runs);
  free(d->backtrace);
  mt_reader_free_runs(d->scratch);
  free(d);
}

/* --- packets ------------------------------------------------------------------------------ */

/* Offsets of header fields, for error messages. */
static int64_t field_offset(const mt_reader *r, int v3_offset) {
  int off = v3_offset;
  if (r->header.version < 3 && v3_offset > 38)
    off -= 2;
  return r->packet_offset + off;
}

/* Reads the header at the current position and applies the §2.11 header checks. Returns 1 with
 * the packet's bytes peeked into r->content, 0 at a clean or cut end, or an error. */
/* Why a trace ends mid-packet when the reader can tell: a zstd stream cut inside a frame. */
static const char *cut_short(const mt_reader *r) {
  return mt_input_cut(r->source) ? "; the zstd stream ends inside a frame: the compressed file "
                                   "was cut short"
                                 : "";
}

static int read_packet(mt_reader *r) {
  mt_error e;
  size_t got;
  r->packet_offset = mt_input_position(r->source);
  const uint8_t *p = mt_input_peek(r->source, MT_HEADER_SIZE_V3, &got, &e);
  if (!p)
    return reader_fail(r, &e);
  if (got == 0) {
    if (mt_input_cut(r->source) && !r->truncated) {
      r->truncated = true;
      r->truncated_at = r->packet_offset;
      warn(r, r->packet_offset,
           "the zstd stream ends inside a frame at byte %lld of the trace (the compressed file "
           "was cut short): what follows is missing; reading stops there",
           (long long)r->packet_offset);
    }
    return 0;
  }
  mt_packet_header *h = &r->header;
  if (got >= 5 && r->packet_offset == 0 && !memcmp(p, "go 1.", 5)) /* come through a pipe */
    return mt_reader_malformed(r, 0,
                               "not a CTF packet: a Go execution trace, which memtap reads from a "
                               "regular file (or converts with memtap import-go)");
  if (got >= 4 && mt_load_u32(p) != MT_CTF_MAGIC) /* garbage is garbage, even when short */
    return mt_reader_malformed(r, r->packet_offset,
                               "not a CTF packet (magic 0x%08x, expected 0x%08x)", mt_load_u32(p),
                               MT_CTF_MAGIC);
  size_t hsize = mt_packet_header_decode(p, got, h);
  if (!hsize) {
    r->truncated = true;
    r->truncated_at = r->packet_offset;
    warn(r, r->packet_offset,
         "the trace ends inside a packet header at byte %lld (%zu byte%s of it present%s); "
         "reading stops there",
         (long long)r->packet_offset, got, got == 1 ? "" : "s", cut_short(r));
    return 0;
  }
  r->header_size = hsize;
  if (h->magic != MT_CTF_MAGIC)
    return mt_reader_malformed(r, r->packet_offset,
                               "not a CTF packet (magic 0x%08x, expected 0x%08x)", h->magic,
                               MT_CTF_MAGIC);
  if (h->version > 3)
    return mt_reader_malformed(r, r->packet_offset + MT_HEADER_VERSION_OFFSET,
                               "trace format v%03u, but expected v001 to v003",
                               (unsigned)h->version);
  if ((int32_t)h->packet_size_bits < 0)
    return mt_reader_malformed(r, r->packet_offset + 4, "negative packet size");
  if (h->time_begin > h->time_end)
    return mt_reader_malformed(r, r->packet_offset + 16,
                               "packet timestamps are not monotone (begin %lld > end %lld)",
                               (long long)h->time_begin, (long long)h->time_end);
  if (h->alloc_id_begin > h->alloc_id_end)
    return mt_reader_malformed(r, field_offset(r, 60),
                               "packet alloc ids are not monotone (begin %lld > end %lld)",
                               (long long)h->alloc_id_begin, (long long)h->alloc_id_end);
  size_t size = h->packet_size_bits / 8;
  if (size < hsize)
    return mt_reader_malformed(r, r->packet_offset + 4,
                               "packet size %zu is smaller than its %zu-byte header", size, hsize);
  if (size > MT_PACKET_MAX)
    return mt_reader_malformed(r, r->packet_offset + 4,
                               "packet size %zu exceeds the %d-byte maximum", size, MT_PACKET_MAX);
  p = mt_input_peek(r->source, size, &got, &e);
  if (!p)
    return reader_fail(r, &e);
  if (got < size) {
    r->truncated = true;
    r->truncated_at = r->packet_offset;
    warn(r, r->packet_offset,
         "skipping truncated packet at byte %lld: %zu of its %zu bytes are present%s",
         (long long)r->packet_offset, got, size, cut_short(r));
    mt_input_advance(r->source, got);
    return 0;
  }
  r->packet_size = size;
  r->packet_span = (uint64_t)h->time_end - (uint64_t)h->time_begin;
  mt_rbuf_init(&r->content, p + hsize, size - hsize, r->packet_offset + (int64_t)hsize);
  return 1;
}

static int parse_trace_info(mt_reader *r) {
  mt_rbuf *b = &r->content;
  int64_t at = mt_rbuf_offset(b);
  uint32_t word;
  if (!mt_rbuf_u32(b, &word))
    return mt_reader_malformed(r, at, "the trace-info packet holds no event");
  if (word >> 25 != MT_CODE_TRACE_INFO)
    return mt_reader_malformed(r, at, "the first event is not trace_info (event code %u)",
                               word >> 25);
  if (mt_event_time(word, r->header.time_begin) != r->header.time_begin)
    return mt_reader_malformed(r, at, "the trace_info time differs from the packet's start time");
  uint64_t rate_bits, pid;
  uint8_t word_size;
  const char *s[4];
  size_t len[4];
  int64_t field = mt_rbuf_offset(b), rate_at = field;
  if (!mt_rbuf_u64(b, &rate_bits) || !mt_rbuf_u8(b, &word_size))
    return mt_reader_malformed(r, field, "trace_info ends inside its sample rate or word size");
  /* Sizes are words of this many bits: a trace whose words are not whole bytes describes no
   * memory (OCaml writes 64, or 32). */
  if (!word_size)
    return mt_reader_malformed(r, field + 8, "the word size is 0 bits");
  if (word_size % 8)
    return mt_reader_malformed(r, field + 8, "the word size %u bits is not a whole number of bytes",
                               (unsigned)word_size);
  for (int i = 0; i < 3; i++) {
    field = mt_rbuf_offset(b);
    if (!mt_rbuf_string(b, &s[i], &len[i]))
      return mt_reader_malformed(r, field, "trace_info ends inside a string");
  }
  field = mt_rbuf_offset(b);
  if (!mt_rbuf_u64(b, &pid))
    return mt_reader_malformed(r, field, "trace_info ends inside its pid");
  /* A writer puts its one cached pid in both (FORMAT.md §5): when they differ one was damaged,
   * and every later packet would be skipped as another process's, leaving an empty trace that
   * reads as whole. */
  if ((int64_t)pid != r->header.pid)
    return mt_reader_malformed(r, field,
                               "the trace_info pid %lld differs from its packet's pid %lld (byte "
                               "%lld): one of them is damaged",
                               (long long)pid, (long long)r->header.pid,
                               (long long)(r->packet_offset + 30));
  s[3] = "";
  len[3] = 0;
  if (r->header.version >= 2) {
    field = mt_rbuf_offset(b);
    if (!mt_rbuf_string(b, &s[3], &len[3]))
      return mt_reader_malformed(r, field, "trace_info ends inside its context string");
  }
  if (mt_rbuf_left(b))
    return mt_reader_malformed(r, mt_rbuf_offset(b), "%zu unexpected bytes after trace_info",
                               mt_rbuf_left(b));
  const char *kept[4];
  for (int i = 0; i < 4; i++)
    if (!(kept[i] = mt_location_table_intern(r->locations, s[i], len[i])))
      return mt_reader_out_of_memory(r, at, "trace info");
  union {
    uint64_t u;
    double f;
  } rate = {.u = rate_bits};
  if (!(rate.f > 0 && rate.f <= 1)) /* FORMAT.md §2: 0 < λ <= 1 (NaN included) */
    return mt_reader_malformed(r, rate_at, "the sample rate %.17g is outside (0, 1]", rate.f);
  if (!mt_sample_rate_is_valid(rate.f, word_size)) /* a denormal λ: a sample's bytes overflow */
    return mt_reader_malformed(r, rate_at,
                               "the sample rate %g is too small: one sample would stand for more "
                               "bytes than a double holds",
                               rate.f);
  r->info = (mt_trace_info){.version = r->header.version,
                            .start_time = r->header.time_begin,
                            .sample_rate = rate.f,
                            .word_size = word_size,
                            .executable_name = kept[0],
                            .host_name = kept[1],
                            .ocaml_runtime_params = kept[2],
                            .pid = (int64_t)pid,
                            .context = kept[3]};
  r->packets_end = r->info.start_time;
  return MT_OK;
}

static int open_common(mt_reader *r, mt_reader **out, mt_error *err) {
  *out = NULL;
  r->locations = mt_location_table_new();
  if (!r->locations) {
    mt_reader_close(r);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  int rc = read_packet(r);
  if (rc == 0) {
    const char *why = r->truncated && mt_input_cut(r->source)
                          ? "the zstd stream ends inside a frame before the trace-info packet is "
                            "whole (the compressed file was cut short)"
                      : r->truncated ? "the trace-info packet is incomplete"
                      : mt_input_compressed(r->source)
                          ? "the zstd stream holds no complete block of trace data"
                          : "the file is empty";
    mt_reader_close(r);
    return mt_fail(err, MT_E_MALFORMED, 0, "malformed trace at byte 0: %s", why);
  }
  if (rc > 0)
    rc = parse_trace_info(r);
  if (rc < 0) {
    if (err)
      *err = r->failure;
    mt_reader_close(r);
    return rc;
  }
  mt_input_advance(r->source, r->packet_size);
  r->warnings = 0; /* nothing was skipped yet */
  *out = r;
  return MT_OK;
}

static mt_reader *new_reader(const mt_reader_options *options) {
  mt_reader *r = calloc(1, sizeof *r);
  if (r && options)
    r->options = *options;
  return r;
}

int mt_reader_open_fd(mt_reader **out, int fd, const mt_reader_options *options, mt_error *err) {
  mt_reader *r = new_reader(options);
  if (!r)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  int rc = mt_input_open_fd(&r->source, fd, false, err);
  if (rc) {
    free(r);
    return rc;
  }
  return open_common(r, out, err);
}

int mt_reader_open(mt_reader **out, const char *path, const mt_reader_options *options,
                   mt_error *err) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return mt_fail_io(err, "cannot open");
  mt_reader *r = new_reader(options);
  if (!r) {
    close(fd);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  }
  int rc = mt_input_open_fd(&r->source, fd, true, err);
  if (rc) {
    close(fd);
    free(r);
    return rc;
  }
  return open_common(r, out, err);
}

int mt_reader_open_memory(mt_reader **out, const void *data, size_t size,
                          const mt_reader_options *options, mt_error *err) {
  mt_reader *r = new_reader(options);
  if (!r)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory");
  int rc = mt_input_open_memory(&r->source, data, size, err);
  if (rc) {
    free(r);
    return rc;
  }
  return open_common(r, out, err);
}

void mt_reader_close(mt_reader *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->ndomains; i++)
    mt_reader_free_domain(r->domains[i]);
  free(r->domains);
  mt_location_table_free(r->locations);
  mt_input_close(r->source);
  free(r);
}

/* Moves to the next packet worth decoding: skips foreign-pid packets, sets up the domain and checks
 * the cache verifier. Returns 1, 0 at the end, or an error. */
static int begin_packet(mt_reader *r) {
  for (;;) {
    int rc = read_packet(r);
    if (rc <= 0)
      return rc;
    const mt_packet_header *h = &r->header;
    if (h->pid != r->info.pid) {
      warn_foreign(r, h);
      mt_input_advance(r->source, r->packet_size);
      continue;
    }
    domain_state *d = mt_reader_find_domain(r, h->domain);
    if (!d && !domain_memory_allows_one_more(r)) /* the input, not malloc, asked too much */
      return mt_reader_malformed(
          r, field_offset(r, 38),
          "more than %zu domains in the first %lld bytes (each needs %zu KiB of "
          "decoder state, bounded at %u MiB + %u bytes per byte of input)",
          r->ndomains, (long long)r->packet_offset, DOMAIN_COST / 1024,
          (unsigned)(DOMAIN_MEMORY_FREE >> 20), (unsigned)DOMAIN_MEMORY_PER_INPUT_BYTE);
    if (!d)
      return mt_reader_out_of_memory(r, field_offset(r, 38), "per-domain state");
    r->domain = d;
    r->allocs_in_packet = 0;
    if (r->options.backtraces && h->verify_ix != MT_NO_VERIFY) {
      if (!d->cache && !(d->cache = calloc(1, sizeof *d->cache)))
        return mt_reader_out_of_memory(r, r->packet_offset, "a backtrace cache");
      unsigned ix = h->verify_ix;
      if (ix >= MT_CACHE_BUCKETS || d->cache->next[ix] != h->verify_pred ||
          d->cache->loc[ix] != mt_code63((uint64_t)h->verify_val))
        return mt_reader_malformed(r, field_offset(r, 40),
                                   "backtrace cache verification failed (bucket %u)", ix);
    }
    r->in_packet = true;
    return 1;
  }
}

int mt_reader_end_packet(mt_reader *r) {
  /* Ids are untrusted: wrapping (unsigned) arithmetic, never signed overflow. */
  if ((uint64_t)r->header.alloc_id_begin + (uint64_t)r->allocs_in_packet !=
      (uint64_t)r->header.alloc_id_end)
    return mt_reader_malformed(r, field_offset(r, 60),
                               "alloc id sync: the packet declares ids [%lld, %lld) but holds %lld "
                               "allocations",
                               (long long)r->header.alloc_id_begin,
                               (long long)r->header.alloc_id_end, (long long)r->allocs_in_packet);
  mt_input_advance(r->source, r->packet_size);
  r->in_packet = false;
  if (r->header.time_end > r->packets_end)
    r->packets_end = r->header.time_end;
  return MT_OK;
}

int64_t mt_reader_end_time(const mt_reader *r) {
  return r->packets_end;
}

static int read_location(mt_reader *r, int64_t at) {
  mt_rbuf *b = &r->content;
  uint64_t code;
  uint8_t count;
  if (!mt_rbuf_u64(b, &code) || !mt_rbuf_u8(b, &count))
    return mt_reader_malformed(r, at, "location event ends inside its code or count");
  int64_t bad;
  const char *reason;
  int rc =
      mt_location_decode(&r->domain->locations, b, r->locations, count, r->decoded, &bad, &reason);
  if (rc == MT_E_NOMEM)
    return mt_reader_out_of_memory(r, at, "locations");
  if (rc)
    return mt_reader_malformed(r, bad, "%s", reason);
  rc = mt_location_table_add(r->locations, mt_code63(code), r->decoded, count);
  if (rc == MT_E_NOMEM)
    return mt_reader_out_of_memory(r, at, "locations");
  if (rc < 0)
    return mt_reader_malformed(r, at,
                               "inconsistent location info: code %lld was described differently "
                               "before",
                               (long long)mt_code63(code));
  return MT_OK;
}

static int skip_backtrace(mt_reader *r, unsigned count) {
  mt_rbuf *b = &r->content;
  for (unsigned i = 0; i < count; i++) {
    if (mt_rbuf_left(b) < 2)
      return mt_reader_malformed(r, mt_rbuf_offset(b), "allocation ends inside its backtrace");
    unsigned tag = b->p[0] & 3;
    size_t size = tag == 2 ? 3 : tag == 3 ? 10 : 2;
    if (mt_rbuf_left(b) < size)
      return mt_reader_malformed(r, mt_rbuf_offset(b), "allocation ends inside its backtrace");
    b->p += size;
  }
  return MT_OK;
}

static int read_alloc(mt_reader *r, mt_event *ev, unsigned code) {
  mt_rbuf *b = &r->content;
  int64_t prefix, prefix_at;
  unsigned count;
  ev->kind = MT_EVENT_ALLOC;
  if (code == MT_CODE_ALLOC) {
    uint8_t source;
    uint16_t n16;
    int64_t at = mt_rbuf_offset(b);
    if (!mt_rbuf_vint(b, &ev->length))
      return mt_reader_malformed(r, mt_rbuf_offset(b), "allocation ends inside its length");
    if (ev->length < 0)
      return mt_reader_malformed(r, at, "allocation of negative length %lld",
                                 (long long)ev->length);
    at = mt_rbuf_offset(b);
    if (!mt_rbuf_vint(b, &ev->nsamples))
      return mt_reader_malformed(r, mt_rbuf_offset(b), "allocation ends inside its samples");
    if (ev->nsamples < 1) /* FORMAT.md §2.7: every sampled allocation has a sample at least */
      return mt_reader_malformed(r, at, "allocation with %lld samples (at least 1)",
                                 (long long)ev->nsamples);
    at = mt_rbuf_offset(b);
    if (!mt_rbuf_u8(b, &source))
      return mt_reader_malformed(r, at, "allocation ends inside its source");
    if (source > MT_SOURCE_EXTERNAL)
      return mt_reader_malformed(r, at, "unknown allocation source %u", source);
    ev->source = (mt_source)source;
    at = prefix_at = mt_rbuf_offset(b);
    if (!mt_rbuf_vint(b, &prefix) || !mt_rbuf_u16(b, &n16))
      return mt_reader_malformed(r, at, "allocation ends inside its backtrace header");
    count = n16;
    ev->short_form = false;
  } else {
    uint8_t n8;
    int64_t at = prefix_at = mt_rbuf_offset(b);
    if (!mt_rbuf_vint(b, &prefix) || !mt_rbuf_u8(b, &n8))
      return mt_reader_malformed(r, at, "allocation ends inside its backtrace header");
    count = n8;
    ev->length = code - 100;
    ev->nsamples = 1;
    ev->source = MT_SOURCE_MINOR;
    ev->short_form = true;
  }
  if (prefix < 0)
    return mt_reader_malformed(r, prefix_at, "negative common prefix %lld", (long long)prefix);
  ev->common_prefix = prefix;
  ev->obj_id = (int64_t)((uint64_t)r->header.alloc_id_begin + (uint64_t)r->allocs_in_packet++);
  if (!r->options.backtraces) {
    ev->backtrace = NULL;
    ev->backtrace_length = 0;
    ev->backtrace_runs = NULL;
    ev->backtrace_run_count = ev->common_runs = 0;
    return skip_backtrace(r, count);
  }
  return mt_reader_decode_backtrace(r, ev, prefix, count);
}

/* The largest event header before an allocation's codewords: code and time (4), length and
 * nsamples (vints, up to 9 bytes each), source (1), common prefix (vint), codeword count (2). */
#define FAST_EVENT_BYTES 34

/* The id of the packet's last allocation so far (of the one before the packet when it has none
 * yet; -1 before any): a promote's or collect's delta counts back from it. */
static inline int64_t newest_id(const mt_reader *r) {
  return (int64_t)((uint64_t)r->header.alloc_id_begin + (uint64_t)r->allocs_in_packet - 1);
}

/* A promote or a collect of the object `delta` allocations before the packet's last one: every
 * field but time, offset and domain, which the caller sets. */
static inline void fill_id_event(const mt_reader *r, mt_event *ev, unsigned code, int64_t delta) {
  ev->kind = code == MT_CODE_PROMOTE ? MT_EVENT_PROMOTE : MT_EVENT_COLLECT;
  /* The allocation-only fields, length to common_runs, all zero (MT_SOURCE_MINOR, false, NULL):
   * one clear of the range is fewer stores than a field at a time. */
  memset(&ev->length, 0,
         offsetof(mt_event, common_runs) + sizeof ev->common_runs - offsetof(mt_event, length));
  ev->obj_id = (int64_t)((uint64_t)r->header.alloc_id_begin + (uint64_t)r->allocs_in_packet - 1 -
                         (uint64_t)delta);
}

/* mt_reader_next's allocation (as mt_reader_next_alloc) when the reader skips backtraces. */
static __attribute__((noinline)) int next_alloc_plain(mt_reader *r, mt_event *ev, mt_error *err,
                                                      const uint8_t *p, unsigned code,
                                                      int64_t time) {
  int64_t prefix;
  unsigned count;
  const uint8_t *q = mt_alloc_header(p, code, ev, &prefix, &count);
  if (!q)
    return mt_reader_next_careful(r, ev, err);
  r->content.p = q;
  r->domain->last_time = time;
  ev->time = time;
  ev->offset = r->content.origin + (p - r->content.base);
  ev->domain = r->header.domain;
  ev->obj_id = (int64_t)((uint64_t)r->header.alloc_id_begin + (uint64_t)r->allocs_in_packet++);
  ev->backtrace = NULL;
  ev->backtrace_length = 0;
  ev->backtrace_runs = NULL;
  ev->backtrace_run_count = ev->common_runs = 0;
  int rc = skip_backtrace(r, count);
  if (rc < 0 && err)
    *err = r->failure;
  return rc < 0 ? rc : 1;
}

__attribute__((noinline)) int mt_reader_next_careful(mt_reader *r, mt_event *ev, mt_error *err) {
  if (r->failed) {
    if (err)
      *err = r->failure;
    return r->failed;
  }
  if (r->done)
    return 0;
  int rc;
  for (;;) {
    if (!r->in_packet) {
      rc = begin_packet(r);
      if (rc == 0) {
        r->done = true;
        mt_reader_stop_fast(r); /* what is left may be a skipped packet's */
        return 0;
      }
      if (rc < 0)
        break;
    }
    mt_rbuf *b = &r->content;
    if (!mt_rbuf_left(b)) {
      if ((rc = mt_reader_end_packet(r)) < 0)
        break;
      continue;
    }
    int64_t at = mt_rbuf_offset(b);
    uint32_t word;
    if (!mt_rbuf_u32(b, &word)) {
      rc = mt_reader_malformed(r, at, "packet ends inside an event header");
      break;
    }
    unsigned code = word >> 25;
    /* FORMAT.md §2.4: the time is begin plus the low bits' distance from begin's, mod 2^25
     * (mt_event_time), and must lie in [begin, end]. Checking the distance against the packet's
     * span catches a time that would wrap past INT64_MAX as well as one past end. */
    uint64_t since = (word - (uint32_t)r->header.time_begin) & MT_TIME_MASK;
    int64_t time = (int64_t)((uint64_t)r->header.time_begin + since);
    if (since > r->packet_span) {
      rc = mt_reader_malformed(r, at, "event time %lld is outside its packet's bounds [%lld, %lld]",
                               (long long)time, (long long)r->header.time_begin,
                               (long long)r->header.time_end);
      break;
    }
    domain_state *d = r->domain;
    if (time < d->last_time) {
      rc = mt_reader_malformed(r, at, "timestamps are not monotone: %lld after %lld in domain %u",
                               (long long)time, (long long)d->last_time, (unsigned)d->id);
      break;
    }
    d->last_time = time;
    ev->time = time;
    ev->offset = at;
    ev->domain = r->header.domain;
    if (code == MT_CODE_LOCATION) {
      if ((rc = read_location(r, at)) < 0)
        break;
      continue;
    }
    if (code == MT_CODE_ALLOC ||
        (code >= MT_CODE_ALLOC_SHORT_FIRST && code <= MT_CODE_ALLOC_SHORT_LAST)) {
      if ((rc = read_alloc(r, ev, code)) < 0)
        break;
      return 1;
    }
    if (code == MT_CODE_PROMOTE || code == MT_CODE_COLLECT) {
      int64_t delta;
      int64_t field = mt_rbuf_offset(b);
      if (!mt_rbuf_vint(b, &delta)) {
        rc = mt_reader_malformed(r, field, "event ends inside its object id");
        break;
      }
      if (code == MT_CODE_PROMOTE && delta < 0) {
        rc =
            mt_reader_malformed(r, field, "promote id sync: negative delta %lld", (long long)delta);
        break;
      }
      if (delta > newest_id(r)) { /* ids count from 0 (§2.8, §2.9) */
        rc = mt_reader_malformed(r, field, "%s of object %lld: ids start at 0 (delta %lld)",
                                 code == MT_CODE_PROMOTE ? "promote" : "collect",
                                 (long long)(newest_id(r) - delta), (long long)delta);
        break;
      }
      fill_id_event(r, ev, code, delta);
      return 1;
    }
    if (code == MT_CODE_TRACE_INFO)
      rc = mt_reader_malformed(r, at, "multiple trace-info events present");
    else
      rc = mt_reader_malformed(r, at, "unknown event code %u", code);
    break;
  }
  if (err)
    *err = r->failure;
  return rc;
}

/* The usual event, an allocation, promote or collect lying whole in the packet with no rule broken,
 * is decoded with one bound check for its header (content.end is content.p whenever the reader is
 * not inside a packet it may decode: mt_reader_stop_fast); promotes and collects here, without a
 * call. */
int mt_reader_next(mt_reader *r, mt_event *ev, mt_error *err) {
  const uint8_t *p = r->content.p;
  if (__builtin_expect(r->content.end - p >= FAST_EVENT_BYTES, 1)) {
    uint32_t word = mt_load_u32(p);
    unsigned code = word >> 25;
    uint64_t since = (word - (uint32_t)r->header.time_begin) & MT_TIME_MASK;
    int64_t time = (int64_t)((uint64_t)r->header.time_begin + since);
    domain_state *d = r->domain;
    if (__builtin_expect(since <= r->packet_span && time >= d->last_time, 1)) {
      if (code == MT_CODE_COLLECT || code == MT_CODE_PROMOTE) {
        int64_t delta;
        const uint8_t *q = mt_vint_at(p + 4, &delta);
        if ((code == MT_CODE_COLLECT || delta >= 0) && delta <= newest_id(r)) {
          r->content.p = q;
          d->last_time = time;
          ev->time = time;
          ev->offset = r->content.origin + (p - r->content.base);
          ev->domain = r->header.domain;
          fill_id_event(r, ev, code, delta);
          return 1;
        }
      } else if (code == MT_CODE_ALLOC ||
                 (code >= MT_CODE_ALLOC_SHORT_FIRST && code <= MT_CODE_ALLOC_SHORT_LAST)) {
        return r->options.backtraces ? mt_reader_next_alloc(r, ev, err, p, code, time)
                                     : next_alloc_plain(r, ev, err, p, code, time);
      }
    }
  }
  return mt_reader_next_careful(r, ev, err);
}

int mt_reader_iter(mt_reader *r, mt_event_fn fn, void *user, mt_error *err) {
  mt_event ev;
  int rc;
  while ((rc = mt_reader_next(r, &ev, err)) > 0) {
    int stop = fn(user, &ev);
    if (stop)
      return stop;
  }
  return rc;
}

const mt_trace_info *mt_reader_info(const mt_reader *r) {
  return &r->info;
}

bool mt_reader_lookup_location(const mt_reader *r, int64_t code, const mt_location **entries,
                               size_t *count) {
  return mt_location_table_lookup(r->locations, code, entries, count);
}

int64_t mt_reader_position(const mt_reader *r) {
  return mt_input_position(r->source);
}

int64_t mt_reader_size(const mt_reader *r) {
  return mt_input_size(r->source);
}

bool mt_reader_file_mtime(const mt_reader *r, int64_t *mtime_ns) {
  return mt_input_file_mtime(r->source, mtime_ns);
}

uint64_t mt_reader_warning_count(const mt_reader *r) {
  return r->warnings;
}

bool mt_reader_truncated(const mt_reader *r, int64_t *offset) {
  if (offset)
    *offset = r->truncated_at;
  return r->truncated;
}
