/* The symboliser's sorted symbol table (src/record/symtab.c) names every address as libdwfl's
 * own lookup does (dwfl_module_addrinfo, function symbols only, inside their size), on Debian's
 * libc and libstdc++: at each function symbol's first byte, its middle, its last byte and just
 * past its end, and on a stride through the whole text. */
#include <elfutils/libdwfl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "record/symtab.h"

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

/* libdwfl's answer, filtered as the symboliser filtered it before it had its own table. */
static const char *reference(Dwfl_Module *mod, Dwarf_Addr addr) {
  GElf_Off offset;
  GElf_Sym sym;
  const char *name = dwfl_module_addrinfo(mod, addr, &offset, &sym, NULL, NULL, NULL);
  if (!name || !*name)
    return NULL;
  int type = GELF_ST_TYPE(sym.st_info);
  if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
      (sym.st_size ? offset >= sym.st_size : offset != 0))
    return NULL;
  return name;
}

static long disagreements, checked;

static void check(Dwfl_Module *mod, const rec_symtab *t, Dwarf_Addr addr) {
  const char *want = reference(mod, addr), *got = rec_symtab_find(t, addr);
  checked++;
  if (want == got || (want && got && !strcmp(want, got)))
    return;
  if (disagreements++ < 10)
    print_message("0x%llx: libdwfl says %s, the table %s\n", (unsigned long long)addr,
                  want ? want : "(none)", got ? got : "(none)");
}

static void compare_library(const char *path) {
  if (access(path, R_OK) != 0) {
    print_message("skipped: %s is not installed\n", path);
    return;
  }
  Dwfl *dwfl = dwfl_begin(&callbacks);
  assert_non_null(dwfl);
  dwfl_report_begin(dwfl);
  Dwfl_Module *mod = dwfl_report_elf(dwfl, path, path, -1, 0, false);
  dwfl_report_end(dwfl, NULL, NULL);
  assert_non_null(mod);
  rec_symtab *t = rec_symtab_build(mod);
  assert_non_null(t);
  disagreements = checked = 0;
  Dwarf_Addr low = (Dwarf_Addr)-1, high = 0;
  int n = dwfl_module_getsymtab(mod);
  assert_true(n > 100);
  for (int i = 1; i < n; i++) {
    GElf_Sym sym;
    GElf_Addr addr;
    const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL, NULL, NULL);
    if (!name || GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_size)
      continue;
    check(mod, t, addr);
    check(mod, t, addr + sym.st_size / 2);
    check(mod, t, addr + sym.st_size - 1);
    check(mod, t, addr + sym.st_size);
    low = addr < low ? addr : low;
    high = addr + sym.st_size > high ? addr + sym.st_size : high;
  }
  for (Dwarf_Addr a = low; a < high; a += 997)
    check(mod, t, a);
  print_message("%s: %ld addresses, %ld disagreements\n", path, checked, disagreements);
  assert_true(checked > 1000);
  assert_int_equal(disagreements, 0);
  rec_symtab_free(t);
  dwfl_end(dwfl);
}

static void the_table_agrees_with_libdwfl_on_libc(void **state) {
  (void)state;
  compare_library("/lib/x86_64-linux-gnu/libc.so.6");
}

static void the_table_agrees_with_libdwfl_on_libstdcxx(void **state) {
  (void)state;
  compare_library("/lib/x86_64-linux-gnu/libstdc++.so.6");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_table_agrees_with_libdwfl_on_libc),
      cmocka_unit_test(the_table_agrees_with_libdwfl_on_libstdcxx),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
