// C++ exceptions thrown and caught through frames that allocate, run under the preload shim by
// test_tracer_preload.c: the output must be the same with and without the shim (the shim loads
// libunwind privately, so the program's exceptions keep unwinding through libgcc).
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

struct Node {
  std::vector<std::string> names;
};

__attribute__((noinline)) static int deep(int depth) {
  auto node = std::make_unique<Node>();
  node->names.push_back("level " + std::to_string(depth));
  if (depth == 0)
    throw std::runtime_error("bottom reached after " + node->names.back());
  return deep(depth - 1) + 1;
}

int main() {
  int caught = 0;
  std::string last;
  for (int i = 0; i < 200; i++) {
    try {
      deep(i % 17);
    } catch (const std::runtime_error &e) {
      caught++;
      last = e.what();
    }
  }
  try {
    std::vector<int> v;
    v.at(3) = 1;
  } catch (const std::out_of_range &) {
    caught++;
  }
  std::printf("caught %d last '%s'\n", caught, last.c_str());
  return caught == 201 ? 0 : 1;
}
