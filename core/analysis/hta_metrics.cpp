#include "core/analysis/hta_metrics.h"

#include "core/analysis/kernel_classify.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "core/util/error.h"

namespace shardscope::core {
namespace {

// One row of HTA's table for a rank (traces.md §5.1): only events with a duration and a category.
struct Row {
  std::int64_t ts = 0;   // µs, after HTA's rounding
  std::int64_t dur = 0;  // µs
  std::int64_t correlation = -1;
  std::int64_t iteration = -1;
  std::int64_t stepNumber = -1;  // >= 0 on ProfilerStep rows
  Category type = Category::Other;
  bool gpu = false;   // stream != -1 (any cat: HTA's quirk, flag HtaGpuRow)
  bool syncName = false;  // "Event Sync" / "Context Sync"
  bool cpuOpStreamZero = false;
};

struct Interval {
  std::int64_t s, e;
};


// Union of [ts, ts+dur) sorted by (ts, end): a new interval starts only when ts is beyond the
// running maximum of the ends so far (touching intervals merge). A lone non-positive-length row
// keeps its non-positive length, as HTA's merge does.
std::vector<Interval> mergeIntervals(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.s != b.s ? a.s < b.s : a.e < b.e; });
  std::vector<Interval> out;
  std::int64_t runningMax = 0;
  for (const auto& r : v) {
    if (out.empty() || r.s > runningMax) {
      out.push_back(r);
      runningMax = r.e;
    } else {
      out.back().e = std::max(out.back().e, r.e);
      runningMax = std::max(runningMax, r.e);
    }
  }
  return out;
}

std::int64_t totalLength(const std::vector<Interval>& v) {
  std::int64_t t = 0;
  for (const auto& i : v) t += i.e - i.s;
  return t;
}

// Time covered by both unions (each a list of disjoint intervals).
std::int64_t intersection(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::int64_t total = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const std::int64_t s = std::max(a[i].s, b[j].s);
    const std::int64_t e = std::min(a[i].e, b[j].e);
    if (e > s) total += e - s;
    if (a[i].e < b[j].e)
      ++i;
    else
      ++j;
  }
  return total;
}

const char* kLabels[8] = {"",
                          "COMPUTATION",
                          "COMMUNICATION",
                          "COMPUTATION overlapping COMMUNICATION",
                          "MEMORY",
                          "COMPUTATION overlapping MEMORY",
                          "COMMUNICATION overlapping MEMORY",
                          "COMPUTATION overlapping COMMUNICATION overlapping MEMORY"};

}  // namespace

double roundHalfEven(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::nearbyint(x * scale) / scale;
}

