#pragma once
// What a runtime test reads back from a run's --dump-params / --dump-losses files.
#include <fstream>
#include <string>
#include <vector>

namespace shardscope::test {

// The float32 parameters rank 0 dumped (model order).
inline std::vector<float> readFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const auto n = static_cast<std::size_t>(in.tellg()) / 4;
  std::vector<float> v(n);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * 4));
  return v;
}

// One loss per line.
inline std::vector<double> readLosses(const std::string& path) {
  std::ifstream in(path);
  std::vector<double> v;
  double x;
  while (in >> x) v.push_back(x);
  return v;
}

}  // namespace shardscope::test
