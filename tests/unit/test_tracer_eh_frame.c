/* The reduction of .eh_frame to the unwinder's compact rules (src/tracer/eh_frame.c): hand-made
 * tables (a prologue and a frame pointer, the PLT's CFA expression, a signal frame's 'S'
 * augmentation, an undefined return address, CFAs in other registers, tables cut short or
 * pointing outside their segment), and the linker's real .plt FDE of this executable. */
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tracer/eh_frame.h"
#include "tracer/unwind_cfi.h"

/* Builds .eh_frame_hdr + one CIE + one FDE covering [code, code + 64) in buf. */
typedef struct table {
  _Alignas(8) unsigned char buf[512];
  size_t len;
  uintptr_t code;
} table;

static void put(table *t, const void *bytes, size_t n) {
  assert_true(t->len + n <= sizeof t->buf);
  memcpy(t->buf + t->len, bytes, n);
  t->len += n;
}
static void put_u8(table *t, uint8_t v) {
  put(t, &v, 1);
}
static void put_u32(table *t, uint32_t v) {
  put(t, &v, 4);
}
static void patch_u32(table *t, size_t at, uint32_t v) {
  memcpy(t->buf + at, &v, 4);
}

static mt_eh_tables build(table *t, const char *aug, const unsigned char *cie_insns, size_t cie_len,
                          const unsigned char *fde_insns, size_t fde_len) {
  memset(t, 0, sizeof *t);
  t->code = (uintptr_t)t->buf + 4096; /* never executed, never read */
  /* header: version, eh_frame_ptr pcrel|sdata4, count udata4, table datarel|sdata4 */
  put_u8(t, 1), put_u8(t, 0x1b), put_u8(t, 0x03), put_u8(t, 0x3b);
  size_t eh_ptr = t->len;
  put_u32(t, 0), put_u32(t, 1), put_u32(t, 0), put_u32(t, 0);
  size_t cie = t->len;
  patch_u32(t, eh_ptr, (uint32_t)(cie - eh_ptr));
  put_u32(t, 0); /* length, patched */
  put_u32(t, 0); /* CIE id */
  put_u8(t, 1);
  put(t, aug, strlen(aug) + 1);
  put_u8(t, 1), put_u8(t, 0x78), put_u8(t, 16); /* code align 1, data align -8, RA column 16 */
  put_u8(t, 1), put_u8(t, 0x1b);                /* augmentation data: 'R' pcrel|sdata4 */
  put(t, cie_insns, cie_len);
  while ((t->len - cie) % 8)
    put_u8(t, 0);
  patch_u32(t, cie, (uint32_t)(t->len - cie - 4));
  size_t fde = t->len;
  put_u32(t, 0);
  put_u32(t, (uint32_t)(t->len - cie)); /* CIE pointer: back from this field */
  put_u32(t, (uint32_t)(t->code - ((uintptr_t)t->buf + t->len)));
  put_u32(t, 64);
  put_u8(t, 0); /* augmentation data length */
  put(t, fde_insns, fde_len);
  while ((t->len - fde) % 8)
    put_u8(t, 0);
  patch_u32(t, fde, (uint32_t)(t->len - fde - 4));
  patch_u32(t, 12, (uint32_t)(t->code - (uintptr_t)t->buf));
  patch_u32(t, 16, (uint32_t)fde);
  return (mt_eh_tables){(uintptr_t)t->buf, (uintptr_t)t->buf, (uintptr_t)t->buf + t->len};
}

/* CIE of every x86-64 object: CFA = rsp + 8, return address at CFA - 8. */
static const unsigned char cie_std[] = {0x0c, 7, 8, 0x90, 1};

static void eh_frame_reduces_prologue_and_frame_pointer_rows(void **state) {
  (void)state;
  table t;
  /* push rbp (1 byte): CFA rsp+16, rbp at CFA-16; mov rsp,rbp (3): CFA = rbp + 16. */
  const unsigned char fde[] = {0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0d, 6};
  mt_eh_tables tb = build(&t, "zR", cie_std, sizeof cie_std, fde, sizeof fde);
  mt_eh_rule r = mt_eh_rule_at(&tb, t.code);
  assert_int_equal(r.kind, MT_EH_CFA_RSP);
  assert_int_equal(r.cfa_offset, 8);
  assert_int_equal(r.rbp_slot, 0);
  r = mt_eh_rule_at(&tb, t.code + 1);
  assert_int_equal(r.kind, MT_EH_CFA_RSP);
  assert_int_equal(r.cfa_offset, 16);
  assert_int_equal(r.rbp_slot, -2);
  r = mt_eh_rule_at(&tb, t.code + 40);
  assert_int_equal(r.kind, MT_EH_CFA_RBP);
  assert_int_equal(r.cfa_offset, 16);
  assert_int_equal(r.rbp_slot, -2);
  assert_int_equal(mt_eh_rule_at(&tb, t.code + 64).kind, MT_EH_NO_FDE);
  assert_int_equal(mt_eh_rule_at(&tb, t.code - 1).kind, MT_EH_NO_FDE);
}

