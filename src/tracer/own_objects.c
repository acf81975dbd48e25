/* The objects the shim brought into the process (docs/tracer.md, "Locked memory"): itself, the
 * libraries only it needs (libm), and what it loaded privately (libunwind and its dependencies;
 * in process, libmemtap with elfutils and zstd). mlockall (mlock.c) leaves their mappings unlocked:
 * locked, their pages (2.6 MiB of the shim's .bss alone, almost none of it ever touched) counted
 * against the program's RLIMIT_MEMLOCK, and a program that locked its future mappings had 33 of 50
 * later malloc(100000) fail under memtap where none failed untraced. A library some other object
 * of the process also needs is the program's as well, and stays locked. */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <string.h>

#include "tracer/loaded_object.h"
#include "tracer/shim.h"

#define NOTED_MAX 32
#define PAGE 4096u

/* The link maps of the objects loaded by the shim's private dlopens. Appended under the
 * loader's calls of one thread at a time (start-up, or control.c's lock). */
static const struct link_map *noted[NOTED_MAX];
static _Atomic unsigned noted_count;

static void note(const struct link_map *map) {
  unsigned n = atomic_load(&noted_count);
  for (unsigned i = 0; i < n; i++)
    if (noted[i] == map)
      return;
  if (n < NOTED_MAX) {
    noted[n] = map;
    atomic_store(&noted_count, n + 1);
  }
}

static const struct link_map *last_map(void) {
  Dl_info info;
  struct link_map *map = NULL;
  if (!dladdr1((void *)last_map, &info, (void **)&map, RTLD_DL_LINKMAP) || !map)
    return NULL;
  while (map->l_next)
    map = map->l_next;
  return map;
}

const void *mt_own_objects_mark(void) {
  return last_map();
}

void mt_own_objects_note_since(const void *mark) {
  const struct link_map *map = mark;
  if (!map)
    return;
  /* What a dlopen of the shim's own added: the objects after the last one before it. */
  for (map = map->l_next; map; map = map->l_next)
    note(map);
}

static const char *base_name(const char *path) {
  const char *slash = path ? strrchr(path, '/') : NULL;
  return slash ? slash + 1 : path ? path : "";
}

/* The candidates: every noted object, the shim, and the shim's direct dependencies. */
typedef struct candidates {
  const struct link_map *map[NOTED_MAX + 8];
  bool needed_elsewhere[NOTED_MAX + 8]; /* the program's too */
  bool expanded[NOTED_MAX + 8];         /* what it needs is marked as well */
  unsigned count;
  const struct link_map *first; /* the loader's list */
} candidates;

static bool is_candidate(const candidates *c, const struct link_map *map) {
  for (unsigned i = 0; i < c->count; i++)
    if (c->map[i] == map)
      return true;
  return false;
}

static void add(candidates *c, const struct link_map *map) {
  if (!is_candidate(c, map) && c->count < sizeof c->map / sizeof *c->map)
    c->map[c->count++] = map;
}

/* Calls `each(name, user)` for each DT_NEEDED entry of the object whose dynamic section is `ld`. */
static void each_needed(ElfW(Addr) base, const ElfW(Dyn) * ld, void (*each)(const char *, void *),
                        void *user) {
  uintptr_t strtab = 0;
  for (const ElfW(Dyn) *d = ld; d && d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_STRTAB)
      strtab = mt_loaded_dynamic_pointer(base, d->d_un.d_ptr);
  for (const ElfW(Dyn) *d = ld; strtab && d && d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_NEEDED)
      each((const char *)(strtab + d->d_un.d_val), user);
}

static void add_needed(const char *name, void *user) {
  candidates *c = user;
  for (const struct link_map *m = c->first; m; m = m->l_next)
    if (!strcmp(base_name(m->l_name), name)) {
      add(c, m);
      return;
    }
}

static void mark_needed(const char *name, void *user) {
  candidates *c = user;
  for (unsigned i = 0; i < c->count; i++)
    if (!strcmp(base_name(c->map[i]->l_name), name))
      c->needed_elsewhere[i] = true;
}

typedef struct ranges_out {
  const candidates *c;
  mt_own_range *out;
  size_t max, count;
} ranges_out;

static int object_range(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  ranges_out *r = data;
  for (unsigned i = 0; i < r->c->count && r->count < r->max; i++) {
    const struct link_map *m = r->c->map[i];
    if (r->c->needed_elsewhere[i] || !mt_loaded_is(info, m))
      continue;
    uint64_t low, high;
    mt_loaded_span(info, &low, &high);
    if (low < high) {
      r->out[r->count].start = low & ~(uint64_t)(PAGE - 1);
      r->out[r->count++].end = (high + PAGE - 1) & ~(uint64_t)(PAGE - 1);
    }
    break;
  }
  return 0;
}

size_t mt_own_objects_ranges(mt_own_range *out, size_t max) {
  candidates c = {0};
  Dl_info info;
  struct link_map *shim = NULL;
  if (!dladdr1((void *)mt_own_objects_ranges, &info, (void **)&shim, RTLD_DL_LINKMAP) || !shim)
    return 0;
  for (c.first = shim; c.first->l_prev;)
    c.first = c.first->l_prev;
  add(&c, shim);
  each_needed(shim->l_addr, shim->l_ld, add_needed, &c);
  unsigned n = atomic_load(&noted_count);
  for (unsigned i = 0; i < n; i++)
    add(&c, noted[i]);
  /* A candidate that an object of the program needs is the program's too (libc, or a libm the
   * program links), and so is what it needs in turn (the loader, needed by libc). */
  for (const struct link_map *m = c.first; m; m = m->l_next)
    if (!is_candidate(&c, m))
      each_needed(m->l_addr, m->l_ld, mark_needed, &c);
  for (bool changed = true; changed;) {
    changed = false;
    for (unsigned i = 0; i < c.count; i++) {
      if (!c.needed_elsewhere[i] || c.expanded[i])
        continue;
      c.expanded[i] = true;
      changed = true;
      each_needed(c.map[i]->l_addr, c.map[i]->l_ld, mark_needed, &c);
    }
  }
  ranges_out r = {.c = &c, .out = out, .max = max};
  dl_iterate_phdr(object_range, &r);
  return r.count;
}
