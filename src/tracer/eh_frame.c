/* eh_frame: finds the FDE of a PC through .eh_frame_hdr's sorted table, runs its CIE's and its own
 * call frame instructions up to the PC, and reduces the resulting row to an mt_eh_rule (see
 * eh_frame.h). Every read goes through a cursor bounded by the tables' segment; anything this
 * reduction cannot represent exactly becomes MT_EH_UNEXPRESSIBLE, so the caller can fall back. */
#include "tracer/eh_frame.h"

#include <stdbool.h>
#include <stddef.h>

/* DW_EH_PE pointer encodings (LSB, "DWARF Exception Header Encoding"). */
enum {
  PE_ABSPTR = 0x00,
  PE_ULEB128 = 0x01,
  PE_UDATA2 = 0x02,
  PE_UDATA4 = 0x03,
  PE_UDATA8 = 0x04,
  PE_SLEB128 = 0x09,
  PE_SDATA2 = 0x0a,
  PE_SDATA4 = 0x0b,
  PE_SDATA8 = 0x0c,
  PE_PCREL = 0x10,
  PE_DATAREL = 0x30,
  PE_INDIRECT = 0x80,
  PE_OMIT = 0xff,
};

/* x86-64 DWARF register numbers (System V psABI, figure 3.36). */
enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };

typedef struct cursor {
  uintptr_t p, end;
  bool bad;
} cursor;

static bool take(cursor *c, size_t n, uintptr_t *at) {
  /* A cursor past its end (an entry shorter than the fields read before its end was set) must not
   * read on: end - p would wrap to a huge room. */
  if (c->bad || c->p > c->end || n > c->end - c->p) {
    c->bad = true;
    return false;
  }
  *at = c->p;
  c->p += n;
  return true;
}

#define READ_FIXED(name, type)                                                                     \
  static type name(cursor *c) {                                                                    \
    uintptr_t at;                                                                                  \
    type v = 0;                                                                                    \
    if (take(c, sizeof v, &at))                                                                    \
      __builtin_memcpy(&v, (const void *)at, sizeof v);                                            \
    return v;                                                                                      \
  }
READ_FIXED(read_u8, uint8_t)
READ_FIXED(read_u16, uint16_t)
READ_FIXED(read_u32, uint32_t)
READ_FIXED(read_u64, uint64_t)

static uint64_t read_uleb(cursor *c) {
  uint64_t v = 0;
  for (unsigned shift = 0; !c->bad; shift += 7) {
    uint8_t b = read_u8(c);
    if (shift < 64)
      v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      break;
    if (shift > 63)
      c->bad = true;
  }
  return v;
}

static int64_t read_sleb(cursor *c) {
  uint64_t v = 0;
  unsigned shift = 0;
  uint8_t b = 0;
  do {
    b = read_u8(c);
    if (shift < 64)
      v |= (uint64_t)(b & 0x7f) << shift;
    shift += 7;
    if (shift > 70)
      c->bad = true;
  } while ((b & 0x80) && !c->bad);
  if (shift < 64 && (b & 0x40))
    v |= ~(uint64_t)0 << shift;
  return (int64_t)v;
}

/* A DW_EH_PE-encoded value. base_data is the datarel base (.eh_frame_hdr). Indirect values are
 * returned as the address of the pointer: only the personality uses them, and it is skipped. */
static uint64_t read_encoded(cursor *c, uint8_t enc, uintptr_t base_data) {
  uintptr_t field = c->p;
  uint64_t v;
  switch (enc & 0x0f) {
  case PE_ABSPTR: v = read_u64(c); break;
  case PE_ULEB128: v = read_uleb(c); break;
  case PE_UDATA2: v = read_u16(c); break;
  case PE_UDATA4: v = read_u32(c); break;
  case PE_UDATA8: v = read_u64(c); break;
  case PE_SLEB128: v = (uint64_t)read_sleb(c); break;
  case PE_SDATA2: v = (uint64_t)(int64_t)(int16_t)read_u16(c); break;
  case PE_SDATA4: v = (uint64_t)(int64_t)(int32_t)read_u32(c); break;
  case PE_SDATA8: v = read_u64(c); break;
  default: c->bad = true; return 0;
  }
  switch (enc & 0x70) {
  case 0: break;
  case PE_PCREL: v += field; break;
  case PE_DATAREL:
    if (!base_data)
      c->bad = true;
    v += base_data;
    break;
  default: c->bad = true; break; /* textrel, funcrel, aligned: never produced on x86-64 */
  }
  return v;
}

