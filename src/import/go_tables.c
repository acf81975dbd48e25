/* Reading the table batches of a Go trace generation (go_tables.h). */
#include "import/go_tables.h"

#include <stdlib.h>
#include <string.h>

#include "import/go_events.h"

/* Alloc/free experimental batches start with one of these bytes. */
enum { ALLOCFREE_TYPES = 0, ALLOCFREE_INFO = 1 };

static void reset_map(mt_hashmap *m) {
  if (m->cap && m->count == 0 && m->used == 0)
    return;
  mt_hashmap_free(m);
  *m = (mt_hashmap){.seed = mt_hashmap_random_seed()};
}

void go_tables_free(go_tables *t) {
  mt_hashmap_free(&t->strings);
  mt_hashmap_free(&t->stacks);
  mt_hashmap_free(&t->types);
  free(t->type);
  memset(t, 0, sizeof *t);
}

const go_type *go_tables_type(const go_tables *t, uint64_t id) {
  uint64_t index;
  if (id == 0 || !mt_hashmap_get(&t->types, (int64_t)id, &index))
    return NULL;
  return &t->type[index];
}

static go_cursor batch_cursor(const go_generation *g, const go_batch *b) {
  return go_cursor_make(g->data.data + b->offset, b->size, b->file_offset);
}

static int bad_varint(go_cursor *c, const char *what, mt_error *err) {
  return go_fail(err, go_cursor_offset(c), "%s in %s",
                 go_cursor_left(c) < 10 ? "the batch ends inside a number" : "bad varint", what);
}

/* Strings: Strings, then String events [id, length, bytes]. */
static int read_strings(go_tables *t, go_cursor *c, mt_error *err) {
  c->p++; /* the Strings byte */
  while (c->p < c->end) {
    int64_t at = go_cursor_offset(c);
    if (*c->p++ != GO_EV_STRING)
      return go_fail(err, at, "a strings batch holds event type %u", c->p[-1]);
    uint64_t id, len;
    if (!go_uvarint(c, &id) || !go_uvarint(c, &len))
      return bad_varint(c, "a string", err);
    if (len > GO_MAX_STRING_SIZE)
      return go_fail(err, at, "string of %llu bytes, more than %d", (unsigned long long)len,
                     GO_MAX_STRING_SIZE);
    if (len > go_cursor_left(c))
      return go_fail(err, go_cursor_offset(c), "string of %llu bytes runs past its batch",
                     (unsigned long long)len);
    c->p += len;
    if (mt_hashmap_get(&t->strings, (int64_t)id, NULL))
      return go_fail(err, at, "string id %llu defined twice", (unsigned long long)id);
    if (!mt_hashmap_put(&t->strings, (int64_t)id, 1))
      return go_nomem(err);
    t->records++;
  }
  return MT_OK;
}

/* Stacks: Stacks, then Stack events [id, nframes, nframes x {pc, function, file, line}], the
 * function and file being string ids. */
static int read_stacks(go_tables *t, go_cursor *c, mt_error *err) {
  c->p++; /* the Stacks byte */
  while (c->p < c->end) {
    int64_t at = go_cursor_offset(c);
    if (*c->p++ != GO_EV_STACK)
      return go_fail(err, at, "a stacks batch holds event type %u", c->p[-1]);
    uint64_t id, n;
    if (!go_uvarint(c, &id) || !go_uvarint(c, &n))
      return bad_varint(c, "a stack", err);
    if (n > GO_MAX_FRAMES)
      return go_fail(err, at, "stack of %llu frames, more than %d", (unsigned long long)n,
                     GO_MAX_FRAMES);
    for (uint64_t i = 0; i < n; i++) {
      uint64_t pc, function, file, line;
      int64_t frame_at = go_cursor_offset(c);
      if (!go_uvarint(c, &pc) || !go_uvarint(c, &function) || !go_uvarint(c, &file) ||
          !go_uvarint(c, &line))
        return bad_varint(c, "a stack frame", err);
      if (!go_tables_has_string(t, function) || !go_tables_has_string(t, file))
        return go_fail(err, frame_at, "stack %llu names string %llu, which the trace lacks",
                       (unsigned long long)id,
                       (unsigned long long)(go_tables_has_string(t, function) ? file : function));
    }
    if (mt_hashmap_get(&t->stacks, (int64_t)id, NULL))
      return go_fail(err, at, "stack id %llu defined twice", (unsigned long long)id);
    if (!mt_hashmap_put(&t->stacks, (int64_t)id, 1))
      return go_nomem(err);
    t->records++;
  }
  return MT_OK;
}

