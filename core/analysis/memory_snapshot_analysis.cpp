#include "core/analysis/memory_snapshot_analysis.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/storage/memsnap_store.h"
#include "core/util/json.h"

namespace shardscope::core {
namespace {

bool isPython(const MemFrame& f) { return f.file.size() > 3 && f.file.compare(f.file.size() - 3, 3, ".py") == 0; }

// Library code: the interpreter's own and installed packages (torch, transformers, ...).
bool isLibrary(const MemFrame& f) {
  for (const char* dir : {"site-packages/", "dist-packages/", "/lib/python3", "<frozen"})
    if (f.file.find(dir) != std::string::npos) return true;
  return false;
}

std::string frameText(const MemFrame& f) { return f.file + ":" + std::to_string(f.line) + ":" + f.name; }

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// Sizes come from the file: sums wrap instead of overflowing (a hostile file gets nonsense, no UB).
std::int64_t add(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t sub(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}

}  // namespace

std::string snapshotOwnerFrame(const MemorySnapshot& s, StackId stack) {
  if (stack < 0 || static_cast<std::size_t>(stack) >= s.stacks.size()) return "";
  const MemFrame* firstPython = nullptr;
  for (std::int32_t fi : s.stacks[static_cast<std::size_t>(stack)]) {
    if (fi < 0 || static_cast<std::size_t>(fi) >= s.frames.size()) continue;
    const MemFrame& f = s.frames[static_cast<std::size_t>(fi)];
    if (!isPython(f)) continue;
    if (!isLibrary(f)) return frameText(f);
    if (!firstPython) firstPython = &f;
  }
  return firstPython ? frameText(*firstPython) : "";
}

namespace {

std::string siteFrame(const MemorySnapshot& s, StackId stack) {
  if (stack < 0 || static_cast<std::size_t>(stack) >= s.stacks.size()) return "";
  for (std::int32_t fi : s.stacks[static_cast<std::size_t>(stack)])
    if (fi >= 0 && static_cast<std::size_t>(fi) < s.frames.size() && isPython(s.frames[static_cast<std::size_t>(fi)]))
      return frameText(s.frames[static_cast<std::size_t>(fi)]);
  return "";
}

}  // namespace

std::string snapshotCategory(const MemorySnapshot& s, StackId stack, const std::vector<std::string>& open) {
  bool optimizer = false, comm = false, grads = false, params = false, forward = false, backward = false;
  for (const std::string& a : open) {
    if (contains(a, "Optimizer.step") || contains(a, "optimizer")) optimizer = true;
    if (contains(a, "post_backward_reduce") || contains(a, "all_gather") || contains(a, "reduce_scatter") ||
        contains(a, "all_reduce"))
      comm = true;
    if (contains(a, "post_backward_accumulate")) grads = true;
    if (contains(a, "forward")) forward = true;
    if (contains(a, "backward")) backward = true;
  }
  if (stack >= 0 && static_cast<std::size_t>(stack) < s.stacks.size()) {
    for (std::int32_t fi : s.stacks[static_cast<std::size_t>(stack)]) {
      if (fi < 0 || static_cast<std::size_t>(fi) >= s.frames.size()) continue;
      const MemFrame& f = s.frames[static_cast<std::size_t>(fi)];
      if (contains(f.file, "torch/optim/") || contains(f.name, "zero_grad")) optimizer = true;
      if (contains(f.file, "_fsdp_collectives.py") || contains(f.name, "all_gather") || contains(f.name, "reduce_scatter") ||
          contains(f.name, "all_reduce") || contains(f.name, "c10d::") || contains(f.name, "ProcessGroupNCCL") ||
          contains(f.file, "torch/distributed/distributed_c10d.py"))
        comm = true;
      if (contains(f.name, "AccumulateGrad") || contains(f.name, "accumulate_grad") || contains(f.name, "_make_grads"))
        grads = true;
      if (contains(f.file, "_fsdp_param.py") || contains(f.file, "torch/nn/init.py") || contains(f.name, "reset_parameters") ||
          (contains(f.file, "torch/nn/modules/module.py") && f.name == "_apply"))
        params = true;
      if ((isPython(f) && f.name == "forward") || contains(f.file, "torch/nn/functional.py")) forward = true;
      if (contains(f.name, "torch::autograd::Engine") || contains(f.name, "run_backward") || f.name == "backward")
        backward = true;
    }
  }
  if (optimizer) return "optimizer_state";
  if (comm) return "comm_buffers";
  if (grads) return "gradients";
  if (params) return "parameters";
  if (forward || backward) return "activations";
  return "unknown";
}

SnapshotTimeline buildSnapshotTimeline(const MemorySnapshot& s, int device) {
  SnapshotTimeline t;
  t.device = device;
  std::vector<const MemTraceEvent*> events;
  for (const auto& e : s.events)
    if (e.device == device) events.push_back(&e);
  const TimeNs firstNs = events.empty() ? 0 : events.front()->tsNs;
  const TimeNs lastNs = events.empty() ? 0 : events.back()->tsNs;

  // Allocations: prior blocks freed in the trace (a free_completed with no alloc before it), blocks
  // alive at the dump and never allocated in the trace (MemorySnapshot::prior), then the trace's own.
  std::vector<SnapshotAllocation> prior, traced;
  std::vector<std::pair<bool, std::size_t>> actionAlloc;  // per active-curve action: (prior?, index)
  std::vector<const MemTraceEvent*> actionEvent;
  std::unordered_map<std::uint64_t, std::size_t> open;
  for (const MemTraceEvent* e : events) {
    if (e->action == MemAction::Alloc) {
      open[e->addr] = traced.size();
      traced.push_back({e->addr, e->size, e->stack, e->seq, -1, e->tsNs, lastNs});
      actionAlloc.emplace_back(false, traced.size() - 1);
      actionEvent.push_back(e);
    } else if (e->action == MemAction::FreeCompleted) {
      if (auto it = open.find(e->addr); it != open.end()) {
        traced[it->second].freeSeq = e->seq;
        traced[it->second].freeNs = e->tsNs;
        actionAlloc.emplace_back(false, it->second);
        open.erase(it);
      } else {
        prior.push_back({e->addr, e->size, e->stack, -1, e->seq, firstNs, e->tsNs});
        actionAlloc.emplace_back(true, prior.size() - 1);
      }
      actionEvent.push_back(e);
    }
  }
  for (const MemPriorBlock& p : s.prior)
    if (p.device == device && !p.fromFree) prior.push_back({p.addr, p.size, p.stack, -1, -1, firstNs, lastNs});

  for (const auto& p : prior) t.priorActiveBytes = add(t.priorActiveBytes, p.size);
  std::int64_t level = t.priorActiveBytes;
  t.active.push_back({-1, firstNs, level});
  for (std::size_t i = 0; i < actionAlloc.size(); ++i) {
    const auto [isPrior, idx] = actionAlloc[i];
    const MemTraceEvent* e = actionEvent[i];
    const std::int64_t size = isPrior ? prior[idx].size : traced[idx].size;
    level = e->action == MemAction::Alloc ? add(level, size) : sub(level, size);
    t.active.push_back({e->seq, e->tsNs, level});
  }

  // Reserved: the segments at the dump minus the net of the trace's segment events, then their running sum.
  std::int64_t atDump = 0, net = 0;
  for (const auto& g : s.segments)
    if (g.device == device) atDump = add(atDump, g.totalSize);
  for (const MemTraceEvent* e : events) {
    if (e->action == MemAction::SegmentAlloc || e->action == MemAction::SegmentMap) net = add(net, e->size);
    if (e->action == MemAction::SegmentFree || e->action == MemAction::SegmentUnmap) net = sub(net, e->size);
  }
  t.priorReservedBytes = sub(atDump, net);
  std::int64_t reserved = t.priorReservedBytes;
  t.reserved.push_back({-1, firstNs, reserved});
  for (const MemTraceEvent* e : events) {
    if (e->action == MemAction::SegmentAlloc || e->action == MemAction::SegmentMap)
      reserved = add(reserved, e->size);
    else if (e->action == MemAction::SegmentFree || e->action == MemAction::SegmentUnmap)
      reserved = sub(reserved, e->size);
    else
      continue;
    t.reserved.push_back({e->seq, e->tsNs, reserved});
  }

  t.allocations = std::move(prior);
  t.allocations.insert(t.allocations.end(), traced.begin(), traced.end());
  return t;
}

std::vector<SnapshotCurvePoint> curveLevelOfDetail(const std::vector<SnapshotCurvePoint>& curve, TimeNs t0, TimeNs t1,
                                                   int buckets) {
  std::vector<SnapshotCurvePoint> out;
  if (buckets <= 0 || t1 <= t0) return out;
  const double width = static_cast<double>(t1 - t0) / buckets;
  int current = -1;
  for (const auto& p : curve) {
    if (p.tsNs < t0 || p.tsNs >= t1) continue;
    const int b = std::min(buckets - 1, static_cast<int>(static_cast<double>(p.tsNs - t0) / width));
    if (b != current) {
      out.push_back(p);
      current = b;
    } else if (p.bytes > out.back().bytes) {
      out.back() = p;
    }
  }
  return out;
}

SnapshotFigures snapshotFigures(const MemorySnapshot& s, const SnapshotTimeline& t, int topN) {
  SnapshotFigures f;
  f.device = t.device;
  for (const auto& e : s.events)
    if (e.device == t.device) ++f.events;
  f.priorActiveBytes = t.priorActiveBytes;
  // memory_viz's maximum is taken after each action; only a trace without actions shows its start.
  const SnapshotCurvePoint* peak = t.active.size() > 1 ? nullptr : &t.active.front();
  for (std::size_t i = 1; i < t.active.size(); ++i)
    if (!peak || t.active[i].bytes > peak->bytes) peak = &t.active[i];
  f.peakActiveBytes = peak->bytes;
  f.peakActiveNs = peak->tsNs;
  f.peakActiveSeq = peak->seq;
  const SnapshotCurvePoint* rpeak = &t.reserved.front();
  for (const auto& p : t.reserved) {
    if (p.bytes > rpeak->bytes) rpeak = &p;
    if (p.seq <= f.peakActiveSeq) f.reservedAtPeakBytes = p.bytes;
  }
  f.peakReservedBytes = rpeak->bytes;
  f.peakReservedNs = rpeak->tsNs;
  f.fragmentationBytes = sub(f.reservedAtPeakBytes, f.peakActiveBytes);

  // Alive at the peak, in order of allocation time, with the annotations open when each was made.
  std::vector<const SnapshotAllocation*> alive;
  for (const auto& a : t.allocations)
    if (a.allocSeq <= f.peakActiveSeq && (a.freeSeq < 0 || a.freeSeq > f.peakActiveSeq)) alive.push_back(&a);
  f.allocationsAtPeak = static_cast<std::int64_t>(alive.size());
  std::stable_sort(alive.begin(), alive.end(), [](const auto* x, const auto* y) { return x->allocSeq < y->allocSeq; });
  std::vector<const MemAnnotation*> ann;
  for (const auto& a : s.annotations)
    if (a.device == t.device) ann.push_back(&a);
  std::stable_sort(ann.begin(), ann.end(), [](const auto* x, const auto* y) { return x->tsNs < y->tsNs; });
  std::vector<std::string> openNow;
  std::size_t ai = 0;
  std::map<std::pair<StackId, bool>, SnapshotStackGroup> groups;
  std::map<std::string, std::int64_t> cats;
  for (const SnapshotAllocation* a : alive) {
    const bool isPrior = a->allocSeq < 0;
    if (!isPrior) {
      for (; ai < ann.size() && ann[ai]->tsNs <= a->allocNs; ++ai) {
        if (ann[ai]->start) {
          openNow.push_back(ann[ai]->name);
        } else if (auto it = std::find(openNow.rbegin(), openNow.rend(), ann[ai]->name); it != openNow.rend()) {
          openNow.erase(std::next(it).base());
        }
      }
    }
    auto [it, fresh] = groups.try_emplace({a->stack, isPrior});
    SnapshotStackGroup& g = it->second;
    if (fresh) {
      g.stack = a->stack;
      g.prior = isPrior;
      g.owner = snapshotOwnerFrame(s, a->stack);
      g.site = siteFrame(s, a->stack);
      // A block from before recording is not in the annotations' time; only its stack (if any) speaks.
      g.category = snapshotCategory(s, a->stack, isPrior ? std::vector<std::string>{} : openNow);
      if (g.owner.empty()) g.owner = isPrior ? "<allocated before recording started>" : "<no Python frame>";
    }
    g.bytes = add(g.bytes, a->size);
    ++g.count;
    cats[g.category] = add(cats[g.category], a->size);
  }
  std::vector<SnapshotStackGroup> all;
  all.reserve(groups.size());
  for (auto& [k, g] : groups) all.push_back(std::move(g));
  std::stable_sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.bytes > y.bytes; });
  if (all.size() > static_cast<std::size_t>(std::max(topN, 0))) all.resize(static_cast<std::size_t>(std::max(topN, 0)));
  f.topAtPeak = std::move(all);
  for (const char* c : {"parameters", "gradients", "optimizer_state", "activations", "comm_buffers", "unknown"})
    if (auto it = cats.find(c); it != cats.end()) f.categories.emplace_back(c, it->second);
  return f;
}

