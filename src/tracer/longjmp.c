/* longjmp out of a signal handler (docs/tracer.md, "Signals"). A handler that interrupted this
 * thread's ring write (or its draining of deferred records) defers its own records until the
 * write ends; if it leaves by longjmp the write never ends, and without this every later record of
 * the thread would be deferred until the buffer overflowed. Likewise a record being built in a
 * scratch level would keep its level taken for good, and after four such jumps every later
 * REALLOC and MAP record of the thread would be cut to 32 frames. The shim interposes longjmp,
 * _longjmp, siglongjmp and __longjmp_chk: a jump from inside such a handler (the trampoline noted
 * its frame) to a frame above it abandons the interrupted write, whose record was never published,
 * before jumping. A jump that stays inside the handler leaves the write alone. The target's stack
 * pointer is read from the jump buffer as glibc stores it on x86-64 (mangled with the thread's
 * pointer guard); elsewhere the jump is only passed on. */
#include <setjmp.h>

#include "tracer/shim.h"

#define MT_EXPORT __attribute__((visibility("default")))

typedef void (*jump_fn)(struct __jmp_buf_tag *, int);

/* glibc's fortified longjmp, declared by <setjmp.h> only under _FORTIFY_SOURCE. */
void __longjmp_chk(struct __jmp_buf_tag env[1], int value) __attribute__((noreturn));

#if defined(__x86_64__) && defined(__GLIBC__)
/* glibc's x86-64 jump buffer: rbx, rbp, r12-r15, rsp, pc; rsp, rbp and pc mangled (PTR_MANGLE:
 * xor with the pointer guard at %fs:0x30, then rotate left by 17). */
#define JB_RSP 6

static uintptr_t target_sp(const struct __jmp_buf_tag *env) {
  uintptr_t v = (uintptr_t)env->__jmpbuf[JB_RSP], guard;
  __asm__("mov %%fs:0x30, %0" : "=r"(guard));
  return ((v >> 17) | (v << 47)) ^ guard;
}

static void leaving(const struct __jmp_buf_tag *env) {
  mt_shim_thread *t = &mt_shim_self;
  uintptr_t frame = t->handler_frame;
  /* Out of every handler the trampoline runs: the thread is in none any more (ending.c bounds
   * the end of an in-process trace only from inside one). */
  if (__builtin_expect(t->in_handler != 0, 0) && target_sp(env) > t->handler_outer)
    t->in_handler = 0, t->handler_outer = 0;
  if (__builtin_expect(frame != 0, 0) && target_sp(env) > frame) {
    t->handler_frame = 0;
    mt_record_abandon_write();
    /* The shim code the handler interrupted was called from code that held no level (a handler
     * that interrupted shim code holding one would be the outermost). */
    mt_record_abandon_scratch(0);
  }
}
#else
static void leaving(const struct __jmp_buf_tag *env) {
  (void)env;
}
#endif

/* The next definition (a handler the shim wrapped exists only after sigaction, which
 * resolves). */
static jump_fn next(void *const *slot) {
  return (jump_fn)mt_shim_next(slot);
}

MT_EXPORT void longjmp(struct __jmp_buf_tag env[1], int value) {
  leaving(env);
  next (&mt_shim_real.longjmp)(env, value);
  __builtin_unreachable();
}

MT_EXPORT void _longjmp(struct __jmp_buf_tag env[1], int value) {
  leaving(env);
  next (&mt_shim_real.longjmp_)(env, value);
  __builtin_unreachable();
}

MT_EXPORT void siglongjmp(struct __jmp_buf_tag env[1], int value) {
  leaving(env);
  next (&mt_shim_real.siglongjmp)(env, value);
  __builtin_unreachable();
}

MT_EXPORT void __longjmp_chk(struct __jmp_buf_tag env[1], int value) {
  leaving(env);
  next (&mt_shim_real.longjmp_chk)(env, value);
  __builtin_unreachable();
}
