/* A module's function symbols sorted by address (docs/record.md, "Symbolisation"), for the
 * symboliser's lookups without DWARF. libdwfl's dwfl_module_addrinfo walks the whole symbol table
 * on every call (elfutils 0.188): on libLLVM's 60 000 symbols a C++ compiler's trace spent a minute
 * there. The table is read once per file with dwfl_module_getsym_info (the same .symtab, or
 * .dynsym without one, that dwfl_module_addrinfo reads) and searched in O(log n).
 *
 * Which symbol names an address: the function symbol that contains it (inside its size; a sizeless
 * one only at its own address). Of several symbols at one address (aliases: malloc and
 * __libc_malloc), a global one before a weak one before a local one, then the longer size, then
 * the earlier in the table, as libdwfl prefers. */
#include <stdlib.h>

#include "record/symtab.h"

typedef struct symbol {
  Dwarf_Addr low;
  GElf_Xword size;
  const char *name; /* in the ELF's string table: valid while the Dwfl lives */
  unsigned rank;    /* binding preference: 0 global, 1 weak, 2 local */
  size_t index;     /* in the symbol table */
} symbol;

struct rec_symtab {
  symbol *symbols; /* sorted by low; one per address */
  size_t count;
};

static unsigned binding_rank(unsigned char info) {
  switch (GELF_ST_BIND(info)) {
  case STB_GLOBAL: return 0;
  case STB_WEAK: return 1;
  default: return 2;
  }
}

static int by_address_then_preference(const void *pa, const void *pb) {
  const symbol *a = pa, *b = pb;
  if (a->low != b->low)
    return a->low < b->low ? -1 : 1;
  if (a->rank != b->rank)
    return a->rank < b->rank ? -1 : 1;
  if (a->size != b->size)
    return a->size > b->size ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

rec_symtab *rec_symtab_build(Dwfl_Module *mod) {
  int n = dwfl_module_getsymtab(mod);
  if (n <= 0)
    return NULL;
  rec_symtab *t = calloc(1, sizeof *t);
  if (!t || !(t->symbols = malloc((size_t)n * sizeof *t->symbols))) {
    free(t);
    return NULL;
  }
  for (int i = 1; i < n; i++) { /* entry 0 is the null symbol */
    GElf_Sym sym;
    GElf_Addr addr;
    const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL, NULL, NULL);
    int type = GELF_ST_TYPE(sym.st_info);
    /* Functions only: libc's table also holds objects of non-loaded sections at address 0. */
    if (!name || !*name || (type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF)
      continue;
    t->symbols[t->count++] =
        (symbol){addr, sym.st_size, name, binding_rank(sym.st_info), (size_t)i};
  }
  qsort(t->symbols, t->count, sizeof *t->symbols, by_address_then_preference);
  size_t kept = 0; /* the preferred symbol of each address */
  for (size_t i = 0; i < t->count; i++)
    if (!kept || t->symbols[kept - 1].low != t->symbols[i].low)
      t->symbols[kept++] = t->symbols[i];
  t->count = kept;
  return t;
}

const char *rec_symtab_find(const rec_symtab *t, Dwarf_Addr addr) {
  if (!t || !t->count || addr < t->symbols[0].low)
    return NULL;
  size_t lo = 0, hi = t->count; /* the last symbol at or below addr is in [lo, hi) */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->symbols[mid].low <= addr)
      lo = mid;
    else
      hi = mid;
  }
  const symbol *s = &t->symbols[lo];
  Dwarf_Addr offset = addr - s->low;
  return (s->size ? offset < s->size : offset == 0) ? s->name : NULL;
}

void rec_symtab_free(rec_symtab *t) {
  if (t)
    free(t->symbols);
  free(t);
}
