/* The consumer's guarantees under a racing producer: an end set on a live file (one-shot reads),
 * registry entries reported before the records that need them even while another thread is
 * still registering, and, through fault injection between the copy and the head re-check, a
 * batch overwritten after it was copied skipped and counted as lost, never delivered torn. And
 * polls in time order (mt_cursor_set_time_order): the rings read oldest record first. */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

#include "ring/consumer.h"
#include "ring/producer.h"

static size_t count_counters(const rt_collector *col, uint32_t id) {
  size_t n = 0;
  for (size_t i = 0; i < col->count; i++)
    n += col->records[i].type == MT_RING_TYPE_COUNTER && col->records[i].id == id;
  return n;
}

static void poll_once(mt_cursor *c, size_t *got) {
  mt_error err = {0};
  if (mt_cursor_poll(c, 0, got, &err) != MT_OK)
    fail_msg("mt_cursor_poll: %s", err.message);
}

/* ---------------------------------------------------------------------------------------------
 * mt_cursor_set_end
 * ------------------------------------------------------------------------------------------- */

static void cursor_end_delivers_only_what_was_published_before_it(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  assert_int_equal(mt_ring_register_name(r, 1, "before"), MT_OK);
  for (uint64_t i = 0; i < 10; i++)
    assert_int_equal(mt_ring_write_counter(r, 1, i), MT_OK);
  mt_cursor *c = rt_cursor(-1);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  uint64_t before = info.records_written; /* START, THREAD_START, CLOCK and the 10 counters */
  mt_cursor_set_end(c);
  for (uint64_t i = 0; i < 10; i++)
    assert_int_equal(mt_ring_write_counter(r, 2, i), MT_OK);
  assert_int_equal(mt_ring_register_name(r, 2, "after"), MT_OK);

  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  size_t got = 0;
  poll_once(c, &got);
  assert_int_equal(got, before);
  assert_true(mt_cursor_drained(c));
  poll_once(c, &got);
  assert_int_equal(got, 0);
  assert_int_equal(count_counters(&col, 1), 10);
  assert_int_equal(count_counters(&col, 2), 0);
  assert_int_equal(col.registry_entries, 1);
  const void *bytes;
  size_t len;
  assert_int_equal(mt_cursor_lookup(c, MT_RING_REGISTRY_NAME, 2, &bytes, &len), MT_E_INVALID);
  assert_int_equal(col.lost, 0);

  /* The later records are there: a cursor without an end reads them. */
  mt_cursor *all = rt_cursor(-1);
  rt_collector every = {.keep = true};
  rt_collector_attach(all, &every);
  poll_once(all, &got);
  assert_int_equal(count_counters(&every, 2), 10);
  assert_int_equal(every.registry_entries, 2);
  mt_cursor_close(all);
  rt_collector_free(&every);
  mt_cursor_close(c);
  rt_collector_free(&col);
  mt_ring_close(r);
}

/* Records present at the end but overwritten before the cursor reached them are lost, exactly;
 * nothing written after the end is delivered, whether the lap stops short of the end or passes
 * it. */
static void run_lap_past_end(uint64_t present, uint64_t after, bool expect_delivered) {
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, MT_RING_MIN_SIZE, 2, false);
  mt_cursor *c = rt_cursor(-1);
  for (uint64_t i = 0; i < present; i++)
    assert_int_equal(mt_ring_write_counter(r, 1, i), MT_OK);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  uint64_t at_end = info.records_written;
  mt_cursor_set_end(c);
  for (uint64_t i = 0; i < after; i++)
    assert_int_equal(mt_ring_write_counter(r, 2, i), MT_OK);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  size_t got = 0;
  poll_once(c, &got);
  assert_true(mt_cursor_drained(c));
  assert_int_equal(count_counters(&col, 2), 0);
  assert_int_equal(col.count + col.lost, at_end);
  assert_true(col.lost > 0);
  assert_int_equal(col.count > 0, expect_delivered);
  for (size_t i = 1; i < col.count; i++)
    assert_true(col.records[i].seq > col.records[i - 1].seq);
  poll_once(c, &got);
  assert_int_equal(got, 0);
  assert_int_equal(mt_cursor_lost_records(c), at_end - col.count);
  mt_cursor_close(c);
  rt_collector_free(&col);
  mt_ring_close(r);
}

