#include "core/timeline/draw_list.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>

namespace shardscope::core::timeline {

namespace {

// First index in [from, hi) whose value is >= x, for sorted v; gallops from `from` (the answer is
// usually near) before the binary search.
std::uint32_t gallop(const std::vector<TimeNs>& v, std::uint32_t from, std::uint32_t hi, TimeNs x) {
  if (from >= hi || v[from] >= x) return from;
  std::uint64_t lo = from, step = 1, probe = 0;  // invariant: v[lo] < x
  for (;;) {
    probe = lo + step;
    if (probe >= hi) {
      probe = hi;
      break;
    }
    if (v[probe] >= x) break;
    lo = probe;
    step *= 2;
  }
  // The answer is in (lo, probe].
  return static_cast<std::uint32_t>(
      std::lower_bound(v.begin() + static_cast<std::ptrdiff_t>(lo) + 1, v.begin() + static_cast<std::ptrdiff_t>(probe), x) -
      v.begin());
}

struct Frame {
  const TimelineIndex& index;
  const Viewport& view;
  TimeNs t0, t1;
  double nsPerPx;
  float width;
  TimeNs fold;  // events narrower than this fold (minPx in ns, at least 1)

  float px(TimeNs t) const {
    if (t <= t0) return 0.0f;
    if (t >= t1) return width;
    return static_cast<float>(static_cast<double>(t - t0) / nsPerPx);
  }

  std::uint8_t textFlags(float w, std::size_t chars) const {
    const float room = w - 2 * view.textPaddingPx;
    if (room >= static_cast<float>(chars) * view.charWidthPx) return DrawFlags::TextFull | DrawFlags::TextElided;
    if (room >= static_cast<float>(view.minTextChars + 1) * view.charWidthPx) return DrawFlags::TextElided;
    return 0;
  }

