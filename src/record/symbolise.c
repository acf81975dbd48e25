/* Symbolisation with elfutils (docs/record.md, "Symbolisation"): a location code (module instance,
 * ELF address) becomes a memtrace location list, outermost first (FORMAT.md §2.6, §5): the
 * function that physically holds the instruction, then each inlined function down to the
 * innermost, each with the file and line where it calls the next (the innermost: the line of the
 * instruction), from the scopes holding the address (scopes.c). DWARF comes from the file or its
 * separate debug info (debuginfo.c); without it, .symtab/.dynsym names a function only when the
 * address is inside the symbol's size, else the code is `libfoo.so+0x1234`. A file deleted, or
 * whose build-id differs from the one the process loaded, is read from the process's mapping of
 * the file it loaded while it lives, else not at all. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libiberty/demangle.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/arena.h"
#include "common/hashmap.h"
#include "record/debuginfo.h"
#include "record/inflate.h"
#include "record/record_internal.h"
#include "record/scopes.h"
#include "record/symtab.h"

#define MAX_ENTRIES 256
#define NAME_CAP 1024 /* bytes of one name kept when a list must be cut */

typedef struct rec_elf {
  char *path;
  uint8_t *build_id;
  size_t build_id_length;
  Dwfl *dwfl;
  Dwfl_Module *mod;
  Dwarf_Addr bias; /* dwfl address = ELF address + bias */
  bool mismatch;   /* the file on disk is not the one the process loaded */
  bool unusable;   /* cannot be opened */
  /* The CUs' address ranges, for files without .debug_aranges (clang does not emit it by default,
   * and libdwfl's CU lookup relies on it): built on the first miss, sorted by address. */
  struct cu_range *ranges;
  size_t range_count;
  bool ranges_built;
  rec_symtab *symtab; /* its function symbols, read on the first lookup without DWARF */
  bool symtab_built;
  rec_scopes *scopes; /* its compile units' scopes, indexed as they are looked up (scopes.c) */
  struct rec_elf *next;
} rec_elf;

typedef struct cu_range {
  Dwarf_Addr low, high; /* DWARF addresses */
  Dwarf_Die cu;
  Dwarf_Addr bias;
} cu_range;

/* A resolved code: the writer asks again for codes its backtrace cache evicted. */
typedef struct cached_list {
  size_t count;
  mt_location entries[];
} cached_list;

struct rec_symboliser {
  bool no_symbols;
  int64_t pid;    /* the traced process, whose mappings may still hold a file gone from disk */
  size_t watched; /* descriptors rec_symboliser_watch_module opened */
  rec_symboliser_gone_fn gone; /* told of each module found only that way, or not at all */
  void *gone_user;
  void (*stall)(void *user); /* rec_symboliser_set_stall_hook */
  void *stall_user;
  const Dwfl_Callbacks *callbacks; /* where separate debug info is looked for */
  mt_hashmap cache;                /* code -> cached_list * */
  mt_arena arena;                  /* the cached lists and their strings */
  rec_elf *elves;
  mt_location entries[MAX_ENTRIES];
  char *owned[MAX_ENTRIES * 2 + 2]; /* strings of the last answer, freed at the next call */
  size_t owned_count;
  char scratch[MAX_ENTRIES * 2 * NAME_CAP];
};

void rec_symboliser_set_stall_hook(rec_symboliser *s, void (*hook)(void *user), void *user) {
  s->stall = hook;
  s->stall_user = user;
}

static void stalling(rec_symboliser *s) {
  if (s->stall)
    s->stall(s->stall_user);
}

rec_symboliser *rec_symboliser_new(bool no_symbols, bool debuginfod) {
  rec_symboliser *s = calloc(1, sizeof *s);
  if (s) {
    s->no_symbols = no_symbols;
    if (!no_symbols)
      rec_inflate_load();
    s->callbacks = rec_debuginfo_callbacks(debuginfod);
    s->cache.seed = mt_hashmap_random_seed();
  }
  return s;
}