/* ---- CIE and FDE ------------------------------------------------------------------------- */

typedef struct cie {
  uint64_t code_align;
  int64_t data_align;
  uint64_t ra_reg;
  uint8_t fde_enc;
  bool has_z, signal;
  uintptr_t insns, insns_end;
} cie;

typedef struct fde {
  uintptr_t pc_begin, pc_end;
  uintptr_t insns, insns_end;
} fde;

/* One entry's extent: [*body, *end) after its length field. */
static bool entry_extent(cursor *c, uintptr_t *body, uintptr_t *end) {
  uint64_t len = read_u32(c);
  if (len == 0xffffffffu)
    len = read_u64(c);
  if (c->bad || len == 0 || len > c->end - c->p)
    return false;
  *body = c->p;
  *end = c->p + len;
  return true;
}

static bool parse_cie(const mt_eh_tables *t, uintptr_t at, cie *out) {
  cursor c = {at, t->hi, at < t->lo || at >= t->hi};
  uintptr_t body, end;
  if (!entry_extent(&c, &body, &end))
    return false;
  c.end = end; /* before the CIE id: an entry of 1 to 3 bytes has none */
  if (read_u32(&c) != 0)
    return false;
  uint8_t version = read_u8(&c);
  if (version != 1 && version != 3 && version != 4)
    return false;
  char aug[8];
  size_t n = 0;
  for (;;) {
    uint8_t ch = read_u8(&c);
    if (c.bad || n == sizeof aug)
      return false;
    aug[n++] = (char)ch;
    if (!ch)
      break;
  }
  if (aug[0] && aug[0] != 'z')
    return false; /* "eh" and other pre-z augmentations */
  if (version == 4 && (read_u8(&c) != 8 || read_u8(&c) != 0))
    return false; /* address size, segment selector size */
  out->code_align = read_uleb(&c);
  out->data_align = read_sleb(&c);
  out->ra_reg = version == 1 ? read_u8(&c) : read_uleb(&c);
  out->fde_enc = PE_ABSPTR;
  out->has_z = aug[0] == 'z';
  out->signal = false;
  if (out->has_z) {
    uint64_t aug_len = read_uleb(&c);
    if (c.bad || aug_len > c.end - c.p)
      return false;
    uintptr_t aug_end = c.p + aug_len;
    for (size_t i = 1; aug[i]; i++) {
      switch (aug[i]) {
      case 'R': out->fde_enc = read_u8(&c); break;
      case 'P': {
        uint8_t enc = read_u8(&c);
        if (enc == PE_OMIT)
          return false;
        (void)read_encoded(&c, enc, 0);
        break;
      }
      case 'L': (void)read_u8(&c); break;
      case 'S': out->signal = true; break;
      case 'B': break;
      default: return false; /* an augmentation whose data we cannot place */
      }
    }
    c.p = aug_end;
  }
  if (c.bad)
    return false;
  out->insns = c.p;
  out->insns_end = end;
  return true;
}

static bool parse_fde(const mt_eh_tables *t, uintptr_t at, cie *ci, fde *out) {
  cursor c = {at, t->hi, at < t->lo || at >= t->hi};
  uintptr_t body, end;
  if (!entry_extent(&c, &body, &end))
    return false;
  c.end = end;
  uintptr_t id_field = c.p;
  uint32_t cie_off = read_u32(&c);
  if (c.bad || cie_off == 0 || cie_off > id_field - t->lo)
    return false;
  if (!parse_cie(t, id_field - cie_off, ci))
    return false;
  if ((ci->fde_enc & PE_INDIRECT) || ci->fde_enc == PE_OMIT)
    return false;
  out->pc_begin = read_encoded(&c, ci->fde_enc, 0);
  out->pc_end = out->pc_begin + read_encoded(&c, ci->fde_enc & 0x0f, 0);
  if (ci->has_z) {
    uint64_t aug_len = read_uleb(&c);
    if (c.bad || aug_len > c.end - c.p)
      return false;
    c.p += aug_len;
  }
  if (c.bad)
    return false;
  out->insns = c.p;
  out->insns_end = end;
  return true;
}

/* Binary search of .eh_frame_hdr's table; 0 when no entry starts at or below pc. Only the
 * datarel|sdata4 table every linker writes is searched; any other layout returns 1 (give up). */
