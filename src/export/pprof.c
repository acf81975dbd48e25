/* The pprof export: a profile.proto message, gzip-compressed, for `go tool pprof`, Pyroscope and
 * Parca. The protobuf encoding is written by hand (varints and length-delimited fields, writing
 * only): the profile needs six message types, which is less code than a generator and a runtime
 * library. Field numbers are those of the published profile.proto:
 *   Profile: 1 sample_type, 2 sample, 3 mapping, 4 location, 5 function, 6 string_table,
 *            9 time_nanos, 10 duration_nanos, 11 period_type, 12 period, 14 default_sample_type
 *   ValueType: 1 type, 2 unit            Sample: 1 location_id (packed), 2 value (packed)
 *   Mapping: 1 id, 2 memory_start, 3 memory_limit, 5 filename, 7 has_functions,
 *            8 has_filenames, 9 has_line_numbers, 10 has_inline_frames
 *   Location: 1 id, 2 mapping_id, 4 line   Line: 1 function_id, 2 line
 *   Function: 1 id, 2 name, 3 system_name, 4 filename */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/error.h"
#include "common/hashmap.h"
#include "export/export_internal.h"

typedef struct pb {
  uint8_t *data;
  size_t len, cap;
  bool failed;
} pb;

static void pb_bytes(pb *b, const void *p, size_t n) {
  if (b->failed)
    return;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n)
      cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) {
      b->failed = true;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

static void pb_varint(pb *b, uint64_t v) {
  uint8_t buf[10];
  size_t n = 0;
  do {
    buf[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
    v >>= 7;
  } while (v);
  pb_bytes(b, buf, n);
}

static void pb_int(pb *b, unsigned field, uint64_t v) { /* varint field (wire type 0) */
  if (!v)
    return; /* proto3: zero is the default and is not written */
  pb_varint(b, (uint64_t)field << 3);
  pb_varint(b, v);
}

static void pb_len(pb *b, unsigned field, const void *p, size_t n) { /* wire type 2 */
  pb_varint(b, (uint64_t)field << 3 | 2);
  pb_varint(b, n);
  pb_bytes(b, p, n);
}

static void pb_message(pb *b, unsigned field, pb *m) {
  if (m->failed)
    b->failed = true;
  pb_len(b, field, m->data, m->len);
  m->len = 0;
}

/* The string table: index 0 is "". */
typedef struct strings {
  const char **list;
  size_t count, cap;
  mt_hashmap index; /* content hash (+ probe) -> index */
} strings;

static int64_t string_index(strings *s, const char *str) {
  uint64_t h = 1469598103934665603u;
  for (const char *c = str; *c; c++)
    h = (h ^ (uint8_t)*c) * 1099511628211u;
  uint64_t i;
  for (;; h++) {
    if (!mt_hashmap_get(&s->index, (int64_t)h, &i))
      break;
    if (!strcmp(s->list[i], str))
      return (int64_t)i;
  }
  if (s->count == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    const char **l = realloc(s->list, cap * sizeof *l);
    if (!l)
      return -1;
    s->list = l;
    s->cap = cap;
  }
  if (!mt_hashmap_put(&s->index, (int64_t)h, s->count))
    return -1;
  s->list[s->count] = str;
  return (int64_t)s->count++;
}

typedef struct pprof {
  pb out, msg, sub;
  strings str;
  mt_hashmap functions; /* name index << 32 | file index -> function id */
  uint64_t nfunctions;
  mt_hashmap locations; /* hash of the frame run (+ probe) -> location id */
  uint32_t *loc_frames; /* frames of each location, outermost first */
  size_t *loc_start;    /* loc_start[id-1] .. loc_start[id] */
  size_t nloc, loc_cap, nframes, frames_cap;
  bool failed;
} pprof;

static uint64_t function_id(pprof *p, const mt_analysis *a, uint32_t frame) {
  mt_frame f = mt_analysis_frame(a, frame);
  int64_t name = string_index(&p->str, f.function), file = string_index(&p->str, f.file);
  if (name < 0 || file < 0) {
    p->failed = true;
    return 0;
  }
  int64_t key = name << 32 | file;
  uint64_t id;
  if (mt_hashmap_get(&p->functions, key, &id))
    return id;
  id = ++p->nfunctions;
  if (!mt_hashmap_put(&p->functions, key, id))
    p->failed = true;
  pb_int(&p->sub, 1, id);
  pb_int(&p->sub, 2, (uint64_t)name);
  pb_int(&p->sub, 3, (uint64_t)name);
  pb_int(&p->sub, 4, (uint64_t)file);
  pb_message(&p->out, 5, &p->sub);
  return id;
}

/* The location of frames[0..n) (one return address: frames 1.. were inlined into frame 0). */
static uint64_t location_id(pprof *p, const mt_analysis *a, const uint32_t *frames, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15u * (n + 1);
  for (size_t i = 0; i < n; i++)
    h = mt_hash64(h ^ frames[i]);
  uint64_t id;
  for (;; h++) {
    if (!mt_hashmap_get(&p->locations, (int64_t)h, &id))
      break;
    size_t s = p->loc_start[id - 1], e = p->loc_start[id];
    if (e - s == n && !memcmp(p->loc_frames + s, frames, n * sizeof *frames))
      return id;
  }
  if (p->nloc + 2 > p->loc_cap) {
    size_t cap = p->loc_cap ? p->loc_cap * 2 : 1024;
    size_t *l = realloc(p->loc_start, cap * sizeof *l);
    if (!l)
      return p->failed = true, 0;
    p->loc_start = l;
    p->loc_cap = cap;
  }
  if (p->nframes + n > p->frames_cap) {
    size_t cap = p->frames_cap ? p->frames_cap * 2 : 4096;
    while (cap < p->nframes + n)
      cap *= 2;
    uint32_t *f = realloc(p->loc_frames, cap * sizeof *f);
    if (!f)
      return p->failed = true, 0;
    p->loc_frames = f;
    p->frames_cap = cap;
  }
  if (p->nloc == 0)
    p->loc_start[0] = 0;
  memcpy(p->loc_frames + p->nframes, frames, n * sizeof *frames);
  p->nframes += n;
  id = ++p->nloc;
  p->loc_start[id] = p->nframes;
  if (!mt_hashmap_put(&p->locations, (int64_t)h, id))
    p->failed = true;
  /* Functions first (they are separate top-level messages), then the location. */
  uint64_t fids[256];
  for (size_t i = 0; i < n && i < 256; i++)
    fids[i] = function_id(p, a, frames[i]);
  pb_int(&p->msg, 1, id);
  pb_int(&p->msg, 2, 1);
  for (size_t i = n; i-- > 0;) { /* Line: the most deeply inlined first, the caller last */
    if (i >= 256)
      continue;
    pb_int(&p->sub, 1, fids[i]);
    pb_int(&p->sub, 2, (uint64_t)(int64_t)mt_analysis_frame(a, frames[i]).line);
    pb_message(&p->msg, 4, &p->sub);
  }
  pb_message(&p->out, 4, &p->msg);
  return id;
}

static void value_type(pprof *p, unsigned field, const char *type, const char *unit) {
  pb_int(&p->sub, 1, (uint64_t)string_index(&p->str, type));
  pb_int(&p->sub, 2, (uint64_t)string_index(&p->str, unit));
  pb_message(&p->out, field, &p->sub);
}

static int write_gzip(FILE *out, const uint8_t *data, size_t len, mt_error *err) {
  z_stream z = {0};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return mt_fail(err, MT_E_NOMEM, -1, "cannot start gzip compression");
  uint8_t buf[65536];
  z.next_in = (Bytef *)data;
  z.avail_in = (uInt)len;
  int zrc;
  do {
    z.next_out = buf;
    z.avail_out = sizeof buf;
    zrc = deflate(&z, Z_FINISH);
    if (zrc == Z_STREAM_ERROR)
      break;
    fwrite(buf, 1, sizeof buf - z.avail_out, out);
  } while (zrc != Z_STREAM_END);
  deflateEnd(&z);
  if (zrc != Z_STREAM_END)
    return mt_fail(err, MT_E_NOMEM, -1, "gzip compression failed");
  return MT_OK;
}

static void packed(pb *b, unsigned field, const uint64_t *v, size_t n, pb *tmp) {
  for (size_t i = 0; i < n; i++)
    pb_varint(tmp, v[i]);
  pb_message(b, field, tmp);
}

int mt_export_pprof(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err) {
  const mt_summary *s = mt_analysis_summary(a);
  pprof p = {0};
  pb tmp = {0};
  int rc = MT_OK;
  size_t n = mt_analysis_stack_count(a);
  bool at_peak = o->inuse_at_peak;
  bool *keep;
  if ((rc = mt_export_focus(a, o, &keep, err)))
    return rc;
  int64_t *alloc_space = mt_export_stack_values(a, MT_METRIC_BYTES, keep);
  int64_t *inuse_space = mt_export_stack_values(a, at_peak ? MT_METRIC_PEAK : MT_METRIC_LIVE, keep);
  int64_t *alloc_objects = mt_export_stack_objects(a, false, at_peak, keep);
  int64_t *inuse_objects = mt_export_stack_objects(a, true, at_peak, keep);
  free(keep);
  uint64_t *ids = malloc(4096 * sizeof *ids);
  size_t ids_cap = 4096;
  if (string_index(&p.str, "") != 0 || !alloc_space || !inuse_space || !alloc_objects ||
      !inuse_objects || !ids) {
    rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
    goto done;
  }
  value_type(&p, 1, "alloc_objects", "count");
  value_type(&p, 1, "alloc_space", "bytes");
  value_type(&p, 1, "inuse_objects", "count");
  value_type(&p, 1, "inuse_space", "bytes");
  /* One mapping for the whole program, marked as symbolised so that pprof does not try to. */
  pb_int(&p.sub, 1, 1);
  pb_int(&p.sub, 5, (uint64_t)string_index(&p.str, s->info.executable_name));
  for (unsigned f = 7; f <= 10; f++)
    pb_int(&p.sub, f, 1);
  pb_message(&p.out, 3, &p.sub);
  for (size_t i = 0; i < n; i++) {
    uint64_t values[4] = {(uint64_t)alloc_objects[i], (uint64_t)alloc_space[i],
                          (uint64_t)inuse_objects[i], (uint64_t)inuse_space[i]};
    if (!values[0] && !values[1] && !values[2] && !values[3])
      continue;
    size_t depth;
    const bool *inlined;
    const uint32_t *frames = mt_analysis_stack_frames(a, i, &depth, &inlined);
    size_t nids = 0;
    if (depth + 1 > ids_cap) {
      uint64_t *q = realloc(ids, (depth + 1) * sizeof *q);
      if (!q) {
        rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
        goto done;
      }
      ids = q;
      ids_cap = depth + 1;
    }
    /* Locations innermost first, as pprof wants them; each is a frame and the frames inlined in
     * it. The frames buffer is borrowed: copy the runs before the next stack call. */
    size_t end = depth;
    while (end > 0) {
      size_t start = end - 1;
      while (start > 0 && inlined[start])
        start--;
      uint32_t run[256];
      size_t len = end - start < 256 ? end - start : 256;
      memcpy(run, frames + start, len * sizeof *run);
      ids[nids++] = location_id(&p, a, run, len);
      end = start;
    }
    if (depth == 0) {
      static const uint32_t none = UINT32_MAX; /* "<no backtrace>" */
      ids[nids++] = location_id(&p, a, &none, 1);
    }
    packed(&p.msg, 1, ids, nids, &tmp);
    packed(&p.msg, 2, values, 4, &tmp);
    pb_message(&p.out, 2, &p.msg);
  }
  /* Microseconds to nanoseconds in unsigned arithmetic: a damaged trace's times can be anything,
   * and wrap-around (a nonsense time) is what they get, not undefined behaviour. */
  pb_int(&p.out, 9, ((uint64_t)s->info.start_time + (uint64_t)s->from) * 1000u);
  pb_int(&p.out, 10, ((uint64_t)s->to - (uint64_t)s->from) * 1000u);
  value_type(&p, 11, "space", "bytes");
  pb_int(&p.out, 12, (uint64_t)llround(s->bytes_per_sample));
  pb_int(&p.out, 14, (uint64_t)string_index(&p.str, "alloc_space"));
  for (size_t i = 0; i < p.str.count; i++)
    pb_len(&p.out, 6, p.str.list[i], strlen(p.str.list[i]));
  if (p.failed || p.out.failed || p.msg.failed || p.sub.failed || tmp.failed) {
    rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
    goto done;
  }
  rc = write_gzip(out, p.out.data, p.out.len, err);
done:
  free(alloc_space);
  free(inuse_space);
  free(alloc_objects);
  free(inuse_objects);
  free(ids);
  free(p.out.data);
  free(p.msg.data);
  free(p.sub.data);
  free(tmp.data);
  free(p.str.list);
  mt_hashmap_free(&p.str.index);
  mt_hashmap_free(&p.functions);
  mt_hashmap_free(&p.locations);
  free(p.loc_frames);
  free(p.loc_start);
  return rc;
}
