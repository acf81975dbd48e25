/* test_program.h: what the integration test programs share. Each program allocates in a known
 * pattern and marks its allocation sites with an "@expect" comment on the line of the call:
 *
 *   p = malloc(24); // @expect[MODES] allocs=N frees=M words=W
 *
 * meaning: run in one of MODES (all modes when omitted), `memtap record --full` must show exactly
 * N allocations whose innermost frame in this program's sources is this line, M collects of those
 * objects, and W words in total (a block of n bytes is ceil(n / 8) words). A key left out is not
 * checked; frees=allocs says they must be equal, whatever the count. The innermost frame of each
 * such allocation must be the line itself (not malloc, operator new or a wrapper), unless top=no
 * (a throw: libstdc++'s __cxa_allocate_exception calls malloc). bytes=B (sampled.c) is the bytes
 * the line allocates in total. "@line NAME" names a line for the backtrace checks.
 * run_tracer_tests.py reads these comments; the programs print only deterministic text.
 */
#ifndef MEMTAP_TEST_PROGRAM_H
#define MEMTAP_TEST_PROGRAM_H

/* Keeps the compiler from proving a block unused: GCC and clang delete a malloc whose result is
 * only freed, which would make the program's pattern differ from its source. */
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

#endif
