/* Saving and restoring a reader's decoder state between packets (format.h, "Checkpoints"): the
 * position of the next packet and a copy of its header, and per domain the last time, the MTF
 * tables of the location codec, the used buckets of the backtrace cache and the previous
 * backtrace; location codes apart, in the order the trace described them. Restoring treats the
 * saved bytes as untrusted input: every count and index is checked before it is used, and a state
 * is built aside and swapped in only once whole. Marks take a reader back to where it stood
 * (mt_reader_rewind), when a restored state proves wrong. */
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/error.h"
#include "format/reader_internal.h"

#define STATE_MAGIC 0x5354524Du     /* "MRTS" */
#define LOCATIONS_MAGIC 0x434F4C4Du /* "MLOC" */
#define STATE_VERSION 1

/* --- saving ------------------------------------------------------------------------------- */

bool mt_reader_between_packets(const mt_reader *r) {
  if (r->failed || r->done)
    return false;
  return !r->in_packet || !mt_rbuf_left(&r->content);
}

static int hand_over(mt_bytes *b, void **data, size_t *size, mt_error *err) {
  if (b->failed) {
    mt_bytes_free(b);
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory saving the reader's state");
  }
  *data = b->data;
  *size = b->len;
  return MT_OK;
}

static void save_domain(mt_bytes *b, const domain_state *d, bool runs_only) {
  mt_bytes_u16(b, d->id);
  mt_bytes_u64(b, (uint64_t)d->last_time);
  const mt_location_decoder *loc = &d->locations;
  mt_bytes_u8(b, (uint8_t)loc->count);
  for (int i = 0; i < loc->count; i++) {
    mt_bytes_string(b, loc->file[i]);
    const mt_mtf_names *names = loc->defnames[i];
    mt_bytes_u8(b, (uint8_t)names->count);
    for (int j = 0; j < names->count; j++)
      mt_bytes_string(b, names->name[j]);
  }
  /* Only the buckets in use: a zero bucket is what a fresh cache holds. */
  uint32_t used = 0;
  if (d->cache)
    for (unsigned i = 0; i < MT_CACHE_BUCKETS; i++)
      used += d->cache->loc[i] != 0 || d->cache->next[i] != 0;
  mt_bytes_u32(b, used);
  for (unsigned i = 0; used && i < MT_CACHE_BUCKETS; i++)
    if (d->cache->loc[i] != 0 || d->cache->next[i] != 0) {
      mt_bytes_u16(b, (uint16_t)i);
      mt_bytes_u64(b, (uint64_t)d->cache->loc[i]);
      mt_bytes_u16(b, d->cache->next[i]);
    }
  mt_bytes_u64(b, d->depth); /* from the form the reader keeps (reader_backtrace.c) */
  if (runs_only)
    for (size_t i = 0; i < d->nruns; i++)
      for (uint32_t j = 0; j < d->runs[i].count; j++)
        mt_bytes_u64(b, (uint64_t)d->runs[i].code);
  else
    for (size_t i = 0; i < d->depth; i++)
      mt_bytes_u64(b, (uint64_t)d->backtrace[i]);
}

int mt_reader_save_state(mt_reader *r, void **data, size_t *size, mt_error *err) {
  *data = NULL;
  *size = 0;
  if (!mt_input_seekable(r->source))
    return mt_fail(err, MT_E_INVALID, -1,
                   "the reader's state can only be saved for an uncompressed file or memory");
  if (!mt_reader_between_packets(r))
    return mt_fail(err, MT_E_INVALID, -1, "the reader is not between two packets");
  if (r->in_packet) {
    int rc = mt_reader_end_packet(r);
    if (rc < 0) {
      if (err)
        *err = r->failure;
      return rc;
    }
  }
  size_t got;
  mt_error e;
  const uint8_t *next = mt_input_peek(r->source, MT_HEADER_SIZE_V3, &got, &e);
  if (!next || got == 0)
    return mt_fail(err, MT_E_INVALID, -1, "the reader is at the end of the trace");
  mt_bytes b = {0};
  mt_bytes_u32(&b, STATE_MAGIC);
  mt_bytes_u32(&b, STATE_VERSION);
  mt_bytes_u64(&b, (uint64_t)mt_input_position(r->source));
  mt_bytes_u8(&b, (uint8_t)got);
  mt_bytes_data(&b, next, got);
  mt_bytes_u32(&b, (uint32_t)r->ndomains);
  for (size_t i = 0; i < r->ndomains; i++)
    save_domain(&b, r->domains[i], r->options.runs_only);
  return hand_over(&b, data, size, err);
}