void rec_symboliser_set_process(rec_symboliser *s, int64_t pid, rec_symboliser_gone_fn gone,
                                void *user) {
  s->pid = pid;
  s->gone = gone;
  s->gone_user = user;
}

void rec_symboliser_free(rec_symboliser *s) {
  if (!s)
    return;
  for (rec_elf *e = s->elves, *next; e; e = next) {
    next = e->next;
    if (e->dwfl)
      dwfl_end(e->dwfl);
    free(e->path);
    free(e->build_id);
    free(e->ranges);
    rec_symtab_free(e->symtab);
    rec_scopes_free(e->scopes);
    free(e);
  }
  for (size_t i = 0; i < s->owned_count; i++)
    free(s->owned[i]);
  mt_hashmap_free(&s->cache);
  mt_arena_free(&s->arena);
  free(s);
}

/* --- demangling ---------------------------------------------------------------------------- */

/* elfutils has no demangler: libiberty's (the one binutils and gdb use) reads C++ (Itanium ABI)
 * and both Rust manglings, legacy (`_ZN...17h<hash>E`, which a C++ demangler reads only halfway:
 * `$LT$` escapes and the hash left in) and v0 (`_R...`, which Rust's standard library uses). Its
 * two demanglers are called directly: cplus_demangle() would pull in libiberty's xmalloc, which
 * exits the process when memory runs out. Both keep to their default recursion limit, so a crafted
 * name in a traced program's symbol table cannot overflow memtap's stack. */
char *rec_demangle(const char *name) {
  if (!name || name[0] != '_')
    return NULL;
  if (name[1] == 'R')
    return rust_demangle(name, DMGL_PARAMS | DMGL_ANSI);
  if (name[1] != 'Z')
    return NULL;
  char *rust = rust_demangle(name, DMGL_PARAMS | DMGL_ANSI); /* NULL unless it has a Rust hash */
  return rust ? rust : cplus_demangle_v3(name, DMGL_PARAMS | DMGL_ANSI);
}

/* --- files --------------------------------------------------------------------------------- */

/* Reports the module's file (`fd` >= 0: that descriptor, which libdwfl then owns; else `path`)
 * into a new Dwfl of `e`: usable when libdwfl reads it, a mismatch when its build-id is not the
 * one the process loaded. */
static void report_file(rec_symboliser *s, rec_elf *e, const rec_module *m, const char *path,
                        int fd) {
  if (!(e->dwfl = dwfl_begin(s->callbacks))) {
    if (fd >= 0)
      close(fd);
    return;
  }
  dwfl_report_begin(e->dwfl);
  e->mod = dwfl_report_elf(e->dwfl, m->path, path, fd, 0, false);
  if (!e->mod && fd >= 0)
    close(fd); /* consumed only on success */
  dwfl_report_end(e->dwfl, NULL, NULL);
  if (e->mod && dwfl_module_getelf(e->mod, &e->bias)) {
    e->unusable = false;
    const unsigned char *bits;
    GElf_Addr vaddr;
    int n = dwfl_module_build_id(e->mod, &bits, &vaddr);
    if (m->build_id_length &&
        (n != (int)m->build_id_length || memcmp(bits, m->build_id, m->build_id_length)))
      e->mismatch = true;
  }
}

/* One line of /proc/PID/maps: its range, file offset and file name (its newline cut; "" for an
 * anonymous mapping). */
static bool maps_line(char *line, unsigned long long *lo, unsigned long long *hi,
                      unsigned long long *offset, char **name) {
  int name_at = 0;
  if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", lo, hi, offset, &name_at) != 3 || !name_at)
    return false;
  *name = line + name_at;
  (*name)[strcspn(*name, "\n")] = 0;
  return true;
}

static FILE *open_maps(int64_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/maps", (long long)pid);
  return fopen(path, "re");
}

