/* The consumer's map of live malloc blocks (src/record/addrmap.h): tombstones left by frees,
 * taken over by the next allocation at their address, dropped when the table is rebuilt; checked
 * against a plain array model over a long random churn. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "record/addrmap.h"

static rec_live entry(uint64_t addr, int64_t id) {
  return (rec_live){.addr = addr, .id = id, .time_ns = id * 10, .source = 7};
}

static void freed_address_is_absent_and_its_tombstone_is_reused(void **state) {
  (void)state;
  rec_addrmap m = {.seed = 12345};
  rec_live l = entry(0x1000, 1);
  assert_true(rec_addrmap_put(&m, &l));
  rec_live *s = rec_addrmap_get(&m, 0x1000);
  assert_non_null(s);
  assert_int_equal(s->id, 1);
  rec_addrmap_remove(&m, s);
  assert_null(rec_addrmap_get(&m, 0x1000));
  assert_int_equal(m.count, 0);
  rec_live *t = rec_addrmap_find(&m, 0x1000);
  assert_non_null(t);
  assert_int_equal(t->id, REC_LIVE_FREED);
  l = entry(0x1000, 2);
  rec_addrmap_revive(&m, t, &l);
  assert_int_equal(rec_addrmap_get(&m, 0x1000)->id, 2);
  assert_int_equal(m.count, 1);
  assert_int_equal(m.used, 1);
  /* put also takes the tombstone over: no second slot for one address */
  rec_addrmap_remove(&m, rec_addrmap_get(&m, 0x1000));
  l = entry(0x1000, 3);
  assert_true(rec_addrmap_put(&m, &l));
  assert_int_equal(m.used, 1);
  assert_int_equal(rec_addrmap_get(&m, 0x1000)->id, 3);
  rec_addrmap_free(&m);
}

static void tombstones_of_addresses_never_reused_are_dropped_on_rebuild(void **state) {
  (void)state;
  rec_addrmap m = {.seed = 99};
  /* Ever new addresses, each freed at once: the table must not grow without bound. */
  for (uint64_t i = 1; i <= 100000; i++) {
    rec_live l = entry(i * 16, (int64_t)i);
    assert_true(rec_addrmap_put(&m, &l));
    rec_addrmap_remove(&m, rec_addrmap_get(&m, i * 16));
  }
  assert_int_equal(m.count, 0);
  assert_true(m.mask + 1 <= 1024);
  assert_true(m.used * 2 <= m.mask + 1);
  rec_addrmap_free(&m);
}

static void random_churn_matches_a_plain_model(void **state) {
  (void)state;
  enum { ADDRS = 3000, STEPS = 400000 };
  int64_t *model = calloc(ADDRS, sizeof *model); /* 0: not live, else the id */
  assert_non_null(model);
  rec_addrmap m = {.seed = 0x5eed};
  uint64_t rng = 88172645463325252ull;
  size_t live = 0;
  for (int64_t step = 1; step <= STEPS; step++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    size_t k = (size_t)(rng % ADDRS);
    uint64_t a = 0x10000 + (uint64_t)k * 16;
    rec_live *s = rec_addrmap_find(&m, a);
    if (model[k]) {
      assert_non_null(s);
      assert_int_equal(s->id, model[k]);
      assert_int_equal(s->time_ns, model[k] * 10);
      if ((rng >> 20) % 3) {
        rec_addrmap_remove(&m, s);
        model[k] = 0;
        live--;
      }
    } else {
      assert_null(rec_addrmap_get(&m, a));
      rec_live l = entry(a, step);
      if (s && (rng >> 30) & 1)
        rec_addrmap_revive(&m, s, &l);
      else
        assert_true(rec_addrmap_put(&m, &l));
      model[k] = step;
      live++;
    }
    assert_int_equal(m.count, live);
    assert_true(m.used * 2 <= m.mask + 1);
  }
  for (size_t k = 0; k < ADDRS; k++) {
    rec_live *s = rec_addrmap_get(&m, 0x10000 + (uint64_t)k * 16);
    if (model[k])
      assert_true(s && s->id == model[k]);
    else
      assert_null(s);
  }
  rec_addrmap_free(&m);
  free(model);
}

/* Tables grown through the sizes mapped with huge pages asked for (8 to 64 MiB), one ending
 * there and one past them, then thinned by frees and rebuilt: every block is found with its id at
 * every size, and the table is released whichever way it came. */
static void large_tables_keep_every_block_through_every_size(void **state) {
  (void)state;
  static const uint64_t sizes[] = {300000, 1100000};
  for (int t = 0; t < 2; t++) {
    const uint64_t live = sizes[t], base = 0x7f0000000000;
    rec_addrmap m = {.seed = 7};
    bool saw_mapped = false;
    for (uint64_t i = 1; i <= live; i++) {
      rec_live l = entry(base + i * 48, (int64_t)i);
      assert_true(rec_addrmap_put(&m, &l));
      saw_mapped |= m.mapped;
      if (i % 49999 == 0) /* the blocks put so far, at this size */
        for (uint64_t j = 1; j <= i; j += 997)
          assert_int_equal(rec_addrmap_get(&m, base + j * 48)->id, (int64_t)j);
    }
    size_t bytes = (m.mask + 1) * sizeof(rec_live);
    assert_true(saw_mapped);
    assert_int_equal(m.mapped, bytes >= REC_ADDRMAP_HUGE_MIN && bytes <= REC_ADDRMAP_HUGE_MAX);
    assert_int_equal(m.mapped, t == 0);
    assert_int_equal(m.count, live);
    for (uint64_t i = 1; i <= live; i++) {
      rec_live *s = rec_addrmap_get(&m, base + i * 48);
      assert_non_null(s);
      assert_int_equal(s->id, (int64_t)i);
      if (i % 4)
        rec_addrmap_remove(&m, s);
    }
    assert_int_equal(m.count, live / 4);
    assert_true(rec_addrmap_rebuild(&m)); /* the tombstones dropped, into a new table */
    assert_int_equal(m.used, live / 4);
    for (uint64_t i = 1; i <= live; i++) {
      rec_live *s = rec_addrmap_get(&m, base + i * 48);
      if (i % 4)
        assert_null(s);
      else
        assert_true(s && s->id == (int64_t)i);
    }
    rec_addrmap_free(&m);
    assert_null(m.slots);
    assert_false(m.mapped);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(freed_address_is_absent_and_its_tombstone_is_reused),
      cmocka_unit_test(tombstones_of_addresses_never_reused_are_dropped_on_rebuild),
      cmocka_unit_test(random_churn_matches_a_plain_model),
      cmocka_unit_test(large_tables_keep_every_block_through_every_size),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