int mt_reader_save_locations(const mt_reader *r, size_t *mark, void **data, size_t *size,
                             mt_error *err) {
  *data = NULL;
  *size = 0;
  size_t total = mt_location_table_count(r->locations);
  size_t from = *mark < total ? *mark : total;
  mt_bytes b = {0};
  mt_bytes_u32(&b, LOCATIONS_MAGIC);
  mt_bytes_u32(&b, STATE_VERSION);
  mt_bytes_u64(&b, total - from);
  for (size_t i = from; i < total; i++) {
    int64_t code;
    const mt_location *entries;
    size_t count;
    mt_location_table_entry(r->locations, i, &code, &entries, &count);
    mt_bytes_u64(&b, (uint64_t)code);
    mt_bytes_u8(&b, (uint8_t)count);
    for (size_t j = 0; j < count; j++) {
      mt_bytes_string(&b, entries[j].filename);
      mt_bytes_string(&b, entries[j].defname);
      mt_bytes_u32(&b, (uint32_t)entries[j].line);
      mt_bytes_u32(&b, (uint32_t)entries[j].start_char);
      mt_bytes_u32(&b, (uint32_t)entries[j].end_char);
    }
  }
  int rc = hand_over(&b, data, size, err);
  if (rc == MT_OK)
    *mark = total;
  return rc;
}

/* --- restoring ---------------------------------------------------------------------------- */

static int damaged(mt_error *err, const mt_bytes_reader *in, const char *what) {
  size_t at = mt_bytes_reader_offset(in);
  return mt_fail(err, MT_E_MALFORMED, (int64_t)at, "saved reader state, byte %zu: %s", at, what);
}

static int expect_header(mt_bytes_reader *in, uint32_t magic, mt_error *err) {
  uint32_t m, version;
  if (!mt_bytes_get_u32(in, &m) || m != magic)
    return damaged(err, in, "not a saved reader state of this kind");
  if (!mt_bytes_get_u32(in, &version) || version != STATE_VERSION)
    return damaged(err, in, "unknown version");
  return MT_OK;
}

static const char *get_name(mt_reader *r, mt_bytes_reader *in) {
  const char *s;
  size_t len;
  if (!mt_bytes_get_string(in, &s, &len) || memchr(s, 0, len))
    return NULL;
  return mt_location_table_intern(r->locations, s, len);
}

int mt_reader_load_locations(mt_reader *r, const void *data, size_t size, mt_error *err) {
  mt_bytes_reader in;
  mt_bytes_reader_init(&in, data, size);
  int rc = expect_header(&in, LOCATIONS_MAGIC, err);
  if (rc)
    return rc;
  uint64_t n;
  if (!mt_bytes_get_u64(&in, &n))
    return damaged(err, &in, "ends inside the number of codes");
  for (uint64_t i = 0; i < n; i++) {
    uint64_t code;
    uint8_t count;
    if (!mt_bytes_get_u64(&in, &code) || !mt_bytes_get_u8(&in, &count))
      return damaged(err, &in, "ends inside a location code");
    mt_location *entries = r->decoded;
    for (unsigned j = 0; j < count; j++) {
      uint32_t line, start, end;
      if (!(entries[j].filename = get_name(r, &in)) || !(entries[j].defname = get_name(r, &in)) ||
          !mt_bytes_get_u32(&in, &line) || !mt_bytes_get_u32(&in, &start) ||
          !mt_bytes_get_u32(&in, &end))
        return damaged(err, &in, "a location is cut or holds a NUL byte");
      entries[j].line = (int32_t)line;
      entries[j].start_char = (int32_t)start;
      entries[j].end_char = (int32_t)end;
    }
    if ((int64_t)code != mt_code63(code))
      return damaged(err, &in, "a location code outside the 63-bit range");
    rc = mt_location_table_add(r->locations, (int64_t)code, entries, count);
    if (rc == MT_E_NOMEM)
      return mt_fail(err, MT_E_NOMEM, -1, "out of memory loading locations");
    if (rc < 0)
      return damaged(err, &in, "a location code the reader knows with another description");
  }
  if (mt_bytes_reader_left(&in))
    return damaged(err, &in, "unexpected bytes after the last code");
  return MT_OK;
}

