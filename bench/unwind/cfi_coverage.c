/* How much code the cached unwinder covers (not a timing): for every byte of text of every module
 * in the process (this program, libc, ld.so, the vdso, and the libraries named on the command line,
 * dlopen'ed first), the rule eh_frame.c reduces its CFI to, as shares of the bytes an FDE covers:
 * CFA from rsp, CFA from rbp, unexpressible (the walk falls back to libunwind there), plus the
 * counts of signal-frame and outermost bytes.
 *   bench_unwind_coverage [libfoo.so.N ...] */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>

#include "tracer/eh_frame.h"
#include "tracer/unwind_cfi.h"

static int each(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size, (void)data;
  mt_cfi_module m;
  if (mt_cfi_module_from_phdr(info, &m) != MT_OK)
    return 0;
  const char *name = info->dlpi_name[0] ? info->dlpi_name : "(this program)";
  if (!m.eh_frame_hdr) {
    printf("%-44s no .eh_frame_hdr: its frames end a walk\n", name);
    return 0;
  }
  mt_eh_tables t = {m.eh_frame_hdr, m.eh_lo, m.eh_hi};
  unsigned long n[8] = {0};
  for (uintptr_t pc = m.text_lo; pc < m.text_hi; pc++)
    n[mt_eh_rule_at(&t, pc).kind]++;
  unsigned long covered = n[MT_EH_CFA_RSP] + n[MT_EH_CFA_RBP] + n[MT_EH_UNEXPRESSIBLE] +
                          n[MT_EH_SIGNAL] + n[MT_EH_OUTERMOST];
  if (!covered)
    covered = 1;
  printf("%-44s %8lu B with FDE: rsp %6.2f%%  rbp %6.2f%%  unexpressible %7.4f%% (%lu B)  "
         "signal %lu B  outermost %lu B\n",
         name, covered, 100.0 * n[MT_EH_CFA_RSP] / covered, 100.0 * n[MT_EH_CFA_RBP] / covered,
         100.0 * n[MT_EH_UNEXPRESSIBLE] / covered, n[MT_EH_UNEXPRESSIBLE], n[MT_EH_SIGNAL],
         n[MT_EH_OUTERMOST]);
  return 0;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!dlopen(argv[i], RTLD_NOW))
      fprintf(stderr, "bench_unwind_coverage: %s\n", dlerror());
  dl_iterate_phdr(each, NULL);
  return 0;
}
