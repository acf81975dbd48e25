/* Writers for further domains sharing one trace file (memtrace's live tracer): threads write their
 * own domains concurrently, packets never interleave, object ids never collide, and the result
 * reads back domain for domain in order. Runs under ThreadSanitizer in CI (label tsan). */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/hashmap.h"
#include "testutil.h"
#include "tracegen.h"

enum { PER_THREAD = 20000, THREADS = 3 };

typedef struct worker {
  mt_writer *w;
  uint16_t domain;
  int64_t ids[PER_THREAD];
  int status;
} worker;

static void *run_worker(void *arg) {
  worker *k = arg;
  uint64_t stack[5] = {0, 0, 300, 200, 100};
  for (int i = 0; i < PER_THREAD && !k->status; i++) {
    int64_t now = TG_START + 1000 + i;
    stack[0] = 1000u * k->domain + (uint64_t)(i % 50) + 1; /* domain-specific allocation sites */
    stack[1] = (uint64_t)k->domain + 7;
    k->status = mt_writer_put_alloc(k->w, now, 3, 1, MT_SOURCE_EXTERNAL, stack, 5, tg_resolve, NULL,
                                    &k->ids[i], NULL);
    if (!k->status && i >= 10)
      k->status = mt_writer_put_collect(k->w, now, k->ids[i - 10], NULL);
  }
  return NULL;
}

static void threads_write_their_own_domains_into_one_file(void **state) {
  (void)state;
  int fd;
  mt_writer *main_writer = tg_writer(3, 1.0, &fd);
  worker *workers = calloc(THREADS, sizeof *workers);
  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; t++) {
    workers[t].domain = (uint16_t)(t + 1);
    assert_int_equal(mt_writer_create_domain(main_writer, workers[t].domain, TG_START + 500,
                                             &workers[t].w, NULL),
                     MT_OK);
  }
  for (int t = 0; t < THREADS; t++)
    assert_int_equal(pthread_create(&threads[t], NULL, run_worker, &workers[t]), 0);
  for (int t = 0; t < THREADS; t++) {
    pthread_join(threads[t], NULL);
    assert_int_equal(workers[t].status, MT_OK);
  }
  assert_int_equal(mt_writer_close(main_writer, NULL), MT_OK); /* closed before its children */
  for (int t = 0; t < THREADS; t++)
    assert_int_equal(mt_writer_close(workers[t].w, NULL), MT_OK);

  size_t size, n;
  uint8_t *data = tg_fd_bytes(fd, &size);
  tg_event *ev = tg_read_all(data, size, true, &n, NULL);
  assert_int_equal(n, THREADS * (2 * PER_THREAD - 10));
  mt_hashmap seen = {0};
  size_t next_alloc[THREADS + 1] = {0};
  for (size_t i = 0; i < n; i++) {
    int d = ev[i].ev.domain;
    assert_true(d >= 1 && d <= THREADS);
    if (ev[i].ev.kind != MT_EVENT_ALLOC)
      continue;
    size_t k = next_alloc[d]++;
    assert_int_equal(ev[i].ev.obj_id, workers[d - 1].ids[k]);   /* in order, within its domain */
    assert_false(mt_hashmap_get(&seen, ev[i].ev.obj_id, NULL)); /* unique across domains */
    mt_hashmap_put(&seen, ev[i].ev.obj_id, 1);
    assert_int_equal(ev[i].backtrace[4], (int64_t)(1000u * d + k % 50 + 1));
  }
  for (int t = 1; t <= THREADS; t++)
    assert_int_equal(next_alloc[t], PER_THREAD);
  mt_hashmap_free(&seen);
  tg_free_events(ev, n);
  free(data);
  free(workers);
  close(fd);
}

