/* Saving and restoring the reader's decoder state between packets (format.h, "Checkpoints"): a
 * reader restored from any saved state reads exactly the events that followed it, with the same
 * backtraces and location lookups, on real traces (v1, v2, v3) and on a generated multi-domain
 * trace; a state of another trace, a damaged state, or a reader that cannot seek is refused; a
 * reader taken back to a mark reads as if it had never moved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/buf.h"
#include "testutil.h"
#include "tracegen.h"

#define MAX_CHECKPOINTS 48

typedef struct checkpoint {
  size_t events_before; /* events returned before it */
  void *state, *locations;
  size_t state_size, locations_size;
} checkpoint;

typedef struct saved {
  checkpoint c[MAX_CHECKPOINTS];
  size_t count;
} saved;

static void free_saved(saved *s) {
  for (size_t i = 0; i < s->count; i++) {
    free(s->c[i].state);
    free(s->c[i].locations);
  }
}

/* Reads `data` to the end, saving a state at every `every`-th packet boundary (at most
 * MAX_CHECKPOINTS), and checks that saving changed nothing that was read. */
static void save_along(const uint8_t *data, size_t size, size_t every, saved *out,
                       const tg_event *all, size_t nall) {
  mt_reader *r;
  mt_error err;
  mt_reader_options o = {.backtraces = true};
  assert_int_equal(mt_reader_open_memory(&r, data, size, &o, &err), MT_OK);
  size_t mark = 0, n = 0, boundaries = 0;
  out->count = 0;
  mt_event ev;
  int rc;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
    assert_true(n < nall);
    assert_int_equal(ev.time, all[n].ev.time);
    assert_int_equal(ev.obj_id, all[n].ev.obj_id);
    n++;
    if (!mt_reader_between_packets(r) || ++boundaries % every || out->count == MAX_CHECKPOINTS)
      continue;
    checkpoint *c = &out->c[out->count];
    rc = mt_reader_save_state(r, &c->state, &c->state_size, &err);
    if (rc == MT_E_INVALID) /* the last packet: nothing follows */
      continue;
    assert_int_equal(rc, MT_OK);
    assert_int_equal(mt_reader_save_locations(r, &mark, &c->locations, &c->locations_size, &err),
                     MT_OK);
    c->events_before = n;
    out->count++;
  }
  assert_int_equal(rc, 0);
  assert_int_equal(n, nall);
  mt_reader_close(r);
}

static bool same_locations(const mt_location *a, size_t na, const mt_location *b, size_t nb) {
  if (na != nb)
    return false;
  for (size_t i = 0; i < na; i++)
    if (strcmp(a[i].filename, b[i].filename) || strcmp(a[i].defname, b[i].defname) ||
        a[i].line != b[i].line || a[i].start_char != b[i].start_char ||
        a[i].end_char != b[i].end_char)
      return false;
  return true;
}

