/* The index map (common/indexmap.h): get-or-add against a plain array through growth, keys that
 * share a probe run and wrap around the table's end, reserved room that adds never move, and
 * clearing. */
#include <stdlib.h>

#include "common/indexmap.h"
#include "testutil.h"

#define KEYS 5000

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void each_key_keeps_the_value_of_its_first_add(void **state) {
  (void)state;
  uint64_t *keys = malloc(KEYS * sizeof *keys);
  for (size_t i = 0; i < KEYS; i++) /* dense, sparse and top-bit keys, as packed cells are */
    keys[i] = i % 3 == 0 ? i : i % 3 == 1 ? (uint64_t)i << 40 | 7 : ~(uint64_t)i;
  mt_indexmap m = {.seed = 99};
  uint32_t *first = malloc(KEYS * sizeof *first);
  for (size_t i = 0; i < KEYS; i++)
    first[i] = MT_INDEXMAP_NONE;
  uint64_t s = 88172645463325252u;
  uint32_t next = 0;
  for (int step = 0; step < 4 * KEYS; step++) {
    size_t k = next_random(&s) % KEYS;
    bool added;
    uint32_t v = mt_indexmap_get_or_add(&m, keys[k], next, &added);
    assert_int_equal(added, first[k] == MT_INDEXMAP_NONE);
    if (added)
      first[k] = next++;
    assert_int_equal(v, first[k]);
  }
  assert_int_equal(m.count, next);
  for (size_t i = 0; i < KEYS; i++)
    assert_int_equal(mt_indexmap_get(&m, keys[i]), first[i]);
  assert_true(m.count * 2 <= m.cap);
  mt_indexmap_free(&m);
  free(first);
  free(keys);
}

static void keys_in_one_run_across_the_end_are_all_found(void **state) {
  (void)state;
  mt_indexmap m = {.seed = 7};
  assert_true(mt_indexmap_reserve(&m, 32));
  size_t cap = m.cap;
  uint64_t chosen[12];
  size_t n = 0;
  for (uint64_t key = 0; n < 12; key++) /* homes in the last three slots: the run wraps */
    if ((mt_hash64(key ^ m.seed) & (cap - 1)) >= cap - 3)
      chosen[n++] = key;
  bool added;
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(mt_indexmap_get_or_add(&m, chosen[i], (uint32_t)i, &added), i);
    assert_true(added);
  }
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(mt_indexmap_get(&m, chosen[i]), i);
    assert_int_equal(mt_indexmap_get_or_add(&m, chosen[i], 1000, &added), i);
    assert_false(added);
  }
  assert_int_equal(m.cap, cap);
  assert_int_equal(mt_indexmap_get(&m, chosen[n - 1] + 1000003), MT_INDEXMAP_NONE);
  mt_indexmap_free(&m);
}

static void reserved_room_is_not_moved_by_adds(void **state) {
  (void)state;
  mt_indexmap m = {0};
  assert_int_equal(mt_indexmap_get(&m, 1), MT_INDEXMAP_NONE); /* an empty map needs no memory */
  assert_true(mt_indexmap_reserve(&m, 1000));
  const mt_indexmap_slot *slots = m.slots;
  bool added;
  for (uint32_t i = 0; i < 1000; i++)
    assert_int_equal(mt_indexmap_get_or_add(&m, (uint64_t)i * 977, i, &added), i);
  assert_ptr_equal(m.slots, slots);
  assert_true(mt_indexmap_reserve(&m, 10)); /* less than it holds: nothing to do */
  assert_ptr_equal(m.slots, slots);
  mt_indexmap_free(&m);
}

static void clear_forgets_the_keys_but_keeps_room_and_seed(void **state) {
  (void)state;
  mt_indexmap m = {.seed = 5};
  bool added;
  for (uint32_t i = 0; i < 100; i++)
    mt_indexmap_get_or_add(&m, i, i, &added);
  size_t cap = m.cap;
  mt_indexmap_clear(&m);
  assert_int_equal(m.count, 0);
  assert_int_equal(m.cap, cap);
  assert_int_equal(m.seed, 5);
  for (uint32_t i = 0; i < 100; i++)
    assert_int_equal(mt_indexmap_get(&m, i), MT_INDEXMAP_NONE);
  assert_int_equal(mt_indexmap_get_or_add(&m, 42, 0, &added), 0);
  assert_true(added);
  m.gen = UINT32_MAX; /* a clear that wraps the generation must still empty every slot */
  for (uint32_t i = 0; i < 10; i++)
    mt_indexmap_get_or_add(&m, i, i, &added);
  mt_indexmap_clear(&m);
  for (uint32_t i = 0; i < 10; i++)
    assert_int_equal(mt_indexmap_get(&m, i), MT_INDEXMAP_NONE);
  assert_int_equal(mt_indexmap_get(&m, 42), MT_INDEXMAP_NONE);
  mt_indexmap_free(&m);
  assert_null(m.slots);
  assert_int_equal(m.seed, 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_key_keeps_the_value_of_its_first_add),
      cmocka_unit_test(keys_in_one_run_across_the_end_are_all_found),
      cmocka_unit_test(reserved_room_is_not_moved_by_adds),
      cmocka_unit_test(clear_forgets_the_keys_but_keeps_room_and_seed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