std::vector<SnapshotFigures> computeSnapshotFigures(TraceStore& store, RunId runId, int topN) {
  std::vector<SnapshotFigures> out;
  for (const Rank& r : memorySnapshotRanks(store, runId)) {
    const auto snap = loadMemorySnapshot(store, r.id);
    if (!snap) continue;
    for (int device : snap->devices()) {
      SnapshotFigures f = snapshotFigures(*snap, buildSnapshotTimeline(*snap, device), topN);
      f.rank = r.rank;
      out.push_back(std::move(f));
    }
  }
  return out;
}

JsonValue SnapshotFigures::toJson() const {
  JsonValue o = JsonValue::object();
  o.set("rank", JsonValue::number(static_cast<std::int64_t>(rank)));
  o.set("device", JsonValue::number(static_cast<std::int64_t>(device)));
  o.set("events", JsonValue::number(events));
  o.set("peak_active_bytes", JsonValue::number(peakActiveBytes));
  o.set("peak_active_ns", JsonValue::number(peakActiveNs));
  o.set("peak_active_seq", JsonValue::number(peakActiveSeq));
  o.set("peak_reserved_bytes", JsonValue::number(peakReservedBytes));
  o.set("peak_reserved_ns", JsonValue::number(peakReservedNs));
  o.set("reserved_at_peak_bytes", JsonValue::number(reservedAtPeakBytes));
  o.set("fragmentation_bytes", JsonValue::number(fragmentationBytes));
  o.set("prior_active_bytes", JsonValue::number(priorActiveBytes));
  o.set("allocations_at_peak", JsonValue::number(allocationsAtPeak));
  JsonValue cj = JsonValue::object();
  for (const auto& [c, b] : categories) cj.set(c, JsonValue::number(b));
  o.set("categories", std::move(cj));
  JsonValue top = JsonValue::array();
  for (const auto& g : topAtPeak) {
    JsonValue gj = JsonValue::object();
    gj.set("bytes", JsonValue::number(g.bytes));
    gj.set("count", JsonValue::number(g.count));
    gj.set("owner", JsonValue::string(g.owner));
    gj.set("site", JsonValue::string(g.site));
    gj.set("category", JsonValue::string(g.category));
    gj.set("prior", JsonValue::boolean(g.prior));
    top.push(std::move(gj));
  }
  o.set("top_at_peak", std::move(top));
  return o;
}

