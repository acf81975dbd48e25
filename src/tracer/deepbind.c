/* Libraries opened with RTLD_DEEPBIND (docs/tracer.md, "Deep binding"). Such a library looks its
 * symbols up in its own dependencies before the global scope, so its calls to malloc and free
 * bind to libc's definitions, past the shim: its allocations went untraced and, in full tracing,
 * the program's frees of its blocks were unknown frees (19,286 of them in one program) without a
 * word. After such a dlopen returns, the shim points the library's (and its newly loaded
 * dependencies') import slots of the functions it interposes back at what the global scope
 * defines, as a library opened without the flag binds them: the shim's own functions, or the
 * program's if it defines them. A slot is changed only when it was bound to the next
 * definition after the shim (libc's), or, not bound yet (lazy binding), would be: a library that
 * brings its own malloc keeps it. What the library's constructors allocate inside dlopen, before
 * the slots are changed, stays untraced.
 *
 * The dlopen stub (modules.c) comes here only for RTLD_DEEPBIND, and only when calling dlopen from
 * the shim instead of the program changes nothing: a path with a slash, or a caller without
 * RPATH or RUNPATH (glibc searches the caller's object's for a bare name). Otherwise the call goes
 * through untouched, and the library stays deep-bound. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tracer/loaded_object.h"
#include "tracer/shim.h"

/* The interposed functions whose slots are looked at, with the next definition of each. */
typedef struct rebound {
  const char *name;
  void *next;
} rebound;

static size_t interposed(rebound *out) {
  const mt_real *r = &mt_shim_real;
  const rebound all[] = {
      {"malloc", (void *)r->malloc},
      {"free", (void *)r->free},
      {"calloc", (void *)r->calloc},
      {"realloc", (void *)r->realloc},
      {"reallocarray", NULL}, /* the shim's own overflow check and realloc: looked up below */
      {"posix_memalign", (void *)r->posix_memalign},
      {"aligned_alloc", (void *)r->aligned_alloc},
      {"memalign", (void *)r->memalign},
      {"valloc", (void *)r->valloc},
      {"pvalloc", (void *)r->pvalloc},
      {"malloc_usable_size", (void *)r->malloc_usable_size},
      {"mmap", (void *)r->mmap},
      {"munmap", (void *)r->munmap},
      {"mremap", (void *)r->mremap},
  };
  size_t n = 0;
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    out[n++] = all[i];
  return n;
}

/* The object's program headers, from the loader's list. */
typedef struct object_view {
  const struct link_map *map;
  const ElfW(Phdr) * phdr;
  size_t phnum;
} object_view;

static int find_headers(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  object_view *v = data;
  if (!mt_loaded_is(info, v->map))
    return 0;
  v->phdr = info->dlpi_phdr;
  v->phnum = info->dlpi_phnum;
  return 1;
}

/* Whether `address` lies in one of the object's loaded segments. */
static bool inside(const object_view *v, uintptr_t address) {
  for (size_t i = 0; i < v->phnum; i++) {
    const ElfW(Phdr) *ph = &v->phdr[i];
    uintptr_t low = v->map->l_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && address >= low && address - low < ph->p_memsz)
      return true;
  }
  return false;
}

/* Stores `value` in the slot, through the read-only protection the loader put over the
 * relocated data (PT_GNU_RELRO) when the slot is under it. */
static void store(const object_view *v, uintptr_t slot, void *value) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t relro_low = 0, relro_high = 0;
  for (size_t i = 0; i < v->phnum; i++)
    if (v->phdr[i].p_type == PT_GNU_RELRO) {
      /* the pages the loader protected: from the segment's page to its end's, rounded down */
      relro_low = (v->map->l_addr + v->phdr[i].p_vaddr) & ~(uintptr_t)(page - 1);
      relro_high =
          (v->map->l_addr + v->phdr[i].p_vaddr + v->phdr[i].p_memsz) & ~(uintptr_t)(page - 1);
    }
  bool protected = slot >= relro_low && slot < relro_high;
  void *at = (void *)(slot & ~(uintptr_t)(page - 1));
  if (protected && mprotect(at, (size_t)page, PROT_READ | PROT_WRITE) != 0)
    return;
  __atomic_store_n((void **)slot, value, __ATOMIC_RELEASE);
  if (protected)
    mprotect(at, (size_t)page, PROT_READ);
}

/* Points the object's slots of the interposed functions at the global scope's definitions where
 * they are, or would be once bound, the next ones after the shim. `handle` is the deep-bound
 * dlopen's: a slot not bound yet is what its lookup gives. */
