/* libmemtap-preload.so on real programs (tracer_prog.c, tracer_prog_exceptions.cpp): the test runs
 * them with LD_PRELOAD and MEMTAP_RECORD=1 into a preserved ring file, reads the file with a
 * cursor and checks the records against what the program did; and checks that the program's
 * output is the same as without the shim. The end-to-end suite through `memtap record` is
 * tests/integration/; these tests look at the shim's own records. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "memtap/ring.h"
#include "memtap/tracer.h"
#include "testutil.h"

#ifndef MEMTAP_PRELOAD_PATH
#error "MEMTAP_PRELOAD_PATH must name libmemtap-preload.so"
#endif

typedef struct record {
  unsigned type, id;
  size_t words;
  uint64_t payload[12];
} record;

typedef struct module_entry {
  uint64_t serial, low, high;
  size_t seen_at; /* records delivered before the entry */
  char path[256];
} module_entry;

typedef struct records {
  record *r;
  size_t count, cap;
  module_entry modules[64];
  size_t module_count;
  uint64_t main_low, main_high; /* the main program's module (registry serial 1) */
  int process_entries;
  double process_rate;
  uint32_t process_flags;
} records;

static int collect(void *user, const mt_ring_event *ev) {
  records *rs = user;
  if (ev->type < MT_RING_TYPE_OPAQUE_FIRST)
    return MT_CURSOR_NEXT;
  if (rs->count == rs->cap) {
    rs->cap = rs->cap ? rs->cap * 2 : 256;
    rs->r = realloc(rs->r, rs->cap * sizeof *rs->r);
    assert_non_null(rs->r);
  }
  record *r = &rs->r[rs->count++];
  memset(r, 0, sizeof *r);
  r->type = ev->type;
  r->id = ev->id;
  r->words = ev->words;
  memcpy(r->payload, ev->payload, (ev->words < 12 ? ev->words : 12) * 8);
  return MT_CURSOR_NEXT;
}

static void collect_registry(void *user, unsigned kind, uint64_t id, const void *bytes,
                             size_t length) {
  records *rs = user;
  if (kind == MT_TRACER_REGISTRY_MODULE && length >= sizeof(mt_tracer_module)) {
    mt_tracer_module m;
    memcpy(&m, bytes, sizeof m);
    assert_int_equal(length, sizeof m + m.build_id_length + m.path_length);
    if (id == 1) {
      rs->main_low = m.low;
      rs->main_high = m.high;
    }
    if (rs->module_count < 64) {
      module_entry *e = &rs->modules[rs->module_count++];
      e->serial = id;
      e->seen_at = rs->count;
      e->low = m.low;
      e->high = m.high;
      size_t n = m.path_length < sizeof e->path - 1 ? m.path_length : sizeof e->path - 1;
      memcpy(e->path, (const char *)bytes + sizeof m + m.build_id_length, n);
      e->path[n] = 0;
    }
  }
  if (kind == MT_TRACER_REGISTRY_PROCESS && length >= sizeof(mt_tracer_process)) {
    mt_tracer_process p;
    memcpy(&p, bytes, sizeof p);
    rs->process_entries++;
    rs->process_rate = p.sample_rate;
    rs->process_flags = p.flags;
  }
}

static bool ring_exists(int pid) {
  char path[4096];
  assert_int_equal(mt_ring_file_path(path, sizeof path, tu_temp_dir(), pid), MT_OK);
  struct stat st;
  return stat(path, &st) == 0;
}

/* Reads every record of `pid`'s (stopped, preserved) ring file. */
static void read_ring(int pid, records *rs) {
  memset(rs, 0, sizeof *rs);
  mt_cursor *c = NULL;
  mt_error err = {0};
  int rc = mt_cursor_open(&c, tu_temp_dir(), pid, &err);
  if (rc != MT_OK)
    fail_msg("mt_cursor_open(%d): %s", pid, err.message);
  mt_cursor_callbacks cb = {0};
  cb.other = collect;
  cb.registry = collect_registry;
  mt_cursor_set_callbacks(c, &cb, rs);
  mt_cursor_set_end(c);
  for (int i = 0; i < 100000 && !mt_cursor_drained(c); i++)
    assert_int_equal(mt_cursor_poll(c, 0, NULL, &err), MT_OK);
  assert_true(mt_cursor_drained(c));
  mt_cursor_close(c);
}