/* A descriptor of the file the process `pid` maps as module `m`, read through its mappings
 * (/proc/PID/map_files, for root) or, for the executable, /proc/PID/exe; -1 when the process is
 * gone or neither can be opened. The caller checks the build-id: the pid may be another
 * process's by now. */
static int open_mapped_copy(int64_t pid, const rec_module *m) {
  FILE *maps = open_maps(pid);
  if (!maps)
    return -1;
  char line[4096 + 128], path[128];
  int fd = -1;
  bool mapped = false;
  size_t n = strlen(m->path);
  while (fd < 0 && fgets(line, sizeof line, maps)) {
    unsigned long long lo, hi, offset;
    char *name;
    if (!maps_line(line, &lo, &hi, &offset, &name) || lo < m->low || lo >= m->high || offset != 0)
      continue;
    if (strncmp(name, m->path, n) != 0 || (name[n] && strcmp(name + n, " (deleted)")))
      continue;
    snprintf(path, sizeof path, "/proc/%lld/map_files/%llx-%llx", (long long)pid, lo, hi);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    mapped = true; /* /proc/PID/exe is worth a try if map_files is refused (not root) */
  }
  fclose(maps);
  if (fd < 0 && mapped) {
    snprintf(path, sizeof path, "/proc/%lld/exe", (long long)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC); /* the build-id check tells whether it is this module */
  }
  return fd;
}

/* The absolute path of the file mapped at `address` in process `pid`, if its name ends with
 * `base` (malloc'd), else NULL. */
static char *mapped_path(int64_t pid, uint64_t address, const char *base) {
  FILE *maps = open_maps(pid);
  if (!maps)
    return NULL;
  char line[4096 + 128], *found = NULL;
  size_t b = strlen(base);
  while (!found && fgets(line, sizeof line, maps)) {
    unsigned long long lo, hi, offset;
    char *name;
    if (!maps_line(line, &lo, &hi, &offset, &name) || address < lo || address >= hi ||
        name[0] != '/')
      continue;
    size_t n = strlen(name);
    if (n > b && name[n - b - 1] == '/' && !strcmp(name + n - b, base))
      found = strdup(name);
  }
  fclose(maps);
  return found;
}

void rec_symboliser_resolve_path(rec_symboliser *s, rec_module *m, int64_t pid) {
  if (s->no_symbols || !m || !m->path[0] || m->path[0] == '/')
    return;
  stalling(s);
  const char *slash = strrchr(m->path, '/');
  char *found = pid > 0 ? mapped_path(pid, m->low, slash ? slash + 1 : m->path) : NULL;
  char resolved[PATH_MAX];
  struct stat st;
  if (!found && slash && realpath(m->path, resolved) && stat(resolved, &st) == 0 &&
      S_ISREG(st.st_mode))
    found = strdup(resolved);
  if (found) {
    free(m->path);
    m->path = found;
  }
}

/* Early descriptors kept at most: a program dlopen'ing fresh plugins by the thousand must not
 * use up memtap's descriptors. */
#define WATCHED_MAX 64

