// Tracer benchmark workload: C++ containers (std::map, std::vector, std::string,
// std::unordered_map) allocating through operator new: an index of generated words with growing
// posting lists, rebuilt and partly erased in rounds. Usage: containers [SCALE].
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

static uint64_t next(uint64_t &x) {
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  return x * 0x2545F4914F6CDD1DULL;
}

static std::string word(uint64_t r) {
  std::string w;
  size_t n = 3 + r % 22; // past the small-string buffer about half the time
  for (size_t i = 0; i < n; i++)
    w += static_cast<char>('a' + (r >> (i * 2 % 60)) % 26);
  return w;
}

int main(int argc, char **argv) {
  double scale = argc > 1 ? std::strtod(argv[1], nullptr) : 1.0;
  if (!(scale > 0)) {
    std::fprintf(stderr, "containers: SCALE must be a positive number\n");
    return 64;
  }
  int rounds = static_cast<int>(scale * 36);
  if (rounds < 1)
    rounds = 1;
  uint64_t rng = 1234567, checksum = 0;
  for (int round = 0; round < rounds; round++) {
    std::map<std::string, std::vector<uint32_t>> index;
    std::unordered_map<uint64_t, std::string> names;
    for (uint32_t i = 0; i < 40000; i++) {
      uint64_t r = next(rng);
      std::string w = word(r % 5000 * 0x9E3779B97F4A7C15ULL);
      index[w].push_back(i);
      if (i % 4 == 0)
        names.emplace(r, w + "-" + std::to_string(i));
    }
    for (auto it = index.begin(); it != index.end();) {
      checksum += it->second.size();
      if (it->second.size() % 3 == 0)
        it = index.erase(it);
      else
        ++it;
    }
    std::vector<std::string> joined;
    for (auto &kv : names)
      if (kv.first % 7 == 0)
        joined.push_back(kv.second + kv.second);
    checksum += joined.size() + index.size() + names.size();
  }
  std::printf("containers: checksum %llu\n", static_cast<unsigned long long>(checksum));
  return 0;
}