/* Restores every checkpoint into a fresh reader and compares what follows with `all`. */
static void resume_each(const uint8_t *data, size_t size, const saved *s, const tg_event *all,
                        size_t nall, mt_reader *full) {
  for (size_t k = 0; k < s->count; k++) {
    mt_reader *r;
    mt_error err;
    mt_reader_options o = {.backtraces = true};
    assert_int_equal(mt_reader_open_memory(&r, data, size, &o, &err), MT_OK);
    for (size_t j = 0; j <= k; j++)
      if (mt_reader_load_locations(r, s->c[j].locations, s->c[j].locations_size, &err))
        fail_msg("checkpoint %zu, locations %zu: %s", k, j, err.message);
    if (mt_reader_load_state(r, s->c[k].state, s->c[k].state_size, &err))
      fail_msg("checkpoint %zu: %s", k, err.message);
    size_t n = s->c[k].events_before;
    mt_event ev;
    int rc;
    while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
      assert_true(n < nall);
      const mt_event *want = &all[n].ev;
      if (ev.kind != want->kind || ev.time != want->time || ev.obj_id != want->obj_id ||
          ev.domain != want->domain || ev.length != want->length || ev.nsamples != want->nsamples ||
          ev.source != want->source || ev.offset != want->offset ||
          ev.backtrace_length != want->backtrace_length)
        fail_msg("checkpoint %zu: event %zu differs", k, n);
      for (size_t i = 0; i < ev.backtrace_length; i++) {
        if (ev.backtrace[i] != all[n].backtrace[i])
          fail_msg("checkpoint %zu: event %zu frame %zu differs", k, n, i);
        const mt_location *a, *b;
        size_t na, nb;
        assert_true(mt_reader_lookup_location(full, ev.backtrace[i], &a, &na));
        if (!mt_reader_lookup_location(r, ev.backtrace[i], &b, &nb) ||
            !same_locations(a, na, b, nb))
          fail_msg("checkpoint %zu: event %zu: code %lld looks up differently", k, n,
                   (long long)ev.backtrace[i]);
      }
      n++;
    }
    if (rc < 0)
      fail_msg("checkpoint %zu: after %zu events: %s", k, n, err.message);
    assert_int_equal(n, nall);
    mt_reader_close(r);
  }
}

static void check_resume(const uint8_t *data, size_t size, size_t every, size_t min_checkpoints) {
  size_t nall;
  mt_reader *full;
  tg_event *all = tg_read_all(data, size, true, &nall, &full);
  saved s;
  save_along(data, size, every, &s, all, nall);
  if (s.count < min_checkpoints)
    fail_msg("only %zu checkpoints were saved", s.count);
  resume_each(data, size, &s, all, nall, full);
  free_saved(&s);
  mt_reader_close(full);
  tg_free_events(all, nall);
}

static void resume_real_trace(const char *name, size_t every, size_t min_checkpoints) {
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata(name), &size);
  check_resume(data, size, every, min_checkpoints);
  free(data);
}

static void reader_resumes_demo_v3_from_every_packet(void **state) {
  (void)state;
  resume_real_trace("memtrace/demo_v3.ctf", 1, 3);
}

static void reader_resumes_ocamlopt_v1_v2_v3(void **state) {
  (void)state;
  resume_real_trace("memtrace/ocamlopt_v1.ctf", 3, 20);
  resume_real_trace("memtrace/ocamlopt_v2.ctf", 1, 3);
  resume_real_trace("memtrace/ocamlopt_v3.ctf", 1, 3);
}

/* Four domains with interleaved packets, shared backtrace prefixes and enough location codes to
 * evict entries from the MTF tables. */
static uint8_t *multi_domain_trace(size_t *size) {
  int fd;
  mt_writer *w = tg_writer(3, 0.01, &fd);
  uint64_t rng = 7;
  int64_t now = TG_START;
  uint64_t stack[64];
  for (int i = 0; i < 20000; i++) {
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    uint16_t domain = (uint16_t)(rng >> 60 & 3);
    now += (int64_t)(rng >> 40 & 1023);
    size_t depth = 1 + (rng >> 20 & 31);
    for (size_t j = 0; j < depth; j++)
      stack[j] = 1 + ((rng >> 8) + j * 977) % 5000;
    int64_t id;
    mt_error err;
    if (mt_writer_put_alloc_in(w, domain, now, (int64_t)(rng >> 50 & 63), 1, MT_SOURCE_MINOR, stack,
                               depth, tg_resolve, NULL, &id, &err))
      fail_msg("put_alloc: %s", err.message);
    if (i % 3 == 0 && mt_writer_put_collect_in(w, domain, now, id, &err))
      fail_msg("put_collect: %s", err.message);
  }
  return tg_finish(w, fd, size);
}

static void reader_resumes_multi_domain_trace(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = multi_domain_trace(&size);
  check_resume(data, size, 2, 10);
  free(data);
}