static void eh_frame_evaluates_the_plt_cfa_expression_per_pc(void **state) {
  (void)state;
  table t;
  /* ld's .plt FDE: def_cfa_offset 16; advance 6; def_cfa_offset 24; advance 10;
   * def_cfa_expression: rsp + 8 + ((rip & 15) >= 11) << 3 */
  const unsigned char fde[] = {0x0e, 16, 0x46, 0x0e, 24,   0x4a, 0x0f, 11,   0x77, 8,
                               0x80, 0,  0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
  mt_eh_tables tb = build(&t, "zR", cie_std, sizeof cie_std, fde, sizeof fde);
  for (uintptr_t pc = t.code + 16; pc < t.code + 64; pc++) {
    mt_eh_rule r = mt_eh_rule_at(&tb, pc);
    assert_int_equal(r.kind, MT_EH_CFA_RSP);
    assert_int_equal(r.cfa_offset, (pc & 15) >= 11 ? 16 : 8);
  }
  assert_int_equal(mt_eh_rule_at(&tb, t.code + 7).cfa_offset, 24);
}

static void eh_frame_says_signal_frame_for_s_augmentation(void **state) {
  (void)state;
  table t;
  const unsigned char fde[] = {0x0f, 4, 0x77, 0xa0, 0x01, 0x06}; /* CFA = *(rsp + 160) */
  mt_eh_tables tb = build(&t, "zRS", cie_std, sizeof cie_std, fde, sizeof fde);
  assert_int_equal(mt_eh_rule_at(&tb, t.code + 3).kind, MT_EH_SIGNAL);
  tb = build(&t, "zR", cie_std, sizeof cie_std, fde, sizeof fde); /* same without S: a deref */
  assert_int_equal(mt_eh_rule_at(&tb, t.code + 3).kind, MT_EH_UNEXPRESSIBLE);
}

static void eh_frame_says_outermost_for_undefined_return_address(void **state) {
  (void)state;
  table t;
  const unsigned char fde[] = {0x44, 0x07, 16}; /* advance 4; undefined rip */
  mt_eh_tables tb = build(&t, "zR", cie_std, sizeof cie_std, fde, sizeof fde);
  assert_int_equal(mt_eh_rule_at(&tb, t.code).kind, MT_EH_CFA_RSP);
  assert_int_equal(mt_eh_rule_at(&tb, t.code + 4).kind, MT_EH_OUTERMOST);
}

static void eh_frame_refuses_cfa_in_other_registers_and_reads_outside_its_segment(void **state) {
  (void)state;
  table t;
  const unsigned char fde[] = {0x0c, 10, 8}; /* CFA = r10 + 8 (a realigned main's prologue) */
  mt_eh_tables tb = build(&t, "zR", cie_std, sizeof cie_std, fde, sizeof fde);
  assert_int_equal(mt_eh_rule_at(&tb, t.code + 1).kind, MT_EH_UNEXPRESSIBLE);
  const unsigned char ok[] = {0x0e, 16};
  tb = build(&t, "zR", cie_std, sizeof cie_std, ok, sizeof ok);
  /* The FDE pointer aims past the segment, then the segment ends inside the FDE. */
  patch_u32(&t, 16, 0x7ffffff0);
  assert_int_equal(mt_eh_rule_at(&tb, t.code + 1).kind, MT_EH_UNEXPRESSIBLE);
  tb = build(&t, "zR", cie_std, sizeof cie_std, ok, sizeof ok);
  tb.hi -= 6;
  assert_int_equal(mt_eh_rule_at(&tb, t.code + 1).kind, MT_EH_UNEXPRESSIBLE);
  tb.hi += 6;
  assert_int_equal(mt_eh_rule_at(&tb, t.code + 1).cfa_offset, 16);
}

/* The linker's own .plt FDE of this executable (CFA by a DWARF expression on rip): every PC of
 * the lazy-binding stubs reduces to rsp + 8, or + 16 once the stub pushed its index. */
static int find_executable(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  mt_cfi_module *m = data;
  return info->dlpi_name[0] == 0 && mt_cfi_module_from_phdr(info, m) == 0;
}

static void eh_frame_reduces_the_linkers_plt_entries_of_this_executable(void **state) {
  (void)state;
  size_t size;
  uint8_t *elf = tu_read_file("/proc/self/exe", &size);
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)elf;
  assert_true(size > sizeof *eh && eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= size);
  const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(elf + eh->e_shoff);
  const char *names = (const char *)elf + sh[eh->e_shstrndx].sh_offset;
  uintptr_t plt = 0, plt_size = 0;
  for (size_t i = 0; i < eh->e_shnum; i++)
    if (strcmp(names + sh[i].sh_name, ".plt") == 0)
      plt = sh[i].sh_addr, plt_size = sh[i].sh_size;
  free(elf);
  if (!plt) {
    skip(); /* linked without lazy-binding stubs */
    return;
  }
  mt_cfi_module me;
  assert_int_equal(dl_iterate_phdr(find_executable, &me), 1);
  mt_eh_tables tables = {me.eh_frame_hdr, me.eh_lo, me.eh_hi};
  plt += me.load_bias;
  for (uintptr_t pc = plt; pc < plt + plt_size; pc++) {
    mt_eh_rule r = mt_eh_rule_at(&tables, pc);
    int32_t want = pc < plt + 6 ? 16 : pc < plt + 16 ? 24 : (pc & 15) >= 11 ? 16 : 8;
    assert_int_equal(r.kind, MT_EH_CFA_RSP);
    assert_int_equal(r.cfa_offset, want);
    assert_int_equal(r.rbp_slot, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(eh_frame_reduces_prologue_and_frame_pointer_rows),
      cmocka_unit_test(eh_frame_evaluates_the_plt_cfa_expression_per_pc),
      cmocka_unit_test(eh_frame_reduces_the_linkers_plt_entries_of_this_executable),
      cmocka_unit_test(eh_frame_says_signal_frame_for_s_augmentation),
      cmocka_unit_test(eh_frame_says_outermost_for_undefined_return_address),
      cmocka_unit_test(eh_frame_refuses_cfa_in_other_registers_and_reads_outside_its_segment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