void rec_symboliser_watch_module(rec_symboliser *s, rec_module *m, int64_t pid, int64_t since_ns) {
  if (s->no_symbols || !m || m->mapped_fd >= 0 || !m->build_id_length || pid <= 0 ||
      m->path[0] != '/' || s->watched == WATCHED_MAX)
    return;
  stalling(s);
  struct stat st;
  if (stat(m->path, &st) == 0 && S_ISREG(st.st_mode) &&
      (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec < since_ns)
    return; /* unchanged since the process started: the file it loaded */
  m->mapped_fd = open_mapped_copy(pid, m);
  s->watched += m->mapped_fd >= 0;
}

static rec_elf *open_elf(rec_symboliser *s, rec_module *m) {
  if (m->elf)
    return m->elf;
  for (rec_elf *e = s->elves; e; e = e->next)
    if (!strcmp(e->path, m->path) && e->build_id_length == m->build_id_length &&
        !memcmp(e->build_id, m->build_id, m->build_id_length))
      return m->elf = e;
  rec_elf *e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  e->path = strdup(m->path);
  e->build_id = malloc(m->build_id_length + 1);
  if (!e->path || !e->build_id) {
    free(e->path);
    free(e->build_id);
    free(e);
    return NULL;
  }
  memcpy(e->build_id, m->build_id, m->build_id_length);
  e->build_id_length = m->build_id_length;
  e->unusable = true;
  /* Regular files only: the path comes from the traced process, and opening a FIFO would block. */
  struct stat st;
  bool on_disk = m->path[0] == '/' && stat(m->path, &st) == 0 && S_ISREG(st.st_mode);
  if (on_disk)
    report_file(s, e, m, m->path, -1);
  if (e->unusable || e->mismatch) {
    /* Deleted or replaced while the program ran (rebuilt, upgraded): the process, while it
     * lives, still maps the file it loaded. */
    bool from_process = false;
    if (m->build_id_length && s->pid > 0) {
      int fd = m->mapped_fd >= 0 ? m->mapped_fd : open_mapped_copy(s->pid, m);
      m->mapped_fd = -1; /* handed over */
      if (fd >= 0) {
        rec_elf copy = *e;
        copy.dwfl = NULL, copy.mod = NULL, copy.unusable = true, copy.mismatch = false;
        report_file(s, &copy, m, m->path, fd);
        if (!copy.unusable && !copy.mismatch) {
          if (e->dwfl)
            dwfl_end(e->dwfl);
          *e = copy;
          from_process = true;
        } else if (copy.dwfl) {
          dwfl_end(copy.dwfl);
        }
      }
    }
    if (s->gone && m->path[0] == '/' && (from_process || !on_disk || e->mismatch))
      s->gone(s->gone_user, m->path, from_process);
  }
  e->next = s->elves;
  s->elves = e;
  return m->elf = e;
}

/* The function symbol containing `vaddr` (inside its size; a sizeless symbol only at its
 * address). */
static const char *symbol_at(rec_elf *e, uint64_t vaddr) {
  if (!e->symtab_built) {
    e->symtab = rec_symtab_build(e->mod);
    e->symtab_built = true;
  }
  return rec_symtab_find(e->symtab, vaddr + e->bias);
}

bool rec_symboliser_is_wrapper(rec_symboliser *s, rec_module *m, uint64_t vaddr) {
  if (s->no_symbols)
    return false; /* no file is opened at all */
  stalling(s);
  rec_elf *e = open_elf(s, m);
  if (!e || e->unusable || e->mismatch)
    return false;
  const char *name = symbol_at(e, vaddr);
  /* operator new / new[] (_Znwm, _Znam), with nothrow_t and align_val_t variants. */
  if (!name || !strncmp(name, "_Znwm", 5) || !strncmp(name, "_Znam", 5))
    return name != NULL;
  /* Rust's allocator shims (__rust_alloc -> __rdl_alloc, or __rg_alloc with a global allocator,
   * and their _zeroed and realloc forms), by name or, v0-mangled, as the path's last identifier
   * (_RNv...11___rdl_alloc: "_" then the identifier). */
  static const char *const rust[] = {"__rust_alloc", "__rust_alloc_zeroed", "__rust_realloc",
                                     "__rdl_alloc",  "__rdl_alloc_zeroed",  "__rdl_realloc",
                                     "__rg_alloc",   "__rg_alloc_zeroed",   "__rg_realloc"};
  size_t n = strlen(name);
  for (size_t i = 0; i < sizeof rust / sizeof rust[0]; i++) {
    size_t k = strlen(rust[i]);
    if (!strcmp(name, rust[i]) || (name[0] == '_' && name[1] == 'R' && n > k + 1 &&
                                   name[n - k - 1] == '_' && !strcmp(name + n - k, rust[i])))
      return true;
  }
  return false;
}

/* --- answers ------------------------------------------------------------------------------- */

static const char *own(rec_symboliser *s, char *text) {
  if (!text)
    return NULL;
  if (s->owned_count == sizeof s->owned / sizeof s->owned[0]) {
    free(text);
    return NULL;
  }
  return s->owned[s->owned_count++] = text;
}

static const char *basename_of(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash && slash[1] ? slash + 1 : path;
}

static void push(rec_symboliser *s, size_t *count, const char *file, const char *name, int line,
                 int column) {
  if (*count == MAX_ENTRIES)
    return;
  mt_location *l = &s->entries[(*count)++];
  l->filename = file ? file : "";
  l->defname = name ? name : "??";
  l->line = line > 0 ? line : 0;
  l->start_char = l->end_char = column > 0 ? column : 0;
}

/* A function's name: its linkage name demangled, else its plain name (abstract origins
 * followed, for inlined instances). */
static const char *die_name(rec_symboliser *s, Dwarf_Die *die) {
  Dwarf_Attribute a;
  const char *linkage = NULL;
  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
      dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
    linkage = dwarf_formstring(&a);
  if (linkage) {
    const char *d = own(s, rec_demangle(linkage));
    if (d)
      return d;
  }
  const char *name = NULL;
  if (dwarf_attr_integrate(die, DW_AT_name, &a))
    name = dwarf_formstring(&a);
  return name ? name : linkage;
}

static int compare_ranges(const void *a, const void *b) {
  const cu_range *x = a, *y = b;
  return x->low < y->low ? -1 : x->low > y->low;
}

static void build_ranges(rec_elf *e) {
  e->ranges_built = true;
  size_t cap = 0;
  Dwarf_Die *cu = NULL;
  Dwarf_Addr bias;
  while ((cu = dwfl_module_nextcu(e->mod, cu, &bias))) {
    Dwarf_Addr base, start, end;
    ptrdiff_t offset = 0;
    while ((offset = dwarf_ranges(cu, offset, &base, &start, &end)) > 0) {
      if (start >= end)
        continue;
      if (e->range_count == cap) {
        size_t n = cap ? cap * 2 : 64;
        cu_range *grown = realloc(e->ranges, n * sizeof *grown);
        if (!grown)
          return;
        e->ranges = grown;
        cap = n;
      }
      e->ranges[e->range_count++] = (cu_range){start, end, *cu, bias};
    }
  }
  if (e->range_count)
    qsort(e->ranges, e->range_count, sizeof *e->ranges, compare_ranges);
}

/* The CU holding the dwfl address `addr`: libdwfl's lookup (.debug_aranges), checked, else the
 * CUs' own ranges. */
static Dwarf_Die *find_cu(rec_elf *e, Dwarf_Addr addr, Dwarf_Addr *bias, Dwarf_Die *storage) {
  Dwarf_Die *cu = dwfl_module_addrdie(e->mod, addr, bias);
  if (cu && dwarf_haspc(cu, addr - *bias) > 0)
    return cu;
  if (!e->ranges_built)
    build_ranges(e);
  size_t lo = 0, hi = e->range_count;
  while (lo < hi) { /* the last range starting at or below addr */
    size_t mid = lo + (hi - lo) / 2;
    if (e->ranges[mid].low + e->ranges[mid].bias <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo; i-- > 0 && lo - i <= 64;) {
    const cu_range *r = &e->ranges[i];
    if (addr - r->bias >= r->low && addr - r->bias < r->high) {
      *storage = r->cu;
      *bias = r->bias;
      return storage;
    }
  }
  return NULL;
}

/* Fills the entries innermost first from DWARF; returns how many. The scopes come from the
 * module's index (`indexed`), else from libdw's walks alone (tests). */
static size_t from_dwarf(rec_symboliser *s, rec_elf *e, uint64_t vaddr, bool indexed) {
  Dwarf_Addr addr = vaddr + e->bias, dbias = 0;
  Dwarf_Die storage;
  Dwarf_Die *cu = find_cu(e, addr, &dbias, &storage);
  if (!cu)
    return 0;
  const char *file = NULL;
  int line = 0, column = 0;
  Dwarf_Line *dl = dwarf_getsrc_die(cu, addr - dbias);
  if (dl) {
    file = dwarf_linesrc(dl, NULL, NULL);
    dwarf_lineno(dl, &line);
    dwarf_linecol(dl, &column);
  }
  if (indexed && !e->scopes)
    e->scopes = rec_scopes_new(); /* NULL: libdw's walks */
  Dwarf_Die *scopes = NULL;
  int n = rec_scopes_at(indexed ? e->scopes : NULL, cu, addr - dbias, &scopes);
  size_t count = 0;
  Dwarf_Files *files = NULL;
  size_t nfiles = 0;
  for (int i = 0; i < n; i++) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
      continue;
    push(s, &count, file, die_name(s, &scopes[i]), line, column);
    if (tag == DW_TAG_subprogram)
      break;
    /* The enclosing function's position is where this inlined instance was called from. */
    Dwarf_Attribute a;
    Dwarf_Word value;
    file = NULL;
    line = column = 0;
    if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &a), &value) == 0 &&
        (files || dwarf_getsrcfiles(cu, &files, &nfiles) == 0) && value < nfiles)
      file = dwarf_filesrc(files, value, NULL, NULL);
    if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &a), &value) == 0)
      line = (int)value;
    if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_column, &a), &value) == 0)
      column = (int)value;
  }
  free(scopes);
  return count;
}