typedef struct run_result {
  int pid;
  int status;
  char *out, *err;
} run_result;

static char *slurp(const char *path) {
  size_t size;
  uint8_t *data = tu_read_file(path, &size);
  char *s = realloc(data, size + 1);
  s[size] = 0;
  return s;
}

/* Runs `argv` with the extra environment `env` (NULL-terminated "NAME=value" list; NULL for
 * none), stdout and stderr captured. */
static void run(run_result *res, char *const argv[], const char *const env[]) {
  const char *out = tu_temp_path("stdout"), *err = tu_temp_path("stderr");
  char out_path[4096], err_path[4096];
  snprintf(out_path, sizeof out_path, "%s", out);
  snprintf(err_path, sizeof err_path, "%s", err);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0)
      _exit(91);
    dup2(o, 1);
    dup2(e, 2);
    static char own_pid[64];
    for (const char *const *v = env; v && *v; v++) {
      if (!strcmp(*v, "MEMTAP_TRACE_PID=self")) {
        snprintf(own_pid, sizeof own_pid, "MEMTAP_TRACE_PID=%d", (int)getpid());
        putenv(own_pid);
      } else {
        putenv((char *)*v);
      }
    }
    execv(argv[0], argv);
    _exit(92);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  res->pid = pid;
  res->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  res->out = slurp(out_path);
  res->err = slurp(err_path);
}

static void run_result_free(run_result *r) {
  free(r->out);
  free(r->err);
}

static char ring_dir_env[4200];

/* The environment of a traced run, plus `extra`. */
static void traced_env(const char **env, size_t cap, const char *const *extra) {
  snprintf(ring_dir_env, sizeof ring_dir_env, "MEMTAP_RING_DIR=%s", tu_temp_dir());
  size_t n = 0;
  env[n++] = "LD_PRELOAD=" MEMTAP_PRELOAD_PATH;
  env[n++] = "MEMTAP_RECORD=1";
  env[n++] = ring_dir_env;
  env[n++] = "MEMTAP_RING_PRESERVE=1";
  env[n++] = "MEMTAP_RING_SIZE=4M";
  env[n++] = "MEMTAP_RING_THREADS=16";
  for (; extra && *extra && n + 1 < cap; extra++)
    env[n++] = *extra;
  env[n] = NULL;
}

static size_t count(const records *rs, unsigned type, uint64_t size) {
  size_t n = 0;
  for (size_t i = 0; i < rs->count; i++) {
    const record *r = &rs->r[i];
    if (r->type != type)
      continue;
    if (type == MT_TRACER_REC_ALLOC && r->payload[1] != size)
      continue;
    if (type == MT_TRACER_REC_REALLOC && r->payload[2] != size)
      continue;
    n++;
  }
  return n;
}

static const record *find_alloc(const records *rs, uint64_t size) {
  for (size_t i = 0; i < rs->count; i++)
    if (rs->r[i].type == MT_TRACER_REC_ALLOC && rs->r[i].payload[1] == size)
      return &rs->r[i];
  return NULL;
}

static const record *find_realloc(const records *rs, uint64_t size) {
  for (size_t i = 0; i < rs->count; i++)
    if (rs->r[i].type == MT_TRACER_REC_REALLOC && rs->r[i].payload[2] == size)
      return &rs->r[i];
  return NULL;
}

/* Every ALLOC of `size` has a FREE of its address later in the same file. */
static size_t freed_allocs(const records *rs, uint64_t size) {
  size_t freed = 0;
  for (size_t i = 0; i < rs->count; i++) {
    const record *a = &rs->r[i];
    if (a->type != MT_TRACER_REC_ALLOC || a->payload[1] != size)
      continue;
    for (size_t j = i + 1; j < rs->count; j++) {
      const record *f = &rs->r[j];
      if (f->type == MT_TRACER_REC_FREE && f->payload[0] == a->payload[0]) {
        freed++;
        break;
      }
      if (f->type == MT_TRACER_REC_ALLOC && f->payload[0] == a->payload[0])
        break;
    }
  }
  return freed;
}