static void cursor_end_counts_records_overwritten_before_it_was_reached(void **state) {
  (void)state;
  run_lap_past_end(300, 100, true); /* 1024-word ring: the lap takes the oldest ~100 records */
}

static void cursor_end_counts_everything_when_the_producer_laps_past_it(void **state) {
  (void)state;
  run_lap_past_end(100, 5000, false);
}

/* ---------------------------------------------------------------------------------------------
 * Registry ordering
 * ------------------------------------------------------------------------------------------- */

struct held_registration {
  mt_ring *ring;
  rt_pipe reserved, resume;
  _Atomic int armed;
};

/* Holds the first registration that reaches it between taking its place and committing. */
static void hold_registration(void *user) {
  struct held_registration *h = user;
  if (!atomic_exchange(&h->armed, 0))
    return;
  rt_signal(&h->reserved);
  rt_wait(&h->resume);
}

static void *register_first(void *p) {
  struct held_registration *h = p;
  mt_ring_register_name(h->ring, 1, "first");
  return NULL;
}

struct name_check {
  mt_cursor *cursor;
  size_t records, named, registry_entries;
};

static int note_user_int(void *user, const mt_ring_event *ev) {
  struct name_check *n = user;
  const void *bytes;
  size_t len;
  n->records++;
  if (mt_cursor_lookup(n->cursor, MT_RING_REGISTRY_NAME, ev->id, &bytes, &len) == MT_OK &&
      len == strlen("second") && memcmp(bytes, "second", len) == 0)
    n->named++;
  return MT_CURSOR_NEXT;
}

static void note_registry(void *user, unsigned kind, uint64_t id, const void *bytes,
                          size_t length) {
  (void)kind, (void)id, (void)bytes, (void)length;
  ((struct name_check *)user)->registry_entries++;
}

/* Thread A has taken the registry's next place but not committed its entry; thread B registers
 * after it and writes a record naming its entry. The record must come with B's entry known. */
static void registry_entry_behind_an_unfinished_one_comes_before_its_writers_records(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 4, false);
  mt_cursor *c = rt_cursor(-1);
  struct name_check check = {.cursor = c};
  mt_cursor_callbacks cb = {0};
  cb.user_int = note_user_int;
  cb.registry = note_registry;
  mt_cursor_set_callbacks(c, &cb, &check);

  struct held_registration h = {.ring = r, .armed = 1};
  rt_pipe_open(&h.reserved);
  rt_pipe_open(&h.resume);
  mt_ring_test_registry_reserved_user = &h;
  mt_ring_test_registry_reserved = hold_registration;
  pthread_t a;
  assert_int_equal(pthread_create(&a, NULL, register_first, &h), 0);
  rt_wait(&h.reserved);

  assert_int_equal(mt_ring_register_name(r, 2, "second"), MT_OK);
  assert_int_equal(mt_ring_register_name(r, 1, "renamed"), MT_OK); /* placed after A's */
  assert_int_equal(mt_ring_write_user_int(r, 2, 42), MT_OK);
  size_t got = 0;
  poll_once(c, &got);
  assert_int_equal(check.records, 1);
  assert_int_equal(check.named, 1);
  assert_int_equal(check.registry_entries, 2); /* A's is still being filled */

  rt_signal(&h.resume);
  pthread_join(a, NULL);
  mt_ring_test_registry_reserved = NULL;
  poll_once(c, &got);
  assert_int_equal(check.registry_entries, 3);
  /* A's entry was reported last but lies before "renamed" in the registry: "renamed" wins. */
  const void *bytes;
  size_t len;
  assert_int_equal(mt_cursor_lookup(c, MT_RING_REGISTRY_NAME, 1, &bytes, &len), MT_OK);
  assert_string_equal(bytes, "renamed");
  mt_cursor_close(c);

  /* A cursor opened now reads all three in registry order. */
  c = rt_cursor(-1);
  rt_collector col = {0};
  rt_collector_attach(c, &col);
  poll_once(c, &got);
  assert_int_equal(col.registry_entries, 3);
  assert_int_equal(mt_cursor_lookup(c, MT_RING_REGISTRY_NAME, 1, &bytes, &len), MT_OK);
  assert_string_equal(bytes, "renamed");
  mt_cursor_close(c);
  rt_collector_free(&col);
  mt_ring_close(r);
}