size_t rec_symboliser_dwarf_at(rec_symboliser *s, rec_module *m, uint64_t vaddr, bool indexed,
                               const mt_location **entries, struct rec_scopes_stats *stats) {
  for (size_t i = 0; i < s->owned_count; i++)
    free(s->owned[i]);
  s->owned_count = 0;
  rec_elf *e = open_elf(s, m);
  if (!e || e->unusable || e->mismatch)
    return 0;
  size_t n = from_dwarf(s, e, vaddr, indexed);
  if (stats)
    *stats = rec_scopes_get_stats(e->scopes);
  *entries = s->entries;
  return n;
}

size_t rec_fit_locations(mt_location *entries, size_t count, char *scratch) {
  size_t worst = 9;
  for (size_t i = 0; i < count; i++)
    worst += 8 + strlen(entries[i].filename) + strlen(entries[i].defname);
  if (worst <= 4096 && count <= 255)
    return count;
  /* Shorten long names first (keeping their start, which says the most), ... */
  worst = 9;
  for (size_t i = 0; i < count; i++) {
    const char **names[2] = {&entries[i].filename, &entries[i].defname};
    for (int k = 0; k < 2; k++) {
      size_t len = strlen(*names[k]);
      if (len >= NAME_CAP / 4) {
        char *cut = scratch + (i * 2 + (size_t)k) * NAME_CAP;
        memcpy(cut, *names[k], NAME_CAP / 4 - 4);
        strcpy(cut + NAME_CAP / 4 - 4, "...");
        *names[k] = cut;
        len = NAME_CAP / 4 - 1;
      }
      worst += len;
    }
    worst += 8;
  }
  /* ... then drop inlined frames from the middle: the outermost function and the innermost call
   * site are what a reader looks for. */
  while ((worst > 4096 || count > 255) && count > 2) {
    size_t drop = count / 2;
    worst -= 8 + strlen(entries[drop].filename) + strlen(entries[drop].defname);
    memmove(entries + drop, entries + drop + 1, (count - drop - 1) * sizeof *entries);
    count--;
  }
  return count;
}