/* FREEs of addresses that no ALLOC or REALLOC of the file ever returned. */
static size_t unknown_frees(const records *rs) {
  size_t unknown = 0;
  for (size_t i = 0; i < rs->count; i++) {
    if (rs->r[i].type != MT_TRACER_REC_FREE)
      continue;
    bool seen = false;
    for (size_t j = 0; j < rs->count && !seen; j++)
      seen = (rs->r[j].type == MT_TRACER_REC_ALLOC && rs->r[j].payload[0] == rs->r[i].payload[0]) ||
             (rs->r[j].type == MT_TRACER_REC_REALLOC && rs->r[j].payload[1] == rs->r[i].payload[0]);
    unknown += !seen;
  }
  return unknown;
}

static const char *const full[] = {"MEMTAP_FULL=1", NULL};

static void full_tracing_records_every_allocation_of_the_program(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "basic", NULL};
  run_result plain, traced;
  run(&plain, argv, NULL);
  const char *env[32];
  traced_env(env, 32, full);
  run(&traced, argv, env);
  assert_int_equal(plain.status, 0);
  assert_int_equal(traced.status, 0);
  assert_string_equal(plain.out, traced.out); /* the program's output is unchanged */

  records rs;
  read_ring(traced.pid, &rs);
  assert_int_equal(rs.process_entries, 1);
  assert_true(rs.process_rate == 1.0);
  assert_int_equal(rs.process_flags, MT_TRACER_PROCESS_FULL);
  assert_int_equal(count(&rs, MT_TRACER_REC_ALLOC, 1234), 100);
  assert_int_equal(freed_allocs(&rs, 1234), 100);
  assert_int_equal(count(&rs, MT_TRACER_REC_ALLOC, 7770), 1); /* calloc(10, 777) */
  assert_int_equal(find_alloc(&rs, 7770)->payload[3] & MT_TRACER_KIND_MASK, MT_TRACER_KIND_CALLOC);
  assert_int_equal(find_alloc(&rs, 7770)->payload[2], (7770 + 7) / 8);
  assert_int_equal(count(&rs, MT_TRACER_REC_REALLOC, 5001), 1);
  assert_int_equal(count(&rs, MT_TRACER_REC_REALLOC, 5002), 1);
  assert_int_equal(count(&rs, MT_TRACER_REC_REALLOC, 5003), 1);
  assert_int_equal(count(&rs, MT_TRACER_REC_REALLOC, 4365), 1); /* reallocarray(NULL, 3, 1455) */
  static const struct {
    uint64_t size;
    unsigned kind;
  } aligned[] = {{4321, MT_TRACER_KIND_POSIX_MEMALIGN},
                 {4352, MT_TRACER_KIND_ALIGNED_ALLOC},
                 {4353, MT_TRACER_KIND_MEMALIGN},
                 {4354, MT_TRACER_KIND_VALLOC},
                 {8192, MT_TRACER_KIND_PVALLOC}};
  for (size_t i = 0; i < sizeof aligned / sizeof aligned[0]; i++) {
    const record *a = find_alloc(&rs, aligned[i].size);
    assert_non_null(a);
    assert_int_equal(a->payload[3] & MT_TRACER_KIND_MASK, aligned[i].kind);
  }
  /* The overflowing calloc recorded nothing: no allocation larger than 2^62. */
  for (size_t i = 0; i < rs.count; i++)
    if (rs.r[i].type == MT_TRACER_REC_ALLOC)
      assert_true(rs.r[i].payload[1] < (1ull << 62));

  /* Frame 0 is the return address in site(), which the program printed. */
  void *site = NULL;
  assert_int_equal(sscanf(traced.err, "site %p", &site), 1);
  const record *a = find_alloc(&rs, 1234);
  assert_true(a->id >= 2);
  assert_int_equal(a->payload[3] & (MT_TRACER_FLAG_NO_STACK | MT_TRACER_FLAG_TRUNCATED), 0);
  uint64_t frame0 = a->payload[4];
  assert_true(frame0 > (uintptr_t)site && frame0 < (uintptr_t)site + 64);
  assert_true(frame0 >= rs.main_low && frame0 < rs.main_high);

  /* One region: the PROT_NONE reservation is not one; both munmaps are written. */
  size_t maps = 0, unmaps = 0;
  for (size_t i = 0; i < rs.count; i++) {
    if (rs.r[i].type == MT_TRACER_REC_MAP && rs.r[i].payload[1] == 1u << 20)
      maps++;
    if (rs.r[i].type == MT_TRACER_REC_UNMAP && rs.r[i].payload[1] == 1u << 20)
      unmaps++;
  }
  assert_int_equal(maps, 1);
  assert_int_equal(unmaps, 2);
  free(rs.r);
  run_result_free(&plain);
  run_result_free(&traced);
}

