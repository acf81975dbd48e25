/* libFuzzer target for the shim's reader of unwind tables (src/tracer/eh_frame.c), which reads
 * the .eh_frame_hdr and .eh_frame of every module a traced program maps, inside the program: a
 * table it cannot follow must give a rule that ends the walk, never a fault in the program.
 *
 * The input is an 8-byte PC offset (little-endian, from the segment's start) and then the bytes of
 * a segment whose first byte is the .eh_frame_hdr; the segment is copied to a buffer of exactly its
 * size, so that any read past it is a sanitizer report. The rule is asked at the PC and a few
 * addresses after it (inside a function, at its end). Every answer must be one of the kinds and,
 * for a CFA rule, a caller's rbp slot below the CFA. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracer/eh_frame.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8)
    return 0;
  uint64_t pc_offset;
  memcpy(&pc_offset, data, 8);
  size -= 8;
  uint8_t *segment = malloc(size ? size : 1);
  CHECK(segment != NULL);
  if (size)
    memcpy(segment, data + 8, size);
  mt_eh_tables tables = {(uintptr_t)segment, (uintptr_t)segment, (uintptr_t)segment + size};
  static const uint64_t steps[] = {0, 1, 4, 15, 63};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    mt_eh_rule rule = mt_eh_rule_at(&tables, (uintptr_t)segment + pc_offset + steps[i]);
    CHECK(rule.kind >= MT_EH_CFA_RSP && rule.kind <= MT_EH_NO_FDE);
    if (rule.kind == MT_EH_CFA_RSP || rule.kind == MT_EH_CFA_RBP)
      CHECK(rule.rbp_slot <= 0 && rule.cfa_offset >= 8);
  }
  free(segment);
  return 0;
}