  void place(DrawRect& r, TimeNs s, TimeNs e) const {
    r.x0 = px(s);
    r.x1 = px(e);
    if (s < t0) r.flags |= DrawFlags::ClippedLeft;
    if (e > t1) r.flags |= DrawFlags::ClippedRight;
    if (r.x1 - r.x0 < 1.0f) {
      r.flags |= DrawFlags::Widened;
      r.x1 = r.x0 + 1.0f;
      if (r.x1 > width) {
        r.x1 = width;
        r.x0 = std::max(0.0f, width - 1.0f);
      }
    }
  }
};

// The rectangles, rows and counter lines of view lanes [vb, ve).
struct Partial {
  std::vector<DrawRect> rects;
  std::vector<DrawRow> rows;
  std::vector<std::uint32_t> rowCount;  // per view lane of the part
  std::vector<CounterLine> counters;
  std::vector<std::pair<std::size_t, RankSummary>> summaries;  // (position in Viewport::summaryRanks, track)
  std::uint64_t events = 0;
};

// What a fold [b, e) of a lane row is drawn as: OR / AND of its keys, OR of its bits, the time its
// events cover, and the time per key (whole blocks add their dominant key's time).
struct FoldAcc {
  std::uint8_t keyOr = 0, keyAnd = 0xFF, bitsOr = 0;
  TimeNs covered = 0;
  // Time per key seen, in first-seen order: [0, nKeys) (a row rarely has more than a few keys; left
  // uninitialised beyond nKeys: a fold costs no clearing).
  std::uint32_t nKeys = 0;
  std::uint8_t keys[kKeyCount];
  TimeNs time[kKeyCount];
  void add(std::uint8_t key, TimeNs t) {
    for (std::uint32_t i = 0; i < nKeys; ++i)
      if (keys[i] == key) {
        time[i] += t;
        return;
      }
    if (nKeys < kKeyCount) {
      keys[nKeys] = key;
      time[nKeys++] = t;
    }
  }
  std::uint8_t dominant() const {
    std::uint32_t best = 0;
    for (std::uint32_t i = 1; i < nKeys; ++i)
      if (time[i] > time[best] || (time[i] == time[best] && keys[i] < keys[best])) best = i;
    return nKeys ? keys[best] : keyOr;
  }
};

// OR / AND of the keys, OR of the bits and the covered time of the fold [b, e): the per-64 summaries
// for whole blocks, the events at the edges.
void foldSummary(const Lane& l, std::uint32_t b, std::uint32_t e, FoldAcc& a) {
  constexpr std::uint32_t kBlock = 1u << Lane::kBlockShift;
  std::uint32_t i = b;
  auto one = [&](std::uint32_t k) {
    a.keyOr |= l.key[k];
    a.keyAnd &= l.key[k];
    a.bitsOr |= l.bits[k];
    a.covered += l.end[k] - l.start[k];
  };
  for (; i < e && (i & (kBlock - 1)) != 0; ++i) one(i);
  for (; i + kBlock <= e; i += kBlock) {
    const std::uint32_t k = i >> Lane::kBlockShift;
    a.keyOr |= l.blockKeyOr[k];
    a.keyAnd &= l.blockKeyAnd[k];
    a.bitsOr |= l.blockBitsOr[k];
    a.covered += l.blockDur[k];
  }
  for (; i < e; ++i) one(i);
}

// The key covering the most time in a fold of several keys: the events at its edges add their own
// time, whole blocks their dominant key's (a second pass, only for folds that mix keys).
std::uint8_t foldDominantKey(const Lane& l, std::uint32_t b, std::uint32_t e, FoldAcc& a) {
  constexpr std::uint32_t kBlock = 1u << Lane::kBlockShift;
  std::uint32_t i = b;
  for (; i < e && (i & (kBlock - 1)) != 0; ++i) a.add(l.key[i], l.end[i] - l.start[i]);
  for (; i + kBlock <= e; i += kBlock) {
    const std::uint32_t k = i >> Lane::kBlockShift;
    a.add(l.blockTopKey[k], l.blockTopDur[k]);
  }
  for (; i < e; ++i) a.add(l.key[i], l.end[i] - l.start[i]);
  return a.dominant();
}

// The first k in (i, hi) with wide(k), else hi, where level1[b] / level2[b] bound wide() over
// blocks of 64 / 4096 indices from above (a block whose bound is under G holds no wide index and
// is skipped whole).
template <class Wide>
std::uint32_t runEnd(std::uint32_t i, std::uint32_t hi, TimeNs G, const std::vector<TimeNs>& level1,
                     const std::vector<TimeNs>& level2, const Wide& wide) {
  constexpr std::uint32_t B = 1u << Lane::kBlockShift;
  constexpr std::uint32_t B2 = B << Lane::kBlockShift;
  std::uint32_t k = i + 1;
  for (; k < hi && (k & (B - 1)) != 0; ++k)
    if (wide(k)) return k;
  while (k < hi) {
    if ((k & (B2 - 1)) == 0 && hi - k >= B2 && level2[k >> (2 * Lane::kBlockShift)] < G) {
      k += B2;
      continue;
    }
    if (hi - k >= B && level1[k >> Lane::kBlockShift] < G) {
      k += B;
      continue;
    }
    for (const std::uint32_t e = std::min(hi, k + B); k < e; ++k)
      if (wide(k)) return k;
  }
  return hi;
}

// The end of the fold starting at the narrow event i: the first k in (i, hi) that is at least G wide
// or starts at least G after its predecessor (its reach is >= G), else hi.
std::uint32_t foldRun(const Lane& l, std::uint32_t i, std::uint32_t hi, TimeNs G) {
  return runEnd(i, hi, G, l.reach1, l.reach2,
                [&](std::uint32_t k) { return l.end[k] - l.start[k] >= G || l.start[k] - l.end[k - 1] >= G; });
}

void drawRow(const Frame& f, const Lane& l, std::uint32_t laneIndex, std::uint32_t viewLane, std::uint32_t depth, Partial& out) {
  const IndexRange w = f.index.window(laneIndex, depth, f.t0, f.t1);
  const TimeNs G = f.fold;
  std::uint32_t i = w.begin;
  const std::uint32_t hi = w.end;
  out.events += w.size();
  while (i < hi) {
    DrawRect r;
    r.viewLane = viewLane;
    r.depth = depth;
    r.first = i;
    const TimeNs s = l.start[i];
    if (l.end[i] - s >= G) {
      r.key = l.key[i];
      r.bits = l.bits[i];
      f.place(r, s, l.end[i]);
      r.flags |= f.textFlags(r.x1 - r.x0, f.index.name(l.nameIdx[i]).size());
      out.rects.push_back(r);
      ++i;
      continue;
    }
    // A narrow event: fold it with the narrow neighbours that follow closely.
    const std::uint32_t j = foldRun(l, i, hi, G);
    const TimeNs foldEnd = l.end[j - 1];
    r.count = j - i;
    if (r.count == 1) {
      r.key = l.key[i];
      r.bits = l.bits[i];
    } else {
      FoldAcc a;
      foldSummary(l, i, j, a);
      r.key = a.keyOr == a.keyAnd ? a.keyOr : foldDominantKey(l, i, j, a);
      r.bits = a.bitsOr;
      r.flags |= DrawFlags::Folded;
      if (a.keyOr != a.keyAnd) r.flags |= DrawFlags::Mixed;
      const TimeNs span = foldEnd - s;
      r.density = span <= 0 ? 255 : static_cast<std::uint8_t>(std::clamp<TimeNs>((a.covered * 255 + span / 2) / span, 1, 255));
    }
    f.place(r, s, foldEnd);
    if (r.count == 1)
      r.flags |= f.textFlags(r.x1 - r.x0, f.index.name(l.nameIdx[i]).size());
    else
      r.flags |= f.textFlags(r.x1 - r.x0, std::to_string(r.count).size() + 7);  // "N events"
    out.rects.push_back(r);
    i = j;
  }
}

void drawCounter(const Frame& f, const Lane& l, std::uint32_t laneIndex, std::uint32_t viewLane, Partial& out) {
  CounterLine line;
  line.viewLane = viewLane;
  const auto n = static_cast<std::uint32_t>(l.sampleTs.size());
  const IndexRange w = f.index.sampleWindow(laneIndex, f.t0, f.t1);
  // Nothing when the curve ends before the window or starts after it.
  if (w.begin >= n || (w.begin == 0 && w.end == 0)) {
    out.counters.push_back(std::move(line));
    return;
  }
  bool held = w.begin > 0;
  double value = held ? l.sampleValue[w.begin - 1] : 0.0;
  std::uint32_t i = w.begin;
  const int width = static_cast<int>(f.width);
  const int c0 = held ? 0 : std::min(width - 1, static_cast<int>(f.px(l.sampleTs[i])));
  bool first = true;
  for (int c = c0; c < width; ++c) {
    const TimeNs colEnd = c + 1 >= width ? f.t1 : f.t0 + static_cast<TimeNs>(std::ceil(static_cast<double>(c + 1) * f.nsPerPx));
    const std::uint32_t j = gallop(l.sampleTs, i, w.end, colEnd);
    double v = value;
    if (j > i) {
      const double m = f.index.sampleMax(laneIndex, i, j);
      v = held ? std::max(value, m) : m;
      value = l.sampleValue[j - 1];
      held = true;
      i = j;
    }
    if (first || v != line.points.back().value) line.points.push_back(CounterPoint{static_cast<float>(c), v});
    if (first) line.windowMax = v;
    line.windowMax = std::max(line.windowMax, v);
    first = false;
    line.xEnd = static_cast<float>(c + 1);
    // After the last sample the curve ends (nothing is extrapolated past the data).
    if (i >= n) break;
  }
  out.counters.push_back(std::move(line));
}

void drawLanes(const Frame& f, std::uint32_t vb, std::uint32_t ve, Partial& out) {
  for (std::uint32_t v = vb; v < ve; ++v) {
    const ViewLane& vl = f.view.lanes[v];
    const Lane& l = f.index.lane(vl.lane);
    std::uint32_t rows = 0;
    if (l.isCounter()) {
      drawCounter(f, l, vl.lane, v, out);
    } else {
      rows = std::min(vl.maxDepth, l.depthCount());
      for (std::uint32_t d = 0; d < rows; ++d) {
        DrawRow row;
        row.viewLane = v;
        row.depth = d;
        row.begin = static_cast<std::uint32_t>(out.rects.size());
        drawRow(f, l, vl.lane, v, d, out);
        row.end = static_cast<std::uint32_t>(out.rects.size());
        out.rows.push_back(row);
      }
    }
    out.rowCount.push_back(rows);
  }
}

void drawExposed(const Frame& f, const RankInfo& r, int rankIndex, std::vector<ExposedSpan>& out) {
  const auto& E = r.exposed;
  const TimeNs gap = std::max<TimeNs>(1, static_cast<TimeNs>(std::ceil(f.nsPerPx)));
  auto k = static_cast<std::uint32_t>(
      std::upper_bound(E.begin(), E.end(), f.t0, [](TimeNs t, const intervals::Span& x) { return t < x.e; }) - E.begin());
  const auto hi = static_cast<std::uint32_t>(
      std::lower_bound(E.begin() + k, E.end(), f.t1, [](const intervals::Span& x, TimeNs t) { return x.s < t; }) - E.begin());
  while (k < hi) {
    // Spans less than a pixel apart merge: the run ends at the first gap of a pixel or more.
    const std::uint32_t m =
        runEnd(k, hi, gap, r.exposedGap1, r.exposedGap2, [&](std::uint32_t q) { return E[q].s - E[q - 1].e >= gap; });
    ExposedSpan x{rankIndex, f.px(E[k].s), f.px(E[m - 1].e)};
    if (x.x1 - x.x0 < 1.0f) x.x1 = std::min(f.width, x.x0 + 1.0f);
    out.push_back(x);
    k = m;
  }
}

void summarize(const Frame& f, std::size_t first, std::size_t stride, Partial& out) {
  for (std::size_t k = first; k < f.view.summaryRanks.size(); k += stride)
    out.summaries.emplace_back(k, buildRankSummary(f.index, f.view.summaryRanks[k], f.t0, f.t1, static_cast<int>(f.width)));
}

}  // namespace

RankSummary buildRankSummary(const TimelineIndex& index, int rankIndex, TimeNs t0, TimeNs t1, int widthPx) {
  RankSummary out;
  out.rankIndex = rankIndex;
  if (rankIndex < 0 || static_cast<std::size_t>(rankIndex) >= index.ranks().size() || widthPx <= 0) return out;
  const RankInfo& r = index.ranks()[static_cast<std::size_t>(rankIndex)];
  t1 = std::max(t1, t0 + 1);
  const auto width = static_cast<std::size_t>(widthPx);
  out.columns.resize(width);
  const double npp = static_cast<double>(t1 - t0) / static_cast<double>(width);
  // Nothing to do for columns outside the rank's work.
  const TimeNs busyFrom = r.workCover.empty() ? t1 : r.workCover.start.front();
  const TimeNs busyTo = r.workCover.empty() ? t0 : r.workCover.end(r.workCover.size() - 1);
  std::size_t hp = 0, hw = 0, he = 0;
  TimeNs a = t0;
  TimeNs cp = r.computeCover.coveredBefore(a, hp), cw = r.workCover.coveredBefore(a, hw),
         ce = r.exposedCover.coveredBefore(a, he);
  for (std::size_t c = 0; c < width; ++c) {
    const TimeNs b = c + 1 == width ? t1 : t0 + static_cast<TimeNs>(static_cast<double>(c + 1) * npp);
    if (b <= a) {  // under a nanosecond per pixel: the column repeats its neighbour
      if (c) out.columns[c] = out.columns[c - 1];
      continue;
    }
    if (b <= busyFrom || a >= busyTo) {
      a = b;
      continue;
    }
    const TimeNs np = r.computeCover.coveredBefore(b, hp), nw = r.workCover.coveredBefore(b, hw),
                 ne = r.exposedCover.coveredBefore(b, he);
    const TimeNs span = b - a;
    auto share = [&](TimeNs t) -> int {
      return static_cast<int>(std::clamp<TimeNs>((std::max<TimeNs>(0, t) * 255 + span / 2) / span, 0, 255));
    };
    int sc = share(np - cp), se = share(ne - ce), so = share((nw - cw) - (np - cp) - (ne - ce));
    // Rounding never makes the shares exceed the column.
    if (sc + se + so > 255) so = std::max(0, 255 - sc - se);
    if (sc + se > 255) se = 255 - sc;
    out.columns[c] = SummaryColumn{static_cast<std::uint8_t>(sc), static_cast<std::uint8_t>(se), static_cast<std::uint8_t>(so)};
    cp = np;
    cw = nw;
    ce = ne;
    a = b;
  }
  return out;
}

DrawList buildDrawList(const TimelineIndex& index, const Viewport& view) {
  DrawList out;
  out.t0 = view.t0;
  out.t1 = std::max(view.t1, view.t0 + 1);
  out.widthPx = std::max(1, view.widthPx);
  out.nsPerPx = static_cast<double>(out.t1 - out.t0) / out.widthPx;
  Frame f{index,
          view,
          out.t0,
          out.t1,
          out.nsPerPx,
          static_cast<float>(out.widthPx),
          std::max<TimeNs>(1, static_cast<TimeNs>(std::ceil(static_cast<double>(view.minPx) * out.nsPerPx)))};

  const auto nv = static_cast<std::uint32_t>(view.lanes.size());
  unsigned threads = view.threads ? view.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(
      threads, std::max<std::uint32_t>(1, std::max<std::uint32_t>(nv, static_cast<std::uint32_t>(view.summaryRanks.size()))));
  std::vector<Partial> parts(threads);
  std::vector<std::uint32_t> bounds{0};
  if (threads == 1) {
    bounds.push_back(nv);
  } else {
    // Contiguous slices of about equal work (events of the visible rows, plus a constant per lane).
    std::vector<double> work(nv);
    double total = 0;
    for (std::uint32_t v = 0; v < nv; ++v) {
      const Lane& l = index.lane(view.lanes[v].lane);
      work[v] = 64.0 + static_cast<double>(l.isCounter() ? l.sampleTs.size() / 16 : l.start.size());
      total += work[v];
    }
    double acc = 0;
    for (std::uint32_t v = 0; v < nv; ++v) {
      acc += work[v];
      if (acc >= total * static_cast<double>(bounds.size()) / threads && bounds.size() < threads) bounds.push_back(v + 1);
    }
    while (bounds.size() <= threads) bounds.push_back(nv);
  }
  if (threads == 1) {
    drawLanes(f, 0, nv, parts[0]);
    summarize(f, 0, 1, parts[0]);
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t)
      pool.emplace_back([&, t] {
        drawLanes(f, bounds[t], bounds[t + 1], parts[t]);
        summarize(f, t, threads, parts[t]);
      });
    drawLanes(f, bounds[0], bounds[1], parts[0]);
    summarize(f, 0, threads, parts[0]);
    for (auto& th : pool) th.join();
  }