SnapshotComparison compareSnapshots(const SnapshotFigures& a, const SnapshotFigures& b, int topN) {
  SnapshotComparison c;
  c.a = a;
  c.b = b;
  c.peakActiveDelta = sub(b.peakActiveBytes, a.peakActiveBytes);
  c.peakReservedDelta = sub(b.peakReservedBytes, a.peakReservedBytes);
  c.fragmentationDelta = sub(b.fragmentationBytes, a.fragmentationBytes);
  std::map<std::string, SnapshotStackDelta> by;
  auto key = [](const SnapshotStackGroup& g) { return g.owner + "\n" + g.site; };
  for (const auto& g : a.topAtPeak) {
    auto& d = by[key(g)];
    d.owner = g.owner, d.site = g.site, d.category = g.category;
    d.bytesA = add(d.bytesA, g.bytes);
  }
  for (const auto& g : b.topAtPeak) {
    auto& d = by[key(g)];
    d.owner = g.owner, d.site = g.site, d.category = g.category;
    d.bytesB = add(d.bytesB, g.bytes);
  }
  for (auto& [k, d] : by)
    if (d.bytesB > d.bytesA) c.grew.push_back(d);
  std::stable_sort(c.grew.begin(), c.grew.end(),
                   [](const auto& x, const auto& y) { return sub(x.bytesB, x.bytesA) > sub(y.bytesB, y.bytesA); });
  if (c.grew.size() > static_cast<std::size_t>(std::max(topN, 0))) c.grew.resize(static_cast<std::size_t>(std::max(topN, 0)));
  return c;
}