static uintptr_t find_fde(const mt_eh_tables *t, uintptr_t pc) {
  uintptr_t hdr = t->eh_frame_hdr;
  cursor c = {hdr, t->hi, hdr < t->lo || hdr >= t->hi};
  uint8_t version = read_u8(&c);
  uint8_t ptr_enc = read_u8(&c), count_enc = read_u8(&c), table_enc = read_u8(&c);
  if (c.bad || version != 1 || ptr_enc == PE_OMIT || count_enc == PE_OMIT ||
      table_enc != (PE_DATAREL | PE_SDATA4))
    return 1;
  (void)read_encoded(&c, ptr_enc, hdr);
  uint64_t count = read_encoded(&c, count_enc, hdr);
  if (c.bad || count > (t->hi - c.p) / 8)
    return 1;
  const unsigned char *table = (const unsigned char *)c.p;
  int64_t key = (int64_t)(pc - hdr);
  size_t lo = 0, hi = (size_t)count; /* first entry whose start is > key */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int32_t start;
    __builtin_memcpy(&start, table + mid * 8, 4);
    if ((int64_t)start <= key)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return 0;
  int32_t fde_rel;
  __builtin_memcpy(&fde_rel, table + (lo - 1) * 8 + 4, 4);
  return hdr + (uintptr_t)(intptr_t)fde_rel;
}

/* ---- the CFA program --------------------------------------------------------------------- */

enum rule_type { R_SAME, R_UNDEF, R_OFFSET, R_EXPR, R_OTHER };
enum { N_TRACKED = 3, STATE_STACK = 4 };

/* Kept small: the walk may run on a signal handler's alternate stack. */
typedef struct reg_rule {
  uint8_t type;
  uint32_t expr_len; /* R_EXPR: the block is at value */
  int64_t value;     /* R_OFFSET: saved at CFA + value */
} reg_rule;

typedef struct row {
  uint8_t cfa_is_expr;
  uint32_t cfa_reg;         /* or, with cfa_is_expr, the expression's length */
  int64_t cfa_offset;       /* or, with cfa_is_expr, the expression's address */
  reg_rule regs[N_TRACKED]; /* rbp, rsp, return address */
} row;

static reg_rule *tracked(row *r, uint64_t reg) {
  switch (reg) {
  case REG_RBP: return &r->regs[0];
  case REG_RSP: return &r->regs[1];
  case REG_RA: return &r->regs[2];
  default: return NULL;
  }
}

typedef struct program {
  const cie *ci;
  uintptr_t target;
  row initial; /* after the CIE's instructions: what DW_CFA_restore goes back to */
  row stack[STATE_STACK];
  unsigned depth;
} program;

/* A factored offset (DWARF's operand times the CIE's data alignment), wrapping rather than
 * overflowing on a damaged table: an offset that large fails the rule's range checks later. */
static int64_t factored(uint64_t operand, int64_t data_align) {
  return (int64_t)(operand * (uint64_t)data_align);
}

/* Sums and differences of an expression's values, wrapping as the machine does rather than
 * overflowing (undefined in C) on a damaged table. */
static int64_t wrapping_add(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t wrapping_sub(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a - (uint64_t)b);
}

static void set_rule(row *r, uint64_t reg, uint8_t type, int64_t value) {
  reg_rule *rr = tracked(r, reg);
  if (rr)
    *rr = (reg_rule){type, 0, value};
}

/* Runs [insns, end) on *r, stopping once the location passes target. Returns false on an
 * instruction it cannot parse or follow. *loc is the location the row applies from. */
