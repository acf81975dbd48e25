/* The unwinder behind mt_tracer_unwind (shim.h): libunwind, the baseline. Debian's libunwind
 * exports the _Unwind_* ABI, so linking it into the shim would let it take over the program's C++
 * exceptions; it is loaded privately instead (dlopen with RTLD_LOCAL, from the shim's
 * constructor) and called through a function pointer. Until it is loaded, records carry
 * MT_TRACER_FLAG_NO_STACK. */
#include <dlfcn.h>

#include "tracer/shim.h"

static int (*backtrace_fn)(void **buffer, int size);

void mt_tracer_unwind_load(void) {
  if (backtrace_fn)
    return;
  void *(*open)(const char *, int) = (void *(*)(const char *, int))mt_dl_real_open;
  if (!open)
    return;
  void *h = open("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
  backtrace_fn = (int (*)(void **, int))dlsym(h, "unw_backtrace");
}

size_t mt_tracer_unwind(uint64_t *pcs, size_t max, unsigned *flags) {
  if (!backtrace_fn) {
    *flags |= MT_TRACER_FLAG_NO_STACK;
    return 0;
  }
  /* libunwind fills the caller's buffer (MT_UNWIND_SLACK words longer than `max`) with void *,
   * the same 8 bytes as a uint64_t here; the shim's frames are then squeezed out in place. One
   * buffer on the stack instead of two: the program's thread may have a small stack. */
  _Static_assert(sizeof(void *) == sizeof(uint64_t), "x86-64");
  int got = backtrace_fn((void **)pcs, (int)(max + MT_UNWIND_SLACK));
  if (got <= 0) {
    *flags |= MT_TRACER_FLAG_NO_STACK;
    return 0;
  }
  size_t n = 0;
  uintptr_t low = mt_shim.text_low, span = mt_shim.text_high - mt_shim.text_low;
  for (int i = 0; i < got; i++) {
    uintptr_t pc = (uintptr_t)pcs[i];
    if (pc - low < span || pc == 0)
      continue; /* the shim's own frame (the trampoline of a thread, too) */
    if (n == max) {
      *flags |= MT_TRACER_FLAG_TRUNCATED;
      break;
    }
    pcs[n++] = pc;
  }
  if ((size_t)got == max + MT_UNWIND_SLACK && n == max)
    *flags |= MT_TRACER_FLAG_TRUNCATED;
  return n;
}