static const char *arena_copy(mt_arena *a, const char *text) {
  size_t len = strlen(text) + 1;
  char *copy = mt_arena_alloc(a, len);
  if (copy)
    memcpy(copy, text, len);
  return copy;
}

/* Keeps the answer just made for the next time the writer asks (a failure only costs a lookup). */
static void remember(rec_symboliser *s, uint64_t code, const mt_location *entries, size_t count) {
  cached_list *c = mt_arena_alloc(&s->arena, sizeof *c + count * sizeof c->entries[0]);
  if (!c)
    return;
  c->count = count;
  for (size_t i = 0; i < count; i++) {
    c->entries[i] = entries[i];
    c->entries[i].filename = arena_copy(&s->arena, entries[i].filename);
    c->entries[i].defname = arena_copy(&s->arena, entries[i].defname);
    if (!c->entries[i].filename || !c->entries[i].defname)
      return;
  }
  mt_hashmap_put(&s->cache, (int64_t)code, (uint64_t)(uintptr_t)c);
}

static int resolve_uncached(rec_symboliser *s, const rec_modules *ms, const rec_sites *sites,
                            uint64_t code, const mt_location **entries, size_t *count);

int rec_symboliser_resolve(rec_symboliser *s, const rec_modules *ms, const rec_sites *sites,
                           uint64_t code, const mt_location **entries, size_t *count) {
  uint64_t hit;
  if (mt_hashmap_get(&s->cache, (int64_t)code, &hit)) {
    const cached_list *c = (const cached_list *)(uintptr_t)hit;
    *entries = c->entries;
    *count = c->count;
    return MT_OK;
  }
  stalling(s);
  int rc = resolve_uncached(s, ms, sites, code, entries, count);
  if (rc == MT_OK)
    remember(s, code, *entries, *count);
  return rc;
}

