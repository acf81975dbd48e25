/* Code for the scope index's test, compiled -O2 -g (record.cmake): libstdc++'s templates inlined
 * several deep, lexical blocks, lambdas, and an inline function that is both inlined and kept as
 * an out-of-line instance (its address taken), whose own inlined calls then sit in a concrete
 * instance of an abstract function. */
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "scopes_helper.h"

namespace {

inline __attribute__((always_inline)) int bump(int x) {
  return x * 3 + 1;
}

inline int twice_bumped(int x) { /* inlined below, and out of line through `through` */
  int y = bump(x);
  {
    int z = bump(y) ^ x;
    y += z;
  }
  return y;
}

int (*volatile through)(int) = twice_bumped;

template <typename T> struct Tally {
  std::map<std::string, std::vector<T>> groups;
  void add(const std::string &key, T value) {
    groups[key].push_back(value);
  }
  long sorted_sizes() {
    long total = 0;
    for (auto &group : groups) {
      std::sort(group.second.begin(), group.second.end(), [](T a, T b) { return b < a; });
      total += (long)group.second.size() + (long)group.second.front();
    }
    return total;
  }
};

} // namespace

long scopes_helper_run(int n) {
  Tally<int> tally;
  long sum = 0;
  for (int i = 0; i < n; i++) {
    tally.add(std::to_string(i % 5), twice_bumped(i));
    sum += through(i);
  }
  return sum + tally.sorted_sizes();
}