  std::size_t nRects = 0, nRows = 0;
  for (const auto& p : parts) {
    nRects += p.rects.size();
    nRows += p.rows.size();
  }
  out.rects.reserve(nRects);
  out.rows.reserve(nRows);
  out.rowBegin.reserve(nv + 1);
  out.rowBegin.push_back(0);
  for (auto& p : parts) {
    const auto base = static_cast<std::uint32_t>(out.rects.size());
    out.rects.insert(out.rects.end(), p.rects.begin(), p.rects.end());
    for (DrawRow row : p.rows) {
      row.begin += base;
      row.end += base;
      out.rows.push_back(row);
    }
    for (std::uint32_t c : p.rowCount) out.rowBegin.push_back(out.rowBegin.back() + c);
    for (auto& c : p.counters) out.counters.push_back(std::move(c));
    out.eventsInView += p.events;
  }
  out.summaries.resize(view.summaryRanks.size());
  for (auto& p : parts)
    for (auto& [k, strip] : p.summaries) out.summaries[k] = std::move(strip);

  // Per rank with a visible lane: its exposed communication and its steps.
  std::vector<char> rankVisible(index.ranks().size(), 0);
  for (const auto& vl : view.lanes) rankVisible[static_cast<std::size_t>(index.lane(vl.lane).rankIndex)] = 1;
  for (int r : view.summaryRanks)
    if (r >= 0 && static_cast<std::size_t>(r) < rankVisible.size()) rankVisible[static_cast<std::size_t>(r)] = 1;
  for (std::size_t r = 0; r < rankVisible.size(); ++r) {
    if (!rankVisible[r]) continue;
    const RankInfo& info = index.ranks()[r];
    if (view.exposedSpans) drawExposed(f, info, static_cast<int>(r), out.exposed);
    for (const Step& s : info.steps) {
      if (s.endNs <= out.t0 || s.startNs >= out.t1) continue;
      out.steps.push_back(
          StepMark{static_cast<int>(r), s.step, f.px(s.startNs), f.px(s.endNs), s.startNs<out.t0, s.endNs> out.t1});
    }
  }
  return out;
}

