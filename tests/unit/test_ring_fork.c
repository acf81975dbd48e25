/* fork: the child gets its own ring file, with the parent's registry; the parent's file never
 * sees a record of the child, and the other way round. With fork_untraced, the child gets no
 * file at all and its writes are dropped. A copy of the process made by the clone system call
 * without fork handlers writes nothing into its parent's file either. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ring/producer.h"

#include "ring_testlib.h"
#include "testutil.h"

enum { PARENT_BEFORE = 1, PARENT_AFTER = 2, CHILD = 3 };

static size_t count_counter(const rt_collector *c, unsigned id) {
  size_t n = 0;
  for (size_t i = 0; i < c->count; i++)
    n += c->records[i].type == MT_RING_TYPE_COUNTER && c->records[i].id == id;
  return n;
}

static const rt_record *find_lifecycle(const rt_collector *c, unsigned id) {
  for (size_t i = 0; i < c->count; i++)
    if (c->records[i].type == MT_RING_TYPE_LIFECYCLE && c->records[i].id == id)
      return &c->records[i];
  return NULL;
}

/* This process's file, closed: 10 PARENT_BEFORE and 20 PARENT_AFTER counters and not one of a
 * child's, and the FORK_PARENT record when `forked` (a fork through the handlers). */
static void parent_file_holds_only_its_own(bool forked) {
  mt_cursor *pc = rt_cursor(getpid());
  rt_collector parent = {.keep = true};
  rt_collector_attach(pc, &parent);
  rt_drain(pc, true);
  assert_int_equal(count_counter(&parent, PARENT_BEFORE), 10);
  assert_int_equal(count_counter(&parent, PARENT_AFTER), 20);
  assert_int_equal(count_counter(&parent, CHILD), 0);
  if (forked)
    assert_non_null(find_lifecycle(&parent, MT_RING_LIFECYCLE_FORK_PARENT));
  mt_cursor_close(pc);
  rt_collector_free(&parent);
}

static void parent_and_child_each_write_their_own_file(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 4, true);
  assert_int_equal(mt_ring_register_name(r, 1, "before fork"), MT_OK);
  for (int i = 0; i < 100; i++)
    mt_ring_write_counter(r, PARENT_BEFORE, (uint64_t)i);
  rt_pipe child_done;
  rt_pipe_open(&child_done);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int bad = 0;
    for (int i = 0; i < 50; i++)
      bad |= mt_ring_write_counter(r, CHILD, (uint64_t)i) != MT_OK;
    bad |= mt_ring_register_name(r, 2, "child only") != MT_OK;
    mt_ring_close(r); /* preserved: the test reads it */
    rt_signal(&child_done);
    _exit(bad ? 96 : 0);
  }
  for (int i = 0; i < 70; i++)
    mt_ring_write_counter(r, PARENT_AFTER, (uint64_t)i);
  rt_wait(&child_done);
  assert_int_equal(rt_wait_child(pid), 0);
  mt_ring_close(r);

  mt_cursor *pc = rt_cursor(getpid()), *cc = rt_cursor(pid);
  rt_collector parent = {.keep = true}, child = {.keep = true};
  rt_collector_attach(pc, &parent);
  rt_collector_attach(cc, &child);
  rt_drain(pc, true);
  rt_drain(cc, true);

  assert_int_equal(count_counter(&parent, PARENT_BEFORE), 100);
  assert_int_equal(count_counter(&parent, PARENT_AFTER), 70);
  assert_int_equal(count_counter(&parent, CHILD), 0);
  assert_int_equal(count_counter(&child, CHILD), 50);
  assert_int_equal(count_counter(&child, PARENT_BEFORE), 0);
  assert_int_equal(count_counter(&child, PARENT_AFTER), 0);

  const rt_record *forked = find_lifecycle(&parent, MT_RING_LIFECYCLE_FORK_PARENT);
  const rt_record *born = find_lifecycle(&child, MT_RING_LIFECYCLE_FORK_CHILD);
  assert_non_null(forked);
  assert_non_null(born);
  assert_int_equal(born->payload[0], getpid());
  assert_int_equal(born->payload[1], forked->payload[0]); /* the same fork */
  assert_null(find_lifecycle(&child, MT_RING_LIFECYCLE_START));

  mt_ring_file_info info;
  mt_cursor_info(cc, &info);
  assert_int_equal(info.pid, pid);
  assert_int_equal(info.parent_pid, getpid());
  assert_int_equal(info.fork_number, forked->payload[0]);
  const void *name;
  size_t len;
  assert_int_equal(mt_cursor_lookup(cc, MT_RING_REGISTRY_NAME, 1, &name, &len), MT_OK);
  assert_string_equal(name, "before fork"); /* inherited */
  assert_int_equal(mt_cursor_lookup(cc, MT_RING_REGISTRY_NAME, 2, &name, &len), MT_OK);
  assert_int_equal(mt_cursor_lookup(pc, MT_RING_REGISTRY_NAME, 2, &name, &len), MT_E_INVALID);

  mt_cursor_close(pc);
  mt_cursor_close(cc);
  rt_collector_free(&parent);
  rt_collector_free(&child);
}

