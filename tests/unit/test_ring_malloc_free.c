/* The producer never calls malloc: it runs inside an interposed malloc. This test executable
 * interposes malloc, calloc, realloc and free itself and counts the calls made by a thread while
 * it is being watched: opening (after the first time), claiming, writing, registering, pausing,
 * thread exit, closing, and the fork child's re-initialisation must make none. (Sanitizer builds
 * own malloc: the test is skipped there.) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ring_testlib.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif

static __thread int watching;
static _Atomic int calls;

#ifndef SANITIZED
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void __libc_free(void *p);

void *malloc(size_t size) {
  if (watching)
    atomic_fetch_add(&calls, 1);
  return __libc_malloc(size);
}
void *calloc(size_t n, size_t size) {
  if (watching)
    atomic_fetch_add(&calls, 1);
  return __libc_calloc(n, size);
}
void *realloc(void *p, size_t size) {
  if (watching)
    atomic_fetch_add(&calls, 1);
  return __libc_realloc(p, size);
}
void free(void *p) {
  if (watching && p)
    atomic_fetch_add(&calls, 1);
  __libc_free(p);
}
#endif

static mt_ring *ring;

static void *watched_thread(void *p) {
  (void)p;
  watching = 1; /* stays on through the thread's exit and its ring's release */
  uint64_t payload[4] = {1, 2, 3, 4};
  for (int i = 0; i < 100000; i++) /* claims, wraps, reclaims */
    mt_ring_write(ring, MT_RING_TYPE_OPAQUE_FIRST, 0, payload, (size_t)(i % 5));
  mt_ring_write_user_custom(ring, 1, "bytes", 5);
  mt_ring_register_name(ring, 9, "a name");
  return NULL;
}

static void producer_calls_no_malloc(void **state) {
  (void)state;
#ifdef SANITIZED
  skip();
#endif
  /* The first open registers the key and the fork and exit handlers: not watched. */
  mt_ring_close(rt_open(MT_RING_FLIGHT_RECORDER, 0, 4, false));
  mt_ring_options o;
  mt_ring_options_init(&o, NULL);
  o.dir = tu_temp_dir();
  o.ring_size = MT_RING_MIN_SIZE;
  o.max_rings = 4;
  watching = 1;
  int rc = mt_ring_open(&ring, &o, NULL);
  mt_ring_pause(ring);
  mt_ring_resume(ring);
  watching = 0;
  assert_int_equal(rc, MT_OK);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, watched_thread, NULL), 0);
  pthread_join(t, NULL);

  fflush(NULL);
  watching = 1;
  pid_t pid = fork(); /* the parent's and the child's fork handlers run watched */
  if (pid == 0) {
    int bad = atomic_load(&calls) != 0;
    bad |= mt_ring_write_counter(ring, 1, 1) != MT_OK; /* claims in the child's new file */
    bad |= atomic_load(&calls) != 0;
    _exit(bad);
  }
  mt_ring_close(ring);
  watching = 0;
  assert_int_equal(rt_wait_child(pid), 0);
  assert_int_equal(atomic_load(&calls), 0);

  /* The counting works: this test would see an allocation. */
  void *(*volatile allocate)(size_t) = malloc; /* not elided as a malloc/free pair */
  watching = 1;
  free(allocate(16));
  watching = 0;
  assert_int_equal(atomic_load(&calls), 2);
  char path[4096];
  mt_ring_file_path(path, sizeof path, tu_temp_dir(), pid);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(producer_calls_no_malloc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
