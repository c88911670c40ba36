#pragma once
// Interval arithmetic shared by the Shardscope analyses (not the HTA-compatible ones, which keep
// HTA's own merge rules for non-positive lengths).
#include <algorithm>
#include <vector>

#include "core/model/types.h"

namespace shardscope::core::intervals {

struct Span {
  TimeNs s, e;
};

// Union of the spans; zero- and negative-length spans occupy no time and are dropped.
inline std::vector<Span> unite(std::vector<Span> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](const Span& x) { return x.e <= x.s; }), v.end());
  std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.s < b.s; });
  std::vector<Span> out;
  for (const auto& x : v) {
    if (out.empty() || x.s > out.back().e)
      out.push_back(x);
    else
      out.back().e = std::max(out.back().e, x.e);
  }
  return out;
}

inline TimeNs length(const std::vector<Span>& u) {
  TimeNs t = 0;
  for (const auto& x : u) t += x.e - x.s;
  return t;
}

// Time of [s, e) covered by the union u (sorted, disjoint).
inline TimeNs coveredBy(const std::vector<Span>& u, TimeNs s, TimeNs e) {
  auto it = std::upper_bound(u.begin(), u.end(), s, [](TimeNs t, const Span& x) { return t < x.e; });
  TimeNs t = 0;
  for (; it != u.end() && it->s < e; ++it) t += std::min(e, it->e) - std::max(s, it->s);
  return t;
}

// Clips every span to [s, e) (a span outside becomes empty and occupies no time).
inline void clip(std::vector<Span>& v, TimeNs s, TimeNs e) {
  for (auto& x : v) {
    x.s = std::clamp(x.s, s, e);
    x.e = std::clamp(x.e, s, e);
  }
}

// Time covered by both unions.
inline TimeNs overlap(const std::vector<Span>& a, const std::vector<Span>& b) {
  TimeNs t = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const TimeNs s = std::max(a[i].s, b[j].s), e = std::min(a[i].e, b[j].e);
    if (e > s) t += e - s;
    if (a[i].e < b[j].e)
      ++i;
    else
      ++j;
  }
  return t;
}

}  // namespace shardscope::core::intervals