static bool run(program *pg, row *r, uintptr_t insns, uintptr_t end, uintptr_t *loc) {
  cursor c = {insns, end, false};
  const cie *ci = pg->ci;
  while (c.p < end && !c.bad) {
    uint8_t op = read_u8(&c);
    uint64_t reg, advance = 0;
    switch (op >> 6) {
    case 1: advance = (uint64_t)(op & 0x3f) * ci->code_align; goto advance_loc;
    case 2: set_rule(r, op & 0x3f, R_OFFSET, factored(read_uleb(&c), ci->data_align)); continue;
    case 3: {
      reg_rule *rr = tracked(r, op & 0x3f);
      if (rr)
        *rr = *tracked(&pg->initial, op & 0x3f);
      continue;
    }
    default: break;
    }
    switch (op) {
    case 0x00: break; /* nop */
    case 0x01: {      /* set_loc */
      uintptr_t to = read_encoded(&c, ci->fde_enc, 0);
      if (to > pg->target)
        return !c.bad;
      *loc = to;
      break;
    }
    case 0x02: advance = read_u8(&c) * ci->code_align; goto advance_loc;
    case 0x03: advance = read_u16(&c) * ci->code_align; goto advance_loc;
    case 0x04: advance = read_u32(&c) * ci->code_align; goto advance_loc;
    case 0x05:
      reg = read_uleb(&c);
      set_rule(r, reg, R_OFFSET, factored(read_uleb(&c), ci->data_align));
      break;
    case 0x06: {
      reg = read_uleb(&c);
      reg_rule *rr = tracked(r, reg);
      if (rr)
        *rr = *tracked(&pg->initial, reg);
      break;
    }
    case 0x07: set_rule(r, read_uleb(&c), R_UNDEF, 0); break;
    case 0x08: set_rule(r, read_uleb(&c), R_SAME, 0); break;
    case 0x09:
      reg = read_uleb(&c);
      (void)read_uleb(&c);
      set_rule(r, reg, R_OTHER, 0);
      break;
    case 0x0a:
      if (pg->depth == STATE_STACK)
        return false;
      pg->stack[pg->depth++] = *r;
      break;
    case 0x0b:
      if (pg->depth == 0)
        return false;
      *r = pg->stack[--pg->depth]; /* the whole row, CFA included, as GCC's CFI expects */
      break;
    case 0x0c:
      r->cfa_is_expr = 0;
      r->cfa_reg = read_uleb(&c);
      r->cfa_offset = (int64_t)read_uleb(&c);
      break;
    case 0x0d:
      r->cfa_is_expr = 0;
      r->cfa_reg = read_uleb(&c);
      break;
    case 0x0e: /* def_cfa_offset: only on a register rule (the field holds an expression) */
      if (r->cfa_is_expr)
        return false;
      r->cfa_offset = (int64_t)read_uleb(&c);
      break;
    case 0x0f: {
      uint64_t len = read_uleb(&c);
      uintptr_t at;
      if (len > UINT32_MAX || !take(&c, (size_t)len, &at))
        return false;
      r->cfa_is_expr = 1;
      r->cfa_reg = (uint32_t)len;
      r->cfa_offset = (int64_t)at;
      break;
    }
    case 0x10:
    case 0x16: { /* expression, val_expression */
      reg = read_uleb(&c);
      uint64_t len = read_uleb(&c);
      uintptr_t at;
      if (len > UINT32_MAX || !take(&c, (size_t)len, &at))
        return false;
      reg_rule *rr = tracked(r, reg);
      if (rr)
        *rr =
            op == 0x10 ? (reg_rule){R_EXPR, (uint32_t)len, (int64_t)at} : (reg_rule){R_OTHER, 0, 0};
      break;
    }
    case 0x11:
      reg = read_uleb(&c);
      set_rule(r, reg, R_OFFSET, factored((uint64_t)read_sleb(&c), ci->data_align));
      break;
    case 0x12:
      r->cfa_is_expr = 0;
      r->cfa_reg = read_uleb(&c);
      r->cfa_offset = factored((uint64_t)read_sleb(&c), ci->data_align);
      break;
    case 0x13:
      if (r->cfa_is_expr)
        return false;
      r->cfa_offset = factored((uint64_t)read_sleb(&c), ci->data_align);
      break;
    case 0x14: /* val_offset */
      reg = read_uleb(&c);
      (void)read_uleb(&c);
      set_rule(r, reg, R_OTHER, 0);
      break;
    case 0x15: /* val_offset_sf */
      reg = read_uleb(&c);
      (void)read_sleb(&c);
      set_rule(r, reg, R_OTHER, 0);
      break;
    case 0x2e: (void)read_uleb(&c); break; /* GNU_args_size */
    case 0x2f:                             /* GNU_negative_offset_extended */
      reg = read_uleb(&c);
      set_rule(r, reg, R_OFFSET, factored(-read_uleb(&c), ci->data_align));
      break;
    default: return false;
    }
    continue;
  advance_loc:
    if (*loc + advance > pg->target)
      return !c.bad;
    *loc += advance;
  }
  return !c.bad;
}

/* ---- DWARF expressions, evaluated symbolically --------------------------------------------- */

/* A value on the expression stack: base + off, base one of NONE (a constant), RSP, RBP, CFA. */
enum { B_NONE, B_RSP, B_RBP, B_CFA };
typedef struct sym {
  uint8_t base;
  int64_t off;
} sym;

enum { EXPR_STACK = 8, EXPR_STEPS = 64 };

