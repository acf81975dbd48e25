/* The scopes holding an address (docs/record.md, "Symbolisation"), for the symboliser's inlined
 * frames. libdw's dwarf_getscopes walks the compile unit's DIE tree from its top for every
 * address, and dwarf_getscopes_die walks it again to find the innermost scope's parents: on a
 * large unit (CPython's ceval.c) that was 13% of memtap's CPU. Here a unit's tree is walked once,
 * as libdw walks it, into its DIEs with address ranges (functions, inlined instances, blocks:
 * "nodes", in DIE order, with their parents) and a table of address segments, each naming the
 * node libdw's walk ends at for every address in it; an address is then a binary search and a
 * walk up the parents. Wherever the answer could differ from libdw's (a scope from an imported
 * unit, an abstract origin of an unexpected kind, unreadable ranges, absurd nesting), the address
 * or the unit is left to libdw. */
#include <dwarf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/hashmap.h"
#include "record/scopes.h"

#define NONE UINT32_MAX
#define MAX_DEPTH 512        /* DIE nesting (imports included) walked before giving a unit up */
#define MAX_OVERLAP 4096     /* ranges holding one address before giving a unit up */
#define MAX_NODES (1u << 26) /* nodes of one unit (48 bytes each) before giving it up */

/* What libdw answers for an address whose innermost scope is a node. */
enum {
  CHAIN,  /* the node and its parents */
  EMPTY,  /* 0: the innermost inlined instance's abstract origin is not in the unit's walk */
  FAILED, /* -1: that abstract origin cannot be read */
  LIBDW,  /* ask libdw (a scope read through an imported unit; an origin that is no function) */
};

typedef struct node {
  Dwarf_Die die;
  uint32_t parent;  /* NONE: a child of the unit (or of an imported unit's children there) */
  uint32_t end;     /* the nodes below it are the ones after it, up to `end` */
  uint32_t inlined; /* the innermost DW_TAG_inlined_subroutine of it and its parents, or NONE */
  uint8_t status;
} node;

typedef struct segment {
  Dwarf_Addr start; /* up to the next segment's start */
  uint32_t node;    /* libdw's innermost scope there, NONE: no scope */
} segment;

typedef struct unit_index {
  void *cu_addr; /* the unit's DIE, checked on each lookup */
  bool refused;  /* left to libdw */
  node *nodes;
  size_t node_count, node_cap;
  segment *segments;
  size_t segment_count;
} unit_index;

struct rec_scopes {
  mt_hashmap units; /* unit DIE offset -> unit_index * */
  rec_scopes_stats stats;
};

rec_scopes *rec_scopes_new(void) {
  return calloc(1, sizeof(rec_scopes));
}

static void unit_free(unit_index *u) {
  free(u->nodes);
  free(u->segments);
  free(u);
}

void rec_scopes_free(rec_scopes *sc) {
  if (!sc)
    return;
  for (size_t i = 0; i < sc->units.cap; i++)
    if (sc->units.state[i] == 1)
      unit_free((unit_index *)(uintptr_t)sc->units.values[i]);
  mt_hashmap_free(&sc->units);
  free(sc);
}

rec_scopes_stats rec_scopes_get_stats(const rec_scopes *sc) {
  return sc ? sc->stats : (rec_scopes_stats){0};
}

int rec_scopes_at_libdw(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die **scopes) {
  /* dwarf_getscopes follows an inlined instance to its abstract origin's scopes; the concrete
   * chain (the functions it was inlined into) comes from the innermost DIE itself. */
  Dwarf_Die *found = NULL;
  int n = dwarf_getscopes(cu, pc, &found);
  if (n > 0)
    n = dwarf_getscopes_die(&found[0], scopes);
  free(found);
  return n;
}

/* --- building a unit's index: libdw's walk (libdw_visit_scopes.c), once --------------------- */

typedef struct range {
  Dwarf_Addr low, high;
  uint32_t node;
} range;

typedef struct builder {
  unit_index *u;
  range *ranges;
  size_t range_count, range_cap;
  const void **functions; /* every DW_TAG_subprogram the walk meets, for abstract origins */
  size_t function_count, function_cap;
  const void *imports[MAX_DEPTH]; /* the imported_unit DIEs being walked, against cycles */
  unsigned import_count, depth;
} builder;

