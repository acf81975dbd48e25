/* Giving rings back (ring/give_back.c): what a program that lowers its address-space limit gets
 * back is unmapped, never claimed again by this process, and counted; the rings its threads hold
 * and the ones kept stay; a new file has them all again; and claims racing a give-back never land
 * on a ring given back (they would write into unmapped memory). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

#include "ring/layout.h"
#include "ring/producer.h"

#define RINGS 16u

/* Whether the page at `p` is mapped in this process. */
static bool mapped(const void *p) {
  return msync((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, MS_ASYNC) == 0 || errno != ENOMEM;
}

static size_t rings_given_back(void) {
  size_t n = 0;
  for (uint32_t i = 0; i < RINGS; i++)
    n += mt_ring_given_back(i);
  return n;
}

/* The counters of this process's ring file, as a consumer reads them. */
static mt_ring_file_info file_info(void) {
  mt_cursor *c = rt_cursor(-1);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  mt_cursor_close(c);
  return info;
}

struct holder {
  mt_ring *ring;
  pthread_barrier_t *wrote, *release;
  int rc;
};

static void *hold_a_ring(void *p) {
  struct holder *h = p;
  h->rc = mt_ring_write_counter(h->ring, 1, 1);
  pthread_barrier_wait(h->wrote);
  pthread_barrier_wait(h->release);
  return NULL;
}

static void rings_given_back_are_unmapped_kept_from_claims_and_counted(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 64 * 1024, RINGS, false);
  const struct mt_ring *s = &mt_ring_session;
  uint64_t ring_bytes = s->geo.ring_words * 8;
  assert_int_equal(mt_ring_write_counter(r, 1, 1), MT_OK); /* the main thread holds a ring */
  pthread_barrier_t wrote, release;
  pthread_barrier_init(&wrote, NULL, 2);
  pthread_barrier_init(&release, NULL, 2);
  struct holder first = {r, &wrote, &release, -1};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, hold_a_ring, &first), 0);
  pthread_barrier_wait(&wrote);
  assert_int_equal(first.rc, MT_OK);

  /* Two held, three kept: eleven given back, and only those unmapped. */
  assert_int_equal(mt_ring_give_back(3), RINGS - 2 - 3);
  assert_int_equal(rings_given_back(), RINGS - 5);
  assert_int_equal(mt_ring_mapped_data_bytes(), 5 * ring_bytes);
  for (uint32_t i = 0; i < RINGS; i++) {
    const void *data = mt_ring_data_at(s->base, &s->geo, i);
    assert_int_equal(mapped(data), !mt_ring_given_back(i));
    assert_int_equal(mapped((const char *)data + ring_bytes - 1), !mt_ring_given_back(i));
  }
  /* The spans are exactly what is mapped: the header, blocks and registry, and five rings. */
  uint64_t total = 0;
  for (uint64_t at = 0, length; mt_ring_mapped_span(&s->geo, &at, &length); at += length) {
    assert_true(mapped((const char *)s->base + at));
    assert_true(mapped((const char *)s->base + at + length - 1));
    total += length;
  }
  assert_int_equal(total, s->geo.data_offset + 5 * ring_bytes);
  /* Giving back again with nothing more to give changes nothing. */
  assert_int_equal(mt_ring_give_back(3), 0);

  /* Four threads more at once: three find the kept rings, the fourth none, for this reason. */
  pthread_barrier_t wrote4, release4;
  pthread_barrier_init(&wrote4, NULL, 5);
  pthread_barrier_init(&release4, NULL, 5);
  struct holder more[4];
  pthread_t mt[4];
  for (int i = 0; i < 4; i++) {
    more[i] = (struct holder){r, &wrote4, &release4, -1};
    assert_int_equal(pthread_create(&mt[i], NULL, hold_a_ring, &more[i]), 0);
  }
  pthread_barrier_wait(&wrote4);
  int ok = 0;
  for (int i = 0; i < 4; i++)
    ok += more[i].rc == MT_OK;
  assert_int_equal(ok, 3);
  pthread_barrier_wait(&release4);
  for (int i = 0; i < 4; i++)
    pthread_join(mt[i], NULL);
  pthread_barrier_wait(&release);
  pthread_join(t, NULL);

  mt_ring_file_info info = file_info();
  assert_int_equal(info.rings_given_back, RINGS - 5);
  assert_int_equal(info.claims_failed_limit, 1);
  assert_int_equal(info.claims_failed_full, 0);
  assert_int_equal(info.records_no_ring, 1);
  assert_int_equal(mt_ring_close(r), MT_OK);
  /* The placeholder left at close covers what was mapped, not the rings given back. */
  for (uint32_t i = 0; i < RINGS; i++)
    assert_int_equal(mapped(mt_ring_data_at(s->base, &s->geo, i)), !mt_ring_given_back(i));

  /* A new file has every ring again. */
  r = rt_open(MT_RING_FLIGHT_RECORDER, 64 * 1024, RINGS, false);
  assert_false(mt_ring_given_back_any());
  assert_int_equal(mt_ring_mapped_data_bytes(), RINGS * ring_bytes);
  assert_int_equal(mt_ring_close(r), MT_OK);
  pthread_barrier_destroy(&wrote);
  pthread_barrier_destroy(&release);
  pthread_barrier_destroy(&wrote4);
  pthread_barrier_destroy(&release4);
}

