/* Finding the next allocator without recursion (docs/tracer.md, "Start-up"). dlsym allocates
 * (its error buffer) and may run before any constructor, so while one thread resolves, the
 * allocations of that thread, and of any other thread that arrives meanwhile, are served from a
 * static bump arena. Arena blocks are never reused: free ignores them, realloc copies out of
 * them and malloc_usable_size reads their header. A function that the next allocator's own
 * object does not define (jemalloc has no pvalloc; nobody but glibc has reallocarray) is left NULL
 * and emulated with the ones it does define, so that blocks never cross allocators. */
#include <dlfcn.h>
#include <link.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "tracer/shim.h"

mt_real mt_shim_real;
uintptr_t mt_shim_allocator_low, mt_shim_allocator_high;

/* The loaded object that contains an address: the range of its PT_LOAD segments and of its
 * executable ones. Found with dl_iterate_phdr rather than dladdr, which searches the object's
 * symbol table for the nearest symbol: eleven dladdr calls cost about a million instructions at
 * the start of every traced process. */
typedef struct object_span {
  uintptr_t addr;
  uintptr_t low, high;           /* all its PT_LOAD segments; 0, 0 when not found */
  uintptr_t text_low, text_high; /* the executable ones */
  int order;                     /* its place in the load order (the objects before it) */
} object_span;

static int find_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  object_span *o = data;
  uintptr_t low = UINTPTR_MAX, high = 0, text_low = UINTPTR_MAX, text_high = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    low = lo < low ? lo : low;
    high = hi > high ? hi : high;
    if (ph->p_flags & PF_X) {
      text_low = lo < text_low ? lo : text_low;
      text_high = hi > text_high ? hi : text_high;
    }
  }
  if (o->addr < low || o->addr >= high) {
    o->order++;
    return 0;
  }
  o->low = low;
  o->high = high;
  if (text_low < text_high) {
    o->text_low = text_low;
    o->text_high = text_high;
  }
  return 1;
}

static bool object_holds(const object_span *o, const void *f) {
  return (uintptr_t)f - o->low < o->high - o->low;
}

/* Each block is preceded by a 16-byte header holding its size. */
_Alignas(64) unsigned char mt_bootstrap_arena[MT_BOOTSTRAP_SIZE];
static _Atomic size_t arena_used;

void *mt_bootstrap_alloc(size_t size, size_t align) {
  if (align < 16)
    align = 16;
  if (size > MT_BOOTSTRAP_SIZE || align > 4096)
    return NULL;
  size_t need = size + align + 16;
  size_t at = atomic_fetch_add(&arena_used, need);
  if (at + need > MT_BOOTSTRAP_SIZE)
    return NULL;
  uintptr_t p = ((uintptr_t)mt_bootstrap_arena + at + 16 + align - 1) & ~(uintptr_t)(align - 1);
  memcpy((void *)(p - 16), &size, sizeof size);
  return (void *)p;
}

size_t mt_bootstrap_size(const void *p) {
  size_t size;
  memcpy(&size, (const char *)p - 16, sizeof size);
  return size;
}

/* calloc for a next allocator whose object has none of its own. */
static void *calloc_from_malloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total))
    return NULL;
  void *p = mt_shim_real.malloc(total);
  if (p)
    memset(p, 0, total);
  return p;
}

/* The next definition of `name` as the program's own calls bind it. A program linked with glibc
 * asks for the symbol's version (malloc@GLIBC_2.2.5 on x86-64), which an object may define only
 * under that version, hidden from an unversioned lookup: glibc's libc_malloc_debug.so, whose
 * MALLOC_CHECK_ and mtrace the shim once skipped for libc. The versioned lookup in turn skips an
 * unversioned definition (jemalloc's). So both are looked up, and of two different answers the
 * one whose object comes first in the load order (the search order of the program's own
 * lookups) is taken. */
static void *next_symbol(const char *name, const char *version) {
  void *plain = dlsym(RTLD_NEXT, name), *versioned = dlvsym(RTLD_NEXT, name, version);
  if (!plain || !versioned || plain == versioned)
    return plain ? plain : versioned;
  object_span a = {.addr = (uintptr_t)plain}, b = {.addr = (uintptr_t)versioned};
  dl_iterate_phdr(find_object, &a);
  dl_iterate_phdr(find_object, &b);
  return b.order < a.order ? versioned : plain;
}

/* The next definition of `name` if it comes from the object that defines the next malloc. */
static void *next_from(const char *name, const object_span *malloc_object) {
  void *f = next_symbol(name, strcmp(name, "aligned_alloc") ? "GLIBC_2.2.5" : "GLIBC_2.16");
  return f && object_holds(malloc_object, f) ? f : NULL;
}

