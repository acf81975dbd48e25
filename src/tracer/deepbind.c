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
 * RPATH or RUNPATH (glibc searches the caller's object's for a bare name), and no `$ORIGIN` or
 * other dynamic string token in the name (expanded from the caller's object). Otherwise the call
 * goes through untouched, and the library stays deep-bound. Rebinding looks only at the library
 * and the objects its dlopen added (counted by the loader's adds), inside dl_iterate_phdr (no
 * other thread's dlclose can unmap them meanwhile), one thread at a time. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
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

/* Their names: the shim's allocation functions and region calls. */
static const char *const interposed[] = {
    "malloc",        "free",     "calloc", "realloc", "reallocarray",       "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size", "mmap",
    "munmap",        "mremap"};
#define INTERPOSED (sizeof interposed / sizeof *interposed)

/* One object of the loader's list, as dl_iterate_phdr shows it. */
typedef struct object_view {
  uintptr_t base;
  const ElfW(Phdr) * phdr;
  size_t phnum;
} object_view;

/* Whether `address` lies in one of the object's loaded segments. */
static bool inside(const object_view *v, uintptr_t address) {
  for (size_t i = 0; i < v->phnum; i++) {
    const ElfW(Phdr) *ph = &v->phdr[i];
    uintptr_t low = v->base + ph->p_vaddr;
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
      relro_low = (v->base + v->phdr[i].p_vaddr) & ~(uintptr_t)(page - 1);
      relro_high = (v->base + v->phdr[i].p_vaddr + v->phdr[i].p_memsz) & ~(uintptr_t)(page - 1);
    }
  bool protected = slot >= relro_low && slot < relro_high;
  void *at = (void *)(slot & ~(uintptr_t)(page - 1));
  if (protected && mprotect(at, (size_t)page, PROT_READ | PROT_WRITE) != 0)
    return;
  __atomic_store_n((void **)slot, value, __ATOMIC_RELEASE);
  if (protected)
    mprotect(at, (size_t)page, PROT_READ);
}

/* What a rebinding pass needs: the functions, where the global scope defines them, what the
 * deep-bound handle's lookup gives (asked before the pass: dlsym takes the loader's lock, which
 * must not be taken inside dl_iterate_phdr's), and which objects of the list to look at: the
 * library's own, and the `added` - 1 after it that its dlopen loaded with it. */
typedef struct pass {
  const rebound *fns;
  size_t n;
  void *const *global, *const *deep;
  const struct link_map *library;
  uint64_t left; /* objects after the library still to look at */
  bool seen;     /* the library passed */
} pass;

/* Points the object's slots of the interposed functions at the global scope's definitions where
 * they are, or would be once bound, the next ones after the shim. */
static void rebind_object(const object_view *v, const pass *p) {
  const ElfW(Dyn) *dynamic = NULL;
  for (size_t i = 0; i < v->phnum; i++)
    if (v->phdr[i].p_type == PT_DYNAMIC)
      dynamic = (const ElfW(Dyn) *)(v->base + v->phdr[i].p_vaddr);
  if (!dynamic)
    return;
  uintptr_t symtab = 0, strtab = 0, rela = 0, jmprel = 0;
  size_t relasz = 0, pltrelsz = 0, relaent = sizeof(ElfW(Rela)), syment = sizeof(ElfW(Sym));
  for (const ElfW(Dyn) *d = dynamic; d->d_tag != DT_NULL; d++)
    switch (d->d_tag) {
    case DT_SYMTAB: symtab = mt_loaded_dynamic_pointer(v->base, d->d_un.d_ptr); break;
    case DT_STRTAB: strtab = mt_loaded_dynamic_pointer(v->base, d->d_un.d_ptr); break;
    case DT_RELA: rela = mt_loaded_dynamic_pointer(v->base, d->d_un.d_ptr); break;
    case DT_RELASZ: relasz = d->d_un.d_val; break;
    case DT_RELAENT: relaent = d->d_un.d_val; break;
    case DT_JMPREL: jmprel = mt_loaded_dynamic_pointer(v->base, d->d_un.d_ptr); break;
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
    if (!tables[t].at || !inside(v, tables[t].at))
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
      for (size_t i = 0; i < p->n; i++) {
        if (!p->global[i] || strcmp(name, p->fns[i].name) != 0)
          continue;
        uintptr_t slot = v->base + r->r_offset;
        if (!inside(v, slot))
          break;
        void *now = *(void *const *)slot;
        bool bypasses = now == p->fns[i].next || (type == R_X86_64_JUMP_SLOT &&
                                                  inside(v, (uintptr_t)now) && /* not bound yet */
                                                  p->deep[i] == p->fns[i].next);
        if (now != p->global[i] && bypasses)
          store(v, slot, p->global[i]);
        break;
      }
    }
  }
}

/* dl_iterate_phdr's callback: the loader's list cannot change while it runs, so no object looked
 * at is unloaded meanwhile by another thread's dlclose. */
static int rebind_each(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  pass *p = data;
  bool library = !p->seen && mt_loaded_is(info, p->library);
  if (!library && (!p->seen || !p->left))
    return 0;
  if (library)
    p->seen = true;
  else
    p->left--;
  object_view v = {.base = info->dlpi_addr, .phdr = info->dlpi_phdr, .phnum = info->dlpi_phnum};
  rebind_object(&v, p);
  return 0;
}

/* Objects the loader has added to the process so far. */
static int count_adds(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  *(uint64_t *)data = info->dlpi_adds;
  return 1;
}

static uint64_t adds_now(void) {
  uint64_t adds = 0;
  dl_iterate_phdr(count_adds, &adds);
  return adds;
}

/* Whether the dlopen stub may come to mt_dlopen_deep for this call: dlopen then sees the shim as
 * its caller, which changes nothing for a path with a slash or a caller object without RPATH or
 * RUNPATH (the shim has neither once installed; in the build tree, only its own directories), as
 * long as the name has no dynamic string token ($ORIGIN is the caller's directory). */
MT_HIDDEN int mt_dlopen_deep_takes(const char *file, int flags, void *caller);
int mt_dlopen_deep_takes(const char *file, int flags, void *caller) {
  (void)flags;
  if (!file || strchr(file, '$'))
    return 0; /* the program's own handle; or $ORIGIN, $LIB...: expanded from the caller's */
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
  void *(*real_open)(const char *, int) =
      (void *(*)(const char *, int))mt_shim_next(&mt_dl_real_open);
  if (!real_open)
    return NULL;
  /* One pass at a time: two threads' passes would make each other's pages read-only between
   * another's mprotect and store. */
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  mt_shim_self.depth++;
  uint64_t before = adds_now();
  mt_shim_self.depth--;
  void *handle = real_open(file, flags);
  if (!handle)
    return NULL;
  mt_shim_self.depth++;
  int saved_errno = errno;
  rebound fns[INTERPOSED];
  void *global[INTERPOSED], *deep[INTERPOSED];
  size_t n = INTERPOSED;
  for (size_t i = 0; i < n; i++) {
    fns[i] = (rebound){interposed[i], dlsym(RTLD_NEXT, interposed[i])};
    void *g = dlsym(RTLD_DEFAULT, fns[i].name);
    global[i] = g && g != fns[i].next ? g : NULL; /* nothing to point elsewhere */
    deep[i] = global[i] ? dlsym(handle, fns[i].name) : NULL;
  }
  struct link_map *library = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &library) == 0 && library) {
    uint64_t added = adds_now() - before; /* this dlopen's, and any other thread's meanwhile */
    pass p = {.fns = fns,
              .n = n,
              .global = global,
              .deep = deep,
              .library = library,
              .left = added ? added - 1 : 0};
    pthread_mutex_lock(&lock);
    dl_iterate_phdr(rebind_each, &p);
    pthread_mutex_unlock(&lock);
  }
  dlerror(); /* a failed lookup above is not the program's error */
  errno = saved_errno;
  mt_shim_self.depth--;
  return handle;
}
