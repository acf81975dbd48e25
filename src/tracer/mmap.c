/* Mapped regions (docs/tracer.md, "Regions"): anonymous mmap, munmap and mremap made by the
 * program itself. A region is an anonymous mapping that is not PROT_NONE (a reservation is not
 * memory in use); mappings made inside an allocator call (the next allocator's own arenas) are
 * not regions. MAP_FIXED over an existing range and a partial munmap are written as an UNMAP of
 * the range (before the call, as a FREE) followed, for MAP_FIXED, by the MAP (after it). mremap
 * is written after it succeeds as an UNMAP of the old range and a MAP of the new one. */
#include <errno.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

/* Whether this call must pass straight through: the shim's own, inside an allocator, or not
 * tracing. `caller` is the return address: a call from the next allocator's own object (jemalloc
 * mapping an arena) is not the program's. */
static bool untraced(const void *caller) {
  mt_shim_thread *t = &mt_shim_self;
  if (t->depth || t->in_allocator ||
      atomic_load_explicit(&mt_shim.mode, memory_order_relaxed) == MT_SHIM_OFF)
    return true;
  uintptr_t c = (uintptr_t)caller;
  return c - mt_shim_allocator_low < mt_shim_allocator_high - mt_shim_allocator_low;
}

static void *real_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
  if (mt_shim_real.mmap)
    return mt_shim_real.mmap(addr, length, prot, flags, fd, offset);
  long r = syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
  return r == -1 ? MAP_FAILED : (void *)r;
}

/* mmap and mmap64, called from `caller`. */
static inline void *traced_mmap(void *caller, void *addr, size_t length, int prot, int flags,
                                int fd, off_t offset) {
  if (untraced(caller))
    return real_mmap(addr, length, prot, flags, fd, offset);
  if (flags & MAP_FIXED)
    mt_record_unmap(addr, length);
  void *p = real_mmap(addr, length, prot, flags, fd, offset);
  if (p != MAP_FAILED && (flags & MAP_ANONYMOUS) && prot != PROT_NONE)
    mt_record_map(p, length, prot, flags, MT_TRACER_KIND_MMAP);
  return p;
}

MT_EXPORT void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
  return traced_mmap(__builtin_return_address(0), addr, length, prot, flags, fd, offset);
}

/* glibc's mmap64 is the same function on 64-bit targets; programs built with
 * _FILE_OFFSET_BITS=64 on older toolchains call it by that name. */
MT_EXPORT void *mmap64(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
  return traced_mmap(__builtin_return_address(0), addr, length, prot, flags, fd, offset);
}

static int real_munmap(void *addr, size_t length) {
  if (mt_shim_real.munmap)
    return mt_shim_real.munmap(addr, length);
  return (int)syscall(SYS_munmap, addr, length);
}

MT_EXPORT int munmap(void *addr, size_t length) {
  if (!untraced(__builtin_return_address(0)))
    mt_record_unmap(addr, length);
  return real_munmap(addr, length);
}

MT_EXPORT void *mremap(void *old, size_t old_length, size_t new_length, int flags, ...) {
  void *new_address = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_address = va_arg(ap, void *);
    va_end(ap);
  }
  bool trace = !untraced(__builtin_return_address(0));
  void *p;
  if (mt_shim_real.mremap)
    p = mt_shim_real.mremap(old, old_length, new_length, flags, new_address);
  else {
    long r = syscall(SYS_mremap, old, old_length, new_length, flags, new_address);
    p = r == -1 ? MAP_FAILED : (void *)r;
  }
  if (trace && p != MAP_FAILED) {
    int saved = errno;
    mt_record_unmap(old, old_length);
    if (new_length)
      mt_record_map(p, new_length, 0, flags, MT_TRACER_KIND_MREMAP);
    errno = saved;
  }
  return p;
}