#define REGISTRARS 4
#define REGISTRATIONS 500

struct registrar {
  mt_ring *ring;
  uint64_t first_id;
  int failures;
};

static void *register_and_write(void *p) {
  struct registrar *a = p;
  for (uint64_t i = 0; i < REGISTRATIONS; i++) {
    uint64_t id = a->first_id + i;
    if (mt_ring_register(a->ring, MT_RING_REGISTRY_FIRST_USER_KIND, id, &id, sizeof id) != MT_OK ||
        mt_ring_write(a->ring, MT_RING_TYPE_OPAQUE_FIRST, 0, &id, 1) != MT_OK)
      a->failures++;
  }
  return NULL;
}

struct known_check {
  mt_cursor *cursor;
  _Atomic int *done;
  size_t records, unknown;
  int error;
};

static int check_known(void *user, const mt_ring_event *ev) {
  struct known_check *k = user;
  if (ev->type != MT_RING_TYPE_OPAQUE_FIRST)
    return MT_CURSOR_NEXT;
  const void *bytes;
  size_t len;
  k->records++;
  if (mt_cursor_lookup(k->cursor, MT_RING_REGISTRY_FIRST_USER_KIND, ev->payload[0], &bytes, &len) !=
          MT_OK ||
      len != 8 || memcmp(bytes, &ev->payload[0], 8) != 0)
    k->unknown++;
  return MT_CURSOR_NEXT;
}

static void *read_concurrently(void *p) {
  struct known_check *k = p;
  for (;;) {
    int done = atomic_load(k->done);
    size_t got = 0;
    if (mt_cursor_poll(k->cursor, 0, &got, NULL) != MT_OK) {
      k->error = 1;
      return NULL;
    }
    if (done && got == 0 && mt_cursor_drained(k->cursor))
      return NULL;
  }
}

/* Threads registering and writing at once, read concurrently: every record's entry is known
 * when the record arrives. */
static void registry_entries_of_racing_threads_are_known_before_their_records(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 1u << 20, REGISTRARS + 1, false);
  mt_cursor *c = rt_cursor(-1);
  _Atomic int done = 0;
  struct known_check k = {.cursor = c, .done = &done};
  mt_cursor_callbacks cb = {0};
  cb.opaque = check_known;
  mt_cursor_set_callbacks(c, &cb, &k);
  pthread_t reader;
  assert_int_equal(pthread_create(&reader, NULL, read_concurrently, &k), 0);
  pthread_t tids[REGISTRARS];
  struct registrar args[REGISTRARS];
  for (int i = 0; i < REGISTRARS; i++) {
    args[i] = (struct registrar){r, (uint64_t)i * REGISTRATIONS, 0};
    assert_int_equal(pthread_create(&tids[i], NULL, register_and_write, &args[i]), 0);
  }
  for (int i = 0; i < REGISTRARS; i++) {
    pthread_join(tids[i], NULL);
    assert_int_equal(args[i].failures, 0);
  }
  atomic_store(&done, 1);
  pthread_join(reader, NULL);
  assert_int_equal(k.error, 0);
  assert_int_equal(k.records, REGISTRARS * REGISTRATIONS);
  assert_int_equal(k.unknown, 0);
  mt_cursor_close(c);
  mt_ring_close(r);
}

/* ---------------------------------------------------------------------------------------------
 * Fault injection: the producer laps the consumer between its copy and its head re-check
 * ------------------------------------------------------------------------------------------- */

#define PAYLOAD_WORDS 6 /* 8-word records */

struct lap {
  mt_ring *ring;
  uint64_t next_index; /* of the records the producer writes */
  uint64_t lap_records;
  int calls;
};