JsonValue SnapshotComparison::toJson() const {
  JsonValue o = JsonValue::object();
  o.set("peak_active_bytes_a", JsonValue::number(a.peakActiveBytes));
  o.set("peak_active_bytes_b", JsonValue::number(b.peakActiveBytes));
  o.set("peak_active_delta", JsonValue::number(peakActiveDelta));
  o.set("peak_reserved_bytes_a", JsonValue::number(a.peakReservedBytes));
  o.set("peak_reserved_bytes_b", JsonValue::number(b.peakReservedBytes));
  o.set("peak_reserved_delta", JsonValue::number(peakReservedDelta));
  o.set("fragmentation_bytes_a", JsonValue::number(a.fragmentationBytes));
  o.set("fragmentation_bytes_b", JsonValue::number(b.fragmentationBytes));
  o.set("fragmentation_delta", JsonValue::number(fragmentationDelta));
  JsonValue g = JsonValue::array();
  for (const auto& d : grew) {
    JsonValue dj = JsonValue::object();
    dj.set("owner", JsonValue::string(d.owner));
    dj.set("site", JsonValue::string(d.site));
    dj.set("category", JsonValue::string(d.category));
    dj.set("bytes_a", JsonValue::number(d.bytesA));
    dj.set("bytes_b", JsonValue::number(d.bytesB));
    g.push(std::move(dj));
  }
  o.set("grew", std::move(g));
  return o;
}

}  // namespace shardscope::core