static void threads_have_start_and_exit_records_and_their_own_allocations(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "threads", NULL};
  const char *env[32];
  traced_env(env, 32, full);
  run_result traced;
  run(&traced, argv, env);
  assert_int_equal(traced.status, 0);
  records rs;
  read_ring(traced.pid, &rs);
  assert_int_equal(count(&rs, MT_TRACER_REC_ALLOC, 3333), 3200);
  assert_int_equal(freed_allocs(&rs, 3333), 3200);
  size_t starts = 0, exits = 0, with_stack = 0;
  for (size_t i = 0; i < rs.count; i++) {
    if (rs.r[i].type == MT_TRACER_REC_THREAD_START) {
      starts++;
      with_stack += rs.r[i].payload[1] < rs.r[i].payload[2];
    }
    exits += rs.r[i].type == MT_TRACER_REC_THREAD_EXIT;
  }
  /* The shim's own blocks (libunwind's thread-local storage, freed by libc at thread exit) are
   * not written as frees of blocks never allocated. */
  assert_int_equal(unknown_frees(&rs), 0);
  assert_int_equal(starts, 33); /* main + 32 */
  assert_int_equal(exits, 32);
  assert_int_equal(with_stack, 33);
  free(rs.r);
  run_result_free(&traced);
}

static int child_pid(const run_result *r) {
  int pid = -1;
  const char *at = strstr(r->err, "child ");
  assert_non_null(at);
  assert_int_equal(sscanf(at, "child %d", &pid), 1);
  return pid;
}

static void untraced_fork_child_writes_nothing_and_has_no_ring_file(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "fork", NULL};
  const char *env[32];
  traced_env(env, 32, full);
  run_result traced;
  run(&traced, argv, env);
  assert_int_equal(traced.status, 0);
  assert_string_equal(traced.out, "child status 0\n");
  int child = child_pid(&traced);
  assert_false(ring_exists(child));
  records rs;
  read_ring(traced.pid, &rs);
  assert_int_equal(count(&rs, MT_TRACER_REC_ALLOC, 1111), 1);
  assert_int_equal(count(&rs, MT_TRACER_REC_ALLOC, 2222), 0);
  free(rs.r);
  run_result_free(&traced);
}

static void followed_fork_child_traces_into_its_own_file(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "fork", NULL};
  static const char *const follow[] = {"MEMTAP_FULL=1", "MEMTAP_FOLLOW_FORK=1", NULL};
  const char *env[32];
  traced_env(env, 32, follow);
  run_result traced;
  run(&traced, argv, env);
  assert_int_equal(traced.status, 0);
  int child = child_pid(&traced);
  assert_true(ring_exists(child));
  records parent, kid;
  read_ring(traced.pid, &parent);
  read_ring(child, &kid);
  assert_int_equal(count(&parent, MT_TRACER_REC_ALLOC, 2222), 0);
  assert_int_equal(count(&kid, MT_TRACER_REC_ALLOC, 2222), 10);
  assert_int_equal(freed_allocs(&kid, 2222), 10);
  assert_int_equal(kid.process_entries, 2); /* the parent's, inherited, then the child's own */
  free(parent.r);
  free(kid.r);
  run_result_free(&traced);
}

static void other_pid_than_memtap_trace_pid_is_not_traced(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "basic", NULL};
  static const char *const other[] = {"MEMTAP_FULL=1", "MEMTAP_TRACE_PID=1", NULL};
  const char *env[32];
  traced_env(env, 32, other);
  run_result traced;
  run(&traced, argv, env);
  assert_int_equal(traced.status, 0);
  assert_false(ring_exists(traced.pid));
  run_result_free(&traced);
}