/* Short-lived threads claim and release rings while the main thread gives rings back. */
static _Atomic int racing;

static void *write_and_go(void *p) {
  mt_ring *r = p;
  uint64_t payload[8];
  for (int i = 0; i < 8; i++) {
    rt_fill(payload, 8, (uint64_t)i, (uint64_t)i);
    mt_ring_write(r, MT_RING_TYPE_OPAQUE_FIRST, 0, payload, 8); /* MT_E_NOMEM without a ring */
  }
  return NULL;
}

static void *spawn_writers(void *p) {
  while (atomic_load(&racing)) {
    pthread_t t;
    if (pthread_create(&t, NULL, write_and_go, p) == 0)
      pthread_join(t, NULL);
  }
  return NULL;
}

static void claims_racing_a_give_back_never_take_a_ring_given_back(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 64 * 1024, 64, false);
  atomic_store(&racing, 1);
  pthread_t spawners[3];
  for (int i = 0; i < 3; i++)
    assert_int_equal(pthread_create(&spawners[i], NULL, spawn_writers, r), 0);
  uint32_t given = 0;
  for (uint32_t keep = 48; keep > 0; keep -= 8) {
    usleep(2000);
    given += mt_ring_give_back(keep);
  }
  usleep(2000);
  atomic_store(&racing, 0);
  for (int i = 0; i < 3; i++)
    pthread_join(spawners[i], NULL);
  /* Every ring a thread wrote was mapped (else the writer would have faulted). With every writer
   * gone, one more give-back leaves exactly the eight kept and the main thread's (its ring holds
   * the file's START record). */
  given += mt_ring_give_back(8);
  mt_ring_file_info info = file_info();
  assert_int_equal(given, 64 - 8 - 1);
  assert_int_equal(info.rings_given_back, given);
  assert_int_equal(mt_ring_mapped_data_bytes(), 9 * mt_ring_session.geo.ring_words * 8);
  assert_int_equal(mt_ring_close(r), MT_OK);
}

/* A claim that passed the bar's first check, then lost its ring to a give-back before its
 * compare-and-swap, must see the bar after winning the ring and put it back. */
static void give_back_every_ring_once(uint32_t ring) {
  (void)ring;
  mt_ring_test_before_claim = NULL;
  mt_ring_give_back(0);
}

static void *write_one(void *p) {
  uint64_t payload[2] = {1, 2};
  *(int *)p = mt_ring_write(&mt_ring_session, MT_RING_TYPE_OPAQUE_FIRST, 0, payload, 2);
  return NULL;
}

static void a_claim_that_loses_its_ring_to_a_give_back_puts_it_back(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 64 * 1024, 8, false);
  mt_ring_test_before_claim = give_back_every_ring_once;
  int rc = MT_OK;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, write_one, &rc), 0);
  pthread_join(t, NULL);
  mt_ring_test_before_claim = NULL;
  assert_int_equal(rc, MT_E_NOMEM);    /* every free ring was given back: none to claim */
  assert_false(mt_ring_given_back(0)); /* the main thread's, since the file's START record */
  for (uint32_t i = 1; i < 8; i++)
    assert_true(mt_ring_given_back(i));
  mt_ring_file_info info = file_info();
  assert_int_equal(info.rings_given_back, 7);
  assert_int_equal(info.claims_failed_limit, 1);
  assert_int_equal(info.records_no_ring, 1);
  assert_int_equal(mt_ring_close(r), MT_OK);
}

/* Nothing given back, nothing said: a full pool is put down to the number of rings. */
static void a_give_back_that_gives_nothing_changes_nothing(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 64 * 1024, 1, false);
  assert_int_equal(mt_ring_write_counter(r, 1, 1), MT_OK); /* the only ring */
  assert_int_equal(mt_ring_give_back(4), 0);
  assert_false(mt_ring_given_back_any());
  int rc = MT_OK;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, write_one, &rc), 0);
  pthread_join(t, NULL);
  assert_int_equal(rc, MT_E_NOMEM);
  mt_ring_file_info info = file_info();
  assert_int_equal(info.rings_given_back, 0);
  assert_int_equal(info.claims_failed_limit, 0);
  assert_int_equal(info.claims_failed_full, 1);
  assert_int_equal(mt_ring_close(r), MT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rings_given_back_are_unmapped_kept_from_claims_and_counted),
      cmocka_unit_test(claims_racing_a_give_back_never_take_a_ring_given_back),
      cmocka_unit_test(a_claim_that_loses_its_ring_to_a_give_back_puts_it_back),
      cmocka_unit_test(a_give_back_that_gives_nothing_changes_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