/* CPU samples: CPUSamples, then CPUSample events [time, m, p, g, stack]. */
static int read_cpu_samples(go_tables *t, go_cursor *c, mt_error *err) {
  c->p++;
  while (c->p < c->end) {
    int64_t at = go_cursor_offset(c);
    if (*c->p++ != GO_EV_CPU_SAMPLE)
      return go_fail(err, at, "a CPU samples batch holds event type %u", c->p[-1]);
    uint64_t v[5];
    for (int i = 0; i < 5; i++)
      if (!go_uvarint(c, &v[i]))
        return bad_varint(c, "a CPU sample", err);
    if (!go_tables_has_stack(t, v[4]))
      return go_fail(err, at, "CPU sample names stack %llu, which the trace lacks",
                     (unsigned long long)v[4]);
    t->records++;
  }
  return MT_OK;
}

static int set_frequency(go_tables *t, go_cursor *c, int64_t at, mt_error *err) {
  uint64_t f;
  if (!go_uvarint(c, &f))
    return bad_varint(c, "the frequency", err);
  if (t->frequency)
    return go_fail(err, at, "a second frequency in one generation");
  if (f == 0)
    return go_fail(err, at, "frequency 0");
  t->frequency = f;
  t->records++;
  return MT_OK;
}

/* Go 1.23/1.24: a batch holding one Frequency event [ticks per second]. Go 1.25: a Sync batch of
 * Frequency and ClockSnapshot [dt, monotonic ns, wall s, wall ns] events. */
static int read_sync(go_tables *t, go_cursor *c, int version, uint64_t batch_time, mt_error *err) {
  if (version < 25) {
    int64_t at = go_cursor_offset(c);
    c->p++;
    int rc = set_frequency(t, c, at, err);
    if (!rc && c->p != c->end)
      return go_fail(err, go_cursor_offset(c), "bytes after the frequency in its batch");
    return rc;
  }
  c->p++; /* the Sync byte */
  while (c->p < c->end) {
    int64_t at = go_cursor_offset(c);
    uint8_t type = *c->p++;
    if (type == GO_EV_FREQUENCY) {
      int rc = set_frequency(t, c, at, err);
      if (rc)
        return rc;
    } else if (type == GO_EV_CLOCK_SNAPSHOT) {
      uint64_t dt, mono, sec, nsec;
      if (!go_uvarint(c, &dt) || !go_uvarint(c, &mono) || !go_uvarint(c, &sec) ||
          !go_uvarint(c, &nsec))
        return bad_varint(c, "a clock snapshot", err);
      if (nsec >= 1000000000 || sec > (uint64_t)INT64_MAX / 2000000 || dt > UINT64_MAX - batch_time)
        return go_fail(err, at, "clock snapshot out of range");
      if (!t->have_clock) {
        t->have_clock = true;
        t->clock_time = batch_time + dt;
        t->clock_sec = sec;
        t->clock_nsec = nsec;
      }
      t->records++;
    } else {
      return go_fail(err, at, "a sync batch holds event type %u", type);
    }
  }
  return MT_OK;
}

/* Types: {id, type address, size, pointer bytes, name length, name} records. */
static int read_types(go_tables *t, go_cursor *c, mt_error *err) {
  c->p++;
  while (c->p < c->end) {
    int64_t at = go_cursor_offset(c);
    uint64_t id, address, size, ptr_bytes, len;
    if (!go_uvarint(c, &id) || !go_uvarint(c, &address) || !go_uvarint(c, &size) ||
        !go_uvarint(c, &ptr_bytes) || !go_uvarint(c, &len))
      return bad_varint(c, "a type", err);
    if (len > go_cursor_left(c))
      return go_fail(err, go_cursor_offset(c), "type name of %llu bytes runs past its batch",
                     (unsigned long long)len);
    if (id == 0 || mt_hashmap_get(&t->types, (int64_t)id, NULL))
      return go_fail(err, at, "type id %llu %s", (unsigned long long)id,
                     id ? "defined twice" : "is reserved");
    if (ptr_bytes > size)
      return go_fail(err, at, "type with %llu pointer bytes in %llu bytes",
                     (unsigned long long)ptr_bytes, (unsigned long long)size);
    if (t->ntypes == t->types_cap) {
      size_t cap = t->types_cap ? t->types_cap * 2 : 64;
      go_type *nt = realloc(t->type, cap * sizeof *nt);
      if (!nt)
        return go_nomem(err);
      t->type = nt;
      t->types_cap = cap;
    }
    t->type[t->ntypes] = (go_type){(const char *)c->p, (uint32_t)len, size};
    if (!mt_hashmap_put(&t->types, (int64_t)id, t->ntypes))
      return go_nomem(err);
    t->ntypes++;
    c->p += len;
    t->records++;
  }
  return MT_OK;
}

static bool power_of_two(uint64_t v) {
  return v && !(v & (v - 1));
}

/* Reads one field of the alloc/free info batch, noting where it starts. */
static bool info_field(go_cursor *c, uint64_t *value, int64_t *at) {
  *at = go_cursor_offset(c);
  return go_uvarint(c, value);
}

