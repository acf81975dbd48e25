/* The comparison point of the unwinder tests (test_tracer_unwind_cfi.c): ut_check() walks the
 * stack with mt_cfi_unwind and with libunwind's unw_backtrace and counts whether they agree frame
 * by frame. Shared with the C++ part (tracer_unwind_cxx.cpp), which calls it from frames that
 * throw, catch and run destructors. */
#ifndef MEMTAP_TESTS_TRACER_UNWIND_CHECK_H
#define MEMTAP_TESTS_TRACER_UNWIND_CHECK_H

#ifdef __cplusplus
extern "C" {
#endif

void ut_check(void);

/* C++ scenarios: `rounds` exceptions thrown through up to `depth` frames with destructors, caught
 * and rethrown on the way; ut_check runs at the throw, in destructors during unwinding and in the
 * handlers. Returns the number of exceptions caught at the top. */
int ut_cxx_exceptions(int rounds, int depth);

/* ut_check from std::call_once's callable and from a std::thread's body (libstdc++ and libc
 * frames around it), `rounds` times each. Returns the number of calls made. */
int ut_cxx_library_callbacks(int rounds);

#ifdef __cplusplus
}
#endif

#endif