static void malformed_variable_means_no_tracing_and_the_program_runs(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "basic", NULL};
  static const char *const bad[] = {"MEMTAP_RATE=potato", NULL};
  const char *env[32];
  traced_env(env, 32, bad);
  run_result traced, plain;
  run(&traced, argv, env);
  run(&plain, argv, NULL);
  assert_int_equal(traced.status, 0);
  assert_string_equal(traced.out, plain.out);
  assert_false(ring_exists(traced.pid));
  assert_non_null(strstr(traced.err, "MEMTAP_RATE=potato"));
  run_result_free(&traced);
  run_result_free(&plain);
}

static void sampled_mode_estimates_bytes_and_frees_only_sampled_blocks(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "sampled", NULL};
  static const char *const sampled[] = {"MEMTAP_SAMPLE_INTERVAL=4096", "MEMTAP_SEED=42", NULL};
  const char *env[32];
  traced_env(env, 32, sampled);
  run_result traced;
  run(&traced, argv, env);
  assert_int_equal(traced.status, 0);
  records rs;
  read_ring(traced.pid, &rs);
  assert_true(rs.process_rate == 8.0 / 4096);
  uint64_t samples = 0;
  size_t allocs = 0, frees = 0;
  for (size_t i = 0; i < rs.count; i++) {
    const record *r = &rs.r[i];
    if (r->type == MT_TRACER_REC_ALLOC && r->payload[1] == 1000) {
      samples += r->payload[2];
      allocs++;
    }
    frees += r->type == MT_TRACER_REC_FREE;
  }
  /* 20 000 blocks of 1000 bytes: 20e6 / 4096 = 4883 sample points expected (sd ~70). */
  assert_in_range(samples, 4883 - 500, 4883 + 500);
  assert_true(allocs < 20000 / 3);
  assert_int_equal(freed_allocs(&rs, 1000), allocs);
  /* Nothing but sampled blocks is freed: the program frees 20 000 blocks. */
  assert_true(frees <= allocs + 50);
  free(rs.r);
  run_result_free(&traced);
}

static void cxx_exceptions_behave_the_same_under_the_shim(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_EXCEPTIONS_PATH, NULL};
  run_result plain, traced;
  run(&plain, argv, NULL);
  const char *env[32];
  traced_env(env, 32, full);
  run(&traced, argv, env);
  assert_int_equal(plain.status, 0);
  assert_int_equal(traced.status, 0);
  assert_string_equal(plain.out, traced.out);
  assert_non_null(strstr(traced.out, "caught 201"));
  records rs;
  read_ring(traced.pid, &rs);
  size_t with_stack = 0;
  for (size_t i = 0; i < rs.count; i++)
    with_stack += rs.r[i].type == MT_TRACER_REC_ALLOC && rs.r[i].id > 0;
  assert_true(with_stack > 200);
  free(rs.r);
  run_result_free(&plain);
  run_result_free(&traced);
}

static void signal_handler_that_mallocs_leaves_records_consistent(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "signals", NULL};
  const char *env[32];
  traced_env(env, 32, full);
  run_result traced;
  run(&traced, argv, env);
  assert_int_equal(traced.status, 0);
  assert_string_equal(traced.out, "signals done 1\n");
  records rs;
  read_ring(traced.pid, &rs);
  /* Every block the handler allocated is recorded, also when the signal landed inside the shim
   * (its handlers run with the shim's depth set to 0, and records that would nest inside a ring
   * write wait and follow it), and every recorded block has its free after it. */
  int handled = -1;
  assert_int_equal(sscanf(traced.err, "handled %d", &handled), 1);
  size_t handler_allocs = count(&rs, MT_TRACER_REC_ALLOC, 4444);
  assert_int_equal(handler_allocs, (size_t)handled);
  assert_int_equal(freed_allocs(&rs, 4444), handler_allocs);
  size_t loop_allocs = 0, loop_freed = 0;
  for (uint64_t size = 48; size < 248; size++) {
    loop_allocs += count(&rs, MT_TRACER_REC_ALLOC, size);
    loop_freed += freed_allocs(&rs, size);
  }
  assert_true(loop_allocs >= 20000);
  assert_int_equal(loop_freed, loop_allocs);
  free(rs.r);
  run_result_free(&traced);
}

