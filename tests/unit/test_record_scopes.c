/* The symboliser's scope index (src/record/scopes.c) against libdw's dwarf_getscopes: at every
 * address of the compile units of scopes_helper.cpp and record_helper.c (-O2 -g: libstdc++'s
 * templates inlined several deep, lexical blocks, an out-of-line instance of an inline function),
 * the DWARF location list found with the index and without it, entry by entry. Run with files,
 * `test_record_scopes [--stride N] FILE...`, it compares every address (or every N bytes) of
 * every compile unit of those files instead, and prints the counts. */
#include <elfutils/libdwfl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record_helper.h"
#include "scopes_helper.h"
#include "testutil.h"

#include "record/debuginfo.h"
#include "record/record_internal.h"
#include "record/scopes.h"

typedef struct comparison {
  size_t addresses;   /* compared */
  size_t answers;     /* with a DWARF location list */
  size_t inlined;     /* with inlined frames */
  size_t deepest;     /* entries of the longest list */
  size_t differences; /* where the two disagree */
  rec_scopes_stats stats;
} comparison;

typedef struct kept_list {
  size_t count;
  mt_location entries[256];
  char *strings[512];
} kept_list;

static void keep(kept_list *k, const mt_location *entries, size_t count) {
  k->count = count;
  for (size_t i = 0; i < count; i++) {
    k->entries[i] = entries[i];
    k->entries[i].filename = k->strings[2 * i] = strdup(entries[i].filename);
    k->entries[i].defname = k->strings[2 * i + 1] = strdup(entries[i].defname);
    assert_non_null(k->strings[2 * i]);
    assert_non_null(k->strings[2 * i + 1]);
  }
}

static void drop(kept_list *k) {
  for (size_t i = 0; i < 2 * k->count; i++)
    free(k->strings[i]);
  k->count = 0;
}

static bool same(const mt_location *a, const mt_location *b) {
  return !strcmp(a->filename, b->filename) && !strcmp(a->defname, b->defname) &&
         a->line == b->line && a->start_char == b->start_char && a->end_char == b->end_char;
}

static void print_list(const char *what, const mt_location *entries, size_t count) {
  fprintf(stderr, "  %s: %zu entries\n", what, count);
  for (size_t i = 0; i < count; i++)
    fprintf(stderr, "    %s %s:%d:%d\n", entries[i].defname, entries[i].filename, entries[i].line,
            entries[i].start_char);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* Compares the two lookups at `vaddr`. */
static void compare_at(rec_symboliser *indexed, rec_module *m1, rec_symboliser *plain,
                       rec_module *m2, uint64_t vaddr, comparison *c) {
  static kept_list first;
  const mt_location *entries;
  size_t n = rec_symboliser_dwarf_at(indexed, m1, vaddr, true, &entries, &c->stats);
  keep(&first, entries, n);
  size_t k = rec_symboliser_dwarf_at(plain, m2, vaddr, false, &entries, NULL);
  bool equal = n == k;
  for (size_t i = 0; equal && i < n; i++)
    equal = same(&first.entries[i], &entries[i]);
  c->addresses++;
  c->answers += n > 0;
  c->inlined += n > 1;
  c->deepest = n > c->deepest ? n : c->deepest;
  if (!equal && c->differences++ < 10) {
    fprintf(stderr, "difference at %s+0x%llx\n", m1->path, (unsigned long long)vaddr);
    print_list("index", first.entries, n);
    print_list("libdw", entries, k);
  }
  drop(&first);
}

/* Compares every `stride`-th address of the compile units of `path` (those whose name ends with
 * one of `units`, unless NULL) with the index and with libdw alone. */
static void compare_file(const char *path, unsigned stride, const char *const *units,
                         comparison *c) {
  static uint8_t no_build_id[1]; /* not checked */
  rec_module m1 = {
      .serial = 1, .path = realpath(path, NULL), .build_id = no_build_id, .mapped_fd = -1};
  rec_module m2 = {
      .serial = 1, .path = realpath(path, NULL), .build_id = no_build_id, .mapped_fd = -1};
  rec_symboliser *indexed = rec_symboliser_new(false, false);
  rec_symboliser *plain = rec_symboliser_new(false, false);
  Dwfl *dwfl = dwfl_begin(rec_debuginfo_callbacks(false));
  assert_true(m1.path && m2.path && indexed && plain && dwfl);
  dwfl_report_begin(dwfl);
  Dwfl_Module *mod = dwfl_report_elf(dwfl, path, path, -1, 0, false);
  dwfl_report_end(dwfl, NULL, NULL);
  assert_non_null(mod);
  Dwarf_Addr elf_bias;
  assert_non_null(dwfl_module_getelf(mod, &elf_bias));
  Dwarf_Die *cu = NULL;
  Dwarf_Addr bias;
  while ((cu = dwfl_module_nextcu(mod, cu, &bias))) {
    const char *name = dwarf_diename(cu);
    bool wanted = !units;
    for (size_t i = 0; !wanted && units[i]; i++)
      wanted = name && ends_with(name, units[i]);
    Dwarf_Addr base, start, end;
    ptrdiff_t offset = 0;
    while (wanted && (offset = dwarf_ranges(cu, offset, &base, &start, &end)) > 0)
      for (Dwarf_Addr a = start; a < end; a += stride)
        compare_at(indexed, &m1, plain, &m2, a + bias - elf_bias, c);
  }
  dwfl_end(dwfl);
  rec_symboliser_free(indexed);
  rec_symboliser_free(plain);
  free(m1.path);
  free(m2.path);
}

static void report(const char *path, unsigned stride, const comparison *c) {
  printf("%s: %zu addresses (every %u bytes), %zu with DWARF answers, %zu with inlined frames "
         "(at most %zu entries), %zu differences; index: %zu units indexed, %zu refused, %zu "
         "answers, %zu left to libdw\n",
         path, c->addresses, stride, c->answers, c->inlined, c->deepest, c->differences,
         c->stats.units_indexed, c->stats.units_refused, c->stats.answered, c->stats.asked_libdw);
}

static void index_answers_as_libdw_at_every_address_of_inlined_code(void **state) {
  (void)state;
  int a, b;
  assert_true(scopes_helper_run(20) != 0 && record_helper_outer(&a, &b) != 0);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(n > 0);
  self[n] = 0;
  const char *const units[] = {"scopes_helper.cpp", "record_helper.c", NULL};
  comparison c = {0};
  compare_file(self, 1, units, &c);
  report("scopes_helper.cpp, record_helper.c", 1, &c);
  assert_int_equal(c.differences, 0);
  /* The comparison means something: the helpers' code has DWARF, inlined frames several deep,
   * and the index, not libdw, answered. */
  assert_true(c.addresses > 1000);
  assert_true(c.inlined > c.addresses / 8);
  assert_true(c.deepest >= 5);
  assert_int_equal(c.stats.units_indexed, 2);
  assert_int_equal(c.stats.units_refused, 0);
  assert_int_equal(c.stats.asked_libdw, 0);
  assert_int_equal(c.stats.answered, c.addresses);
}

int main(int argc, char **argv) {
  if (argc > 1) {
    unsigned stride = 1;
    int i = 1;
    if (argc > 3 && !strcmp(argv[1], "--stride"))
      stride = (unsigned)atoi(argv[2]), i = 3;
    int failed = 0;
    for (; i < argc; i++) {
      comparison c = {0};
      compare_file(argv[i], stride ? stride : 1, NULL, &c);
      report(argv[i], stride, &c);
      failed |= c.differences != 0;
    }
    return failed;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(index_answers_as_libdw_at_every_address_of_inlined_code),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