Hit hitTest(const DrawList& list, const Viewport& view, float x, float y, float slackPx) {
  Hit h;
  for (std::uint32_t v = 0; v < view.lanes.size() && v + 1 < list.rowBegin.size(); ++v) {
    const ViewLane& vl = view.lanes[v];
    if (y < vl.y || vl.rowHeight <= 0) continue;
    const std::uint32_t rows = list.rowBegin[v + 1] - list.rowBegin[v];
    const bool counter = rows == 0 && std::any_of(list.counters.begin(), list.counters.end(),
                                                  [&](const CounterLine& c) { return c.viewLane == v; });
    if (counter) {
      if (y >= vl.y + vl.rowHeight) continue;
      for (const auto& c : list.counters) {
        if (c.viewLane != v || c.points.empty() || x < c.points.front().x || x >= c.xEnd) continue;
        const auto it =
            std::upper_bound(c.points.begin(), c.points.end(), x, [](float t, const CounterPoint& p) { return t < p.x; });
        h.kind = Hit::Kind::Counter;
        h.viewLane = v;
        h.lane = vl.lane;
        h.index = static_cast<std::uint32_t>(it - c.points.begin()) - 1;
        h.value = c.points[h.index].value;
        return h;
      }
      continue;
    }
    const auto depth = static_cast<std::uint32_t>((y - vl.y) / vl.rowHeight);
    if (depth >= rows) continue;
    const DrawRow& row = list.rows[list.rowBegin[v] + depth];
    const auto b = list.rects.begin() + row.begin, e = list.rects.begin() + row.end;
    // The first rectangle ending after x - slack; the one containing x, else the nearest in reach.
    auto it = std::upper_bound(b, e, x - slackPx, [](float t, const DrawRect& r) { return t < r.x1; });
    const DrawRect* best = nullptr;
    float bestDist = slackPx + 1;
    for (; it != e && it->x0 <= x + slackPx; ++it) {
      const float dist = x < it->x0 ? it->x0 - x : (x >= it->x1 ? x - it->x1 : 0.0f);
      if (dist < bestDist) {
        bestDist = dist;
        best = &*it;
      }
      if (dist == 0) break;
    }
    if (!best || bestDist > slackPx) continue;
    h.kind = (best->flags & DrawFlags::Folded) ? Hit::Kind::Folded : Hit::Kind::Event;
    h.viewLane = v;
    h.lane = vl.lane;
    h.depth = depth;
    h.index = best->first;
    h.count = best->count;
    h.rect = *best;
    return h;
  }
  return h;
}

}  // namespace shardscope::core::timeline