static const module_entry *find_module(const records *rs, const char *suffix) {
  for (size_t i = 0; i < rs->module_count; i++) {
    size_t n = strlen(rs->modules[i].path), m = strlen(suffix);
    if (n >= m && !strcmp(rs->modules[i].path + n - m, suffix))
      return &rs->modules[i];
  }
  return NULL;
}

static void dlopened_library_is_registered_and_its_unload_recorded(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "dlopen", TRACER_PROG_LIB_PATH, NULL};
  const char *env[32];
  traced_env(env, 32, full);
  run_result traced;
  run(&traced, argv, env);
  assert_int_equal(traced.status, 0);
  assert_string_equal(traced.out, "library loaded, used and unloaded\n");
  records rs;
  read_ring(traced.pid, &rs);
  const module_entry *lib = find_module(&rs, "/libtracer_prog_lib.so");
  assert_non_null(lib);
  /* The constructor's allocation, made inside dlopen, and the later call's: frame 0 is in the
   * library. */
  const record *at_load = find_alloc(&rs, 5555), *called = find_alloc(&rs, 6666);
  assert_non_null(at_load);
  assert_non_null(called);
  assert_true(at_load->id >= 1 && called->id >= 1);
  assert_in_range(at_load->payload[4], lib->low, lib->high - 1);
  assert_true(lib->seen_at <= (size_t)(at_load - rs.r)); /* registered before its first frame */
  assert_in_range(called->payload[4], lib->low, lib->high - 1);
  size_t unloads = 0;
  for (size_t i = 0; i < rs.count; i++)
    if (rs.r[i].type == MT_TRACER_REC_MODULE_UNLOAD) {
      assert_int_equal(rs.r[i].payload[0], lib->serial);
      assert_true(&rs.r[i] > called);
      unloads++;
    }
  assert_int_equal(unloads, 1);
  free(rs.r);
  run_result_free(&traced);
}

static void spawned_and_vforked_children_of_other_pids_are_not_traced(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "spawn", NULL};
  static const char *const only_self[] = {"MEMTAP_FULL=1", "MEMTAP_TRACE_PID=self", NULL};
  const char *env[32];
  traced_env(env, 32, only_self);
  run_result traced;
  run(&traced, argv, env);
  assert_int_equal(traced.status, 0);
  assert_string_equal(traced.out, "spawned 0\n");
  int a = 0, b = 0;
  assert_int_equal(sscanf(traced.err, "child %d child %d", &a, &b), 2);
  assert_false(ring_exists(a));
  assert_false(ring_exists(b));
  records rs;
  read_ring(traced.pid, &rs);
  assert_int_equal(count(&rs, MT_TRACER_REC_ALLOC, 7777), 1);
  free(rs.r);
  run_result_free(&traced);
}

static void exec_descendants_trace_under_follow_fork_despite_trace_pid(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "spawn", NULL};
  static const char *const follow[] = {"MEMTAP_FULL=1", "MEMTAP_TRACE_PID=self",
                                       "MEMTAP_FOLLOW_FORK=1", NULL};
  const char *env[32];
  traced_env(env, 32, follow);
  run_result traced;
  run(&traced, argv, env);
  assert_int_equal(traced.status, 0);
  int a = 0, b = 0;
  assert_int_equal(sscanf(traced.err, "child %d child %d", &a, &b), 2);
  assert_true(ring_exists(a));
  assert_true(ring_exists(b));
  run_result_free(&traced);
}

/* tracer_prog deep (an ALLOC of 8888 bytes and a REALLOC to 7777 at 300 frames) traced with
 * `extra`; its records in *rs, the run in *traced. */
static void run_deep(const char *const *extra, records *rs, run_result *traced) {
  char *argv[] = {TRACER_PROG_PATH, "deep", NULL};
  const char *env[32];
  traced_env(env, 32, extra);
  run(traced, argv, env);
  assert_int_equal(traced->status, 0);
  assert_string_equal(traced->out, "depth 300\n");
  read_ring(traced->pid, rs);
}