static int load_mtf(mt_reader *r, mt_bytes_reader *in, domain_state *d, mt_error *err) {
  mt_location_decoder *loc = &d->locations;
  uint8_t files;
  if (!mt_bytes_get_u8(in, &files) || files > MT_MTF_SIZE)
    return damaged(err, in, "bad size of the file move-to-front table");
  for (unsigned i = 0; i < files; i++) {
    mt_mtf_names *names = calloc(1, sizeof *names);
    if (!names)
      return mt_fail(err, MT_E_NOMEM, -1, "out of memory loading the reader's state");
    loc->defnames[i] = names;
    loc->count = (int)i + 1; /* so that the table is freed with the domain */
    uint8_t count;
    if (!(loc->file[i] = get_name(r, in)) || !mt_bytes_get_u8(in, &count) || count > MT_MTF_SIZE)
      return damaged(err, in, "a file move-to-front entry is cut or too large");
    for (unsigned j = 0; j < count; j++) {
      if (!(names->name[j] = get_name(r, in)))
        return damaged(err, in, "a function move-to-front entry is cut");
      names->count = (int)j + 1;
    }
  }
  return MT_OK;
}

static int load_domain(mt_reader *r, mt_bytes_reader *in, domain_state *d, mt_error *err) {
  uint64_t last_time;
  if (!mt_bytes_get_u16(in, &d->id) || !mt_bytes_get_u64(in, &last_time))
    return damaged(err, in, "ends inside a domain");
  d->last_time = (int64_t)last_time;
  int rc = load_mtf(r, in, d, err);
  if (rc)
    return rc;
  uint32_t used;
  if (!mt_bytes_get_u32(in, &used) || used > MT_CACHE_BUCKETS)
    return damaged(err, in, "bad number of backtrace cache buckets");
  if (used && !(d->cache = calloc(1, sizeof *d->cache)))
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory loading the reader's state");
  for (uint32_t i = 0; i < used; i++) {
    uint16_t bucket, next;
    uint64_t code;
    if (!mt_bytes_get_u16(in, &bucket) || !mt_bytes_get_u64(in, &code) ||
        !mt_bytes_get_u16(in, &next))
      return damaged(err, in, "ends inside the backtrace cache");
    /* The decoder indexes the cache with `next`: both must name buckets. */
    if (bucket >= MT_CACHE_BUCKETS || next >= MT_CACHE_BUCKETS)
      return damaged(err, in, "a backtrace cache bucket out of range");
    d->cache->loc[bucket] = (int64_t)code;
    d->cache->next[bucket] = next;
  }
  uint64_t length;
  if (!mt_bytes_get_u64(in, &length) || length > mt_bytes_reader_left(in) / 8 ||
      length > MAX_BACKTRACE_FRAMES)
    return damaged(err, in, "bad length of the previous backtrace");
  if (length) {
    d->backtrace_cap = (size_t)length + FILL_SLACK;
    if (!(d->backtrace = malloc(d->backtrace_cap * sizeof *d->backtrace)))
      return mt_fail(err, MT_E_NOMEM, -1, "out of memory loading the reader's state");
    for (size_t i = 0; i < length; i++)
      mt_bytes_get_i64(in, &d->backtrace[i]);
  }
  d->depth = (size_t)length;
  if (!mt_reader_runs_of_flat(d))
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory loading the reader's state");
  return MT_OK;
}

