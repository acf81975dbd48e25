/* The analysis pass's id map (analysis/idmap.h): random inserts and removals checked against a
 * plain array after every step, with ids chosen to share probe runs and to wrap around the table's
 * end, so that removal's shifting back is exercised on every path; and growth keeps every entry. */
#include <stdlib.h>
#include <string.h>

#include "analysis/idmap.h"
#include "testutil.h"

#define IDS 4096

/* A small xorshift: the same sequence on every run. */
static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void check_all(const mt_idmap *m, const uint32_t *expected, const int64_t *ids) {
  size_t present = 0;
  for (size_t i = 0; i < IDS; i++) {
    assert_int_equal(mt_idmap_get(m, ids[i]), expected[i]);
    present += expected[i] != MT_IDMAP_EMPTY;
  }
  assert_int_equal(m->count, present);
}

static void random_inserts_and_removals_match_an_array(void **state) {
  (void)state;
  int64_t *ids = malloc(IDS * sizeof *ids);
  uint32_t *expected = malloc(IDS * sizeof *expected);
  for (size_t i = 0; i < IDS; i++) {
    /* Dense ids as the trace hands them out, a few far ones, negative ones. */
    ids[i] = i % 7 == 0 ? (int64_t)(i * 1000003) : i % 11 == 0 ? -(int64_t)i : (int64_t)i;
    expected[i] = MT_IDMAP_EMPTY;
  }
  mt_idmap m = {.seed = 12345};
  uint64_t s = 88172645463325252u;
  for (int step = 0; step < 60000; step++) {
    size_t i = next_random(&s) % IDS;
    if (expected[i] == MT_IDMAP_EMPTY) {
      expected[i] = (uint32_t)(next_random(&s) % 1000000);
      assert_true(mt_idmap_put(&m, ids[i], expected[i]));
    } else {
      mt_idmap_remove(&m, ids[i]);
      expected[i] = MT_IDMAP_EMPTY;
    }
    if (step % 997 == 0)
      check_all(&m, expected, ids);
  }
  check_all(&m, expected, ids);
  mt_idmap_remove(&m, (int64_t)1 << 50); /* absent: nothing changes */
  check_all(&m, expected, ids);
  mt_idmap_free(&m);
  free(ids);
  free(expected);
}

/* Every id with a home in the last few slots of the smallest table, so that probe runs wrap past
 * its end; removing them in every order leaves the others findable. */
static void removal_across_the_tables_end_keeps_the_run(void **state) {
  (void)state;
  mt_idmap m = {.seed = 7};
  assert_true(mt_idmap_put(&m, -1, 0)); /* allocates the table, without growing later */
  size_t cap = m.mask + 1;
  int64_t chosen[12];
  size_t n = 0;
  for (int64_t id = 0; n < 12; id++)
    if (mt_idmap_home(&m, id) >= cap - 3)
      chosen[n++] = id;
  for (size_t first = 0; first < n; first++) {
    for (size_t i = 0; i < n; i++)
      assert_true(mt_idmap_put(&m, chosen[i], (uint32_t)i + 1));
    for (size_t k = 0; k < n; k++) {
      size_t gone = (first + k * 5) % n; /* 5 is prime to 12: every one once */
      mt_idmap_remove(&m, chosen[gone]);
      assert_int_equal(mt_idmap_get(&m, chosen[gone]), MT_IDMAP_EMPTY);
      for (size_t j = k + 1; j < n; j++) {
        size_t still = (first + j * 5) % n;
        assert_int_equal(mt_idmap_get(&m, chosen[still]), still + 1);
      }
    }
    assert_int_equal(m.count, 1);
    assert_int_equal(mt_idmap_get(&m, -1), 0);
  }
  mt_idmap_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_inserts_and_removals_match_an_array),
      cmocka_unit_test(removal_across_the_tables_end_keeps_the_run),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
