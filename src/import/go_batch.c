/* Reading a Go trace generation by generation (go_batch.h). */
#include "import/go_batch.h"

#include <stdlib.h>
#include <string.h>

#include "format/input.h"
#include "import/go_events.h"

int go_framer_init(go_framer *f, struct mt_input *in, mt_error *err) {
  memset(f, 0, sizeof *f);
  f->in = in;
  size_t got;
  const uint8_t *h = mt_input_peek(in, GO_HEADER_SIZE, &got, err);
  if (!h)
    return err ? err->code : MT_E_IO;
  int rc = go_header_parse(h, got, &f->version, err);
  if (rc)
    return rc;
  mt_input_advance(in, GO_HEADER_SIZE);
  return MT_OK;
}

void go_framer_free(go_framer *f) {
  go_bytes_free(&f->spill_data);
}

void go_generation_free(go_generation *g) {
  go_bytes_free(&g->data);
  free(g->batches);
  memset(g, 0, sizeof *g);
}

/* Reads one batch header and its data, the data appended to `into`. Returns 1, 0 at the end of
 * the input (nothing left), or an error. */
static int read_batch(go_framer *f, go_batch *b, uint64_t *generation, go_bytes *into,
                      int64_t *header_offset, mt_error *err) {
  int64_t at = mt_input_position(f->in);
  *header_offset = at;
  size_t got;
  const uint8_t *h = mt_input_peek(f->in, 2 + 4 * 10, &got, err);
  if (!h)
    return err ? err->code : MT_E_IO;
  if (got == 0)
    return 0;
  go_cursor c = go_cursor_make(h, got, at);
  uint8_t type = *c.p++;
  b->experiment = 0;
  if (type == GO_EV_EXPERIMENTAL_BATCH) {
    if (c.p == c.end)
      return go_fail(err, go_cursor_offset(&c), "the file ends inside a batch header");
    b->experiment = *c.p++;
    if (b->experiment == 0)
      return go_fail(err, at + 1, "experimental batch of experiment 0");
  } else if (type != GO_EV_EVENT_BATCH) {
    char name[16];
    return go_fail(err, at, "expected a batch, found event %s",
                   go_event_name(f->version, type, name));
  }
  uint64_t size;
  if (!go_uvarint(&c, generation) || !go_uvarint(&c, &b->m) || !go_uvarint(&c, &b->time) ||
      !go_uvarint(&c, &size))
    return go_fail(err, go_cursor_offset(&c),
                   got < 2 + 4 * 10 ? "the file ends inside a batch header"
                                    : "bad varint in a batch header");
  if (size > GO_MAX_BATCH_SIZE)
    return go_fail(err, go_cursor_offset(&c), "batch of %llu bytes, more than the %d a batch holds",
                   (unsigned long long)size, GO_MAX_BATCH_SIZE);
  if (*generation == 0)
    return go_fail(err, at + 1 + (b->experiment != 0), "generation number 0");
  size_t header = (size_t)(c.p - h);
  mt_input_advance(f->in, header);
  b->file_offset = at + (int64_t)header;
  b->size = (uint32_t)size;
  if (!go_bytes_reserve(into, size))
    return go_nomem(err);
  if (size) {
    const uint8_t *d = mt_input_peek(f->in, size, &got, err);
    if (!d)
      return err ? err->code : MT_E_IO;
    if (got < size)
      return go_fail(err, b->file_offset + (int64_t)got,
                     "the file ends inside a batch: %zu of its %llu bytes are there", got,
                     (unsigned long long)size);
    memcpy(into->data + into->len, d, size);
    mt_input_advance(f->in, size);
  }
  b->offset = into->len;
  into->len += size;
  return 1;
}

static int add_batch(go_generation *g, const go_batch *b) {
  if (g->nbatches == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 64;
    go_batch *nb = realloc(g->batches, cap * sizeof *nb);
    if (!nb)
      return MT_E_NOMEM;
    g->batches = nb;
    g->cap = cap;
  }
  g->batches[g->nbatches++] = *b;
  if (g->nbatches == 1 || b->time < g->min_time)
    g->min_time = b->time;
  return MT_OK;
}

int go_framer_next(go_framer *f, go_generation *g, mt_error *err) {
  g->data.len = 0;
  g->nbatches = 0;
  g->number = 0;
  g->min_time = 0;
  g->damaged = false;
  if (f->deferred) {
    int rc = f->deferred;
    f->deferred = 0;
    if (err)
      *err = f->deferred_error;
    return rc;
  }
  if (f->have_spill) {
    f->have_spill = false;
    if (!go_bytes_reserve(&g->data, f->spill_data.len))
      return go_nomem(err);
    memcpy(g->data.data, f->spill_data.data, f->spill_data.len);
    g->data.len = f->spill_data.len;
    f->spill.offset = 0;
    g->number = f->spill_generation;
    g->file_offset = f->spill_header_offset;
    if (add_batch(g, &f->spill))
      return go_nomem(err);
  } else if (f->done) {
    return 0;
  }
  for (;;) {
    go_batch b;
    uint64_t gen = 0;
    int64_t header_offset;
    size_t mark = g->data.len;
    int rc = read_batch(f, &b, &gen, &g->data, &header_offset, err);
    if (rc < 0 && g->nbatches && rc == MT_E_MALFORMED) {
      f->deferred = rc;
      f->deferred_error = err ? *err : (mt_error){0};
      f->deferred_error.code = rc;
      g->data.len = mark;
      g->damaged = true;
      return 1;
    }
    if (rc < 0)
      return rc;
    if (rc == 0) {
      f->done = true;
      return g->nbatches ? 1 : 0;
    }
    if (g->nbatches == 0) {
      g->number = gen;
      g->file_offset = header_offset;
    }
    if (gen != g->number) {
      if (gen != g->number + 1)
        return go_fail(err, header_offset + 1, "generation %llu follows generation %llu",
                       (unsigned long long)gen, (unsigned long long)g->number);
      /* The first batch of the next generation: keep it for the next call. */
      f->spill_data.len = 0;
      if (!go_bytes_reserve(&f->spill_data, b.size))
        return go_nomem(err);
      memcpy(f->spill_data.data, g->data.data + mark, b.size);
      f->spill_data.len = b.size;
      g->data.len = mark;
      f->spill = b;
      f->spill_generation = gen;
      f->spill_header_offset = header_offset;
      f->have_spill = true;
      return 1;
    }
    if (add_batch(g, &b))
      return go_nomem(err);
  }
}