static void a_domain_has_one_writer(void **state) {
  (void)state;
  int fd;
  mt_writer *w = tg_writer(3, 1.0, &fd), *d1, *again;
  mt_error err;
  assert_int_equal(mt_writer_create_domain(w, 1, TG_START, &d1, &err), MT_OK);
  assert_int_equal(mt_writer_create_domain(w, 1, TG_START, &again, &err), MT_E_INVALID);
  assert_int_equal(mt_writer_create_domain(w, 0, TG_START, &again, &err), MT_E_INVALID);
  uint64_t stack[] = {1};
  /* The multiplexed writer may not take over domain 1 either, nor may d1 switch domains. */
  assert_int_equal(mt_writer_put_alloc_in(w, 1, TG_START + 1, 1, 1, MT_SOURCE_MINOR, stack, 1,
                                          tg_resolve, NULL, NULL, &err),
                   MT_E_INVALID);
  assert_int_equal(mt_writer_put_alloc_in(d1, 2, TG_START + 1, 1, 1, MT_SOURCE_MINOR, stack, 1,
                                          tg_resolve, NULL, NULL, &err),
                   MT_E_INVALID);
  assert_non_null(strstr(err.message, "domain 1 only"));
  assert_int_equal(mt_writer_close(d1, NULL), MT_OK);
  assert_int_equal(mt_writer_close(w, NULL), MT_OK);
  close(fd);
  w = tg_writer(2, 1.0, &fd);
  assert_int_equal(mt_writer_create_domain(w, 1, TG_START, &d1, &err), MT_E_INVALID);
  assert_int_equal(mt_writer_close(w, NULL), MT_OK);
  close(fd);
}

typedef struct blocking_worker {
  mt_writer *w;
  _Atomic int flushes;
  _Atomic int status; /* read by the main thread while the worker runs */
} blocking_worker;

/* Writes and flushes until a write fails: on a pipe nobody reads, it blocks inside write(2),
 * holding the lock the writers of the trace share. */
static void *flush_forever(void *arg) {
  blocking_worker *k = arg;
  uint64_t stack[] = {3, 2, 1};
  for (int64_t i = 1; !k->status; i++) {
    k->status = mt_writer_put_alloc(k->w, TG_START + i, 3, 1, MT_SOURCE_EXTERNAL, stack, 3,
                                    tg_resolve, NULL, NULL, NULL);
    if (!k->status)
      k->status = mt_writer_flush(k->w, NULL);
    k->flushes++;
  }
  return NULL;
}

/* fork() copies the trace's lock as it is: held, when another thread is writing a packet. A child
 * that then closes its copy of a writer (at exit, say) must not wait for that lock forever. */
static void a_forked_child_can_close_a_writer_while_another_thread_writes(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  int p[2];
  assert_int_equal(pipe(p), 0);
  fcntl(p[1], F_SETPIPE_SZ, 4096);
  mt_trace_info info = tg_info(1.0);
  mt_writer *w;
  blocking_worker k = {0};
  assert_int_equal(mt_writer_create(&w, p[1], &info, NULL, NULL), MT_OK);
  assert_int_equal(mt_writer_create_domain(w, 1, TG_START, &k.w, NULL), MT_OK);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, flush_forever, &k), 0);
  /* Wait until the worker is stuck in write(2): the pipe is full and it stops making progress. */
  for (int stalled = 0, last = -1; stalled < 50;) {
    usleep(10000);
    int now = k.flushes;
    stalled = now == last ? stalled + 1 : 0;
    last = now;
  }
  assert_int_equal(k.status, MT_OK);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    alarm(10); /* a deadlock shows as death by SIGALRM */
    _exit(mt_writer_close(w, NULL) == MT_E_FORKED ? 0 : 1);
  }
  int status;
  assert_int_equal(waitpid(child, &status, 0), child);
  close(p[0]); /* the worker's write fails with EPIPE, and it stops */
  pthread_join(thread, NULL);
  assert_int_equal(k.status, MT_E_IO);
  mt_writer_close(k.w, NULL);
  mt_writer_close(w, NULL);
  close(p[1]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("the child's mt_writer_close %s", WIFSIGNALED(status) ? "hung" : "failed");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(threads_write_their_own_domains_into_one_file),
      cmocka_unit_test(a_domain_has_one_writer),
      cmocka_unit_test(a_forked_child_can_close_a_writer_while_another_thread_writes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
