#include "core/analysis/hta_metrics.h"

#include "core/model/kernel_classify.h"
#include "core/analysis/rank_scan.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "core/util/error.h"

namespace shardscope::core {
namespace {

struct Interval {
  std::int64_t s, e;
};

// Union of [ts, ts+dur) sorted by (ts, end): a new interval starts only when ts is beyond the
// running maximum of the ends so far (touching intervals merge). A lone non-positive-length row
// keeps its non-positive length, as HTA's merge does. In place.
void mergeIntervals(std::vector<Interval>& v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.s != b.s ? a.s < b.s : a.e < b.e; });
  std::size_t w = 0;
  std::int64_t runningMax = 0;
  for (std::size_t k = 0; k < v.size(); ++k) {
    const Interval r = v[k];
    if (w == 0 || r.s > runningMax) {
      v[w++] = r;
      runningMax = r.e;
    } else {
      v[w - 1].e = std::max(v[w - 1].e, r.e);
      runningMax = std::max(runningMax, r.e);
    }
  }
  v.resize(w);
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

namespace {

// correlation -> value with unordered_map::emplace semantics (the first value stays); a flat array
// when the ids are dense, as Kineto's are.
class CorrTable {
 public:
  static constexpr std::int64_t kNone = INT64_MIN;
  // `buffer` is scratch space reused between calls.
  CorrTable(std::int64_t lo, std::int64_t hi, std::size_t rows, std::vector<std::int64_t>& buffer) : dense_(buffer) {
    if (hi >= lo && static_cast<std::uint64_t>(hi - lo) <= 4 * static_cast<std::uint64_t>(rows) + 4096) {
      lo_ = lo;
      dense_.assign(static_cast<std::size_t>(hi - lo) + 1, kNone);
    } else {
      sparse_ = true;
      dense_.clear();
    }
  }
  void emplace(std::int64_t k, std::int64_t v) {
    if (!sparse_) {
      std::int64_t& x = dense_[static_cast<std::size_t>(k - lo_)];
      if (x == kNone) x = v;
    } else {
      map_.emplace(k, v);
    }
  }
  std::int64_t find(std::int64_t k) const {
    if (!sparse_) {
      if (k < lo_ || k - lo_ >= static_cast<std::int64_t>(dense_.size())) return kNone;
      return dense_[static_cast<std::size_t>(k - lo_)];
    }
    auto it = map_.find(k);
    return it == map_.end() ? kNone : it->second;
  }

