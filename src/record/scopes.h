/* The DWARF scopes holding an address, for the symboliser (scopes.c): libdw's answer, from an
 * index of each compile unit's functions and blocks built once instead of a walk of the unit per
 * address. */
#ifndef MEMTAP_SRC_RECORD_SCOPES_H
#define MEMTAP_SRC_RECORD_SCOPES_H

#include <elfutils/libdw.h>
#include <stddef.h>

typedef struct rec_scopes rec_scopes;

/* What a module's index did (tests, measurements). */
typedef struct rec_scopes_stats {
  size_t units_indexed; /* compile units whose index was built */
  size_t units_refused; /* compile units left to libdw (unreadable or unusual DWARF) */
  size_t answered;      /* lookups answered from an index */
  size_t asked_libdw;   /* lookups left to libdw */
} rec_scopes_stats;

/* The indexes of one module's compile units, each built on the unit's first lookup. NULL when
 * memory runs out. Its answers hold DIEs of the module's Dwarf, which must outlive them. */
rec_scopes *rec_scopes_new(void);
void rec_scopes_free(rec_scopes *sc);

/* The scopes at `pc` (a DWARF address) in the compile unit `cu`: exactly what
 * dwarf_getscopes(cu, pc) then dwarf_getscopes_die of its innermost scope give, innermost first
 * and the unit last, that is the chain of DIEs holding the innermost DIE whose ranges contain
 * `pc`; 0 or -1 whenever libdw says so (no DIE holds `pc`; the innermost inlined instance's
 * abstract origin is not in the unit, or unreadable). *scopes is malloc'd when the count is
 * positive. `sc` NULL: libdw's walks alone (rec_scopes_at_libdw). */
int rec_scopes_at(rec_scopes *sc, Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die **scopes);
/* The same from libdw, which walks the unit's DIE tree from its top on every call. */
int rec_scopes_at_libdw(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die **scopes);
rec_scopes_stats rec_scopes_get_stats(const rec_scopes *sc);

#endif