int mt_reader_load_state(mt_reader *r, const void *data, size_t size, mt_error *err) {
  if (!mt_input_seekable(r->source))
    return mt_fail(err, MT_E_INVALID, -1,
                   "a saved state can only be restored for an uncompressed file or memory");
  if (r->failed) {
    if (err)
      *err = r->failure;
    return r->failed;
  }
  mt_bytes_reader in;
  mt_bytes_reader_init(&in, data, size);
  int rc = expect_header(&in, STATE_MAGIC, err);
  if (rc)
    return rc;
  uint64_t position;
  uint8_t header_len;
  const uint8_t *header;
  if (!mt_bytes_get_u64(&in, &position) || !mt_bytes_get_u8(&in, &header_len) ||
      !mt_bytes_get_data(&in, header_len, &header))
    return damaged(err, &in, "ends inside the position");
  /* The trace must hold, at the position, the very header that followed when the state was
   * saved: otherwise this state belongs to another trace (or another version of this one). */
  int64_t trace_size = mt_input_size(r->source);
  if (header_len == 0 || position > (uint64_t)trace_size ||
      (uint64_t)trace_size - position < header_len)
    return damaged(err, &in, "the position is outside the trace");
  int64_t back = mt_input_position(r->source);
  mt_input_seek(r->source, (int64_t)position);
  size_t got;
  mt_error e;
  const uint8_t *at = mt_input_peek(r->source, header_len, &got, &e);
  bool same = at && got == header_len && !memcmp(at, header, header_len);
  mt_input_seek(r->source, back);
  if (!same)
    return damaged(err, &in, "the trace does not hold the saved packet header at the position");

  uint32_t ndomains;
  if (!mt_bytes_get_u32(&in, &ndomains) || ndomains > 65536 ||
      ndomains > mt_bytes_reader_left(&in) / 16)
    return damaged(err, &in, "bad number of domains");
  /* The bound the reader itself keeps: no more decoder state than reading up to the position
   * could have made. */
  if (ndomains * DOMAIN_COST > mt_reader_domain_memory_allowed((int64_t)position))
    return damaged(err, &in, "more domains than the trace up to the position could hold");
  domain_state **domains = calloc(ndomains ? ndomains : 1, sizeof *domains);
  if (!domains)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory loading the reader's state");
  size_t loaded = 0;
  for (; loaded < ndomains && rc == MT_OK; loaded++) {
    if (!(domains[loaded] = calloc(1, sizeof **domains))) {
      rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory loading the reader's state");
      break;
    }
    rc = load_domain(r, &in, domains[loaded], err);
    for (size_t j = 0; rc == MT_OK && j < loaded; j++)
      if (domains[j]->id == domains[loaded]->id)
        rc = damaged(err, &in, "a domain saved twice");
  }
  if (rc == MT_OK && mt_bytes_reader_left(&in))
    rc = damaged(err, &in, "unexpected bytes after the last domain");
  if (rc) {
    for (size_t i = 0; i < ndomains; i++)
      if (domains[i])
        mt_reader_free_domain(domains[i]);
    free(domains);
    return rc;
  }
  for (size_t i = 0; i < r->ndomains; i++)
    mt_reader_free_domain(r->domains[i]);
  free(r->domains);
  r->domains = domains;
  r->ndomains = ndomains;
  r->domain_memory = ndomains * DOMAIN_COST;
  r->domain = NULL;
  r->in_packet = false;
  mt_reader_stop_fast(r);
  r->done = false;
  mt_input_seek(r->source, (int64_t)position);
  r->read_from = (int64_t)position;
  return MT_OK;
}

/* --- marks -------------------------------------------------------------------------------- */

struct mt_reader_mark {
  void *state;
  size_t state_size;
  size_t locations; /* codes known */
  int64_t packets_end;
  uint64_t warnings;
  bool truncated;
  int64_t truncated_at;
};

int mt_reader_mark_take(mt_reader *r, mt_reader_mark **mark, mt_error *err) {
  *mark = calloc(1, sizeof **mark);
  if (!*mark)
    return mt_fail(err, MT_E_NOMEM, -1, "out of memory marking the reader's place");
  int rc = mt_reader_save_state(r, &(*mark)->state, &(*mark)->state_size, err);
  if (rc) {
    free(*mark);
    *mark = NULL;
    return rc;
  }
  (*mark)->locations = mt_location_table_count(r->locations);
  (*mark)->packets_end = r->packets_end;
  (*mark)->warnings = r->warnings;
  (*mark)->truncated = r->truncated;
  (*mark)->truncated_at = r->truncated_at;
  return MT_OK;
}

int mt_reader_rewind(mt_reader *r, const mt_reader_mark *mark, mt_error *err) {
  /* The packets read since the reader last began reading on had their warnings reported; with
   * those of an earlier rewind when the two meet. */
  int64_t from = r->read_from, to = mt_input_position(r->source);
  if (r->quiet_from < r->quiet_to && from <= r->quiet_to && r->quiet_from <= to) {
    from = from < r->quiet_from ? from : r->quiet_from;
    to = to > r->quiet_to ? to : r->quiet_to;
  }
  r->quiet_from = from;
  r->quiet_to = to;
  r->failed = 0;
  mt_error e;
  int rc = mt_reader_load_state(r, mark->state, mark->state_size, &e);
  if (rc) { /* a state this reader saved: only memory can fail */
    r->failed = rc;
    r->failure = e;
    if (err)
      *err = e;
    return rc;
  }
  mt_location_table_truncate(r->locations, mark->locations);
  r->packets_end = mark->packets_end;
  r->warnings = mark->warnings;
  r->truncated = mark->truncated;
  r->truncated_at = mark->truncated_at;
  return MT_OK;
}

void mt_reader_mark_free(mt_reader_mark *mark) {
  if (!mark)
    return;
  free(mark->state);
  free(mark);
}
