/* The set of live sampled blocks (src/tracer/sampled_set.c): the filter never says "no" for a
 * member and says "no" for almost every other pointer; insert, remove and lookup are exact,
 * also with tombstones reused and with threads working on it at the same time. */
#include <pthread.h>
#include <stdlib.h>

#include "testutil.h"
#include "tracer/sampled_set.h"

static void *ptr(uint64_t i) {
  return (void *)(uintptr_t)(0x7f0000000000ull + i * 16);
}

static void members_are_found_and_removed_once(void **state) {
  (void)state;
  mt_sampled_set s;
  assert_int_equal(mt_sampled_set_init(&s, 16, 16), 0);
  for (uint64_t i = 0; i < 10000; i++)
    assert_true(mt_sampled_set_insert(&s, ptr(i)));
  for (uint64_t i = 0; i < 10000; i++) {
    assert_true(mt_sampled_set_maybe(&s, ptr(i)));
    assert_true(mt_sampled_set_contains(&s, ptr(i)));
  }
  assert_false(mt_sampled_set_contains(&s, ptr(10000)));
  for (uint64_t i = 0; i < 10000; i += 2)
    assert_true(mt_sampled_set_remove(&s, ptr(i)));
  for (uint64_t i = 0; i < 10000; i++) {
    assert_int_equal(mt_sampled_set_contains(&s, ptr(i)), i % 2 == 1);
    if (i % 2)
      assert_true(mt_sampled_set_maybe(&s, ptr(i)));
  }
  assert_false(mt_sampled_set_remove(&s, ptr(0)));
  assert_int_equal(atomic_load(&s.members), 5000);
  /* Inserting a member again keeps one copy. */
  assert_true(mt_sampled_set_insert(&s, ptr(1)));
  assert_true(mt_sampled_set_remove(&s, ptr(1)));
  assert_false(mt_sampled_set_contains(&s, ptr(1)));
  mt_sampled_set_destroy(&s);
}

/* The table's pages are mapped as members need them: reserved whole (32 MiB for 2^22 slots) it
 * took that much of a program's room under an address-space limit it set itself. */
static void table_maps_only_the_pages_its_members_need(void **state) {
  (void)state;
  mt_sampled_set s;
  assert_int_equal(mt_sampled_set_init(&s, 20, 22), 0);
  size_t pages = (size_t)(s.slot_mask + 1) / MT_SET_PAGE_SLOTS, mapped = 0;
  for (size_t i = 0; i < pages; i++)
    mapped += atomic_load(&s.pages[i]) != NULL;
  assert_int_equal(mapped, 0);
  assert_false(mt_sampled_set_contains(&s, ptr(1)));
  assert_false(mt_sampled_set_remove(&s, ptr(1)));
  /* 1000 blocks of a 160 KB heap: 16-byte granules, 8192 slots a page, 3 pages at most. */
  for (uint64_t i = 0; i < 1000; i++)
    assert_true(mt_sampled_set_insert(&s, ptr(i * 10)));
  for (size_t i = 0; i < pages; i++)
    mapped += atomic_load(&s.pages[i]) != NULL;
  assert_true(mapped >= 1 && mapped <= 3);
  for (uint64_t i = 0; i < 1000; i++)
    assert_true(mt_sampled_set_remove(&s, ptr(i * 10)));
  mt_sampled_set_destroy(&s);
}

static void filter_rejects_almost_every_non_member(void **state) {
  (void)state;
  mt_sampled_set s;
  assert_int_equal(mt_sampled_set_init(&s, 20, 16), 0);
  for (uint64_t i = 0; i < 1000; i++)
    assert_true(mt_sampled_set_insert(&s, ptr(i * 977)));
  size_t hits = 0;
  for (uint64_t i = 0; i < 1000000; i++)
    hits += mt_sampled_set_maybe(&s, ptr(5000000 + i));
  /* 1000 members in 2^20 buckets: about 0.1% false positives. */
  assert_true(hits < 3000);
  /* After removal the filter forgets them. */
  for (uint64_t i = 0; i < 1000; i++)
    assert_true(mt_sampled_set_remove(&s, ptr(i * 977)));
  size_t left = 0;
  for (uint64_t i = 0; i < 1000; i++)
    left += mt_sampled_set_maybe(&s, ptr(i * 977));
  assert_int_equal(left, 0);
  mt_sampled_set_destroy(&s);
}

static void churn_reuses_tombstones_without_losing_members(void **state) {
  (void)state;
  mt_sampled_set s;
  assert_int_equal(mt_sampled_set_init(&s, 12, 10), 0); /* 1024 slots */
  for (uint64_t round = 0; round < 200; round++) {
    for (uint64_t i = 0; i < 300; i++)
      assert_true(mt_sampled_set_insert(&s, ptr(round * 1000 + i)));
    for (uint64_t i = 0; i < 300; i++)
      assert_true(mt_sampled_set_remove(&s, ptr(round * 1000 + i)));
  }
  assert_int_equal(atomic_load(&s.members), 0);
  assert_int_equal(atomic_load(&s.insert_failures), 0);
  mt_sampled_set_destroy(&s);
}

typedef struct worker {
  mt_sampled_set *set;
  uint64_t base;
  int failures;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int round = 0; round < 200; round++) {
    for (uint64_t i = 0; i < 500; i++)
      if (!mt_sampled_set_insert(w->set, ptr(w->base + i)))
        w->failures++;
    for (uint64_t i = 0; i < 500; i++)
      if (!mt_sampled_set_maybe(w->set, ptr(w->base + i)) ||
          !mt_sampled_set_contains(w->set, ptr(w->base + i)))
        w->failures++;
    for (uint64_t i = 0; i < 500; i++)
      if (!mt_sampled_set_remove(w->set, ptr(w->base + i)))
        w->failures++;
  }
  return NULL;
}

static void threads_insert_and_remove_their_own_pointers_at_once(void **state) {
  (void)state;
  mt_sampled_set s;
  assert_int_equal(mt_sampled_set_init(&s, 16, 14), 0);
  enum { N = 4 };
  pthread_t t[N];
  worker w[N];
  for (int i = 0; i < N; i++) {
    w[i] = (worker){&s, (uint64_t)i * 1000000, 0};
    assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].failures, 0);
  }
  assert_int_equal(atomic_load(&s.members), 0);
  mt_sampled_set_destroy(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(members_are_found_and_removed_once),
      cmocka_unit_test(filter_rejects_almost_every_non_member),
      cmocka_unit_test(table_maps_only_the_pages_its_members_need),
      cmocka_unit_test(churn_reuses_tombstones_without_losing_members),
      cmocka_unit_test(threads_insert_and_remove_their_own_pointers_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
