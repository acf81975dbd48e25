/* Writer -> reader round trips on random event streams: several domains, collects across domains,
 * promotes, gaps longer than 30 s, backtraces up to 300 frames sharing prefixes, location codes
 * anywhere in [1, 2^62 - 1]. Every event and every location must come back exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tracegen.h"

static uint64_t rng_state;
static uint64_t next_random(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}
static uint64_t below(uint64_t n) {
  return next_random() % n;
}

typedef struct expected {
  mt_event_kind kind;
  int64_t time, obj_id, length, nsamples;
  uint16_t domain;
  mt_source source;
  uint64_t *stack; /* innermost first */
  size_t depth;
} expected;

typedef struct live_object {
  int64_t id;
  uint16_t domain;
  bool promoted;
} live_object;

static void run_round_trip(uint64_t seed, int version, unsigned ndomains, size_t nevents) {
  rng_state = seed;
  uint64_t hot[500];
  for (int i = 0; i < 500; i++)
    hot[i] = below((UINT64_C(1) << 62) - 1) + 1;
  int fd;
  mt_writer *w = tg_writer(version, 0.25, &fd);
  expected *want = calloc(nevents, sizeof *want);
  live_object *live = calloc(nevents, sizeof *live);
  size_t nlive = 0, n = 0;
  uint64_t prev[300];
  size_t prev_depth = 0;
  int64_t now = TG_START;
  uint16_t domain = 0;
  while (n < nevents) {
    now += (int64_t)below(2000);
    if (below(500) == 0)
      now += 40000000; /* a gap longer than a packet may span */
    if (ndomains > 1 && below(5) == 0)
      domain = (uint16_t)below(ndomains);
    expected *e = &want[n];
    e->time = now;
    e->domain = domain;
    unsigned pick = (unsigned)below(10);
    if (pick < 6 || nlive == 0) {
      size_t keep = prev_depth ? below(prev_depth + 1) : 0; /* share some outer frames */
      size_t depth = keep + below(300 - keep + 1);
      if (depth > 300)
        depth = 300;
      uint64_t stack[300];
      for (size_t i = 0; i < depth; i++) {
        size_t from_outer = depth - 1 - i;
        if (from_outer < keep)
          stack[i] = prev[prev_depth - 1 - from_outer];
        else
          stack[i] = below(4) ? hot[below(500)] : below((UINT64_C(1) << 62) - 1) + 1;
      }
      e->kind = MT_EVENT_ALLOC;
      e->length = below(3) ? (int64_t)below(17) : (int64_t)below(1000000);
      e->nsamples = below(4) ? 1 : (int64_t)below(100) + 1;
      e->source = (mt_source)below(3);
      e->stack = malloc((depth + 1) * sizeof *e->stack);
      memcpy(e->stack, stack, depth * sizeof *stack);
      e->depth = depth;
      mt_error err;
      int rc = mt_writer_put_alloc_in(w, domain, now, e->length, e->nsamples, e->source, stack,
                                      depth, tg_resolve, NULL, &e->obj_id, &err);
      if (rc)
        fail_msg("put_alloc event %zu: %s", n, err.message);
      live[nlive++] = (live_object){e->obj_id, domain, false};
      memcpy(prev, stack, depth * sizeof *stack);
      prev_depth = depth;
    } else {
      size_t k = below(nlive);
      live_object *o = &live[k];
      bool promote = pick < 8 && !o->promoted && o->domain == domain;
      e->kind = promote ? MT_EVENT_PROMOTE : MT_EVENT_COLLECT;
      e->obj_id = o->id;
      mt_error err;
      int rc = promote ? mt_writer_put_promote_in(w, domain, now, o->id, &err)
                       : mt_writer_put_collect_in(w, domain, now, o->id, &err);
      if (rc)
        fail_msg("put event %zu: %s", n, err.message);
      if (promote)
        o->promoted = true;
      else
        live[k] = live[--nlive];
    }
    n++;
  }
  size_t size, got;
  uint8_t *data = tg_finish(w, fd, &size);
  mt_reader *r;
  tg_event *ev = tg_read_all(data, size, true, &got, &r);
  assert_int_equal(got, nevents);
  for (size_t i = 0; i < nevents; i++) {
    const expected *e = &want[i];
    const mt_event *g = &ev[i].ev;
    if (g->kind != e->kind || g->time != e->time || g->obj_id != e->obj_id ||
        g->domain != e->domain)
      fail_msg("seed %llu event %zu: kind %d/%d time %lld/%lld id %lld/%lld domain %u/%u",
               (unsigned long long)seed, i, g->kind, e->kind, (long long)g->time,
               (long long)e->time, (long long)g->obj_id, (long long)e->obj_id, g->domain,
               e->domain);
    if (e->kind != MT_EVENT_ALLOC)
      continue;
    assert_int_equal(g->length, e->length);
    assert_int_equal(g->nsamples, e->nsamples);
    assert_int_equal(g->source, e->source);
    assert_int_equal(g->backtrace_length, e->depth);
    for (size_t f = 0; f < e->depth; f++) {
      uint64_t code = e->stack[e->depth - 1 - f];
      assert_int_equal(ev[i].backtrace[f], (int64_t)code);
      const mt_location *locs;
      size_t count;
      assert_true(mt_reader_lookup_location(r, (int64_t)code, &locs, &count));
      const mt_location *want_locs;
      size_t want_count;
      tg_resolve(NULL, code, &want_locs, &want_count);
      assert_int_equal(count, want_count);
      for (size_t l = 0; l < count; l++) {
        assert_string_equal(locs[l].defname, want_locs[l].defname);
        assert_string_equal(locs[l].filename, want_locs[l].filename);
        assert_int_equal(locs[l].line, want_locs[l].line);
        assert_int_equal(locs[l].start_char, want_locs[l].start_char);
        assert_int_equal(locs[l].end_char, want_locs[l].end_char);
      }
    }
  }
  mt_reader_close(r);
  tg_free_events(ev, got);
  for (size_t i = 0; i < nevents; i++)
    free(want[i].stack);
  free(want);
  free(live);
  free(data);
}

static void random_streams_round_trip_in_v3_with_four_domains(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 4; seed++)
    run_round_trip(seed, 3, 4, 15000);
}

static void random_streams_round_trip_in_v2(void **state) {
  (void)state;
  for (uint64_t seed = 11; seed <= 12; seed++)
    run_round_trip(seed, 2, 1, 15000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_streams_round_trip_in_v3_with_four_domains),
      cmocka_unit_test(random_streams_round_trip_in_v2),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
