/* Mapped regions (docs/tracer.md, "Regions"): anonymous mmap, munmap and mremap made by the
 * program itself. A region is an anonymous mapping that is not PROT_NONE (a reservation is not
 * memory in use); mappings made inside an allocator call (the next allocator's own arenas) or by
 * the shim's own code are not regions. Ranges are written as the kernel takes them, in whole
 * pages. A munmap is written as an UNMAP of the range before the call (as a FREE: once the range
 * is unmapped another thread may map it again), and not at all when the kernel would refuse it
 * outright (an unaligned address, length 0). MAP_FIXED over an existing range is written after a
 * successful call, as an UNMAP of the range followed by the MAP; so is mremap, as an UNMAP of the
 * old range (unless MREMAP_DONTUNMAP keeps it mapped) and a MAP of the new one. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tracer/shim.h"

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4 /* Linux 5.7; older C libraries do not name it */
#endif

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
  /* The shim's own calls (the ring's mappings at close, outside any record) bind to these
   * definitions too. */
  return c - mt_shim_allocator_low < mt_shim_allocator_high - mt_shim_allocator_low ||
         c - mt_shim.text_low < mt_shim.text_high - mt_shim.text_low;
}

/* The length of [addr, addr + length) as the kernel maps or unmaps it (whole pages), or 0 when
 * it refuses the range outright: an address not on a page, length 0, or past the address
 * space's end. */
static size_t kernel_length(const void *addr, size_t length) {
  static size_t page;
  if (!page)
    page = (size_t)sysconf(_SC_PAGESIZE);
  uintptr_t a = (uintptr_t)addr;
  if (!length || (a & (page - 1)) || length > SIZE_MAX - (page - 1))
    return 0;
  size_t rounded = (length + page - 1) & ~(page - 1);
  return a + rounded < a ? 0 : rounded;
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
  void *p = real_mmap(addr, length, prot, flags, fd, offset);
  size_t mapped = p == MAP_FAILED ? 0 : kernel_length(p, length);
  if (!mapped)
    return p;
  if (flags & MAP_FIXED) /* whatever was there is gone; a failed call replaced nothing */
    mt_record_unmap(p, mapped);
  if ((flags & MAP_ANONYMOUS) && prot != PROT_NONE)
    mt_record_map(p, mapped, prot, flags, MT_TRACER_KIND_MMAP);
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
  if (!untraced(__builtin_return_address(0))) {
    size_t unmapped = kernel_length(addr, length);
    if (unmapped)
      mt_record_unmap(addr, unmapped);
  }
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
    size_t old_mapped = kernel_length(old, old_length), new_mapped = kernel_length(p, new_length);
    /* 0: a copy of a shared mapping, which leaves the old one in place; so does MREMAP_DONTUNMAP
     * (Linux 5.7), whose old range stays mapped, emptied. */
    if (old_mapped && !(flags & MREMAP_DONTUNMAP))
      mt_record_unmap(old, old_mapped);
    if (new_mapped)
      mt_record_map(p, new_mapped, 0, flags, MT_TRACER_KIND_MREMAP);
    errno = saved;
  }
  return p;
}
