/* Symbolisation of real code: a function of this test with an inlined callee (DWARF: function,
 * file, line, inlined frames outermost first), operator new dropped from the top of a stack,
 * .dynsym names only inside a symbol's size, a build-id mismatch, demangling and the 4 KiB cut. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record_helper.h"
#include "record_testlib.h"
#include "testutil.h"

#include "record/record_internal.h"
#include "ring/layout.h"

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* A ring holding one allocation, made at record_helper.c's inlined call (its lines in *inner_line
 * and *capture_line), of this test program registered as module 1. */
static mt_ring *one_inlined_allocation(int *inner_line, int *capture_line) {
  uint64_t pc = record_helper_outer(inner_line, capture_line);
  mt_ring *r = rr_open(true, 1);
  rr_module_self(r, 1);
  rr_alloc(r, 0x1000, 8, &pc, 1);
  return r;
}

static void inlined_function_gets_its_own_entry_with_file_and_line(void **state) {
  (void)state;
  int inner_line = 0, capture_line = 0;
  mt_ring *r = one_inlined_allocation(&inner_line, &capture_line);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "inline.ctf", NULL, &st), &t);
  assert_int_equal(t.count, 1);
  assert_int_equal(t.events[0].depth, 1);
  size_t n;
  const mt_location *l = rr_locations(&t, t.events[0].codes[0], &n);
  assert_int_equal(n, 2);
  assert_string_equal(l[0].defname, "record_helper_outer");
  assert_true(ends_with(l[0].filename, "record_helper.c"));
  assert_int_equal(l[0].line, inner_line);
  assert_string_equal(l[1].defname, "record_helper_inner");
  assert_true(ends_with(l[1].filename, "record_helper.c"));
  assert_int_equal(l[1].line, capture_line);
  rr_trace_free(&t);
}

static void operator_new_is_dropped_from_the_top_of_the_stack(void **state) {
  (void)state;
  void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    skip();
  void *op_new = dlsym(h, "_Znwm"), *op_new_aligned = dlsym(h, "_ZnwmSt11align_val_t");
  assert_non_null(op_new);
  assert_non_null(op_new_aligned);
  int a, b;
  uint64_t user = record_helper_outer(&a, &b);
  uint64_t frames[3] = {(uint64_t)(uintptr_t)op_new_aligned + 5, (uint64_t)(uintptr_t)op_new + 5,
                        user};
  mt_ring *r = rr_open(true, 1);
  rr_module_self(r, 1);
  rr_module_of(r, 2, op_new);
  rr_alloc(r, 0x1000, 8, frames, 3);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "new.ctf", NULL, &st), &t);
  assert_int_equal(t.events[0].depth, 1);
  size_t n;
  assert_string_equal(rr_locations(&t, t.events[0].codes[0], &n)[0].defname, "record_helper_outer");
  rr_trace_free(&t);
  dlclose(h);
}

struct base {
  const void *address;
  uint64_t bias;
};

static int base_of(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  struct base *b = user;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uint64_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (uint64_t)(uintptr_t)b->address >= start &&
        (uint64_t)(uintptr_t)b->address < start + ph->p_memsz) {
      b->bias = info->dlpi_addr;
      return 1;
    }
  }
  return 0;
}

static void dynsym_names_a_function_only_inside_its_size(void **state) {
  (void)state;
  void *fn = dlsym(RTLD_DEFAULT, "getpid");
  assert_non_null(fn);
  struct base b = {.address = fn};
  assert_int_equal(dl_iterate_phdr(base_of, &b), 1);
  uint64_t inside = (uint64_t)(uintptr_t)fn + 2, header = b.bias + 0x41;
  mt_ring *r = rr_open(true, 1);
  rr_module_of(r, 1, fn);
  rr_alloc(r, 0x1000, 8, &inside, 1);
  rr_alloc(r, 0x2000, 8, &header, 1);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "dynsym.ctf", NULL, &st), &t);
  size_t n;
  const mt_location *l = rr_locations(&t, t.events[0].codes[0], &n);
  assert_non_null(strstr(l[n - 1].defname, "getpid"));
  l = rr_locations(&t, t.events[1].codes[0], &n);
  assert_int_equal(n, 1);
  if (!ends_with(l[0].defname, "+0x40"))
    fail_msg("%s", l[0].defname);
  assert_non_null(strstr(l[0].defname, "libc.so"));
  rr_trace_free(&t);
}