static void write_filled(struct lap *l, uint64_t n) {
  uint64_t payload[PAYLOAD_WORDS];
  for (uint64_t i = 0; i < n; i++, l->next_index++) {
    rt_fill(payload, PAYLOAD_WORDS, 1, l->next_index);
    assert_int_equal(mt_ring_write(l->ring, MT_RING_TYPE_OPAQUE_FIRST, 0, payload, PAYLOAD_WORDS),
                     MT_OK);
  }
}

/* Once: the producer writes enough to overwrite what was just copied, and a third of the copy is
 * replaced by what is in the ring now, as if those words had been read late. */
static void lap_after_copy(void *user, uint32_t ring, uint64_t *copy, const _Atomic uint64_t *live,
                           size_t words) {
  (void)ring;
  struct lap *l = user;
  if (l->calls++)
    return;
  write_filled(l, l->lap_records);
  for (size_t k = 1; k < words; k += 3)
    copy[k] = atomic_load(&live[k]);
}

struct intact {
  uint64_t verified, torn, last_index;
  bool any;
};

static bool check_intact(const mt_ring_event *ev, void *arg) {
  struct intact *t = arg;
  if (ev->type != MT_RING_TYPE_OPAQUE_FIRST)
    return true;
  uint64_t stream, index;
  if (!rt_verify(ev->payload, ev->words, &stream, &index) || stream != 1 ||
      (t->any && index <= t->last_index)) {
    t->torn++;
    return false;
  }
  t->any = true;
  t->last_index = index;
  t->verified++;
  return true;
}

static void run_lapped_copy(uint64_t before, uint64_t lap_records) {
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, MT_RING_MIN_SIZE, 2, false);
  struct lap l = {.ring = r, .lap_records = lap_records};
  write_filled(&l, before);
  mt_cursor *c = rt_cursor(-1);
  struct intact t = {0};
  rt_collector col = {.check = check_intact, .check_arg = &t};
  rt_collector_attach(c, &col);
  mt_cursor_test_after_copy_user = &l;
  mt_cursor_test_after_copy = lap_after_copy;
  mt_error err = {0};
  size_t got = 0;
  int rc = mt_cursor_poll(c, 0, &got, &err);
  mt_cursor_test_after_copy = NULL;
  if (rc != MT_OK)
    fail_msg("a lapped copy was reported as corruption: %s", err.message);
  assert_int_equal(l.calls > 0, true);
  assert_int_equal(mt_cursor_lapped_copies(c), 1);
  write_filled(&l, 10);
  rt_drain(c, false);
  assert_int_equal(t.torn, 0);
  assert_true(col.lost > 0);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(col.seen + col.lost, info.records_written);
  assert_true(t.last_index == l.next_index - 1); /* the newest record arrived */
  mt_cursor_close(c);
  rt_collector_free(&col);
  mt_ring_close(r);
}

/* The new head falls inside the copied batch: the records before it are dropped, those after it
 * delivered. */
static void copy_lapped_in_its_middle_skips_and_counts_the_overwritten_part(void **state) {
  (void)state;
  run_lapped_copy(100, 40);
}

/* The new head is past the whole batch: all of it is dropped, reading resumes at the head. */
static void copy_lapped_entirely_is_dropped_and_counted(void **state) {
  (void)state;
  run_lapped_copy(100, 300);
}

/* ---------------------------------------------------------------------------------------------
 * mt_cursor_set_time_order, mt_cursor_oldest_unread
 * ------------------------------------------------------------------------------------------- */

#define PHASE_RECORDS 4096

typedef struct phases {
  mt_ring *ring;
  sem_t go[2], done[2];
} phases;

static void write_phase(mt_ring *r, uint32_t id) {
  for (uint64_t i = 0; i < PHASE_RECORDS; i++)
    assert_int_equal(mt_ring_write_counter(r, id, i), MT_OK);
  struct timespec pause = {0, 1000000}; /* stamps of two phases never meet */
  nanosleep(&pause, NULL);
}

/* Thread A: its ring gets phase 1, then (after thread B's phase 2) phase 3. */
static void *thread_a(void *arg) {
  phases *p = arg;
  write_phase(p->ring, 1);
  sem_post(&p->done[0]);
  sem_wait(&p->go[1]);
  write_phase(p->ring, 3);
  return NULL;
}