static int resolve_uncached(rec_symboliser *s, const rec_modules *ms, const rec_sites *sites,
                            uint64_t code, const mt_location **entries, size_t *count) {
  for (size_t i = 0; i < s->owned_count; i++)
    free(s->owned[i]);
  s->owned_count = 0;
  size_t n = 0;
  char text[512];
  uint64_t pc;
  if (rec_sites_synthetic_pc(sites, code, &pc)) {
    if (code == REC_CODE_TRUNCATED) {
      push(s, &n, "", "<truncated>", 0, 0);
    } else {
      snprintf(text, sizeof text, "0x%" PRIx64, pc - 1);
      push(s, &n, "", own(s, strdup(text)), 0, 0);
    }
    *entries = s->entries;
    *count = n;
    return MT_OK;
  }
  uint64_t vaddr = code & ((1ull << 40) - 1);
  rec_module *m = rec_modules_by_serial(ms, code >> 40);
  if (!m) {
    snprintf(text, sizeof text, "0x%" PRIx64, code);
    push(s, &n, "", own(s, strdup(text)), 0, 0);
  } else {
    rec_elf *e = s->no_symbols ? NULL : open_elf(s, m);
    if (e && !e->unusable && !e->mismatch) {
      size_t inner = from_dwarf(s, e, vaddr, true);
      if (inner) {
        /* innermost first -> outermost first */
        for (size_t i = 0; i < inner / 2; i++) {
          mt_location t = s->entries[i];
          s->entries[i] = s->entries[inner - 1 - i];
          s->entries[inner - 1 - i] = t;
        }
        n = inner;
      } else {
        const char *name = symbol_at(e, vaddr);
        if (name) {
          const char *d = own(s, rec_demangle(name));
          push(s, &n, m->path, d ? d : name, 0, 0);
        }
      }
    }
    if (!n) {
      if (e && e->mismatch)
        snprintf(text, sizeof text, "%s+0x%" PRIx64 " (build-id mismatch)", m->path, vaddr);
      else
        snprintf(text, sizeof text, "%s+0x%" PRIx64, basename_of(m->path), vaddr);
      push(s, &n, m->path, own(s, strdup(text)), 0, 0);
    }
  }
  n = rec_fit_locations(s->entries, n, s->scratch);
  *entries = s->entries;
  *count = n;
  return MT_OK;
}