/* Evaluates [at, at + len) with pc as rip; initial is pushed first when non-NULL. Succeeds when
 * the result is a constant or one base register plus a constant. */
static bool eval_expr(uintptr_t at, uint32_t len, uintptr_t pc, const sym *initial, sym *out) {
  cursor c = {at, at + len, false};
  sym st[EXPR_STACK];
  unsigned n = 0;
  if (initial)
    st[n++] = *initial;
  for (unsigned steps = 0; c.p < c.end; steps++) {
    if (steps == EXPR_STEPS || c.bad)
      return false;
    uint8_t op = read_u8(&c);
    sym v = {B_NONE, 0};
    bool push = true;
    if (op >= 0x30 && op <= 0x4f) {
      v.off = op - 0x30;
    } else if (op >= 0x70 && op <= 0x8f) {
      int64_t off = read_sleb(&c);
      switch (op - 0x70) {
      case REG_RSP: v = (sym){B_RSP, off}; break;
      case REG_RBP: v = (sym){B_RBP, off}; break;
      case REG_RA: v = (sym){B_NONE, wrapping_add((int64_t)pc, off)}; break;
      default: return false;
      }
    } else {
      switch (op) {
      case 0x08: v.off = read_u8(&c); break;
      case 0x09: v.off = (int8_t)read_u8(&c); break;
      case 0x0a: v.off = read_u16(&c); break;
      case 0x0b: v.off = (int16_t)read_u16(&c); break;
      case 0x0c: v.off = read_u32(&c); break;
      case 0x0d: v.off = (int32_t)read_u32(&c); break;
      case 0x0e:
      case 0x0f: v.off = (int64_t)read_u64(&c); break;
      case 0x10: v.off = (int64_t)read_uleb(&c); break;
      case 0x11: v.off = read_sleb(&c); break;
      case 0x12: /* dup */
        if (n < 1)
          return false;
        v = st[n - 1];
        break;
      case 0x13: /* drop */
        if (n < 1)
          return false;
        n--;
        push = false;
        break;
      case 0x14: /* over */
        if (n < 2)
          return false;
        v = st[n - 2];
        break;
      case 0x16: /* swap */
        if (n < 2)
          return false;
        v = st[n - 1], st[n - 1] = st[n - 2], st[n - 2] = v;
        push = false;
        break;
      case 0x23: /* plus_uconst */
        if (n < 1)
          return false;
        st[n - 1].off = wrapping_add(st[n - 1].off, (int64_t)read_uleb(&c));
        push = false;
        break;
      case 0x96: push = false; break; /* nop */
      case 0x1a:
      case 0x1c:
      case 0x1e:
      case 0x21:
      case 0x22:
      case 0x24:
      case 0x25:
      case 0x26:
      case 0x27:
      case 0x29:
      case 0x2a:
      case 0x2b:
      case 0x2c:
      case 0x2d:
      case 0x2e: {
        if (n < 2)
          return false;
        sym b = st[--n], a = st[--n];
        if (op == 0x22 && (a.base == B_NONE || b.base == B_NONE)) {
          v = (sym){(uint8_t)(a.base | b.base), wrapping_add(a.off, b.off)};
        } else if (op == 0x1c && b.base == B_NONE) {
          v = (sym){a.base, wrapping_sub(a.off, b.off)};
        } else if (op == 0x1c && a.base == b.base) {
          v.off = wrapping_sub(a.off, b.off);
        } else if (a.base != B_NONE || b.base != B_NONE) {
          return false;
        } else {
          uint64_t x = (uint64_t)a.off, y = (uint64_t)b.off;
          switch (op) {
          case 0x1a: v.off = (int64_t)(x & y); break;
          case 0x1e: v.off = (int64_t)(x * y); break;
          case 0x21: v.off = (int64_t)(x | y); break;
          case 0x22: v.off = (int64_t)(x + y); break;
          case 0x1c: v.off = (int64_t)(x - y); break;
          case 0x24: v.off = y < 64 ? (int64_t)(x << y) : 0; break;
          case 0x25: v.off = y < 64 ? (int64_t)(x >> y) : 0; break;
          case 0x26: v.off = y < 64 ? a.off >> y : (a.off < 0 ? -1 : 0); break;
          case 0x27: v.off = (int64_t)(x ^ y); break;
          case 0x29: v.off = a.off == b.off; break;
          case 0x2a: v.off = a.off >= b.off; break;
          case 0x2b: v.off = a.off > b.off; break;
          case 0x2c: v.off = a.off <= b.off; break;
          case 0x2d: v.off = a.off < b.off; break;
          case 0x2e: v.off = a.off != b.off; break;
          }
        }
        break;
      }
      default: return false; /* deref, registers as locations, branches, calls... */
      }
    }
    if (push) {
      if (n == EXPR_STACK)
        return false;
      st[n++] = v;
    }
  }
  if (c.bad || n == 0)
    return false;
  *out = st[n - 1];
  return true;
}