 private:
  bool sparse_ = false;
  std::int64_t lo_ = 0;
  std::vector<std::int64_t>& dense_;
  std::unordered_map<std::int64_t, std::int64_t> map_;
};

}  // namespace

struct HtaAccumulator::Row {
  std::int64_t ts = 0;   // µs, after HTA's rounding
  std::int64_t dur = 0;  // µs
  std::int64_t correlation = -1;
  std::int64_t iteration = -1;
  std::int64_t stepNumber = -1;  // >= 0 on ProfilerStep rows
  Category type = Category::Other;
  bool gpu = false;       // stream != -1 (any cat: HTA's quirk, flag HtaGpuRow)
  bool syncName = false;  // "Event Sync" / "Context Sync"
  bool cpuOpStreamZero = false;
  bool kept = false;  // survives the last-iteration drop (rule 7)
};

// Buffers reused from rank to rank (fresh memory costs page faults on every rank).
struct HtaAccumulator::Scratch {
  std::vector<std::int64_t> corrIteration, keptCorr;
  std::vector<Interval> all, comm, comp, mem;
  std::vector<std::pair<std::int64_t, int>> edges[3], merged[2];
};

namespace {

using Row = HtaAccumulator::Row;

// The figures of one rank from its rows (in track order, then event order) and what was gathered
// while they came in. Two passes over the rows: CPU side (iterations by window, the correlation maps,
// the drop), then GPU side (iterations by correlation, the drop, the unions' inputs).
HtaRankFigures rankFigures(std::vector<Row>& rows, const HtaAccumulator::RankInput& in, bool dropLast, int rankNumber,
                           HtaAccumulator::Scratch& x) {
  HtaRankFigures fig;
  fig.rank = rankNumber;

  // Iterations (rule 5). Windows from every ProfilerStep row; the latest-starting window that
  // contains ts stands in for "the last in file order" (they coincide unless windows overlap).
  using Window = HtaAccumulator::Window;
  std::vector<Window> windows = in.windows;
  std::sort(windows.begin(), windows.end(), [](const Window& a, const Window& b) { return a.s < b.s; });
  auto windowOf = [&](std::int64_t ts) -> std::int64_t {
    auto it = std::upper_bound(windows.begin(), windows.end(), ts, [](std::int64_t t, const Window& w) { return t < w.s; });
    while (it != windows.begin()) {
      --it;
      if (ts >= it->s && ts < it->e) return it->step;
    }
    return -1;
  };
  auto isGpuKernelRow = [](const Row& r) { return (r.gpu && r.correlation >= 0) || r.syncName; };
  CorrTable corrIteration(in.minCorrelation, in.maxCorrelation, rows.size(), x.corrIteration);
  // Last-iteration drop (rule 7): CPU rows starting before the last step's latest start are kept,
  // GPU kernel rows when their correlation is that of a kept CPU row.
  CorrTable keptCorr(dropLast ? in.minCorrelation : 0, dropLast ? in.maxCorrelation : -1, rows.size(), x.keptCorr);
  for (auto& r : rows) {
    if (!r.gpu || r.cpuOpStreamZero) {
      r.iteration = windowOf(r.ts);
      if (!isGpuKernelRow(r) && r.correlation >= 0) corrIteration.emplace(r.correlation, r.iteration);
    }
    if (dropLast && !isGpuKernelRow(r)) {
      r.kept = r.ts < in.lastStepStart;
      if (r.kept && r.correlation >= 0) keptCorr.emplace(r.correlation, 1);
    }
  }

  auto& all = x.all;
  auto& comm = x.comm;
  auto& comp = x.comp;
  auto& mem = x.mem;
  all.clear();
  comm.clear();
  comp.clear();
  mem.clear();
  std::unordered_set<std::int64_t> its;
  std::int64_t previous = -1;
  for (auto& r : rows) {
    if (r.gpu && !r.cpuOpStreamZero) {
      const std::int64_t it = corrIteration.find(r.correlation);
      r.iteration = it != CorrTable::kNone ? it : -1;
    }
    if (!dropLast)
      r.kept = true;
    else if (isGpuKernelRow(r))
      r.kept = r.correlation >= 0 && keptCorr.find(r.correlation) != CorrTable::kNone;
    if (!r.kept) continue;
    ++fig.rowsKept;
    if (r.iteration >= 0 && r.iteration != previous) {
      its.insert(r.iteration);
      previous = r.iteration;
    }
    // GPU rows by type.
    if (!r.gpu) continue;
    const Interval iv{r.ts, r.ts + r.dur};
    all.push_back(iv);
    if (r.type == Category::Communication) comm.push_back(iv);
    if (r.type == Category::Computation) comp.push_back(iv);
    if (r.type == Category::Memory) mem.push_back(iv);
  }
  fig.iterations.assign(its.begin(), its.end());
  std::sort(fig.iterations.begin(), fig.iterations.end());

  mergeIntervals(comm);
  mergeIntervals(comp);
  mergeIntervals(mem);
  mergeIntervals(all);
  const auto& C = comm;
  const auto& P = comp;
  const auto& M = mem;
  const auto& G = all;

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
  // Kernel-type breakdown (§5.5): sweep the type bitmask over the per-type unions. Each union's
  // edges are already in time order, so they are merged rather than sorted (at equal times the order
  // of the edges does not change the sums).
  {
    auto edgesOf = [](const std::vector<Interval>& v, int bit, std::vector<std::pair<std::int64_t, int>>& e) {
      e.clear();
      for (const auto& i : v) {
        if (i.e <= i.s) continue;
        e.push_back({i.s, bit});
        e.push_back({i.e, -bit});
      }
      if (!std::is_sorted(e.begin(), e.end())) std::sort(e.begin(), e.end());
    };
    edgesOf(P, 1, x.edges[0]);
    edgesOf(C, 2, x.edges[1]);
    edgesOf(M, 4, x.edges[2]);
    auto& pc = x.merged[0];
    auto& edges = x.merged[1];
    pc.clear();
    edges.clear();
    std::merge(x.edges[0].begin(), x.edges[0].end(), x.edges[1].begin(), x.edges[1].end(), std::back_inserter(pc));
    std::merge(pc.begin(), pc.end(), x.edges[2].begin(), x.edges[2].end(), std::back_inserter(edges));
    int mask = 0;
    std::int64_t sums[8] = {0};
    for (std::size_t k = 0; k < edges.size(); ++k) {
      if (k > 0 && mask > 0) {
        const std::int64_t dt = edges[k].first - edges[k - 1].first;
        if (dt > 0) sums[mask] += dt;
      }
      mask += edges[k].second;
    }
    for (int m = 1; m < 8; ++m)
      if (sums[m] != 0) fig.kernelTypeUs[kLabels[m]] = sums[m];
  }
  return fig;
}

}  // namespace

HtaAccumulator::HtaAccumulator(ScanContext& ctx) : ctx_(ctx), scratch_(std::make_unique<Scratch>()) {}
HtaAccumulator::~HtaAccumulator() = default;

void HtaAccumulator::beginRank(const Rank& rank) {
  rank_ = &rank;
  rows_.clear();
  input_ = RankInput();
  std::size_t events = 0;
  for (const auto& t : ctx_.summary.tracks)
    if (t.track.rankId == rank.id && t.track.kind != TrackKind::Counter) events += static_cast<std::size_t>(t.eventCount);
  rows_.reserve(events);
}

bool HtaAccumulator::beginTrack(const TrackSummary& t) { return t.track.kind != TrackKind::Counter; }

void HtaAccumulator::onEvent(const EventChunk& c, std::size_t i, Id) {
  if (c.flags[i] & EventFlags::Instant) return;  // no "dur": dropped by HTA
  StringClasses& strings = ctx_.strings;
  const std::uint8_t cat = strings.bits(c.cat[i]);
  if (cat & (StringClasses::kEmpty | StringClasses::kTrace)) return;
  Row r;
  // The file's own µs values: relative to baseTimeNanoseconds in new traces.
  const std::int64_t tsNs = c.start[i] - rank_->timeBaseNs;
  const std::int64_t durNs = c.end[i] - c.start[i];
  if (rank_->tsFloat) {
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
  r.gpu = (c.flags[i] & EventFlags::HtaGpuRow) != 0;
  r.correlation = c.correlation[i] != EventChunk::kNull ? c.correlation[i] : -1;
  r.type = static_cast<Category>(c.category[i]);
  r.syncName = (strings.bits(c.name[i]) & StringClasses::kSyncName) != 0;
  r.cpuOpStreamZero = r.gpu && (cat & StringClasses::kCpuOp);
  r.stepNumber = strings.stepNumber(c.name[i]);
  if (r.stepNumber >= 0) {
    if (stepNames_.size() < 2 && std::find(stepNames_.begin(), stepNames_.end(), r.stepNumber) == stepNames_.end())
      stepNames_.push_back(r.stepNumber);
    input_.windows.push_back({r.ts, r.ts + r.dur, r.stepNumber});
    const bool kernelRow = (r.gpu && r.correlation >= 0) || r.syncName;
    if (!kernelRow) input_.lastStepStart = std::max(input_.lastStepStart, r.ts);
  }
  if (r.correlation >= 0) {
    input_.minCorrelation = std::min(input_.minCorrelation, r.correlation);
    input_.maxCorrelation = std::max(input_.maxCorrelation, r.correlation);
  }
  rows_.push_back(r);
}

void HtaAccumulator::onEvents(const EventChunk& c, std::size_t begin, std::size_t end, Id chunkId) {
  for (std::size_t i = begin; i < end; ++i) onEvent(c, i, chunkId);
}

void HtaAccumulator::endRank(const Rank& rank) {
  // Rule 7 drops the last iteration when the run has two or more distinct step numbers; once two
  // were seen that is settled, before it both variants are kept until finish().
  RankResult res;
  res.dropped = rankFigures(rows_, input_, true, rank.rank, *scratch_);
  if (stepNames_.size() < 2) res.whole = rankFigures(rows_, input_, false, rank.rank, *scratch_);
  ranks_.push_back(std::move(res));
  rows_.clear();  // its capacity serves the next rank
  rank_ = nullptr;
}

HtaFigures HtaAccumulator::finish() {
  HtaFigures out;
  const bool dropLast = stepNames_.size() >= 2;
  std::map<std::string, std::int64_t> labelSums;
  for (auto& r : ranks_) {
    HtaRankFigures& fig = dropLast ? r.dropped : r.whole;
    for (const auto& [label, us] : fig.kernelTypeUs) labelSums[label] += us;
    out.ranks.push_back(std::move(fig));
  }
  ranks_.clear();
  std::int64_t total = 0;
  for (const auto& [label, us] : labelSums) total += us;
  for (int m = 1; m < 8; ++m) {
    auto it = labelSums.find(kLabels[m]);
    if (it == labelSums.end() || it->second == 0) continue;
    HtaKernelTypeRow row;
    row.label = kLabels[m];
    row.sumUs = it->second;
    row.pct = total ? roundHalfEven(static_cast<double>(it->second) / static_cast<double>(total) * 100.0, 1) : 0;
    out.kernelTypes.push_back(row);
  }
  std::sort(out.kernelTypes.begin(), out.kernelTypes.end(),
            [](const HtaKernelTypeRow& a, const HtaKernelTypeRow& b) { return a.sumUs > b.sumUs; });
  return out;
}

HtaFigures computeHtaFigures(TraceStore& store, RunId runId, const CancelToken* cancel) {
  ScanContext ctx(store, runId);
  HtaAccumulator hta(ctx);
  scanRun(ctx, cancel, hta);
  return hta.finish();
}

}  // namespace shardscope::core