/* One saved state of demo_v3, halfway through, with the locations described before it. */
static void demo_checkpoint(uint8_t **data, size_t *size, checkpoint *c) {
  *data = tu_read_file(tu_testdata("memtrace/demo_v3.ctf"), size);
  size_t nall;
  tg_event *all = tg_read_all(*data, *size, true, &nall, NULL);
  saved s;
  save_along(*data, *size, 1, &s, all, nall);
  assert_true(s.count >= 3);
  /* One state with every location before it: merge the increments by saving again. */
  mt_reader *r;
  mt_error err;
  mt_reader_options o = {.backtraces = true};
  assert_int_equal(mt_reader_open_memory(&r, *data, *size, &o, &err), MT_OK);
  size_t k = s.count / 2;
  for (size_t j = 0; j <= k; j++)
    assert_int_equal(mt_reader_load_locations(r, s.c[j].locations, s.c[j].locations_size, &err),
                     MT_OK);
  size_t mark = 0;
  assert_int_equal(mt_reader_save_locations(r, &mark, &c->locations, &c->locations_size, &err),
                   MT_OK);
  c->state = s.c[k].state;
  c->state_size = s.c[k].state_size;
  s.c[k].state = NULL;
  c->events_before = s.c[k].events_before;
  mt_reader_close(r);
  free_saved(&s);
  tg_free_events(all, nall);
}

static void reader_refuses_state_of_another_trace(void **state) {
  (void)state;
  uint8_t *demo;
  size_t demo_size;
  checkpoint c;
  demo_checkpoint(&demo, &demo_size, &c);
  size_t size;
  uint8_t *other = tu_read_file(tu_testdata("memtrace/demo_v2.ctf"), &size);
  mt_reader *r;
  mt_error err;
  mt_reader_options o = {.backtraces = true};
  assert_int_equal(mt_reader_open_memory(&r, other, size, &o, &err), MT_OK);
  assert_int_equal(mt_reader_load_state(r, c.state, c.state_size, &err), MT_E_MALFORMED);
  assert_non_null(strstr(err.message, "does not hold the saved packet header"));
  /* The reader is as it was: it reads its own trace from the start. */
  size_t n = 0, want;
  tg_event *all = tg_read_all(other, size, true, &want, NULL);
  mt_event ev;
  while (mt_reader_next(r, &ev, &err) > 0)
    n++;
  assert_int_equal(n, want);
  tg_free_events(all, want);
  mt_reader_close(r);
  free(other);
  free(c.state);
  free(c.locations);
  free(demo);
}

/* Every cut of a state or of a location increment, and every single-byte change of a state, is an
 * error or a state the reader can use; never a crash (run under ASan in CI). */
static void reader_survives_damaged_states(void **state) {
  (void)state;
  uint8_t *demo;
  size_t size;
  checkpoint c;
  demo_checkpoint(&demo, &size, &c);
  mt_reader_options o = {.backtraces = true};
  for (size_t cut = 0; cut < c.state_size; cut += 1 + cut / 64) {
    mt_reader *r;
    mt_error err;
    assert_int_equal(mt_reader_open_memory(&r, demo, size, &o, &err), MT_OK);
    assert_int_equal(mt_reader_load_state(r, c.state, cut, &err), MT_E_MALFORMED);
    assert_non_null(strstr(err.message, "saved reader state, byte"));
    mt_reader_close(r);
  }
  for (size_t cut = 0; cut < c.locations_size; cut += 1 + cut / 64) {
    mt_reader *r;
    mt_error err;
    assert_int_equal(mt_reader_open_memory(&r, demo, size, &o, &err), MT_OK);
    assert_int_equal(mt_reader_load_locations(r, c.locations, cut, &err), MT_E_MALFORMED);
    mt_reader_close(r);
  }
  uint8_t *bad = malloc(c.state_size);
  for (size_t at = 0; at < c.state_size; at += 1 + at / 32) {
    memcpy(bad, c.state, c.state_size);
    bad[at] ^= (uint8_t)(0x5A + at);
    mt_reader *r;
    mt_error err;
    assert_int_equal(mt_reader_open_memory(&r, demo, size, &o, &err), MT_OK);
    mt_reader_load_locations(r, c.locations, c.locations_size, &err);
    if (mt_reader_load_state(r, bad, c.state_size, &err) == MT_OK) {
      mt_event ev;
      while (mt_reader_next(r, &ev, &err) > 0)
        for (size_t i = 0; i < ev.backtrace_length; i++)
          (void)ev.backtrace[i];
    }
    mt_reader_close(r);
  }
  free(bad);
  free(c.state);
  free(c.locations);
  free(demo);
}