/* ---- reduction to a rule ------------------------------------------------------------------- */

static mt_eh_rule rule_of(uint8_t kind) {
  return (mt_eh_rule){.kind = kind};
}

/* The CFA-relative offset where a register is saved, or false when it is not simply saved. */
static bool saved_at(const reg_rule *rr, uintptr_t pc, int64_t *off) {
  if (rr->type == R_OFFSET) {
    *off = rr->value;
    return true;
  }
  if (rr->type != R_EXPR)
    return false;
  sym cfa = {B_CFA, 0}, v;
  if (!eval_expr((uintptr_t)rr->value, rr->expr_len, pc, &cfa, &v) || v.base != B_CFA)
    return false;
  *off = v.off;
  return true;
}

static mt_eh_rule reduce(const row *r, const cie *ci, uintptr_t pc) {
  if (ci->signal)
    return rule_of(MT_EH_SIGNAL);
  const reg_rule *ra = &r->regs[2], *rbp = &r->regs[0], *rsp = &r->regs[1];
  if (ra->type == R_UNDEF)
    return rule_of(MT_EH_OUTERMOST);
  sym cfa;
  if (r->cfa_is_expr) {
    if (!eval_expr((uintptr_t)r->cfa_offset, r->cfa_reg, pc, NULL, &cfa))
      return rule_of(MT_EH_UNEXPRESSIBLE);
  } else {
    cfa.base = r->cfa_reg == REG_RSP ? B_RSP : r->cfa_reg == REG_RBP ? B_RBP : B_NONE;
    cfa.off = r->cfa_offset;
  }
  if ((cfa.base != B_RSP && cfa.base != B_RBP) || cfa.off < 8 || cfa.off >= (1 << 22))
    return rule_of(MT_EH_UNEXPRESSIBLE);
  int64_t off;
  if (!saved_at(ra, pc, &off) || off != -8)
    return rule_of(MT_EH_UNEXPRESSIBLE);
  if (rsp->type != R_SAME && rsp->type != R_UNDEF)
    return rule_of(MT_EH_UNEXPRESSIBLE);
  mt_eh_rule out = {.kind = cfa.base == B_RSP ? MT_EH_CFA_RSP : MT_EH_CFA_RBP,
                    .cfa_offset = (int32_t)cfa.off};
  if (rbp->type != R_SAME) {
    if (!saved_at(rbp, pc, &off) || off % 8 || off < -256 || off > -16)
      return rule_of(MT_EH_UNEXPRESSIBLE);
    out.rbp_slot = (int8_t)(off / 8);
  }
  return out;
}

mt_eh_rule mt_eh_rule_at(const mt_eh_tables *t, uintptr_t pc) {
  if (!t->eh_frame_hdr)
    return rule_of(MT_EH_NO_FDE);
  uintptr_t at = find_fde(t, pc);
  if (at == 0)
    return rule_of(MT_EH_NO_FDE);
  if (at == 1)
    return rule_of(MT_EH_UNEXPRESSIBLE);
  cie ci;
  fde fd;
  if (!parse_fde(t, at, &ci, &fd))
    return rule_of(MT_EH_UNEXPRESSIBLE);
  if (pc < fd.pc_begin || pc >= fd.pc_end)
    return rule_of(MT_EH_NO_FDE);
  if (ci.ra_reg != REG_RA || ci.code_align == 0)
    return rule_of(MT_EH_UNEXPRESSIBLE);
  program pg = {.ci = &ci, .target = pc};
  row r = {.cfa_reg = REG_RSP};
  uintptr_t loc = fd.pc_begin;
  if (!run(&pg, &r, ci.insns, ci.insns_end, &loc))
    return rule_of(MT_EH_UNEXPRESSIBLE);
  pg.initial = r;
  pg.depth = 0;
  if (!run(&pg, &r, fd.insns, fd.insns_end, &loc))
    return rule_of(MT_EH_UNEXPRESSIBLE);
  return reduce(&r, &ci, pc);
}
