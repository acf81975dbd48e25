/* The interposition floor of the tracer benchmark: an LD_PRELOAD library that interposes the same
 * symbols as libmemtap-preload.so (the malloc family and anonymous mmap/munmap/mremap), keeps a
 * per-thread byte countdown as a sampler would, and records nothing. What memtap costs above this
 * library is what tracing costs; no LD_PRELOAD tool can go under it. Each call goes to the next
 * definition in lookup order (dlsym RTLD_NEXT); while dlsym itself allocates, a static bootstrap
 * buffer serves it. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define TLS __attribute__((tls_model("initial-exec"))) __thread

/* Mean gap of memtap's default sampler; the floor only counts down and re-arms, it keeps no RNG. */
#define INTERVAL (512 * 1024)

EXPORT void *malloc(size_t size);
EXPORT void free(void *ptr);
EXPORT void *calloc(size_t n, size_t size);
EXPORT void *realloc(void *ptr, size_t size);
EXPORT void *reallocarray(void *ptr, size_t n, size_t size);
EXPORT int posix_memalign(void **out, size_t alignment, size_t size);
EXPORT void *aligned_alloc(size_t alignment, size_t size);
EXPORT void *memalign(size_t alignment, size_t size);
EXPORT void *valloc(size_t size);
EXPORT void *pvalloc(size_t size);
EXPORT size_t malloc_usable_size(void *ptr);
EXPORT void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset);
EXPORT int munmap(void *addr, size_t length);
EXPORT void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...);

static struct {
  void *(*malloc)(size_t);
  void (*free)(void *);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*reallocarray)(void *, size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  size_t (*malloc_usable_size)(void *);
  void *(*mmap)(void *, size_t, int, int, int, off_t);
  int (*munmap)(void *, size_t);
  void *(*mremap)(void *, size_t, size_t, int, ...);
} next;

static TLS int64_t countdown = INTERVAL;
static TLS bool resolving;

static _Alignas(16) unsigned char bootstrap[64 * 1024];
static size_t bootstrap_used;

static bool in_bootstrap(const void *p) {
  return (const unsigned char *)p >= bootstrap &&
         (const unsigned char *)p < bootstrap + sizeof bootstrap;
}

static void *bootstrap_alloc(size_t size) {
  size_t start = __atomic_fetch_add(&bootstrap_used, (size + 15) & ~(size_t)15, __ATOMIC_RELAXED);
  if (start + size > sizeof bootstrap)
    return NULL;
  return bootstrap + start;
}

static void resolve(void) {
  resolving = true;
  next.free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  next.calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  next.realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  next.reallocarray = (void *(*)(void *, size_t, size_t))dlsym(RTLD_NEXT, "reallocarray");
  next.posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
  next.aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
  next.memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
  next.valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
  next.pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
  next.malloc_usable_size = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
  next.mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
  next.munmap = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
  next.mremap = (void *(*)(void *, size_t, size_t, int, ...))dlsym(RTLD_NEXT, "mremap");
  /* malloc last: its pointer is the "resolved" flag the other entry points test. */
  void *(*m)(size_t) = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  __atomic_store_n(&next.malloc, m, __ATOMIC_RELEASE);
  resolving = false;
}

/* True when the caller must use the bootstrap buffer (dlsym is allocating on this thread). */
static bool need_bootstrap(void) {
  if (__builtin_expect(__atomic_load_n(&next.malloc, __ATOMIC_ACQUIRE) != NULL, 1))
    return false;
  if (resolving)
    return true;
  resolve();
  return next.malloc == NULL;
}

__attribute__((constructor)) static void floor_init(void) {
  need_bootstrap();
}

static inline void count(size_t size) {
  if (__builtin_expect((countdown -= (int64_t)size) < 0, 0)) {
    while (countdown < 0)
      countdown += INTERVAL;
  }
}

void *malloc(size_t size) {
  if (need_bootstrap())
    return bootstrap_alloc(size);
  count(size);
  return next.malloc(size);
}

void free(void *ptr) {
  if (!ptr || in_bootstrap(ptr))
    return;
  if (need_bootstrap())
    return;
  next.free(ptr);
}

void *calloc(size_t n, size_t size) {
  if (need_bootstrap()) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
      return NULL;
    return bootstrap_alloc(total); /* static storage is already zero */
  }
  count(n * size);
  return next.calloc(n, size);
}

void *realloc(void *ptr, size_t size) {
  if (in_bootstrap(ptr)) {
    void *p = malloc(size);
    if (p) {
      size_t avail = sizeof bootstrap - (size_t)((unsigned char *)ptr - bootstrap);
      memcpy(p, ptr, size < avail ? size : avail);
    }
    return p;
  }
  if (need_bootstrap())
    return ptr ? NULL : bootstrap_alloc(size);
  count(size);
  return next.realloc(ptr, size);
}

void *reallocarray(void *ptr, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (in_bootstrap(ptr) || need_bootstrap())
    return realloc(ptr, total);
  count(total);
  return next.reallocarray(ptr, n, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
  if (need_bootstrap())
    return ENOMEM;
  count(size);
  return next.posix_memalign(out, alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
  if (need_bootstrap())
    return NULL;
  count(size);
  return next.aligned_alloc(alignment, size);
}

void *memalign(size_t alignment, size_t size) {
  if (need_bootstrap())
    return NULL;
  count(size);
  return next.memalign(alignment, size);
}

void *valloc(size_t size) {
  if (need_bootstrap())
    return NULL;
  count(size);
  return next.valloc(size);
}

void *pvalloc(size_t size) {
  if (need_bootstrap())
    return NULL;
  count(size);
  return next.pvalloc(size);
}

size_t malloc_usable_size(void *ptr) {
  if (in_bootstrap(ptr) || need_bootstrap())
    return 0;
  return next.malloc_usable_size(ptr);
}

/* The mapping calls fall back to the system call itself until the next definitions are known. */
void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
  if (need_bootstrap() || !next.mmap)
    return (void *)syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
  return next.mmap(addr, length, prot, flags, fd, offset);
}

int munmap(void *addr, size_t length) {
  if (need_bootstrap() || !next.munmap)
    return (int)syscall(SYS_munmap, addr, length);
  return next.munmap(addr, length);
}

void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...) {
  void *new_address = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_address = va_arg(ap, void *);
    va_end(ap);
  }
  if (need_bootstrap() || !next.mremap)
    return (void *)syscall(SYS_mremap, old, old_size, new_size, flags, new_address);
  return next.mremap(old, old_size, new_size, flags, new_address);
}
