// Run: the program on every rank, event by event. Each rank runs its ops in order on its compute
// thread until it waits on a collective that has not completed; a collective goes onto its
// group's stream on the rank when issued and starts there when the stream is free (and its
// dependency done); it completes on every member when the last member has started it plus its
// alpha-beta time, which frees the streams and wakes the ranks waiting on it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/estimator/simulator_program.h"

namespace shardscope::core::estimator::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
double normalFrom(std::uint64_t h) {
  const double u1 = (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;
  const double u2 = (static_cast<double>(splitmix(h) >> 11) + 0.5) / 9007199254740992.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// A draw from a distribution given by quantiles at equal probability steps (u's position between
// them, linear; the end quantiles below the first and above the last step).
double quantileFrom(const std::vector<double>& q, std::uint64_t h) {
  const double u = (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;
  const double x = u * static_cast<double>(q.size()) - 0.5;
  if (x <= 0) return q.front();
  const auto i = static_cast<std::size_t>(x);
  if (i + 1 >= q.size()) return q.back();
  const double f = x - static_cast<double>(i);
  return q[i] + f * (q[i + 1] - q[i]);
}

class Engine {
 public:
  Engine(const Program& prog, const SimulateInput& in, const std::vector<int>& keptIndex, std::vector<SimRankTrace>& kept)
      : prog_(prog), in_(in), keptIndex_(keptIndex), kept_(kept), W_(prog.layout.world), nColl_(prog.colls.size()) {
    const std::size_t nComp = prog.comps.size(), W = static_cast<std::size_t>(W_);
    rec_.world = W_;
    rec_.totalOps = static_cast<std::uint64_t>(prog.ops.size()) * static_cast<std::uint64_t>(W_);
    rec_.collStart.assign(nColl_ * W, kNaN);
    rec_.collDone.assign(nColl_ * W, kNaN);
    issueT_.assign(nColl_ * W, kNaN);
    collSpan_.assign(nColl_ * kept_.size(), -1);
    rec_.compStart.assign(nComp * W, 0.0);
    rec_.compDur.assign(nComp * W, 0.0);
    for (int k = 0; k < kGroupKinds; ++k) {
      arrivals_[k].assign(static_cast<std::size_t>(prog.layout.instances[k]) * nColl_, 0);
      maxStart_[k].assign(static_cast<std::size_t>(prog.layout.instances[k]) * nColl_, 0.0);
      lastRank_[k].assign(static_cast<std::size_t>(prog.layout.instances[k]) * nColl_, -1);
    }
    rs_.resize(W);
    for (int r = 0; r < W_; ++r) {
      auto& st = rs_[static_cast<std::size_t>(r)];
      for (int c = 0; c < kMemCats; ++c) st.mem[c] = prog.baseline[c];
      for (int c = 0; c < kMemCats; ++c) st.total += prog.baseline[c];
      st.peak = st.total;
      std::copy(std::begin(st.mem), std::end(st.mem), std::begin(st.atPeak));
      for (const auto& [sr, f] : in.slowRanks)
        if (sr == r) st.slow *= f;
      if (auto* tr = keptTrace(r)) tr->memory.push_back({0.0, 0, st.total});
    }
    for (int r = W_ - 1; r >= 0; --r) runnable_.push_back(r);
  }

  RunRecord run(const CancelToken* cancel, const ProgressFn& progress) {
    while (!runnable_.empty() || !retry_.empty()) {
      if (!retry_.empty()) {
        const auto [r, k] = retry_.back();
        retry_.pop_back();
        tryStart(r, k);
        continue;
      }
      const int r = runnable_.back();
      runnable_.pop_back();
      runRank(r, cancel, progress);
    }
    rec_.ranks.resize(static_cast<std::size_t>(W_));
    for (int r = 0; r < W_; ++r) {
      auto& st = rs_[static_cast<std::size_t>(r)];
      if (st.pc < prog_.ops.size())
        throw std::logic_error(
            "simulation stalled: rank " + std::to_string(r) + " waits on " +
            prog_.names[static_cast<std::size_t>(prog_.colls[static_cast<std::size_t>(std::max(0, st.blockedOn))].name)]);
      auto& out = rec_.ranks[static_cast<std::size_t>(r)];
      out.steps = std::move(st.steps);
      out.peak = st.peak;
      std::copy(std::begin(st.atPeak), std::end(st.atPeak), std::begin(out.atPeak));
    }
    return std::move(rec_);
  }

 private:
  // A process group's stream on one rank: its collectives in issue order, one at a time.
  struct Stream {
    std::vector<std::pair<int, double>> q;  // (collective, issue time)
    std::size_t head = 0;
    bool busy = false;
    double freeAt = 0;
  };
  struct RankState {
    std::size_t pc = 0;
    double t = 0;
    int blockedOn = -1;
    Stream streams[kGroupKinds];
    std::int64_t mem[kMemCats] = {};
    std::int64_t total = 0, peak = 0;
    std::int64_t atPeak[kMemCats] = {};
    double slow = 1.0;
    std::vector<std::pair<double, double>> steps;
    std::vector<int> annStack;
    std::vector<double> annStart;
  };

  // A kept rank's collective c: its slot in collSpan_.
  std::size_t keptSlot(int c, int r) const {
    return static_cast<std::size_t>(c) * kept_.size() + static_cast<std::size_t>(keptIndex_[static_cast<std::size_t>(r)]);
  }

  SimRankTrace* keptTrace(int r) {
    const int k = keptIndex_[static_cast<std::size_t>(r)];
    return k < 0 ? nullptr : &kept_[static_cast<std::size_t>(k)];
  }

  // The last member of group instance `inst` started collective c: it ends on every member.
  void complete(int kind, int inst, int c) {
    const CollDef& cd = prog_.colls[static_cast<std::size_t>(c)];
    const std::size_t ai = static_cast<std::size_t>(inst) * nColl_ + static_cast<std::size_t>(c);
    const double start = maxStart_[static_cast<std::size_t>(kind)][ai];
    const int last = lastRank_[static_cast<std::size_t>(kind)][ai];
    const double n = static_cast<double>(prog_.layout.size[kind]);
    const bool ar = cd.kind == CollKind::AllReduce || cd.emulated;
    // Its own size's lateness where the calibration run measured it, else its class's, else its kind's.
    const double byWait = in_.lastLatenessByWait[ar ? 0 : 1][cd.onDemand ? 1 : 0];
    const double theta = cd.lastLateness >= 0 ? cd.lastLateness
                         : byWait >= 0        ? byWait
                                              : (ar ? in_.lastLatenessAllReduce : in_.lastLatenessOther);
    prog_.layout.membersOf(kind, inst, members_);
    for (int m : members_) {
      const double end = start + cd.durS * (m == last ? 1.0 + theta * (n - 1) / n : std::max(0.0, 1.0 - theta / n));
      const std::size_t idx = rec_.at(static_cast<std::size_t>(c), m);
      rec_.collDone[idx] = end;
      auto& st = rs_[static_cast<std::size_t>(m)];
      auto& s = st.streams[kind];
      s.busy = false;
      s.freeAt = end;
      ++s.head;
      if (auto* tr = keptTrace(m)) {
        SimSpan sp;
        sp.lane = SimSpan::Lane::Comm;
        sp.commLane = prog_.laneOfKind[kind];
        sp.startS = rec_.collStart[idx];
        sp.endS = end;
        sp.name = cd.name;
        sp.kind = SimSpan::Kind::Collective;
        sp.step = cd.step;
        sp.op = cd.kind;
        sp.bytes = cd.bytes;
        sp.groupSize = prog_.layout.size[kind];
        sp.emulated = cd.emulated;
        sp.issueS = issueT_[idx];
        collSpan_[keptSlot(c, m)] = static_cast<int>(tr->spans.size());
        tr->spans.push_back(sp);
      }
      for (int k2 : prog_.kindsUsed) retry_.push_back({m, k2});
      if (st.blockedOn == c) {
        st.blockedOn = -1;
        runnable_.push_back(m);
      }
    }
  }

  // Starts the collective at the head of rank r's stream of `kind` if the stream is free and its
  // dependency done; completes it when that rank was the last member to start it.
  void tryStart(int r, int kind) {
    auto& s = rs_[static_cast<std::size_t>(r)].streams[kind];
    if (s.busy || s.head >= s.q.size()) return;
    const auto [c, issue] = s.q[s.head];
    double st = std::max(issue, s.freeAt);
    const int dep = prog_.colls[static_cast<std::size_t>(c)].dep;
    if (dep >= 0) {
      const double d = rec_.collDone[rec_.at(static_cast<std::size_t>(dep), r)];
      if (std::isnan(d)) return;  // retried when the dependency completes
      st = std::max(st, d);
    }
    s.busy = true;
    rec_.collStart[rec_.at(static_cast<std::size_t>(c), r)] = st;
    const int inst = prog_.layout.instanceOf(kind, r);
    const std::size_t ai = static_cast<std::size_t>(inst) * nColl_ + static_cast<std::size_t>(c);
    auto& cnt = arrivals_[static_cast<std::size_t>(kind)][ai];
    auto& mx = maxStart_[static_cast<std::size_t>(kind)][ai];
    if (cnt == 0 || st >= mx) lastRank_[static_cast<std::size_t>(kind)][ai] = r;
    mx = cnt == 0 ? st : std::max(mx, st);
    if (++cnt == prog_.layout.size[kind]) complete(kind, inst, c);
  }

  void memApply(int r, RankState& st, int cat, std::int64_t delta) {
    st.mem[cat] += delta;
    st.total += delta;
    if (st.total > st.peak) {
      st.peak = st.total;
      std::copy(std::begin(st.mem), std::end(st.mem), std::begin(st.atPeak));
    }
    if (auto* tr = keptTrace(r)) tr->memory.push_back({st.t, delta, st.total});
  }

  // Runs rank r's ops until it waits on a collective that has not completed, or its program ends.
  void runRank(int r, const CancelToken* cancel, const ProgressFn& progress) {
    auto& st = rs_[static_cast<std::size_t>(r)];
    SimRankTrace* tr = keptTrace(r);
    while (st.pc < prog_.ops.size()) {
      const Op& op = prog_.ops[st.pc];
      switch (op.kind) {
        case Op::Compute: {
          double f = st.slow;
          const ComputePhase phase = prog_.comps[static_cast<std::size_t>(op.a)].phase;
          const auto& quantiles = in_.jitterQuantiles[static_cast<std::size_t>(phase)];
          const double jit = in_.jitterOf(phase);
          if (!quantiles.empty() || jit > 0) {
            const std::uint64_t h = splitmix(
                in_.seed ^ splitmix(static_cast<std::uint64_t>(r) * 0x100000001b3ULL ^ static_cast<std::uint64_t>(op.a)));
            f *= std::max(0.1, 1.0 + (quantiles.empty() ? jit * normalFrom(h) : quantileFrom(quantiles, h)));
          }
          const double d = prog_.comps[static_cast<std::size_t>(op.a)].durS * f;
          const std::size_t ci = rec_.at(static_cast<std::size_t>(op.a), r);
          rec_.compStart[ci] = st.t;
          rec_.compDur[ci] = d;
          if (tr) {
            SimSpan sp;
            sp.startS = st.t;
            sp.endS = st.t + d;
            sp.name = prog_.comps[static_cast<std::size_t>(op.a)].name;
            sp.step = st.steps.empty() ? 0 : static_cast<int>(st.steps.size() - 1);
            tr->spans.push_back(sp);
          }
          st.t += d;
          break;
        }
        case Op::Issue: {
          const CollDef& cd = prog_.colls[static_cast<std::size_t>(op.a)];
          issueT_[rec_.at(static_cast<std::size_t>(op.a), r)] = st.t;
          st.streams[cd.group].q.push_back({op.a, st.t});
          tryStart(r, cd.group);
          break;
        }
        case Op::Wait: {
          const double d = rec_.collDone[rec_.at(static_cast<std::size_t>(op.a), r)];
          if (std::isnan(d)) {
            st.blockedOn = op.a;
            return;
          }
          if (d > st.t) {
            if (tr) {
              const int own = collSpan_[keptSlot(op.a, r)];
              if (own >= 0) tr->spans[static_cast<std::size_t>(own)].waitS += d - st.t;
            }
            if (tr) {
              SimSpan sp;
              sp.startS = st.t;
              sp.endS = d;
              sp.name = prog_.colls[static_cast<std::size_t>(op.a)].name;
              sp.kind = SimSpan::Kind::Wait;
              sp.step = prog_.colls[static_cast<std::size_t>(op.a)].step;
              tr->spans.push_back(sp);
            }
            st.t = d;
          }
          break;
        }
        case Op::Mem:
          memApply(r, st, op.a, op.b);
          break;
        case Op::AnnBegin:
          st.annStack.push_back(op.a);
          st.annStart.push_back(st.t);
          break;
        case Op::AnnEnd:
          if (tr && !st.annStack.empty()) {
            SimSpan sp;
            sp.startS = st.annStart.back();
            sp.endS = st.t;
            sp.name = st.annStack.back();
            sp.kind = SimSpan::Kind::Annotation;
            sp.step = static_cast<int>(st.steps.size()) - 1;
            tr->spans.push_back(sp);
          }
          if (!st.annStack.empty()) {
            st.annStack.pop_back();
            st.annStart.pop_back();
          }
          break;
        case Op::StepBegin:
          st.steps.push_back({st.t, st.t});
          break;
        case Op::StepEnd:
          st.steps.back().second = st.t;
          break;
      }
      ++st.pc;
      if (++processed_ >= nextReport_) {
        nextReport_ += 1 << 20;
        if (cancel) cancel->throwIfCancelled();
        if (progress) progress({"simulate", static_cast<std::uint64_t>(processed_), rec_.totalOps, "events"});
      }
    }
  }

  const Program& prog_;
  const SimulateInput& in_;
  const std::vector<int>& keptIndex_;
  std::vector<SimRankTrace>& kept_;
  const int W_;
  const std::size_t nColl_;
  RunRecord rec_;
  std::vector<double> issueT_;
  std::vector<int> collSpan_;  // per collective and kept rank (keptSlot): its span's index in the trace, where its wait is added
  std::vector<RankState> rs_;
  // Per group kind, per (instance, collective): members that started it, the latest start.
  std::vector<int> arrivals_[kGroupKinds];
  std::vector<double> maxStart_[kGroupKinds];
  std::vector<int> lastRank_[kGroupKinds];  // the member whose start completed the arrivals
  std::vector<int> runnable_;
  std::vector<std::pair<int, int>> retry_;  // (rank, kind)
  std::vector<int> members_;
  std::int64_t processed_ = 0, nextReport_ = 1 << 20;
};

}  // namespace

// ----------------------------------------------------------------------------------------------
// Process groups

GroupLayout groupLayout(const SimulateInput& in) {
  const EstimateInput& em = in.model;
  GroupLayout g;
  const int W = em.gpus;
  const int gpn = std::max(1, std::min(em.gpusPerNode, W));
  g.world = W;
  g.size[kWorld] = W;
  g.inter[kWorld] = W > gpn;
  int G = W;
  if (in.strategy == Strategy::Hsdp) G = fsdpShardCount(em, in.strategy);
  if (in.strategy == Strategy::ZeroPPHpz) G = effectiveShardGroup(em, in.strategy);
  g.shardGroup = G;
  g.size[kShard] = in.strategy == Strategy::Hsdp ? G : 1;
  g.inter[kShard] = G > gpn;
  g.size[kReplica] = in.strategy == Strategy::Hsdp ? W / G : 1;
  g.inter[kReplica] = W > gpn;
  g.size[kNode] = in.strategy == Strategy::ZeroPPHpz ? G : 1;
  g.inter[kNode] = G > gpn;
  g.instances[kWorld] = 1;
  g.instances[kShard] = W / std::max(1, g.size[kShard]);
  g.instances[kReplica] = std::max(1, G);
  g.instances[kNode] = W / std::max(1, g.size[kNode]);
  if (g.size[kShard] <= 1) g.instances[kShard] = 0;
  if (g.size[kReplica] <= 1) g.instances[kReplica] = 0;
  if (g.size[kNode] <= 1) g.instances[kNode] = 0;
  return g;
}

int GroupLayout::instanceOf(int kind, int r) const {
  switch (kind) {
    case kShard:
      return r / std::max(1, size[kShard]);
    case kReplica:
      return r % std::max(1, shardGroup);
    case kNode:
      return r / std::max(1, size[kNode]);
    default:
      return 0;
  }
}

void GroupLayout::membersOf(int kind, int inst, std::vector<int>& out) const {
  out.clear();
  const int n = size[kind];
  for (int i = 0; i < n; ++i) {
    switch (kind) {
      case kShard:
      case kNode:
        out.push_back(inst * n + i);
        break;
      case kReplica:
        out.push_back(i * shardGroup + inst);
        break;
      default:
        out.push_back(i);
        break;
    }
  }
}

RunRecord runProgram(const Program& prog, const SimulateInput& in, const std::vector<int>& keptIndex,
                     std::vector<SimRankTrace>& kept, const CancelToken* cancel, const ProgressFn& progress) {
  return Engine(prog, in, keptIndex, kept).run(cancel, progress);
}

}  // namespace shardscope::core::estimator::detail