/* libdw's may_have_scopes: the DIEs whose children its walk visits. */
static bool may_have_scopes(int tag) {
  switch (tag) {
  case DW_TAG_compile_unit:
  case DW_TAG_module:
  case DW_TAG_lexical_block:
  case DW_TAG_with_stmt:
  case DW_TAG_catch_block:
  case DW_TAG_try_block:
  case DW_TAG_entry_point:
  case DW_TAG_inlined_subroutine:
  case DW_TAG_subprogram:
  case DW_TAG_namespace:
  case DW_TAG_class_type:
  case DW_TAG_structure_type: return true;
  default: return false;
  }
}

static bool walk_siblings(builder *b, Dwarf_Die die, uint32_t owner, bool candidates,
                          bool imported);

/* The children of `parent`, walked as libdw walks them. */
static bool walk_children(builder *b, Dwarf_Die *parent, uint32_t owner, bool candidates,
                          bool imported) {
  Dwarf_Die child;
  int rc = dwarf_child(parent, &child);
  if (rc != 0)
    return rc > 0;
  return walk_siblings(b, child, owner, candidates, imported);
}

/* One DIE of the walk. `candidates`: libdw's search for an address looks at this DIE (its
 * parents all hold ranges); it becomes a node when it has a non-empty range, whose parent is
 * `owner`. libdw's search descends only into a DIE holding the address, its walk for abstract
 * origins into every DIE of may_have_scopes. */
static bool visit(builder *b, Dwarf_Die *die, uint32_t owner, bool candidates, bool imported) {
  int tag = dwarf_tag(die);
  if (tag == DW_TAG_subprogram) {
    if (!MT_GROW(b->functions, b->function_cap, b->function_count + 1))
      return false;
    b->functions[b->function_count++] = die->addr;
  }
  unit_index *u = b->u;
  uint32_t self = NONE;
  if (candidates) {
    Dwarf_Addr base, start, end;
    ptrdiff_t offset = 0;
    while ((offset = dwarf_ranges(die, offset, &base, &start, &end)) > 0) {
      if (start >= end) /* dwarf_haspc never matches it */
        continue;
      if (self == NONE) {
        if (u->node_count == MAX_NODES || !MT_GROW(u->nodes, u->node_cap, u->node_count + 1))
          return false;
        self = (uint32_t)u->node_count++;
        uint32_t outer = owner == NONE ? NONE : u->nodes[owner].inlined;
        u->nodes[self] = (node){.die = *die,
                                .parent = owner,
                                .inlined = tag == DW_TAG_inlined_subroutine ? self : outer,
                                .status = imported ? LIBDW : CHAIN};
      }
      if (!MT_GROW(b->ranges, b->range_cap, b->range_count + 1))
        return false;
      b->ranges[b->range_count++] = (range){start, end, self};
    }
    if (offset < 0) /* where libdw's search would fail, or not: its business */
      return false;
  }
  if (may_have_scopes(tag) && dwarf_haschildren(die) != 0 &&
      !walk_children(b, die, self, self != NONE, imported))
    return false;
  if (self != NONE)
    u->nodes[self].end = (uint32_t)u->node_count;
  return true;
}

/* `die` and its siblings; the children of an imported unit are walked in its place, as libdw
 * does (gcc -flto's imported compile units skipped, a cycle an error). */
static bool walk_siblings(builder *b, Dwarf_Die die, uint32_t owner, bool candidates,
                          bool imported) {
  if (b->depth == MAX_DEPTH)
    return false;
  b->depth++;
  bool ok = true;
  int rc = 0;
  do {
    while (ok && dwarf_tag(&die) == DW_TAG_imported_unit) {
      Dwarf_Die import = die, unit, first;
      Dwarf_Attribute a;
      if (dwarf_formref_die(dwarf_attr(&import, DW_AT_import, &a), &unit) &&
          dwarf_tag(&unit) != DW_TAG_compile_unit && dwarf_child(&unit, &first) == 0) {
        for (unsigned i = 0; i < b->import_count; i++)
          ok = ok && b->imports[i] != import.addr;
        if (ok && b->import_count < MAX_DEPTH) {
          b->imports[b->import_count++] = import.addr;
          ok = walk_siblings(b, first, owner, candidates, true);
          b->import_count--;
        } else {
          ok = false;
        }
      }
      if (ok && (rc = dwarf_siblingof(&import, &die)) != 0) {
        b->depth--;
        return rc > 0;
      }
    }
    if (ok)
      ok = visit(b, &die, owner, candidates, imported);
  } while (ok && (rc = dwarf_siblingof(&die, &die)) == 0);
  b->depth--;
  return ok && rc > 0;
}

