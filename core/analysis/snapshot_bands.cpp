#include "core/analysis/snapshot_bands.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <unordered_map>

namespace shardscope::core {
namespace {

// Sizes come from the file: sums wrap instead of overflowing (a hostile file gets nonsense, no UB).
std::int64_t add(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t sub(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}

// The point of the active curve made by the event at trace position `seq` (points after the first
// carry increasing seqs).
std::int32_t pointOfSeq(const SnapshotTimeline& t, std::int64_t seq) {
  const auto it = std::lower_bound(t.active.begin() + 1, t.active.end(), seq,
                                   [](const SnapshotCurvePoint& p, std::int64_t s) { return p.seq < s; });
  return static_cast<std::int32_t>(it - t.active.begin());
}

// Walks the stack of live allocations over the points, calling emit(allocation, point, offset) for
// every step of every band: at its alloc, and whenever a band below it is freed.
template <typename Emit>
void simulate(const SnapshotTimeline& t, const SnapshotBandLayout& l, Emit&& emit) {
  std::vector<std::int32_t> stack;  // allocation indices, bottom first (ascending: the stack order)
  std::vector<std::int64_t> offset;
  std::int64_t top = 0;
  for (std::size_t a = 0; a < t.allocations.size(); ++a)
    if (l.allocPoint[a] == 0) {
      stack.push_back(static_cast<std::int32_t>(a));
      offset.push_back(top);
      emit(a, 0, top);
      top = add(top, t.allocations[a].size);
    }
  for (std::int32_t q = 1; q < l.points(); ++q) {
    const std::int32_t a = l.pointAllocation[static_cast<std::size_t>(q)];
    if (a < 0) continue;
    const std::int64_t size = t.allocations[static_cast<std::size_t>(a)].size;
    if (l.allocPoint[static_cast<std::size_t>(a)] == q) {
      // Later allocations have higher indices: they go on top, except a (malformed) out-of-order one.
      const auto it = std::lower_bound(stack.begin(), stack.end(), a);
      const auto k = it - stack.begin();
      const std::int64_t at = it == stack.end() ? top : offset[static_cast<std::size_t>(k)];
      stack.insert(it, a);
      offset.insert(offset.begin() + k, at);
      emit(static_cast<std::size_t>(a), q, at);
      for (auto j = static_cast<std::size_t>(k) + 1; j < stack.size(); ++j) {
        offset[j] = add(offset[j], size);
        emit(static_cast<std::size_t>(stack[j]), q, offset[j]);
      }
      top = add(top, size);
    } else {
      const auto it = std::lower_bound(stack.begin(), stack.end(), a);
      if (it == stack.end() || *it != a) continue;
      const auto k = static_cast<std::size_t>(it - stack.begin());
      stack.erase(it);
      offset.erase(offset.begin() + static_cast<std::ptrdiff_t>(k));
      for (std::size_t j = k; j < stack.size(); ++j) {
        offset[j] = sub(offset[j], size);
        emit(static_cast<std::size_t>(stack[j]), q, offset[j]);
      }
      top = sub(top, size);
    }
  }
}

// The number of steps the walk makes (one per band, plus one per band above each free), without
// walking the stack: a Fenwick tree of the live allocations counts the bands above in O(log n).
std::int64_t countSteps(const SnapshotTimeline& t, const SnapshotBandLayout& l) {
  const std::size_t n = t.allocations.size();
  std::vector<std::int32_t> tree(n + 1, 0);
  std::int64_t alive = 0, steps = 0;
  const auto change = [&](std::size_t a, std::int32_t v) {
    for (std::size_t i = a + 1; i <= n; i += i & (~i + 1)) tree[i] += v;
    alive += v;
  };
  const auto above = [&](std::size_t a) {  // live allocations after a
    std::int64_t upTo = 0;
    for (std::size_t i = a + 1; i > 0; i -= i & (~i + 1)) upTo += tree[i];
    return alive - upTo;
  };
  for (std::size_t a = 0; a < n; ++a)
    if (l.allocPoint[a] == 0) {
      change(a, 1);
      ++steps;
    }
  for (std::int32_t q = 1; q < l.points(); ++q) {
    const std::int32_t a = l.pointAllocation[static_cast<std::size_t>(q)];
    if (a < 0) continue;
    const auto ua = static_cast<std::size_t>(a);
    if (l.allocPoint[ua] == q) {
      change(ua, 1);
      steps += 1 + above(ua);
    } else {
      change(ua, -1);
      steps += above(ua);
    }
  }
  return steps;
}

}  // namespace

std::int64_t SnapshotBandLayout::offsetAt(std::size_t allocation, std::int32_t point) const {
  if (!hasSteps()) {  // the definition: the bytes alive below it
    std::int64_t below = 0;
    for (std::size_t a = 0; a < allocation; ++a)
      if (aliveAt(a, point)) below = add(below, size[a]);
    return below;
  }
  const auto begin = steps.begin() + stepBegin[allocation];
  const auto end = steps.begin() + stepBegin[allocation + 1];
  auto it = std::upper_bound(begin, end, point, [](std::int32_t p, const SnapshotBandStep& s) { return p < s.point; });
  return it == begin ? begin->offset : std::prev(it)->offset;
}

std::size_t SnapshotBandLayout::memoryBytes() const {
  return allocPoint.capacity() * sizeof(std::int32_t) + freePoint.capacity() * sizeof(std::int32_t) +
         size.capacity() * sizeof(std::int64_t) + stepBegin.capacity() * sizeof(std::int64_t) +
         steps.capacity() * sizeof(SnapshotBandStep) + pointAllocation.capacity() * sizeof(std::int32_t);
}

SnapshotBandLayout layoutSnapshotBands(const SnapshotTimeline& t, std::int64_t maxSteps) {
  SnapshotBandLayout l;
  const std::size_t n = t.allocations.size();
  l.pointAllocation.assign(t.active.size(), -1);
  l.allocPoint.resize(n);
  l.freePoint.resize(n);
  l.size.resize(n);
  for (std::size_t a = 0; a < n; ++a) {
    const SnapshotAllocation& x = t.allocations[a];
    l.size[a] = x.size;
    l.allocPoint[a] = x.allocSeq < 0 ? 0 : pointOfSeq(t, x.allocSeq);
    l.freePoint[a] = x.freeSeq < 0 ? l.points() : pointOfSeq(t, x.freeSeq);
    if (l.allocPoint[a] > 0 && l.allocPoint[a] < l.points())
      l.pointAllocation[static_cast<std::size_t>(l.allocPoint[a])] = static_cast<std::int32_t>(a);
    if (l.freePoint[a] < l.points()) l.pointAllocation[static_cast<std::size_t>(l.freePoint[a])] = static_cast<std::int32_t>(a);
  }
  // Over the budget, no steps (and no walk: a deep stack freed oldest first would take frees x depth).
  l.stepCount = countSteps(t, l);
  if (l.stepCount > maxSteps) return l;
  // Two passes over the same walk: count each band's steps, then write them in place.
  std::vector<std::int64_t> count(n + 1, 0);
  simulate(t, l, [&](std::size_t a, std::int32_t, std::int64_t) { ++count[a + 1]; });
  for (std::size_t a = 0; a < n; ++a) count[a + 1] += count[a];
  l.stepBegin = count;
  l.steps.resize(static_cast<std::size_t>(count[n]));
  simulate(t, l, [&](std::size_t a, std::int32_t q, std::int64_t off) {
    l.steps[static_cast<std::size_t>(count[a]++)] = {q, off};
  });
  return l;
}

std::int32_t snapshotPointAt(const SnapshotTimeline& t, TimeNs ns) {
  const auto it =
      std::upper_bound(t.active.begin(), t.active.end(), ns, [](TimeNs v, const SnapshotCurvePoint& p) { return v < p.tsNs; });
  return static_cast<std::int32_t>(it - t.active.begin()) - 1;
}

std::int64_t snapshotAllocationAt(const SnapshotTimeline& t, const SnapshotBandLayout& layout, std::int32_t point,
                                  std::int64_t offset) {
  if (point < 0 || point >= layout.points()) return -1;
  std::int64_t bottom = 0;  // the stack in order: each live allocation sits on the ones before it
  for (std::size_t a = 0; a < t.allocations.size(); ++a) {
    if (!layout.aliveAt(a, point)) continue;
    const std::int64_t top = add(bottom, t.allocations[a].size);
    if (bottom <= offset && offset < top) return static_cast<std::int64_t>(a);
    bottom = top;
  }
  return -1;
}

TimeNs SnapshotBandDetail::bucketStart(int b) const {
  if (buckets <= 0) return t0;
  return t0 + static_cast<TimeNs>(std::floor(static_cast<double>(t1 - t0) * b / buckets));
}

int SnapshotBandDetail::bucketOf(TimeNs ns) const {
  if (buckets <= 0 || ns < t0 || ns >= t1) return -1;
  int b = std::clamp(static_cast<int>(static_cast<double>(ns - t0) / static_cast<double>(t1 - t0) * buckets), 0, buckets - 1);
  while (b > 0 && bucketStart(b) > ns) --b;
  while (b + 1 < buckets && bucketStart(b + 1) <= ns) ++b;
  return b;
}

SnapshotBandDetail snapshotBandDetail(const SnapshotTimeline& t, const SnapshotBandLayout& layout, TimeNs t0, TimeNs t1,
                                      int buckets, std::int64_t minBytes) {
  SnapshotBandDetail d;
  d.t0 = t0;
  d.t1 = t1;
  d.buckets = t1 > t0 ? std::max(buckets, 0) : 0;
  d.minBytes = std::max<std::int64_t>(minBytes, 1);
  d.bucketPoint.assign(static_cast<std::size_t>(d.buckets), -1);
  d.bucketTop.assign(static_cast<std::size_t>(d.buckets), 0);
  if (d.buckets == 0 || t.active.empty() || layout.points() != static_cast<std::int32_t>(t.active.size())) return d;

  // Each bucket's highest level: the points inside it and, unless a point sits on its start, the level in force then.
  const auto& curve = t.active;
  const TimeNs lastNs = curve.back().tsNs;
  auto next = static_cast<std::size_t>(
      std::lower_bound(curve.begin(), curve.end(), t0, [](const SnapshotCurvePoint& p, TimeNs v) { return p.tsNs < v; }) -
      curve.begin());
  for (int b = 0; b < d.buckets; ++b) {
    const TimeNs s = d.bucketStart(b), e = d.bucketStart(b + 1);
    std::int32_t best = -1;
    if (next > 0 && (next == curve.size() || curve[next].tsNs > s)) best = static_cast<std::int32_t>(next - 1);
    for (; next < curve.size() && curve[next].tsNs < e; ++next)
      if (best < 0 || curve[next].bytes > curve[static_cast<std::size_t>(best)].bytes) best = static_cast<std::int32_t>(next);
    if (s > lastNs) best = -1;  // past the dump
    d.bucketPoint[static_cast<std::size_t>(b)] = best;
    if (best >= 0) d.bucketTop[static_cast<std::size_t>(b)] = curve[static_cast<std::size_t>(best)].bytes;
  }

  // The bands of at least minBytes alive at each bucket's point, kept up to date along the points,
  // and the bytes alive per allocation in a Fenwick tree: a band's bottom is the sum before it.
  std::vector<std::int32_t> big;
  const std::size_t n = t.allocations.size();
  std::vector<std::int64_t> tree(n + 1, 0);
  const auto treeAdd = [&](std::size_t a, std::int64_t v) {
    for (std::size_t i = a + 1; i <= n; i += i & (~i + 1)) tree[i] = add(tree[i], v);
  };
  const auto below = [&](std::size_t a) {  // sum over [0, a)
    std::int64_t sum = 0;
    for (std::size_t i = a; i > 0; i -= i & (~i + 1)) sum = add(sum, tree[i]);
    return sum;
  };
  std::int32_t at = -1;
  std::unordered_map<std::int32_t, std::size_t> lastBand, lastGap;
  const auto emit = [&](std::unordered_map<std::int32_t, std::size_t>& last, std::int32_t key, std::int32_t allocation, int b,
                        std::int64_t bottom, std::int64_t top) {
    if (auto it = last.find(key); it != last.end()) {
      SnapshotBandPiece& p = d.pieces[it->second];
      if (p.bucket1 == b && p.bottom == bottom && p.top == top) {
        p.bucket1 = b + 1;
        return;
      }
    }
    last[key] = d.pieces.size();
    d.pieces.push_back({allocation, b, b + 1, bottom, top});
  };
  const auto isBig = [&](std::size_t a) { return t.allocations[a].size >= d.minBytes; };
  for (int b = 0; b < d.buckets; ++b) {
    const std::int32_t p = d.bucketPoint[static_cast<std::size_t>(b)];
    if (p < 0) continue;
    if (at < 0) {
      for (std::size_t a = 0; a < n; ++a) {
        if (!layout.aliveAt(a, p)) continue;
        tree[a + 1] = add(tree[a + 1], t.allocations[a].size);
        if (isBig(a)) big.push_back(static_cast<std::int32_t>(a));
      }
      for (std::size_t i = 1; i <= n; ++i)  // the Fenwick tree of those values, in linear time
        if (const std::size_t parent = i + (i & (~i + 1)); parent <= n) tree[parent] = add(tree[parent], tree[i]);
    } else {
      for (std::int32_t q = at + 1; q <= p; ++q) {
        const std::int32_t a = layout.pointAllocation[static_cast<std::size_t>(q)];
        if (a < 0) continue;
        const auto ua = static_cast<std::size_t>(a);
        const bool allocated = layout.allocPoint[ua] == q;
        treeAdd(ua, allocated ? t.allocations[ua].size : sub(0, t.allocations[ua].size));
        if (!isBig(ua)) continue;
        const auto it = std::lower_bound(big.begin(), big.end(), a);
        if (allocated)
          big.insert(it, a);
        else if (it != big.end() && *it == a)
          big.erase(it);
      }
    }
    at = p;
    std::int64_t reached = 0;
    std::int32_t region = -1;  // the gap's key: the band under it (-1: the bottom of the stack)
    for (const std::int32_t a : big) {
      const std::int64_t bottom = below(static_cast<std::size_t>(a));
      const std::int64_t top = add(bottom, t.allocations[static_cast<std::size_t>(a)].size);
      if (bottom > reached) emit(lastGap, region, -1, b, reached, bottom);
      emit(lastBand, a, a, b, bottom, top);
      reached = top;
      region = a;
    }
    if (d.bucketTop[static_cast<std::size_t>(b)] > reached)
      emit(lastGap, region, -1, b, reached, d.bucketTop[static_cast<std::size_t>(b)]);
  }
  return d;
}

const std::vector<std::string_view>& snapshotCategoryNames() {
  static const std::vector<std::string_view> names{"parameters",  "gradients",    "optimizer_state",
                                                   "activations", "comm_buffers", "unknown"};
  return names;
}

std::vector<std::uint8_t> snapshotAllocationCategories(const MemorySnapshot& s, const SnapshotTimeline& t) {
  const auto& names = snapshotCategoryNames();
  const auto index = [&](const std::string& c) {
    const auto it = std::find(names.begin(), names.end(), c);
    return static_cast<std::uint8_t>(it == names.end() ? names.size() - 1 : static_cast<std::size_t>(it - names.begin()));
  };
  std::vector<const MemAnnotation*> ann;
  for (const auto& a : s.annotations)
    if (a.device == t.device) ann.push_back(&a);
  std::stable_sort(ann.begin(), ann.end(), [](const auto* x, const auto* y) { return x->tsNs < y->tsNs; });
  // The annotations open at each allocation, as in snapshotFigures; a category per (stack, open set).
  std::vector<std::string> openNow;
  std::map<std::string, int> states{{"", 0}};
  int state = 0;
  std::map<std::pair<StackId, int>, std::uint8_t> cache;
  std::size_t ai = 0;
  std::vector<std::uint8_t> out(t.allocations.size());
  for (std::size_t i = 0; i < t.allocations.size(); ++i) {
    const SnapshotAllocation& a = t.allocations[i];
    const bool prior = a.allocSeq < 0;
    if (!prior && ai < ann.size() && ann[ai]->tsNs <= a.allocNs) {
      for (; ai < ann.size() && ann[ai]->tsNs <= a.allocNs; ++ai) {
        if (ann[ai]->start) {
          openNow.push_back(ann[ai]->name);
        } else if (auto it = std::find(openNow.rbegin(), openNow.rend(), ann[ai]->name); it != openNow.rend()) {
          openNow.erase(std::next(it).base());
        }
      }
      std::string key;
      for (const auto& o : openNow) key += o + '\n';
      state = states.try_emplace(key, static_cast<int>(states.size())).first->second;
    }
    const int st = prior ? 0 : state;
    auto [it, fresh] = cache.try_emplace({a.stack, st}, 0);
    if (fresh) it->second = index(snapshotCategory(s, a.stack, prior ? std::vector<std::string>{} : openNow));
    out[i] = it->second;
  }
  return out;
}

}  // namespace shardscope::core