static void stack_deeper_than_256_frames_keeps_the_innermost_and_says_truncated(void **state) {
  (void)state;
  records rs;
  run_result traced;
  run_deep(full, &rs, &traced);
  const record *a = find_alloc(&rs, 8888);
  assert_non_null(a);
  assert_int_equal(a->id, MT_TRACER_MAX_FRAMES);
  assert_int_equal(a->words, 4 + MT_TRACER_MAX_FRAMES);
  assert_true(a->payload[3] & MT_TRACER_FLAG_TRUNCATED);
  const record *g = find_realloc(&rs, 7777); /* built in the thread's scratch page */
  assert_non_null(g);
  assert_int_equal(g->id, MT_TRACER_MAX_FRAMES);
  assert_true(g->payload[4] & MT_TRACER_FLAG_TRUNCATED);
  /* A shallow stack is not marked. */
  for (size_t i = 0; i < rs.count; i++)
    if (rs.r[i].type == MT_TRACER_REC_ALLOC && rs.r[i].id < 100)
      assert_false(rs.r[i].payload[3] & MT_TRACER_FLAG_TRUNCATED);
  free(rs.r);
  run_result_free(&traced);
}

/* Without a scratch page (mmap failing; MEMTAP_TEST_NO_SCRATCH), a record built outside the ring
 * is built on the stack with the innermost SMALL_FRAMES frames (record.c's MT_SMALL_FRAMES),
 * marked truncated: the REALLOC, and the ALLOC too, which leaves the ring when its walk is cut at
 * 256 frames (the frames it walked are kept, not walked again). */
#define SMALL_FRAMES 32
static void without_a_scratch_page_records_keep_their_innermost_frames(void **state) {
  (void)state;
  const char *const extra[] = {"MEMTAP_FULL=1", "MEMTAP_TEST_NO_SCRATCH=1", NULL};
  records rs;
  run_result traced;
  run_deep(extra, &rs, &traced);
  const record *a = find_alloc(&rs, 8888);
  assert_non_null(a);
  assert_int_equal(a->id, SMALL_FRAMES);
  assert_true(a->payload[3] & MT_TRACER_FLAG_TRUNCATED);
  const record *g = find_realloc(&rs, 7777);
  assert_non_null(g);
  assert_int_equal(g->id, SMALL_FRAMES);
  assert_int_equal(g->words, 5 + SMALL_FRAMES);
  assert_true(g->payload[4] & MT_TRACER_FLAG_TRUNCATED);
  /* The frames kept are the innermost: the realloc's caller recurse(0), then recurse(1)... as in
   * the ALLOC's walk, whose innermost frame is site() and whose next one is recurse(0) at the call
   * of site (as far as this reader keeps payload words). */
  for (int i = 1; 5 + i < 12; i++)
    assert_int_equal(g->payload[5 + i], a->payload[4 + i + 1]);
  assert_int_equal(count(&rs, MT_TRACER_REC_REALLOC, 7777), 1);
  free(rs.r);
  run_result_free(&traced);
}

static void early_allocations_from_racing_threads_are_recorded(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_EARLY_PATH, NULL};
  const char *env[32];
  traced_env(env, 32, full);
  run_result traced;
  run(&traced, argv, env);
  assert_int_equal(traced.status, 0);
  assert_string_equal(traced.out, "early threads 4\n");
  records rs;
  read_ring(traced.pid, &rs);
  assert_int_equal(count(&rs, MT_TRACER_REC_ALLOC, 2345), 4000);
  assert_int_equal(freed_allocs(&rs, 2345), 4000);
  assert_int_equal(unknown_frees(&rs), 0);
  free(rs.r);
  run_result_free(&traced);
}