static void *thread_b(void *arg) {
  phases *p = arg;
  sem_wait(&p->go[0]);
  write_phase(p->ring, 2);
  sem_post(&p->done[1]);
  return NULL;
}

/* Phases 1 and 3 in one ring, phase 2 between them in time in another. Each time-ordered poll
 * starts at the oldest record unread in any ring (a poll in turn starts at the next ring, and the
 * first ring's phase 3 would come before phase 2 ends), so that phase 3 begins only after
 * phase 2 is read but for at most one poll's worth; every record comes once, in its ring's
 * order. */
static void time_ordered_polls_read_the_ring_with_the_oldest_record_first(void **state) {
  (void)state;
  phases p = {.ring = rt_open(MT_RING_LOSSLESS, 1u << 20, 4, false)};
  for (int i = 0; i < 2; i++)
    assert_int_equal(sem_init(&p.go[i], 0, 0) | sem_init(&p.done[i], 0, 0), 0);
  pthread_t a, b;
  assert_int_equal(pthread_create(&a, NULL, thread_a, &p), 0);
  assert_int_equal(pthread_create(&b, NULL, thread_b, &p), 0);
  sem_wait(&p.done[0]);
  sem_post(&p.go[0]);
  sem_wait(&p.done[1]);
  sem_post(&p.go[1]);
  assert_int_equal(pthread_join(a, NULL) | pthread_join(b, NULL), 0);

  mt_cursor *c = rt_cursor(-1);
  mt_cursor_set_time_order(c, true);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  enum { BUDGET = 100 };
  size_t got = 0, polls = 0;
  do {
    size_t before = col.count;
    uint64_t oldest = 0;
    bool any = mt_cursor_oldest_unread(c, &oldest);
    mt_error err = {0};
    assert_int_equal(mt_cursor_poll(c, BUDGET, &got, &err), MT_OK);
    assert_true(got <= BUDGET);
    assert_int_equal(any, got > 0);
    if (got)
      assert_int_equal(col.records[before].timestamp, oldest);
    polls++;
  } while (got);
  assert_true(polls > 3 * PHASE_RECORDS / BUDGET);

  /* Each phase whole and in order; phase 3 before the end of phase 2 at most one poll's worth. */
  size_t count[4] = {0}, third_before_second_ends = 0;
  uint32_t ring_of[4] = {0};
  for (size_t i = 0; i < col.count; i++) {
    const rt_record *rec = &col.records[i];
    if (rec->type != MT_RING_TYPE_COUNTER)
      continue;
    assert_true(rec->id >= 1 && rec->id <= 3);
    assert_int_equal(rec->payload[0], count[rec->id]);
    if (!count[rec->id]++)
      ring_of[rec->id] = rec->ring;
    if (rec->id == 3 && count[2] < PHASE_RECORDS)
      third_before_second_ends++;
  }
  for (int k = 1; k <= 3; k++)
    assert_int_equal(count[k], PHASE_RECORDS);
  assert_true(third_before_second_ends <= BUDGET);
  assert_int_equal(ring_of[1], ring_of[3]);
  assert_int_not_equal(ring_of[1], ring_of[2]);
  assert_int_equal(col.lost, 0);
  mt_cursor_close(c);
  rt_collector_free(&col);
  mt_ring_close(p.ring);
  for (int i = 0; i < 2; i++) {
    sem_destroy(&p.go[i]);
    sem_destroy(&p.done[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cursor_end_delivers_only_what_was_published_before_it),
      cmocka_unit_test(cursor_end_counts_records_overwritten_before_it_was_reached),
      cmocka_unit_test(cursor_end_counts_everything_when_the_producer_laps_past_it),
      cmocka_unit_test(registry_entry_behind_an_unfinished_one_comes_before_its_writers_records),
      cmocka_unit_test(registry_entries_of_racing_threads_are_known_before_their_records),
      cmocka_unit_test(copy_lapped_in_its_middle_skips_and_counts_the_overwritten_part),
      cmocka_unit_test(copy_lapped_entirely_is_dropped_and_counted),
      cmocka_unit_test(time_ordered_polls_read_the_ring_with_the_oldest_record_first),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