/* A saved state is held to the reader's own bound on decoder state: no more domains (160 KiB each)
 * than reading the trace up to the saved position could have made. Each domain below takes 35
 * bytes of the state but a backtrace cache once restored. */
static void reader_refuses_a_state_with_more_domains_than_its_position_allows(void **state) {
  (void)state;
  uint8_t *demo;
  size_t size;
  checkpoint c;
  demo_checkpoint(&demo, &size, &c);
  const uint8_t *good = c.state;
  size_t prefix = 4 + 4 + 8 + 1 + good[16]; /* magic, version, position, header copy */
  enum { DOMAINS = 4000 };
  size_t n = prefix + 4 + DOMAINS * 35;
  uint8_t *bad = calloc(1, n);
  memcpy(bad, good, prefix);
  uint8_t *p = bad + prefix;
  mt_store_u32(p, DOMAINS), p += 4;
  for (unsigned i = 0; i < DOMAINS; i++) {
    mt_store_u16(p, (uint16_t)i), p += 2; /* id */
    p += 8 + 1;                           /* last time, no MTF entries */
    mt_store_u32(p, 1), p += 4;           /* one used bucket: 0, code 1, next 0 */
    p += 2;
    mt_store_u64(p, 1), p += 8;
    p += 2 + 8; /* next, no previous backtrace */
  }
  assert_int_equal((size_t)(p - bad), n);
  mt_reader *r;
  mt_error err;
  mt_reader_options o = {.backtraces = true};
  assert_int_equal(mt_reader_open_memory(&r, demo, size, &o, &err), MT_OK);
  assert_int_equal(mt_reader_load_state(r, bad, n, &err), MT_E_MALFORMED);
  assert_non_null(strstr(err.message, "more domains than the trace up to the position"));
  mt_reader_close(r);
  free(bad);
  free(c.state);
  free(c.locations);
  free(demo);
}

static void reader_cannot_save_a_pipe_or_mid_packet(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = tu_read_file(tu_testdata("memtrace/demo_v3.ctf"), &size);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  FILE *f = fdopen(fds[1], "w");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, 4096, f), 4096); /* the pipe holds it: no reader needed */
  fclose(f);
  mt_reader *r;
  mt_error err;
  mt_reader_options o = {.backtraces = true};
  assert_int_equal(mt_reader_open_fd(&r, fds[0], &o, &err), MT_OK);
  void *blob;
  size_t blob_size;
  assert_true(mt_reader_between_packets(r));
  assert_int_equal(mt_reader_save_state(r, &blob, &blob_size, &err), MT_E_INVALID);
  assert_non_null(strstr(err.message, "uncompressed file or memory"));
  mt_reader_close(r);
  close(fds[0]);

  assert_int_equal(mt_reader_open_memory(&r, data, size, &o, &err), MT_OK);
  mt_event ev;
  bool refused = false;
  while (!refused && mt_reader_next(r, &ev, &err) > 0)
    if (!mt_reader_between_packets(r)) {
      assert_int_equal(mt_reader_save_state(r, &blob, &blob_size, &err), MT_E_INVALID);
      refused = true;
    }
  assert_true(refused);
  mt_reader_close(r);
  free(data);
}