HtaFigures computeHtaFigures(TraceStore& store, Id runId, const CancelToken* cancel) {
  HtaFigures out;
  const RunSummary summary = store.summary(runId);
  // Global step names decide whether the last iteration is dropped (rule 7: >= 2 distinct names).
  std::vector<std::vector<Row>> perRank(summary.ranks.size());
  std::unordered_set<std::int64_t> stepNames;
  for (std::size_t ri = 0; ri < summary.ranks.size(); ++ri) {
    const Rank& rank = summary.ranks[ri];
    std::vector<Row>& rows = perRank[ri];
    for (const auto& ts : summary.tracks) {
      if (ts.track.rankId != rank.id || ts.track.kind == TrackKind::Counter) continue;
      store.forEachEvent(ts.track.id, [&](const Event& e) {
        if (e.flags & EventFlags::Instant) return;  // no "dur": dropped by HTA
        if (e.cat.empty() || e.cat == "Trace") return;
        Row r;
        // The file's own µs values: relative to baseTimeNanoseconds in new traces.
        const std::int64_t tsNs = e.startNs - rank.timeBaseNs;
        const std::int64_t durNs = e.endNs - e.startNs;
        if (rank.tsFloat) {
          // round_down_time_stamps: end = floor(ts + dur), ts' = ceil(ts), in doubles as pandas does.
          const double tsD = static_cast<double>(tsNs) / 1000.0;
          const double durD = static_cast<double>(durNs) / 1000.0;
          const double end = std::floor(tsD + durD);
          r.ts = static_cast<std::int64_t>(std::ceil(tsD));
          r.dur = static_cast<std::int64_t>(end) - r.ts;
        } else {
          r.ts = tsNs / 1000;
          r.dur = durNs / 1000;
        }
        r.gpu = (e.flags & EventFlags::HtaGpuRow) != 0;
        r.correlation = e.correlation.value_or(-1);
        r.type = e.category;
        r.syncName = e.name == "Event Sync" || e.name == "Context Sync";
        r.cpuOpStreamZero = r.gpu && e.cat == "cpu_op";
        if (auto n = profilerStepNumber(e.name)) {
          r.stepNumber = *n;
          stepNames.insert(*n);
        }
        rows.push_back(r);
      }, /*withArgs=*/false);
      if (cancel) cancel->throwIfCancelled();
    }
  }

  const bool dropLast = stepNames.size() >= 2;
  std::int64_t labelSums[8] = {0};

  for (std::size_t ri = 0; ri < summary.ranks.size(); ++ri) {
    std::vector<Row>& rows = perRank[ri];
    HtaRankFigures fig;
    fig.rank = summary.ranks[ri].rank;

    // Iterations (rule 5). Windows from every ProfilerStep row; the latest-starting window that
    // contains ts stands in for "the last in file order" (they coincide unless windows overlap).
    std::vector<std::pair<Interval, std::int64_t>> windows;
    for (const auto& r : rows)
      if (r.stepNumber >= 0) windows.push_back({{r.ts, r.ts + r.dur}, r.stepNumber});
    std::sort(windows.begin(), windows.end(), [](const auto& a, const auto& b) { return a.first.s < b.first.s; });
    auto windowOf = [&](std::int64_t ts) -> std::int64_t {
      auto it = std::upper_bound(windows.begin(), windows.end(), ts, [](std::int64_t t, const auto& w) { return t < w.first.s; });
      while (it != windows.begin()) {
        --it;
        if (ts >= it->first.s && ts < it->first.e) return it->second;
      }
      return -1;
    };
    auto isGpuKernelRow = [](const Row& r) { return (r.gpu && r.correlation >= 0) || r.syncName; };
    std::unordered_map<std::int64_t, std::int64_t> corrIteration;
    for (auto& r : rows) {
      if (!r.gpu || r.cpuOpStreamZero) {
        r.iteration = windowOf(r.ts);
        if (!isGpuKernelRow(r) && r.correlation >= 0) corrIteration.emplace(r.correlation, r.iteration);
      }
    }
    for (auto& r : rows) {
      if (r.gpu && !r.cpuOpStreamZero) {
        auto it = corrIteration.find(r.correlation);
        r.iteration = it != corrIteration.end() ? it->second : -1;
      }
    }

    // Last-iteration drop (rule 7).
    std::vector<const Row*> kept;
    if (dropLast) {
      std::int64_t tLast = INT64_MIN;
      for (const auto& r : rows)
        if (r.stepNumber >= 0 && !isGpuKernelRow(r)) tLast = std::max(tLast, r.ts);
      std::unordered_set<std::int64_t> keptCorr;
      for (const auto& r : rows)
        if (!isGpuKernelRow(r) && r.ts < tLast) {
          kept.push_back(&r);
          if (r.correlation >= 0) keptCorr.insert(r.correlation);
        }
      for (const auto& r : rows)
        if (isGpuKernelRow(r) && r.correlation >= 0 && keptCorr.count(r.correlation)) kept.push_back(&r);
    } else {
      for (const auto& r : rows) kept.push_back(&r);
    }
    fig.rowsKept = static_cast<std::int64_t>(kept.size());
    {
      std::unordered_set<std::int64_t> its;
      for (const Row* r : kept)
        if (r->iteration >= 0) its.insert(r->iteration);
      fig.iterations.assign(its.begin(), its.end());
      std::sort(fig.iterations.begin(), fig.iterations.end());
    }

    // GPU rows by type.
    std::vector<Interval> all, comm, comp, mem;
    for (const Row* r : kept) {
      if (!r->gpu) continue;
      const Interval iv{r->ts, r->ts + r->dur};
      all.push_back(iv);
      if (r->type == Category::Communication) comm.push_back(iv);
      if (r->type == Category::Computation) comp.push_back(iv);
      if (r->type == Category::Memory) mem.push_back(iv);
    }
    const auto C = mergeIntervals(comm);
    const auto P = mergeIntervals(comp);
    const auto M = mergeIntervals(mem);
    const auto G = mergeIntervals(all);

    // Overlap (§5.3).
    if (!C.empty()) {
      const std::int64_t c = totalLength(C);
      if (c != 0) fig.overlapPct = roundHalfEven(100.0 * (static_cast<double>(intersection(C, P)) / static_cast<double>(c)), 2);
    }
    // Temporal breakdown (§5.4).
    if (!G.empty()) {
      std::int64_t lastEnd = G.front().e;
      for (const auto& g : G) lastEnd = std::max(lastEnd, g.e);
      fig.kernelTimeUs = lastEnd - G.front().s;
      fig.idleUs = fig.kernelTimeUs - totalLength(G);
      fig.computeUs = totalLength(P);
      fig.nonComputeUs = fig.kernelTimeUs - fig.computeUs - fig.idleUs;
      if (fig.kernelTimeUs != 0) {
        const double k = static_cast<double>(fig.kernelTimeUs);
        fig.idlePct = roundHalfEven(100.0 * (static_cast<double>(fig.idleUs) / k), 2);
        fig.computePct = roundHalfEven(100.0 * (static_cast<double>(fig.computeUs) / k), 2);
        fig.nonComputePct = roundHalfEven(100.0 * (static_cast<double>(fig.nonComputeUs) / k), 2);
      }
    }
    // Kernel-type breakdown (§5.5): sweep the type bitmask over the per-type unions.
    {
      std::vector<std::pair<std::int64_t, int>> edges;  // (time, +bit / -bit)
      auto add = [&](const std::vector<Interval>& v, int bit) {
        for (const auto& i : v) {
          if (i.e <= i.s) continue;
          edges.push_back({i.s, bit});
          edges.push_back({i.e, -bit});
        }
      };
      add(P, 1);
      add(C, 2);
      add(M, 4);
      std::sort(edges.begin(), edges.end());
      int mask = 0;
      for (std::size_t k = 0; k < edges.size(); ++k) {
        if (k > 0 && mask > 0) {
          const std::int64_t dt = edges[k].first - edges[k - 1].first;
          if (dt > 0) {
            fig.kernelTypeUs[kLabels[mask]] += dt;
            labelSums[mask] += dt;
          }
        }
        mask += edges[k].second;
      }
    }
    out.ranks.push_back(std::move(fig));
    rows.clear();
    rows.shrink_to_fit();
  }

  std::int64_t total = 0;
  for (int m = 1; m < 8; ++m) total += labelSums[m];
  for (int m = 1; m < 8; ++m) {
    if (labelSums[m] == 0) continue;
    HtaKernelTypeRow row;
    row.label = kLabels[m];
    row.sumUs = labelSums[m];
    row.pct = total ? roundHalfEven(static_cast<double>(labelSums[m]) / static_cast<double>(total) * 100.0, 1) : 0;
    out.kernelTypes.push_back(row);
  }
  std::sort(out.kernelTypes.begin(), out.kernelTypes.end(),
            [](const HtaKernelTypeRow& a, const HtaKernelTypeRow& b) { return a.sumUs > b.sumUs; });
  return out;
}

}  // namespace shardscope::core