static int first_module(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  *(uint64_t *)user = info->dlpi_addr;
  return 1;
}

static void module_whose_build_id_differs_is_not_symbolised(void **state) {
  (void)state;
  int a, b;
  uint64_t pc = record_helper_outer(&a, &b);
  uint64_t bias = 0;
  dl_iterate_phdr(first_module, &bias);
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  assert_true(len > 0);
  exe[len] = 0;
  mt_ring *r = rr_open(true, 1);
  rr_module(r, 1, bias, pc - 0x100000, pc + 0x100000, exe, "\x01\x02\x03\x04", 4);
  rr_alloc(r, 0x1000, 8, &pc, 1);
  mt_recorder_stats st;
  rr_trace t;
  rr_read(rr_record(r, "mismatch.ctf", NULL, &st), &t);
  size_t n;
  const mt_location *l = rr_locations(&t, t.events[0].codes[0], &n);
  assert_int_equal(n, 1);
  assert_true(ends_with(l[0].defname, "(build-id mismatch)"));
  assert_true(!strncmp(l[0].defname, exe, strlen(exe)));
  rr_trace_free(&t);
}

static void expect_demangled(const char *mangled, const char *want) {
  char *d = rec_demangle(mangled);
  if (!want) {
    assert_null(d);
    return;
  }
  assert_non_null(d);
  assert_string_equal(d, want);
  free(d);
}

static void cxx_and_rust_names_are_demangled(void **state) {
  (void)state;
  expect_demangled("_ZN3foo3barEi", "foo::bar(int)");
  expect_demangled("_ZNSt6vectorIiSaIiEE9push_backERKi",
                   "std::vector<int, std::allocator<int> >::push_back(int const&)");
  /* Rust, legacy: escapes decoded, the hash dropped, an LLVM suffix too. */
  expect_demangled("_ZN1m15Holder$LT$T$GT$4keep17hc8ac8bcf66233699E", "m::Holder<T>::keep");
  expect_demangled("_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17h168e94e611939a97E",
                   "std::rt::lang_start::{{closure}}");
  expect_demangled("_ZN9hashbrown3raw21RawTable$LT$T$C$A$GT$14reserve_rehash17h7b523149617e8425E"
                   ".llvm.11186703069621298206",
                   "hashbrown::raw::RawTable<T,A>::reserve_rehash");
  /* Rust, v0. */
  expect_demangled(
      "_RNvMs4_NtCslNYArtu3iFV_5alloc7raw_vecNtB5_11RawVecInner11finish_growCsjrHSEGnQ3l9_3std",
      "<alloc::raw_vec::RawVecInner>::finish_grow");
  expect_demangled("_RNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal",
                   "std::rt::lang_start_internal");
  /* Not mangled, or not well formed: NULL, and the name is shown as it is. */
  expect_demangled("plain_c_name", NULL);
  expect_demangled("_Zgarbage", NULL);
  expect_demangled("_RNvC", NULL);
  expect_demangled("_", NULL);
  expect_demangled("", NULL);
  assert_null(rec_demangle(NULL));
}

/* A crafted name in a traced program's symbol table (types nested 100,000 deep) must not
 * overflow memtap's stack: the demangler's recursion limit refuses it. */
static void deeply_nested_names_are_refused_not_followed(void **state) {
  (void)state;
  size_t depth = 100000;
  char *name = malloc(depth + 16);
  assert_non_null(name);
  memcpy(name, "_Z1f", 4);
  memset(name + 4, 'P', depth);
  memcpy(name + 4 + depth, "i", 2);
  char *d = rec_demangle(name);
  assert_null(d);
  name[1] = 'R';
  memcpy(name, "_RNvC", 5);
  memset(name + 5, 'B', depth - 1);
  d = rec_demangle(name);
  assert_null(d);
  free(name);
}

