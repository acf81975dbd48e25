/* A module's function symbols sorted by address, for the symboliser (symtab.c). */
#ifndef MEMTAP_SRC_RECORD_SYMTAB_H
#define MEMTAP_SRC_RECORD_SYMTAB_H

#include <elfutils/libdwfl.h>

typedef struct rec_symtab rec_symtab;

/* Reads `mod`'s function symbols once. NULL when it has none (or memory ran out): every lookup
 * then misses. The names stay valid while the module's Dwfl lives. */
rec_symtab *rec_symtab_build(Dwfl_Module *mod);
/* The name of the function symbol containing `addr` (a Dwfl address), or NULL. */
const char *rec_symtab_find(const rec_symtab *t, Dwarf_Addr addr);
void rec_symtab_free(rec_symtab *t);

#endif