static void untraced_fork_child_creates_no_file_and_leaves_the_parent_alone(void **state) {
  (void)state;
  mt_ring_options o;
  mt_error err = {0};
  assert_int_equal(mt_ring_options_init(&o, &err), MT_OK);
  o.dir = tu_temp_dir();
  o.max_rings = 4;
  o.preserve = true;
  o.registry_size = 64 * 1024;
  o.fork_untraced = true;
  mt_ring *r = NULL;
  assert_int_equal(mt_ring_open(&r, &o, &err), MT_OK);
  char parent_path[4096];
  snprintf(parent_path, sizeof parent_path, "%s", mt_ring_path(r));
  for (int i = 0; i < 10; i++)
    mt_ring_write_counter(r, PARENT_BEFORE, (uint64_t)i);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int bad = 0;
    for (int i = 0; i < 50; i++)
      bad |= mt_ring_write_counter(r, CHILD, (uint64_t)i) != MT_E_STATE;
    bad |= mt_ring_close(r) != MT_E_STATE;
    struct stat st;
    bad |= stat(parent_path, &st) != 0; /* the parent's file is not removed by the child */
    _exit(bad ? 96 : 0);
  }
  assert_int_equal(rt_wait_child(pid), 0);
  for (int i = 0; i < 20; i++)
    mt_ring_write_counter(r, PARENT_AFTER, (uint64_t)i);
  char child_path[4096];
  assert_int_equal(mt_ring_file_path(child_path, sizeof child_path, tu_temp_dir(), pid), MT_OK);
  struct stat st;
  assert_int_not_equal(stat(child_path, &st), 0);
  mt_ring_close(r);
  parent_file_holds_only_its_own(true);
}

/* The clone system call called directly, as fork makes a process but with no fork handler run:
 * the child has the parent's memory (the ring's positions of the writing thread included) and
 * the file's shared mapping. Before the owner page its writes went into the ring the parent's
 * thread owns, interleaved with the parent's. */
static void raw_clone_copy_writes_nothing_into_its_parents_file(void **state) {
  (void)state;
  mt_ring *r = rt_open(MT_RING_FLIGHT_RECORDER, 0, 4, true);
  for (int i = 0; i < 10; i++)
    mt_ring_write_counter(r, PARENT_BEFORE, (uint64_t)i);
  assert_false(mt_ring_is_copy());
  fflush(NULL);
  pid_t pid = (pid_t)syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, NULL);
  assert_true(pid >= 0);
  if (pid == 0) {
    int bad = !mt_ring_is_copy();
    for (int i = 0; i < 50; i++)
      bad |= (mt_ring_write_counter(r, CHILD, (uint64_t)i) != MT_E_STATE) << 1;
    bad |= (mt_ring_register_name(r, 2, "child only") != MT_E_STATE) << 2;
    bad |= (mt_ring_close(r) != MT_E_STATE) << 3;
    struct stat st;
    bad |= (stat(mt_ring_path(r), &st) != 0) << 4; /* the parent's file stays */
    _exit(bad ? 64 + bad : 0);
  }
  assert_int_equal(rt_wait_child(pid), 0);
  /* A copy whose first call is a close, a pause or an exit (the exit handler closes) must not
   * stop, pause or unlink its parent's file either. */
  pid = (pid_t)syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, NULL);
  assert_true(pid >= 0);
  if (pid == 0) {
    int bad = (mt_ring_pause(r) != MT_E_STATE) | (mt_ring_close(r) != MT_E_STATE) << 1;
    _exit(bad ? 64 + bad : 0);
  }
  assert_int_equal(rt_wait_child(pid), 0);
  pid = (pid_t)syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, NULL);
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("MEMTAP_KEEP_TEMP", "1", 1); /* the test library's own exit handler: not this one */
    exit(0);                            /* through the ring's exit handler */
  }
  assert_int_equal(rt_wait_child(pid), 0);
  struct stat st;
  assert_int_equal(stat(mt_ring_path(r), &st), 0);
  for (int i = 0; i < 20; i++)
    assert_int_equal(mt_ring_write_counter(r, PARENT_AFTER, (uint64_t)i), MT_OK);
  assert_false(mt_ring_is_copy());
  mt_ring_close(r);
  parent_file_holds_only_its_own(false);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parent_and_child_each_write_their_own_file),
      cmocka_unit_test(untraced_fork_child_creates_no_file_and_leaves_the_parent_alone),
      cmocka_unit_test(raw_clone_copy_writes_nothing_into_its_parents_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