static void rebind_object(const struct link_map *map, void *handle, const rebound *fns, size_t n,
                          void *const *global) {
  object_view v = {.map = map};
  if (!dl_iterate_phdr(find_headers, &v) || !map->l_ld)
    return;
  uintptr_t symtab = 0, strtab = 0, rela = 0, jmprel = 0;
  size_t relasz = 0, pltrelsz = 0, relaent = sizeof(ElfW(Rela)), syment = sizeof(ElfW(Sym));
  for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++)
    switch (d->d_tag) {
    case DT_SYMTAB: symtab = mt_loaded_dynamic_pointer(map->l_addr, d->d_un.d_ptr); break;
    case DT_STRTAB: strtab = mt_loaded_dynamic_pointer(map->l_addr, d->d_un.d_ptr); break;
    case DT_RELA: rela = mt_loaded_dynamic_pointer(map->l_addr, d->d_un.d_ptr); break;
    case DT_RELASZ: relasz = d->d_un.d_val; break;
    case DT_RELAENT: relaent = d->d_un.d_val; break;
    case DT_JMPREL: jmprel = mt_loaded_dynamic_pointer(map->l_addr, d->d_un.d_ptr); break;
    case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
    case DT_SYMENT: syment = d->d_un.d_val; break;
    default: break;
    }
  if (!symtab || !strtab || relaent < sizeof(ElfW(Rela)) || syment < sizeof(ElfW(Sym)))
    return;
  const struct {
    uintptr_t at;
    size_t size;
  } tables[] = {{rela, relasz}, {jmprel, pltrelsz}};
  for (size_t t = 0; t < 2; t++) {
    if (!tables[t].at || !inside(&v, tables[t].at))
      continue;
    for (size_t off = 0; off + sizeof(ElfW(Rela)) <= tables[t].size; off += relaent) {
      const ElfW(Rela) *r = (const ElfW(Rela) *)(tables[t].at + off);
      unsigned type = (unsigned)ELF64_R_TYPE(r->r_info);
      size_t index = ELF64_R_SYM(r->r_info);
      if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT &&
           !(type == R_X86_64_64 && r->r_addend == 0)) ||
          !index)
        continue;
      const ElfW(Sym) *sym = (const ElfW(Sym) *)(symtab + index * syment);
      if (sym->st_shndx != SHN_UNDEF) /* its own definition */
        continue;
      const char *name = (const char *)(strtab + sym->st_name);
      for (size_t i = 0; i < n; i++) {
        if (!global[i] || strcmp(name, fns[i].name) != 0)
          continue;
        uintptr_t slot = map->l_addr + r->r_offset;
        if (!inside(&v, slot))
          break;
        void *now = *(void *const *)slot;
        bool bypasses = now == fns[i].next || (type == R_X86_64_JUMP_SLOT &&
                                               inside(&v, (uintptr_t)now) && /* not bound yet */
                                               dlsym(handle, fns[i].name) == fns[i].next);
        if (now != global[i] && bypasses)
          store(&v, slot, global[i]);
        break;
      }
    }
  }
}

/* Whether the dlopen stub may come to mt_dlopen_deep for this call: dlopen then sees the shim as
 * its caller, which changes nothing for a path with a slash or a caller object without RPATH or
 * RUNPATH (the shim has neither once installed; in the build tree, only its own directories). */
MT_HIDDEN int mt_dlopen_deep_takes(const char *file, int flags, void *caller);
int mt_dlopen_deep_takes(const char *file, int flags, void *caller) {
  (void)flags;
  if (!file)
    return 0; /* the program's own handle: nothing is loaded */
  if (strchr(file, '/'))
    return 1;
  mt_shim_self.depth++;
  Dl_info info;
  struct link_map *map = NULL;
  int takes = dladdr1(caller, &info, (void **)&map, RTLD_DL_LINKMAP) && map && map->l_ld;
  for (const ElfW(Dyn) *d = takes ? map->l_ld : NULL; d && d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_RPATH || d->d_tag == DT_RUNPATH)
      takes = 0;
  mt_shim_self.depth--;
  return takes;
}

MT_HIDDEN void *mt_dlopen_deep(const char *file, int flags);
void *mt_dlopen_deep(const char *file, int flags) {
  if (!mt_dl_real_open) {
    mt_shim_self.depth++;
    mt_shim_resolve();
    mt_shim_self.depth--;
    if (!mt_dl_real_open)
      return NULL;
  }
  void *handle = ((void *(*)(const char *, int))mt_dl_real_open)(file, flags);
  if (!handle)
    return NULL;
  mt_shim_self.depth++;
  rebound fns[16];
  void *global[16];
  size_t n = interposed(fns);
  for (size_t i = 0; i < n; i++) {
    void *g = dlsym(RTLD_DEFAULT, fns[i].name);
    if (!fns[i].next)
      fns[i].next = dlsym(RTLD_NEXT, fns[i].name);
    global[i] = g && g != fns[i].next ? g : NULL; /* nothing to point elsewhere */
  }
  struct link_map *map = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0)
    for (; map; map = map->l_next) /* the library, then what was loaded after it */
      rebind_object(map, handle, fns, n, global);
  mt_shim_self.depth--;
  return handle;
}