static int compare_pointers(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
  return x < y ? -1 : x > y;
}

/* libdw's answer at an inlined instance: its abstract origin, looked for by address among the
 * DIEs its walk meets, must be there. */
static uint8_t origin_status(const builder *b, Dwarf_Die *inlined) {
  Dwarf_Attribute a;
  Dwarf_Die origin;
  if (!dwarf_formref_die(dwarf_attr(inlined, DW_AT_abstract_origin, &a), &origin))
    return FAILED;
  if (dwarf_tag(&origin) != DW_TAG_subprogram)
    return LIBDW; /* only functions are listed */
  const void *key = origin.addr;
  return bsearch(&key, b->functions, b->function_count, sizeof *b->functions, compare_pointers)
             ? CHAIN
             : EMPTY;
}

static int compare_low(const void *a, const void *b) {
  const range *x = a, *y = b;
  return x->low < y->low ? -1 : x->low > y->low;
}

static int compare_high(const void *a, const void *b) {
  const range *x = a, *y = b;
  return x->high < y->high ? -1 : x->high > y->high;
}

/* Where libdw's search ends among the nodes holding an address (`active`, in DIE order): it
 * takes the first child of the unit holding it, then that one's first child holding it, and so
 * on. In DIE order a node's descendants follow it, up to its `end`. */
static uint32_t innermost(const unit_index *u, const uint32_t *active, size_t count) {
  uint32_t at = NONE;
  for (size_t i = 0; i < count; i++) {
    uint32_t n = active[i];
    if (u->nodes[n].parent == at)
      at = n;
    else if (at != NONE && n >= u->nodes[at].end)
      break;
  }
  return at;
}

static bool add_segment(unit_index *u, size_t *cap, Dwarf_Addr start, uint32_t n) {
  if (u->segment_count && u->segments[u->segment_count - 1].node == n)
    return true;
  if (!MT_GROW(u->segments, *cap, u->segment_count + 1))
    return false;
  u->segments[u->segment_count++] = (segment){start, n};
  return true;
}

/* The segments: a sweep over the ranges' ends, the nodes holding the addresses between two ends
 * kept in DIE order. */
static bool build_segments(builder *b) {
  unit_index *u = b->u;
  size_t n = b->range_count, cap = 0;
  range *by_high = malloc((n ? n : 1) * sizeof *by_high);
  uint32_t *holding = calloc(u->node_count ? u->node_count : 1, sizeof *holding);
  uint32_t *active = malloc(MAX_OVERLAP * sizeof *active);
  bool ok = by_high && holding && active;
  if (ok && n) {
    memcpy(by_high, b->ranges, n * sizeof *by_high);
    qsort(b->ranges, n, sizeof *b->ranges, compare_low);
    qsort(by_high, n, sizeof *by_high, compare_high);
  }
  size_t starts = 0, ends = 0, count = 0;
  while (ok && ends < n) {
    Dwarf_Addr at = by_high[ends].high;
    if (starts < n && b->ranges[starts].low < at)
      at = b->ranges[starts].low;
    for (; ends < n && by_high[ends].high == at; ends++) {
      uint32_t k = by_high[ends].node;
      if (--holding[k] == 0) {
        size_t i = 0;
        while (active[i] != k)
          i++;
        memmove(active + i, active + i + 1, (count - i - 1) * sizeof *active);
        count--;
      }
    }
    for (; starts < n && b->ranges[starts].low == at; starts++) {
      uint32_t k = b->ranges[starts].node;
      if (holding[k]++ == 0) {
        if (count == MAX_OVERLAP) {
          ok = false;
          break;
        }
        size_t i = count;
        while (i > 0 && active[i - 1] > k)
          i--;
        memmove(active + i + 1, active + i, (count - i) * sizeof *active);
        active[i] = k;
        count++;
      }
    }
    ok = ok && add_segment(u, &cap, at, innermost(u, active, count));
  }
  free(by_high);
  free(holding);
  free(active);
  return ok;
}

