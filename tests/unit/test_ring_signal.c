/* Writes from signal handlers: a handler that interrupts a write on the same thread has its own
 * write dropped and counted, and the interrupted record arrives whole. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

static mt_ring *ring;
static uint64_t *guarded; /* a payload whose page is made unreadable */
static size_t page_size;
static _Atomic int nested_rc = 1;

/* SIGSEGV from inside mt_ring_write (reading the payload): the write is under way. */
static void on_fault(int sig, siginfo_t *info, void *context) {
  (void)sig, (void)info, (void)context;
  atomic_store(&nested_rc, mt_ring_write_counter(ring, 2, 2));
  mprotect(guarded, page_size, PROT_READ | PROT_WRITE);
}

static void write_interrupted_by_signal_handler_is_kept_and_nested_write_counted(void **state) {
  (void)state;
  ring = rt_open(MT_RING_FLIGHT_RECORDER, 0, 2, false);
  page_size = (size_t)sysconf(_SC_PAGESIZE);
  guarded = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(guarded != MAP_FAILED);
  rt_fill(guarded, 6, 9, 1);
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGSEGV, &sa, &old), 0);
  assert_int_equal(mt_ring_write_counter(ring, 1, 1), MT_OK); /* the thread has its ring */
  mprotect(guarded, page_size, PROT_NONE);
  int rc = mt_ring_write(ring, MT_RING_TYPE_OPAQUE_FIRST, 3, guarded, 6);
  sigaction(SIGSEGV, &old, NULL);
  assert_int_equal(rc, MT_OK);
  assert_int_equal(atomic_load(&nested_rc), MT_E_STATE);

  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  rt_drain(c, false);
  size_t opaque = 0, nested = 0;
  for (size_t i = 0; i < col.count; i++) {
    rt_record *r = &col.records[i];
    if (r->type == MT_RING_TYPE_OPAQUE_FIRST) {
      uint64_t stream, index;
      assert_true(rt_verify(r->payload, r->words, &stream, &index));
      assert_int_equal(stream, 9);
      opaque++;
    }
    nested += r->type == MT_RING_TYPE_COUNTER && r->id == 2;
  }
  assert_int_equal(opaque, 1);
  assert_int_equal(nested, 0);
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(info.records_nested, 1);
  assert_int_equal(col.lost, 0);
  mt_cursor_close(c);
  mt_ring_close(ring);
  munmap(guarded, page_size);
  rt_collector_free(&col);
}

/* A storm of asynchronous signals on a thread that writes without pause. */
static _Atomic uint64_t handler_written, handler_nested, handler_calls;

static void on_usr1(int sig) {
  (void)sig;
  uint64_t n = atomic_fetch_add(&handler_calls, 1);
  uint64_t payload[5];
  rt_fill(payload, 5, 2, n);
  int rc = mt_ring_write(ring, MT_RING_TYPE_OPAQUE_FIRST + 1, 0, payload, 5);
  if (rc == MT_OK)
    atomic_fetch_add(&handler_written, 1);
  else if (rc == MT_E_STATE)
    atomic_fetch_add(&handler_nested, 1);
}

#define STORM_SIGNALS 3000
#define STORM_MAX_RECORDS 300000

static _Atomic int writer_done;
static uint64_t storm_records;

/* Writes until enough signals have landed (or a bound, for sanitizers that defer signals). */
static void *write_through_storm(void *p) {
  (void)p;
  uint64_t payload[6];
  uint64_t i = 0;
  for (; i < STORM_MAX_RECORDS && atomic_load(&handler_calls) < STORM_SIGNALS; i++) {
    rt_fill(payload, 6, 1, i);
    mt_ring_write(ring, MT_RING_TYPE_OPAQUE_FIRST, 0, payload, 6);
  }
  storm_records = i;
  atomic_store(&writer_done, 1);
  return NULL;
}

static void signal_storm_tears_nothing_and_accounts_for_every_handler_write(void **state) {
  (void)state;
  ring = rt_open(MT_RING_FLIGHT_RECORDER, 32u << 20, 2, false); /* holds the whole run */
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
  pthread_t writer;
  assert_int_equal(pthread_create(&writer, NULL, write_through_storm, NULL), 0);
  while (!atomic_load(&writer_done)) {
    uint64_t before = atomic_load(&handler_calls);
    pthread_kill(writer, SIGUSR1);
    for (int spin = 0;
         spin < 100000 && atomic_load(&handler_calls) == before && !atomic_load(&writer_done);
         spin++) {
    }
  }
  pthread_join(writer, NULL);
  sigaction(SIGUSR1, &old, NULL);

  mt_cursor *c = rt_cursor(-1);
  rt_collector col = {.keep = true};
  rt_collector_attach(c, &col);
  rt_drain(c, false);
  uint64_t main_records = 0, handler_records = 0, next = 0;
  for (size_t i = 0; i < col.count; i++) {
    rt_record *r = &col.records[i];
    if (r->type != MT_RING_TYPE_OPAQUE_FIRST && r->type != MT_RING_TYPE_OPAQUE_FIRST + 1)
      continue;
    uint64_t stream, index;
    assert_true(rt_verify(r->payload, r->words, &stream, &index));
    if (r->type == MT_RING_TYPE_OPAQUE_FIRST) {
      assert_int_equal(stream, 1);
      assert_int_equal(index, next++);
      main_records++;
    } else {
      assert_int_equal(stream, 2);
      handler_records++;
    }
  }
  mt_ring_file_info info;
  mt_cursor_info(c, &info);
  assert_int_equal(col.lost, 0);
  assert_int_equal(main_records, storm_records);
  assert_int_equal(handler_records, atomic_load(&handler_written));
  assert_int_equal(info.records_nested, atomic_load(&handler_nested));
  assert_int_equal(atomic_load(&handler_written) + atomic_load(&handler_nested),
                   atomic_load(&handler_calls));
  print_message("signals handled: %llu, nested writes dropped: %llu\n",
                (unsigned long long)atomic_load(&handler_calls),
                (unsigned long long)atomic_load(&handler_nested));
  mt_cursor_close(c);
  mt_ring_close(ring);
  rt_collector_free(&col);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(write_interrupted_by_signal_handler_is_kept_and_nested_write_counted),
      cmocka_unit_test(signal_storm_tears_nothing_and_accounts_for_every_handler_write),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