static void long_location_lists_are_cut_to_fit_one_event(void **state) {
  (void)state;
  static char scratch[256 * 2 * 1024];
  static mt_location entries[300];
  char *long_name = malloc(3000);
  assert_non_null(long_name);
  memset(long_name, 'x', 2999);
  long_name[2999] = 0;
  for (int i = 0; i < 300; i++)
    entries[i] = (mt_location){.filename = "f.c", .defname = i == 0 ? long_name : "g", .line = i};
  size_t n = rec_fit_locations(entries, 300, scratch);
  assert_true(n <= 255 && n >= 2);
  size_t worst = 9;
  for (size_t i = 0; i < n; i++)
    worst += 8 + strlen(entries[i].filename) + strlen(entries[i].defname);
  assert_true(worst <= 4096);
  assert_int_equal(entries[0].line, 0);       /* the outermost function is kept */
  assert_int_equal(entries[n - 1].line, 299); /* and the innermost call site */
  assert_int_equal(entries[0].defname[0], 'x');
  free(long_name);
}

/* A field of the ring file's header, as it is now. */
static uint64_t header_field(const char *ring_path, size_t offset, size_t size) {
  int fd = open(ring_path, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  uint64_t value = 0;
  assert_int_equal(pread(fd, &value, size, (off_t)offset), (ssize_t)size);
  close(fd);
  return value;
}

/* The clock tick the file's header holds now (docs/ring.md §5). */
static uint64_t clock_tick_of(const char *ring_path) {
  return header_field(ring_path, offsetof(mt_ring_file_header, clock_tick), 8);
}

/* Symbolising reads files and may take milliseconds while the program runs on: the recorder
 * withdraws the clock tick it offered before it does (a tick left up would stamp the program's
 * next records with a time from before). A poll that symbolises nothing new leaves it up. */
static void symbolising_withdraws_the_clock_tick(void **state) {
  (void)state;
  int inner_line = 0, capture_line = 0;
  mt_ring *r = one_inlined_allocation(&inner_line, &capture_line);
  char ring_path[4096];
  snprintf(ring_path, sizeof ring_path, "%s", mt_ring_path(r));
  assert_int_equal(mt_ring_close(r), MT_OK);
  if (header_field(ring_path, offsetof(mt_ring_file_header, clock), 4) != MT_RING_CLOCK_TSC) {
    unlink(ring_path);
    skip(); /* no invariant TSC here: the file's clock has no tick */
  }
  int fd = open(tu_temp_path("tick.ctf"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  mt_recorder_options o = {.merge_lag_ms = 1};
  mt_recorder *rec;
  mt_error err = {0};
  assert_int_equal(mt_recorder_create(&rec, fd, &o, &err), MT_OK);
  assert_int_equal(mt_recorder_attach(rec, ring_path, true, &err), MT_OK);
  usleep(20000); /* the record is older than the merge lag: the first poll writes it */
  mt_recorder_set_clock_tick(rec, true);
  bool progress;
  assert_int_equal(mt_recorder_poll(rec, &progress, &err), MT_OK);
  assert_true(progress);
  mt_recorder_stats st;
  mt_recorder_stats_get(rec, &st);
  assert_int_equal(st.allocations, 1);
  assert_true(clock_tick_of(ring_path) == 0); /* withdrawn to symbolise record_helper_outer */
  mt_recorder_set_clock_tick(rec, true);
  assert_int_equal(mt_recorder_poll(rec, &progress, &err), MT_OK);
  assert_true(clock_tick_of(ring_path) != 0); /* nothing new to symbolise: offered */
  assert_int_equal(mt_recorder_finish(rec, &err), MT_OK);
  mt_recorder_destroy(rec);
  close(fd);
  unlink(ring_path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(inlined_function_gets_its_own_entry_with_file_and_line),
      cmocka_unit_test(operator_new_is_dropped_from_the_top_of_the_stack),
      cmocka_unit_test(dynsym_names_a_function_only_inside_its_size),
      cmocka_unit_test(module_whose_build_id_differs_is_not_symbolised),
      cmocka_unit_test(cxx_and_rust_names_are_demangled),
      cmocka_unit_test(deeply_nested_names_are_refused_not_followed),
      cmocka_unit_test(long_location_lists_are_cut_to_fit_one_event),
      cmocka_unit_test(symbolising_withdraws_the_clock_tick),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