static bool build(unit_index *u, Dwarf_Die *cu) {
  builder b = {.u = u};
  bool ok = walk_children(&b, cu, NONE, true, false);
  if (ok) {
    size_t sorted = 1; /* in DIE order already, but for imported units */
    while (sorted < b.function_count &&
           (uintptr_t)b.functions[sorted - 1] <= (uintptr_t)b.functions[sorted])
      sorted++;
    if (sorted < b.function_count)
      qsort(b.functions, b.function_count, sizeof *b.functions, compare_pointers);
    for (size_t i = 0; i < u->node_count; i++) { /* parents first */
      node *x = &u->nodes[i];
      if (x->status == LIBDW || x->inlined == NONE)
        continue;
      x->status = x->inlined == i ? origin_status(&b, &x->die) : u->nodes[x->inlined].status;
    }
    ok = build_segments(&b);
  }
  free(b.ranges);
  free(b.functions);
  if (!ok) {
    free(u->nodes);
    free(u->segments);
    u->nodes = NULL;
    u->segments = NULL;
    u->node_count = u->node_cap = u->segment_count = 0;
  } else { /* kept for the module's life */
    node *nodes = u->node_count ? realloc(u->nodes, u->node_count * sizeof *nodes) : NULL;
    if (nodes)
      u->nodes = nodes;
    segment *segments =
        u->segment_count ? realloc(u->segments, u->segment_count * sizeof *segments) : NULL;
    if (segments)
      u->segments = segments;
  }
  return ok;
}

/* --- lookups -------------------------------------------------------------------------------- */

/* The unit's index, built on its first lookup; NULL when memory runs out. */
static unit_index *unit_of(rec_scopes *sc, Dwarf_Die *cu) {
  int64_t key = (int64_t)dwarf_dieoffset(cu);
  uint64_t value;
  if (mt_hashmap_get(&sc->units, key, &value)) {
    unit_index *u = (unit_index *)(uintptr_t)value;
    return u->cu_addr == cu->addr ? u : NULL;
  }
  unit_index *u = calloc(1, sizeof *u);
  if (!u)
    return NULL;
  u->cu_addr = cu->addr;
  if (!mt_hashmap_put(&sc->units, key, (uint64_t)(uintptr_t)u)) {
    free(u);
    return NULL;
  }
  u->refused = !build(u, cu);
  if (u->refused)
    sc->stats.units_refused++;
  else
    sc->stats.units_indexed++;
  return u;
}

int rec_scopes_at(rec_scopes *sc, Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die **scopes) {
  if (!sc)
    return rec_scopes_at_libdw(cu, pc, scopes);
  unit_index *u = unit_of(sc, cu);
  if (!u || u->refused) {
    sc->stats.asked_libdw++;
    return rec_scopes_at_libdw(cu, pc, scopes);
  }
  size_t lo = 0, hi = u->segment_count; /* the last segment starting at or below pc */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (u->segments[mid].start <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  uint32_t at = lo ? u->segments[lo - 1].node : NONE;
  if (at != NONE && u->nodes[at].status == LIBDW) {
    sc->stats.asked_libdw++;
    return rec_scopes_at_libdw(cu, pc, scopes);
  }
  sc->stats.answered++;
  if (at == NONE)
    return 0;
  if (u->nodes[at].status != CHAIN)
    return u->nodes[at].status == EMPTY ? 0 : -1;
  int depth = 1; /* the unit */
  for (uint32_t n = at; n != NONE; n = u->nodes[n].parent)
    depth++;
  Dwarf_Die *chain = malloc((size_t)depth * sizeof *chain);
  if (!chain)
    return -1;
  int i = 0;
  for (uint32_t n = at; n != NONE; n = u->nodes[n].parent)
    chain[i++] = u->nodes[n].die;
  chain[i] = *cu;
  *scopes = chain;
  return depth;
}