/* Info: min heap address, page size, min heap alignment, fixed stack size. Each is checked where
 * it is, against what Go's runtime can have written: ids are computed from them (docs/go.md). */
static int read_info(go_info *info, go_cursor *c, mt_error *err) {
  int64_t at = go_cursor_offset(c), page_at, align_at, stack_at, ignored;
  c->p++;
  go_info in = {.present = true};
  if (!info_field(c, &in.min_heap, &ignored) || !info_field(c, &in.page_size, &page_at) ||
      !info_field(c, &in.heap_align, &align_at) || !info_field(c, &in.fixed_stack, &stack_at))
    return bad_varint(c, "the alloc/free info batch", err);
  if (c->p != c->end)
    return go_fail(err, go_cursor_offset(c), "bytes after the alloc/free info");
  if (!power_of_two(in.page_size) || in.page_size < 512 || in.page_size > (1u << 20))
    return go_fail(err, page_at,
                   "the alloc/free info's page size is %llu, expected a power of two from 512 to "
                   "1048576",
                   (unsigned long long)in.page_size);
  if (!power_of_two(in.heap_align) || in.heap_align > in.page_size)
    return go_fail(err, align_at,
                   "the alloc/free info's heap alignment is %llu, expected a power of two no "
                   "larger than its page size (%llu)",
                   (unsigned long long)in.heap_align, (unsigned long long)in.page_size);
  if (!power_of_two(in.fixed_stack) || in.fixed_stack > (1u << 30))
    return go_fail(err, stack_at,
                   "the alloc/free info's fixed stack size is %llu, expected a power of two up "
                   "to 1073741824",
                   (unsigned long long)in.fixed_stack);
  if (info->present && memcmp(info, &in, sizeof in))
    return go_fail(err, at, "a second alloc/free info batch that disagrees with the first");
  *info = in;
  return MT_OK;
}

static go_batch_kind classify(const go_batch *b, const uint8_t *data, int version) {
  if (b->experiment)
    return GO_BATCH_EXPERIMENT;
  if (b->size == 0)
    return GO_BATCH_EVENTS;
  switch (data[0]) {
  case GO_EV_STRINGS: return GO_BATCH_STRINGS;
  case GO_EV_STACKS: return GO_BATCH_STACKS;
  case GO_EV_CPU_SAMPLES: return GO_BATCH_CPU_SAMPLES;
  case GO_EV_FREQUENCY: return version < 25 ? GO_BATCH_SYNC : GO_BATCH_EVENTS;
  case GO_EV_SYNC: return version >= 25 ? GO_BATCH_SYNC : GO_BATCH_EVENTS;
  default: return GO_BATCH_EVENTS;
  }
}

int go_tables_read(go_tables *t, go_generation *g, int version, go_info *info, mt_error *err) {
  reset_map(&t->strings);
  reset_map(&t->stacks);
  reset_map(&t->types);
  t->ntypes = 0;
  t->frequency = 0;
  t->have_clock = false;
  for (size_t i = 0; i < g->nbatches; i++) {
    go_batch *b = &g->batches[i];
    b->kind = (uint8_t)classify(b, g->data.data + b->offset, version);
  }
  /* Strings first: stacks name them. Then stacks: samples name them. */
  static const go_batch_kind order[] = {GO_BATCH_STRINGS, GO_BATCH_STACKS, GO_BATCH_SYNC,
                                        GO_BATCH_EXPERIMENT, GO_BATCH_CPU_SAMPLES};
  for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
    for (size_t i = 0; i < g->nbatches; i++) {
      const go_batch *b = &g->batches[i];
      if (b->kind != order[k])
        continue;
      go_cursor c = batch_cursor(g, b);
      int rc = MT_OK;
      switch (order[k]) {
      case GO_BATCH_STRINGS: rc = read_strings(t, &c, err); break;
      case GO_BATCH_STACKS: rc = read_stacks(t, &c, err); break;
      case GO_BATCH_SYNC: rc = read_sync(t, &c, version, b->time, err); break;
      case GO_BATCH_CPU_SAMPLES: rc = read_cpu_samples(t, &c, err); break;
      case GO_BATCH_EXPERIMENT:
        if (b->experiment != GO_EXPERIMENT_ALLOC_FREE || b->size == 0)
          break; /* another experiment's bag of bytes: not ours to read */
        if (c.p[0] == ALLOCFREE_TYPES)
          rc = read_types(t, &c, err);
        else if (c.p[0] == ALLOCFREE_INFO)
          rc = read_info(info, &c, err);
        else
          rc = go_fail(err, b->file_offset, "alloc/free batch of unknown kind %u", c.p[0]);
        break;
      default: break;
      }
      if (rc)
        return rc;
    }
  }
  if (!t->frequency)
    return go_fail(err, g->file_offset, "generation %llu has no frequency",
                   (unsigned long long)g->number);
  return MT_OK;
}
