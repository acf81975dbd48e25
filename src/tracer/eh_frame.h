/* eh_frame: reads a module's unwind tables (PT_GNU_EH_FRAME: the .eh_frame_hdr search table and
 * the .eh_frame CIEs and FDEs it points to) and reduces the call frame information at one PC to
 * the compact x86-64 rule the cached unwinder (unwind_cfi.c) applies. Part of the preload shim
 * (DESIGN.md §2, tracer/): no allocation, no lock, no system call, and every byte it reads is
 * checked against the bounds of the mapped segment that holds the tables, so a damaged table
 * gives "not expressible", never a fault.
 *
 * Format facts used: DWARF 5 §6.4 (call frame instructions, DWARF expressions) and the LSB's
 * description of .eh_frame and .eh_frame_hdr (augmentations z, R, P, L, S; DW_EH_PE encodings). */
#ifndef MEMTAP_SRC_TRACER_EH_FRAME_H
#define MEMTAP_SRC_TRACER_EH_FRAME_H

#include <stdint.h>

/* Where a module's tables are: eh_frame_hdr is the run-time address of PT_GNU_EH_FRAME, and
 * [lo, hi) the run-time range of the PT_LOAD segment that holds it (and, in every layout ld and
 * lld produce, .eh_frame too). Reads outside [lo, hi) are refused. */
typedef struct mt_eh_tables {
  uintptr_t eh_frame_hdr;
  uintptr_t lo, hi;
} mt_eh_tables;

/* What a frame's caller looks like, for the frame whose (lookup) PC was given.
 * MT_EH_CFA_RSP / MT_EH_CFA_RBP: CFA = rsp or rbp + cfa_offset, the return address is at CFA - 8,
 * the caller's rsp is the CFA, and the caller's rbp is at CFA + 8 * rbp_slot (rbp_slot < 0), or
 * unchanged (rbp_slot == 0). The other kinds end the walk, or hand it to special code. */
typedef enum mt_eh_kind {
  MT_EH_EMPTY = 0,         /* never returned; an empty cache slot */
  MT_EH_CFA_RSP = 1,       /* CFA = rsp + cfa_offset */
  MT_EH_CFA_RBP = 2,       /* CFA = rbp + cfa_offset */
  MT_EH_UNEXPRESSIBLE = 3, /* CFI beyond the compact rule (expressions, other registers...) */
  MT_EH_SIGNAL = 4,        /* 'S' augmentation: a signal trampoline, the ucontext is at rsp */
  MT_EH_OUTERMOST = 5,     /* the return address is undefined (_start, a thread's clone) */
  MT_EH_NO_FDE = 6,        /* no FDE covers the PC (or the module has no tables) */
  MT_EH_NO_MODULE = 7,     /* the PC is in no registered module (set by unwind_cfi.c) */
} mt_eh_kind;

typedef struct mt_eh_rule {
  uint8_t kind;    /* mt_eh_kind */
  int8_t rbp_slot; /* caller's rbp at CFA + 8 * rbp_slot; 0: rbp unchanged */
  int32_t cfa_offset;
} mt_eh_rule;

/* The rule at pc for a module's tables. pc is the lookup address: a return address minus one
 * (so a call at the end of a function finds its own FDE), or the exact PC of an interrupted or
 * innermost frame. A DWARF expression whose value at this PC is rsp or rbp plus a constant (the
 * PLT's CFA expression) is reduced to that constant; any other expression is unexpressible. */
mt_eh_rule mt_eh_rule_at(const mt_eh_tables *tables, uintptr_t pc);

#endif
