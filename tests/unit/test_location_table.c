/* The reader's global location table (FORMAT.md §2.6) and the hash map under it, against keys a
 * hostile trace can choose: the map's hash is public, so without a secret seed a trace could name
 * thousands of codes that all land in one probe run and make reading quadratic. */
#include <stdint.h>
#include <stdlib.h>

#include "common/hashmap.h"
#include "format/location_table.h"
#include "testutil.h"

#define COLLIDING 4000

/* The inverse of mt_hash64 (murmur3's finaliser): x ^= x >> 33 is its own inverse, and the
 * multipliers are odd, so they have inverses mod 2^64. */
static uint64_t unhash(uint64_t x) {
  x ^= x >> 33;
  x *= UINT64_C(0x9cb4b2f8129337db); /* inverse of 0xc4ceb9fe1a85ec53 */
  x ^= x >> 33;
  x *= UINT64_C(0x4f74430c22a54005); /* inverse of 0xff51afd7ed558ccd */
  x ^= x >> 33;
  return x;
}

/* Keys whose unseeded hashes all have 32 zero low bits: one slot for any capacity up to 2^32. */
static int64_t colliding_key(uint64_t i) {
  return (int64_t)unhash(i << 32);
}

static void the_collision_keys_do_collide_in_a_zeroed_map(void **state) {
  (void)state;
  assert_int_equal(mt_hash64(unhash(UINT64_C(12345) << 32)), UINT64_C(12345) << 32);
  mt_hashmap m = {0};
  for (uint64_t i = 1; i <= COLLIDING; i++)
    assert_true(mt_hashmap_put(&m, colliding_key(i), i));
  assert_true(mt_hashmap_longest_run(&m) >= COLLIDING);
  mt_hashmap_free(&m);
}

static void a_seeded_map_spreads_keys_that_collide_in_a_zeroed_map(void **state) {
  (void)state;
  mt_hashmap m = {.seed = mt_hashmap_random_seed()};
  for (uint64_t i = 1; i <= COLLIDING; i++)
    assert_true(mt_hashmap_put(&m, colliding_key(i), i));
  assert_true(mt_hashmap_longest_run(&m) < 100);
  for (uint64_t i = 1; i <= COLLIDING; i++) {
    uint64_t v;
    assert_true(mt_hashmap_get(&m, colliding_key(i), &v));
    assert_int_equal(v, i);
  }
  assert_true(mt_hashmap_remove(&m, colliding_key(7)));
  assert_false(mt_hashmap_get(&m, colliding_key(7), NULL));
  mt_hashmap_free(&m);
}

static void location_codes_chosen_to_collide_do_not_share_a_probe_run(void **state) {
  (void)state;
  mt_location_table *t = mt_location_table_new();
  assert_non_null(t);
  for (uint64_t i = 1; i <= COLLIDING; i++)
    assert_int_equal(mt_location_table_add(t, colliding_key(i), NULL, 0), 1);
  assert_int_equal(mt_location_table_count(t), COLLIDING);
  assert_true(mt_location_table_longest_probe(t) < 100);
  const mt_location *entries;
  size_t count;
  assert_true(mt_location_table_lookup(t, colliding_key(123), &entries, &count));
  assert_int_equal(count, 0);
  mt_location_table_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_collision_keys_do_collide_in_a_zeroed_map),
      cmocka_unit_test(a_seeded_map_spreads_keys_that_collide_in_a_zeroed_map),
      cmocka_unit_test(location_codes_chosen_to_collide_do_not_share_a_probe_run),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