static void regions_follow_map_fixed_partial_unmap_and_mremap(void **state) {
  (void)state;
  char *argv[] = {TRACER_PROG_PATH, "regions", NULL};
  static const char *const sampled[] = {"MEMTAP_SEED=3", NULL}; /* regions in sampled mode too */
  const char *env[32];
  traced_env(env, 32, sampled);
  run_result traced;
  run(&traced, argv, env);
  assert_int_equal(traced.status, 0);
  assert_string_equal(traced.out, "regions 1\n");
  void *rp = NULL, *mp = NULL;
  assert_int_equal(sscanf(traced.err, "region %p moved %p", &rp, &mp), 2);
  uint64_t r = (uintptr_t)rp, moved = (uintptr_t)mp;
  records rs;
  read_ring(traced.pid, &rs);
  /* The region records in program order (one thread). */
  static const struct {
    unsigned type;
    int64_t offset; /* from r; INT64_MIN: the moved address */
    uint64_t length;
    unsigned kind;
  } want[] = {
      {MT_TRACER_REC_MAP, 0, 2 << 20, MT_TRACER_KIND_MMAP},
      {MT_TRACER_REC_UNMAP, 1 << 20, 65536, 0}, /* MAP_FIXED replaces the range... */
      {MT_TRACER_REC_MAP, 1 << 20, 65536, MT_TRACER_KIND_MMAP}, /* ...with a new region */
      {MT_TRACER_REC_UNMAP, 0, 4096, 0},                        /* partial munmap */
      {MT_TRACER_REC_UNMAP, 8192, 4096, 0},                     /* munmap of 10 bytes: the page */
      {MT_TRACER_REC_MAP, -1, 4096, MT_TRACER_KIND_MMAP},       /* mmap of 100 bytes: a page */
      {MT_TRACER_REC_UNMAP, -1, 4096, 0},
      {MT_TRACER_REC_UNMAP, 1 << 20, 65536, 0},                      /* mremap: the old range... */
      {MT_TRACER_REC_MAP, INT64_MIN, 131072, MT_TRACER_KIND_MREMAP}, /* ...and the new one */
      {MT_TRACER_REC_MAP, -1, 131072, MT_TRACER_KIND_MREMAP}, /* MREMAP_DONTUNMAP: no UNMAP */
      {MT_TRACER_REC_UNMAP, -1, 4096, 0}, /* the file mapping's munmap (no MAP before it) */
      {MT_TRACER_REC_UNMAP, -1, 131072, 0},
      {MT_TRACER_REC_UNMAP, INT64_MIN, 131072, 0},
      {MT_TRACER_REC_UNMAP, 4096, (2 << 20) - 4096, 0},
  };
  size_t k = 0;
  for (size_t i = 0; i < rs.count; i++) {
    const record *x = &rs.r[i];
    if (x->type != MT_TRACER_REC_MAP && x->type != MT_TRACER_REC_UNMAP)
      continue;
    if (x->payload[1] < 4096)
      continue; /* not one of the program's, nor a whole number of pages */
    assert_true(k < sizeof want / sizeof want[0]);
    assert_int_equal(x->type, want[k].type);
    assert_int_equal(x->payload[1], want[k].length);
    if (want[k].offset == INT64_MIN)
      assert_int_equal(x->payload[0], moved);
    else if (want[k].offset >= 0)
      assert_int_equal(x->payload[0], r + (uint64_t)want[k].offset);
    if (x->type == MT_TRACER_REC_MAP)
      assert_int_equal(x->payload[3] & MT_TRACER_KIND_MASK, want[k].kind);
    k++;
  }
  assert_int_equal(k, sizeof want / sizeof want[0]);
  free(rs.r);
  run_result_free(&traced);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(full_tracing_records_every_allocation_of_the_program),
      cmocka_unit_test(threads_have_start_and_exit_records_and_their_own_allocations),
      cmocka_unit_test(untraced_fork_child_writes_nothing_and_has_no_ring_file),
      cmocka_unit_test(followed_fork_child_traces_into_its_own_file),
      cmocka_unit_test(other_pid_than_memtap_trace_pid_is_not_traced),
      cmocka_unit_test(malformed_variable_means_no_tracing_and_the_program_runs),
      cmocka_unit_test(sampled_mode_estimates_bytes_and_frees_only_sampled_blocks),
      cmocka_unit_test(cxx_exceptions_behave_the_same_under_the_shim),
      cmocka_unit_test(signal_handler_that_mallocs_leaves_records_consistent),
      cmocka_unit_test(dlopened_library_is_registered_and_its_unload_recorded),
      cmocka_unit_test(spawned_and_vforked_children_of_other_pids_are_not_traced),
      cmocka_unit_test(exec_descendants_trace_under_follow_fork_despite_trace_pid),
      cmocka_unit_test(stack_deeper_than_256_frames_keeps_the_innermost_and_says_truncated),
      cmocka_unit_test(without_a_scratch_page_records_keep_their_innermost_frames),
      cmocka_unit_test(early_allocations_from_racing_threads_are_recorded),
      cmocka_unit_test(regions_follow_map_fixed_partial_unmap_and_mremap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