/* Reads `r` to its end or failure: how many events, the status and the error. */
static size_t read_to_end(mt_reader *r, int *rc, mt_error *err) {
  size_t n = 0;
  mt_event ev;
  while ((*rc = mt_reader_next(r, &ev, err)) > 0)
    n++;
  return n;
}

/* A reader restored from a state, read on until it fails, and taken back to a mark made before
 * reads as a fresh reader does: the same events to the same failure, no location code it learnt
 * since, the end time of then. */
static void reader_rewound_to_a_mark_reads_as_if_it_had_never_moved(void **state) {
  (void)state;
  uint8_t *demo;
  size_t size;
  checkpoint c;
  demo_checkpoint(&demo, &size, &c);
  static tg_packets p;
  tg_walk_packets(demo, size, &p);
  demo[p.offset[p.count - 1]] ^= 0xFF; /* the last packet is not one: the reader fails there */
  mt_reader *fresh, *r;
  mt_error want_err, err;
  mt_reader_options o = {.backtraces = true};
  assert_int_equal(mt_reader_open_memory(&fresh, demo, size, &o, &err), MT_OK);
  int want_rc, rc;
  size_t want = read_to_end(fresh, &want_rc, &want_err);
  assert_int_equal(want_rc, MT_E_MALFORMED);

  assert_int_equal(mt_reader_open_memory(&r, demo, size, &o, &err), MT_OK);
  int64_t end_time = mt_reader_end_time(r);
  mt_reader_mark *mark;
  assert_int_equal(mt_reader_mark_take(r, &mark, &err), MT_OK);
  assert_int_equal(mt_reader_load_locations(r, c.locations, c.locations_size, &err), MT_OK);
  assert_int_equal(mt_reader_load_state(r, c.state, c.state_size, &err), MT_OK);
  assert_int_equal(read_to_end(r, &rc, &err), want - c.events_before);
  assert_int_equal(rc, MT_E_MALFORMED);
  /* The code the trace describes first, loaded from the increment (past its magic, version and
   * count). */
  const uint8_t *first = (const uint8_t *)c.locations + 16;
  uint64_t code = 0;
  for (int i = 0; i < 8; i++)
    code |= (uint64_t)first[i] << (8 * i);
  const mt_location *entries;
  size_t count;
  assert_true(mt_reader_lookup_location(r, (int64_t)code, &entries, &count));

  assert_int_equal(mt_reader_rewind(r, mark, &err), MT_OK);
  assert_false(mt_reader_lookup_location(r, (int64_t)code, &entries, &count));
  assert_int_equal(mt_reader_end_time(r), end_time);
  assert_int_equal(read_to_end(r, &rc, &err), want);
  assert_int_equal(rc, want_rc);
  assert_string_equal(err.message, want_err.message);
  assert_true(mt_reader_lookup_location(r, (int64_t)code, &entries, &count));
  assert_int_equal(mt_reader_end_time(r), mt_reader_end_time(fresh));
  mt_reader_mark_free(mark);
  mt_reader_close(r);
  mt_reader_close(fresh);
  free(c.state);
  free(c.locations);
  free(demo);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reader_resumes_demo_v3_from_every_packet),
      cmocka_unit_test(reader_resumes_ocamlopt_v1_v2_v3),
      cmocka_unit_test(reader_resumes_multi_domain_trace),
      cmocka_unit_test(reader_refuses_state_of_another_trace),
      cmocka_unit_test(reader_survives_damaged_states),
      cmocka_unit_test(reader_refuses_a_state_with_more_domains_than_its_position_allows),
      cmocka_unit_test(reader_cannot_save_a_pipe_or_mid_packet),
      cmocka_unit_test(reader_rewound_to_a_mark_reads_as_if_it_had_never_moved),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
