// The C++ part of the unwinder comparison (test_tracer_unwind_cfi.c): exceptions thrown through
// frames that own destructors, caught, rethrown, with stack walks compared at the throw, in the
// destructors that run during unwinding (landing pads) and in the catch handlers.
#include <mutex>
#include <stdexcept>
#include <thread>

#include "tracer_unwind_check.h"

namespace {

volatile int sink;

struct Guard {
  int depth;
  ~Guard() {
    if (depth % 3 == 0)
      ut_check(); // runs from a landing pad while the exception is in flight
    sink = sink + depth;
  }
};

__attribute__((noinline)) int thrower(int depth, int at) {
  Guard guard{depth};
  if (depth == at) {
    ut_check();
    throw std::runtime_error("thrown through traced frames");
  }
  if (depth % 7 == 5) {
    try {
      return thrower(depth + 1, at) + 1;
    } catch (const std::runtime_error &) {
      ut_check(); // a handler in the middle, then the same exception goes on
      throw;
    }
  }
  return thrower(depth + 1, at) + sink;
}

} // namespace

extern "C" int ut_cxx_library_callbacks(int rounds) {
  int calls = 0;
  for (int i = 0; i < rounds; i++) {
    std::once_flag once; // call_once: libstdc++, then libc's pthread_once, then us
    std::call_once(once, [&] {
      ut_check();
      calls++;
    });
    std::thread t([&] { // std::thread: libstdc++'s thread routine at the bottom of the stack
      ut_check();
      calls++;
    });
    t.join();
  }
  return calls;
}

extern "C" int ut_cxx_exceptions(int rounds, int depth) {
  int caught = 0;
  for (int i = 0; i < rounds; i++) {
    try {
      sink = sink + thrower(0, 1 + i % (depth - 1));
    } catch (const std::exception &) {
      ut_check();
      caught++;
    }
  }
  return caught;
}