void mt_shim_resolve(void) {
  if (atomic_load_explicit(&mt_shim.resolve, memory_order_acquire) == MT_RESOLVE_DONE)
    return;
  int expected = MT_RESOLVE_NONE;
  if (!atomic_compare_exchange_strong(&mt_shim.resolve, &expected, MT_RESOLVE_BUSY))
    return; /* another thread (or this one, recursively) is resolving: use the arena */
  mt_shim_thread *t = &mt_shim_self;
  t->resolving++;
  t->depth++;
  mt_real r;
  memset(&r, 0, sizeof r);
  r.malloc = (void *(*)(size_t))next_symbol("malloc", "GLIBC_2.2.5");
  object_span base = {.addr = (uintptr_t)r.malloc};
  if (r.malloc)
    dl_iterate_phdr(find_object, &base);
  r.free = (void (*)(void *))next_from("free", &base);
  r.calloc = (void *(*)(size_t, size_t))next_from("calloc", &base);
  r.realloc = (void *(*)(void *, size_t))next_from("realloc", &base);
  r.posix_memalign = (int (*)(void **, size_t, size_t))next_from("posix_memalign", &base);
  r.aligned_alloc = (void *(*)(size_t, size_t))next_from("aligned_alloc", &base);
  r.memalign = (void *(*)(size_t, size_t))next_from("memalign", &base);
  r.valloc = (void *(*)(size_t))next_from("valloc", &base);
  r.pvalloc = (void *(*)(size_t))next_from("pvalloc", &base);
  r.malloc_usable_size = (size_t(*)(void *))next_from("malloc_usable_size", &base);
  r.mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
  r.munmap = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
  r.mremap = (void *(*)(void *, size_t, size_t, int, ...))dlsym(RTLD_NEXT, "mremap");
  r.pthread_create =
      (int (*)(void *, const void *, void *(*)(void *), void *))dlsym(RTLD_NEXT, "pthread_create");
  r.dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
  r.dlclose = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
  r.sigaction = dlsym(RTLD_NEXT, "sigaction");
  r.longjmp = dlsym(RTLD_NEXT, "longjmp");
  r.longjmp_ = dlsym(RTLD_NEXT, "_longjmp");
  r.siglongjmp = dlsym(RTLD_NEXT, "siglongjmp");
  r.longjmp_chk = dlsym(RTLD_NEXT, "__longjmp_chk");
  r.setrlimit = dlsym(RTLD_NEXT, "setrlimit");
  r.setrlimit64 = dlsym(RTLD_NEXT, "setrlimit64");
  r.prlimit = dlsym(RTLD_NEXT, "prlimit");
  r.prlimit64 = dlsym(RTLD_NEXT, "prlimit64");
  r.exit_ = dlsym(RTLD_NEXT, "_exit");
  r.exit_upper = dlsym(RTLD_NEXT, "_Exit");
  r.execve = dlsym(RTLD_NEXT, "execve");
  r.execv = dlsym(RTLD_NEXT, "execv");
  r.execvp = dlsym(RTLD_NEXT, "execvp");
  r.execvpe = dlsym(RTLD_NEXT, "execvpe");
  r.fexecve = dlsym(RTLD_NEXT, "fexecve");
  r.execveat = dlsym(RTLD_NEXT, "execveat");
  r.daemon = dlsym(RTLD_NEXT, "daemon");
  r.unshare = dlsym(RTLD_NEXT, "unshare");
  r.setns = dlsym(RTLD_NEXT, "setns");
  r.setuid = dlsym(RTLD_NEXT, "setuid");
  r.seteuid = dlsym(RTLD_NEXT, "seteuid");
  r.setreuid = dlsym(RTLD_NEXT, "setreuid");
  r.setresuid = dlsym(RTLD_NEXT, "setresuid");
  r.prctl = dlsym(RTLD_NEXT, "prctl");
  r.syscall = dlsym(RTLD_NEXT, "syscall");
  if (!r.malloc || !r.free || !r.realloc) {
    /* Nothing to forward to: there is no way on; fail loudly rather than corrupt memory. */
    static const char msg[] = "memtap: cannot find the next malloc, free and realloc\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
  }
  if (base.high && r.mmap && !object_holds(&base, (void *)r.mmap)) {
    /* The next malloc is not libc's (jemalloc): its mmap calls are its arenas. */
    mt_shim_allocator_low = base.text_low;
    mt_shim_allocator_high = base.text_high;
  }
  if (!r.calloc)
    r.calloc = calloc_from_malloc;
  mt_shim_real = r;
  mt_dl_real_open = (void *)r.dlopen;
  atomic_store_explicit(&mt_shim.resolve, MT_RESOLVE_DONE, memory_order_release);
  t->depth--;
  t->resolving--;
}
