#include "core/estimator/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>

#include "core/estimator/recommend.h"

namespace shardscope::core::estimator {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::int64_t roundUp(std::int64_t n, std::int64_t m) { return m <= 1 ? n : (n + m - 1) / m * m; }
std::int64_t headDimOf(const ModelShape& m) { return m.headDim > 0 ? m.headDim : m.hidden / std::max(1, m.heads); }

std::string blockName(int b, int layers) {
  if (b == 0) return "embed_tokens";
  if (b == layers + 1) return "lm_head";
  return "layers." + std::to_string(b - 1);
}

// Process-group kinds: every rank is in one group of each kind it uses.
enum GroupKind : int { kWorld = 0, kShard = 1, kReplica = 2, kNode = 3, kGroupKinds = 4 };

struct CompDef {
  int name = 0;
  double durS = 0;
  ComputePhase phase = ComputePhase::Other;
};
struct CollDef {
  int name = 0;
  CollKind kind = CollKind::AllReduce;
  int group = kWorld;
  std::int64_t bytes = 0;
  bool emulated = false;
  int dep = -1;  // a collective (same rank) that must have completed before this one starts
  double durS = 0;
  int step = 0;
};
struct Op {
  enum Kind : std::uint8_t { Compute, Issue, Wait, Mem, AnnBegin, AnnEnd, StepBegin, StepEnd } kind;
  int a = 0;
  std::int64_t b = 0;
};

// Builds the per-rank program (identical on every rank) by replaying a strategy's rules.
class Program {
 public:
  std::vector<std::string> names;
  std::vector<CompDef> comps;
  std::vector<CollDef> colls;
  std::vector<Op> ops;
  std::vector<int> groupSize = std::vector<int>(kGroupKinds, 1);
  std::vector<bool> groupInter = std::vector<bool>(kGroupKinds, false);
  std::int64_t baseline[kMemCats] = {};
  int step = 0;
  const SimulateInput* in = nullptr;

  int name(const std::string& s) {
    auto it = nameIdx_.find(s);
    if (it != nameIdx_.end()) return it->second;
    names.push_back(s);
    return nameIdx_[s] = static_cast<int>(names.size() - 1);
  }
  void compute(const std::string& n, double durS) {
    if (!(durS > 0)) return;
    comps.push_back({name(n), durS, computePhaseOf(n)});
    ops.push_back({Op::Compute, static_cast<int>(comps.size() - 1), 0});
  }
  int issue(const std::string& n, CollKind k, int group, std::int64_t bytes, int dep = -1) {
    CollDef c;
    c.name = name(n);
    c.kind = k;
    c.group = group;
    c.bytes = bytes;
    c.emulated = k == CollKind::ReduceScatter && in->comm.emulatedReduceScatter;
    c.dep = dep;
    c.step = step;
    c.durS = instanceTime(c);
    colls.push_back(c);
    const int idx = static_cast<int>(colls.size() - 1);
    ops.push_back({Op::Issue, idx, 0});
    return idx;
  }
  void wait(int coll) { ops.push_back({Op::Wait, coll, 0}); }
  void mem(MemCat c, std::int64_t delta) {
    if (delta != 0) ops.push_back({Op::Mem, static_cast<int>(c), delta});
  }
  void begin(const std::string& n) { ops.push_back({Op::AnnBegin, name(n), 0}); }
  void end() { ops.push_back({Op::AnnEnd, 0, 0}); }

  double instanceTime(const CollDef& c) const {
    const int n = groupSize[static_cast<std::size_t>(c.group)];
    if (n <= 1) return 0;
    const LinkModel& intra = in->intraNode;
    const LinkModel& inter = in->interNode;
    const LinkModel& l = groupInter[static_cast<std::size_t>(c.group)] && inter.busBwGBps < intra.busBwGBps ? inter : intra;
    const bool ar = c.kind == CollKind::AllReduce || c.emulated;
    const double bw = (ar ? l.arBw() : l.busBwGBps) * 1e9;
    const double wire = static_cast<double>(c.bytes) * ringFactor(ar ? CollKind::AllReduce : c.kind, n);
    return (ar ? l.arAlphaUs() : l.alphaUs) * 1e-6 + (bw > 0 ? wire / bw : 0.0);
  }

 private:
  std::map<std::string, int> nameIdx_;
};

struct Shape {
  int L = 0;
  std::vector<ModuleShape> modules;
  std::vector<std::int64_t> blockNumel;  // L+2
  std::int64_t P = 0;
  std::int64_t w = 4, g = 4;
  // activations kept per block after its forward (without checkpointing: everything the block
  // saves; with: the block input), and one block's full set (recomputed in backward)
  std::vector<std::int64_t> actKept;
  std::int64_t actFullLayer = 0;
  std::int64_t actFlowing = 0;  // checkpointing: gradients flowing through a block in its backward
};

Shape shapeOf(const EstimateInput& in) {
  Shape s;
  s.L = in.model.layers;
  s.modules = moduleShapes(in.model);
  s.blockNumel.assign(static_cast<std::size_t>(s.L + 2), 0);
  for (const auto& m : s.modules) s.blockNumel[static_cast<std::size_t>(m.block)] += m.numel();
  s.P = parameterCount(in.model);
  const bool fp32 = in.precision == Precision::Fp32;
  s.w = s.g = fp32 ? 4 : 2;
  EstimateInput a = in, b = in;
  a.activationCheckpointing = b.activationCheckpointing = false;
  b.model.layers = a.model.layers + 1;
  const std::int64_t full = activationBytes(b) - activationBytes(a);
  const std::int64_t head = activationBytes(a) - s.L * full;
  s.actFullLayer = full;
  s.actKept.assign(static_cast<std::size_t>(s.L + 2), 0);
  std::int64_t kept = full;
  if (in.activationCheckpointing) {
    a.activationCheckpointing = b.activationCheckpointing = true;
    const auto ma = activationMoments(a), mb = activationMoments(b);
    kept = mb.headBackward - ma.headBackward;
    s.actFlowing = ma.blockBackward - s.L * kept - full;
  }
  for (int l = 1; l <= s.L; ++l) s.actKept[static_cast<std::size_t>(l)] = kept;
  s.actKept[static_cast<std::size_t>(s.L + 1)] = head;
  return s;
}

double moduleShare(const Shape& sh, const ModuleShape& m) {
  const auto bn = sh.blockNumel[static_cast<std::size_t>(m.block)];
  return bn > 0 ? static_cast<double>(m.numel()) / static_cast<double>(bn) : 0.0;
}

// ----------------------------------------------------------------------------------------------
// Strategy programs (one micro-batch per step; the runtime's engines, profiler/runtime/engine.cpp)

struct Builder {
  Builder(Program& prog, const SimulateInput& input, const Shape& shape, const ComputeProfile& profile)
      : p(prog), in(input), sh(shape), cp(profile) {}
  Program& p;
  const SimulateInput& in;
  const Shape& sh;
  const ComputeProfile& cp;
  bool ckpt() const { return in.model.activationCheckpointing; }
  double fwd(int b) const { return cp.forwardS[static_cast<std::size_t>(b)]; }
  double bwd(int b) const {
    const bool layer = b >= 1 && b <= sh.L;
    return cp.backwardS[static_cast<std::size_t>(b)] + (ckpt() && layer ? fwd(b) : 0.0);
  }
  std::string bn(int b) const { return blockName(b, sh.L); }
  void actIn(int b) { p.mem(MemCat::Activations, sh.actKept[static_cast<std::size_t>(b)]); }
  void actOut(int b) { p.mem(MemCat::Activations, -sh.actKept[static_cast<std::size_t>(b)]); }
  // With checkpointing, a layer's backward first recomputes its forward: its full activations, and
  // the gradients flowing through it, live during that block's backward.
  void recomputeIn(int b) {
    if (ckpt() && b >= 1 && b <= sh.L) p.mem(MemCat::Activations, sh.actFullLayer + sh.actFlowing);
  }
  void recomputeOut(int b) {
    if (ckpt() && b >= 1 && b <= sh.L) p.mem(MemCat::Activations, -sh.actFullLayer - sh.actFlowing);
  }
  void optimizer(std::int64_t elements) { p.compute("optimizer step", cp.optimizerSPerElement * static_cast<double>(elements)); }

  // DDP, ZeRO-1, ZeRO-2 --------------------------------------------------------------------------
  void replicated(Strategy s) {
    const std::int64_t W = in.model.gpus, P = sh.P, g = sh.g, w = sh.w;
    const std::int64_t Pp = roundUp(P, W), part = Pp / W;
    // Parameters in layout order with their block (the runtime's flat order).
    std::vector<std::pair<std::int64_t, int>> params;
    for (const auto& m : sh.modules)
      for (auto n : m.params) params.push_back({n, m.block});
    p.begin("forward");
    for (int b = 0; b <= sh.L + 1; ++b) {
      p.compute("forward " + bn(b), fwd(b));
      actIn(b);
    }
    p.end();
    p.begin("backward");
    std::vector<int> handles;
    if (s == Strategy::Ddp) {
      // Buckets in reverse parameter order; the first one small (first_bucket_bytes).
      struct Bucket {
        std::int64_t elems = 0;
        int readyBlock = 0;
      };
      std::vector<Bucket> buckets;
      std::int64_t cap = static_cast<std::int64_t>(1.0 * 1024 * 1024) / g, fill = 0;
      for (auto it = params.rbegin(); it != params.rend(); ++it) {
        if (buckets.empty() || (fill > 0 && fill + it->first > cap)) {
          if (!buckets.empty()) cap = static_cast<std::int64_t>(in.model.bucketCapMb * 1024 * 1024) / g;
          buckets.push_back({});
          fill = 0;
        }
        buckets.back().elems += it->first;
        buckets.back().readyBlock = it->second;
        fill += it->first;
      }
      std::size_t next = 0;
      for (int b = sh.L + 1; b >= 0; --b) {
        recomputeIn(b);
        p.compute("backward " + bn(b), bwd(b));
        recomputeOut(b);
        actOut(b);
        if (!in.model.gradientAsBucketView) p.mem(MemCat::Gradients, g * sh.blockNumel[static_cast<std::size_t>(b)]);
        while (next < buckets.size() && buckets[next].readyBlock >= b) {
          handles.push_back(
              p.issue("all_reduce grad bucket " + std::to_string(next), CollKind::AllReduce, kWorld, g * buckets[next].elems));
          ++next;
        }
      }
      for (int h : handles) p.wait(h);
      p.end();
      p.begin("optimizer");
      optimizer(P);
      if (!in.model.gradientAsBucketView) p.mem(MemCat::Gradients, -g * P);  // param.grad copies dropped
      p.end();
      return;
    }
    if (s == Strategy::Zero1) {
      for (int b = sh.L + 1; b >= 0; --b) {
        recomputeIn(b);
        p.compute("backward " + bn(b), bwd(b));
        recomputeOut(b);
        actOut(b);
      }
      const std::int64_t chunk = std::max<std::int64_t>(1, std::min(in.model.reduceBucketSize, Pp));
      for (std::int64_t lo = 0, k = 0; lo < Pp; lo += chunk, ++k)
        handles.push_back(
            p.issue("all_reduce grad bucket " + std::to_string(k), CollKind::AllReduce, kWorld, g * std::min(chunk, Pp - lo)));
      for (int h : handles) p.wait(h);
    } else {
      // ZeRO-2: gradients copied into the IPG bucket as they arrive, all-reduced when it is full
      // (overlap_comm: two buckets alternate, the other one must be reduced before reuse).
      const bool overlap = in.model.overlapComm.value_or(false);
      const std::int64_t cap = std::max<std::int64_t>(1, std::min(in.model.reduceBucketSize, P));
      std::int64_t fill = 0;
      int cur = 0, seq = 0;
      std::vector<std::pair<int, int>> ipgFlights;  // (collective, bucket index)
      auto drain = [&](std::size_t keep) {
        while (ipgFlights.size() > keep) {
          p.wait(ipgFlights.front().first);
          ipgFlights.erase(ipgFlights.begin());
        }
      };
      auto flush = [&] {
        if (fill == 0) return;
        ipgFlights.push_back(
            {p.issue("all_reduce grad bucket " + std::to_string(seq++), CollKind::AllReduce, kWorld, g * fill), cur});
        fill = 0;
        if (!overlap) {
          drain(0);
          return;
        }
        cur = (cur + 1) % 2;
        for (const auto& f : ipgFlights)
          if (f.second == cur) {
            drain(0);
            break;
          }
      };
      std::vector<std::vector<std::int64_t>> byBlock(static_cast<std::size_t>(sh.L + 2));
      for (const auto& [n, b] : params) byBlock[static_cast<std::size_t>(b)].push_back(n);
      for (int b = sh.L + 1; b >= 0; --b) {
        recomputeIn(b);
        p.compute("backward " + bn(b), bwd(b));
        recomputeOut(b);
        actOut(b);
        const auto& ps = byBlock[static_cast<std::size_t>(b)];
        for (auto it = ps.rbegin(); it != ps.rend(); ++it) {
          if (fill + *it > cap) flush();
          if (*it > cap) {
            ipgFlights.push_back({p.issue("all_reduce grad bucket (large parameter)", CollKind::AllReduce, kWorld, g * *it), -1});
            if (!overlap) drain(0);
            continue;
          }
          fill += *it;
        }
      }
      flush();
      drain(0);
    }
    p.end();
    p.begin("optimizer");
    optimizer(part);
    // All-gather of the updated partitions, allgather_bucket_size elements per rank at a time.
    const std::int64_t chunk = std::max<std::int64_t>(1, std::min(in.model.allgatherBucketSize, part));
    for (std::int64_t c0 = 0, k = 0; c0 < part; c0 += chunk, ++k) {
      const std::int64_t len = std::min(chunk, part - c0);
      const std::int64_t buf = w * len * W;  // the backend's staging; the output is the parameters
      p.mem(MemCat::CommBuffers, buf);
      p.wait(p.issue("all_gather param gather " + std::to_string(k), CollKind::AllGather, kWorld, w * len * W));
      p.mem(MemCat::CommBuffers, -buf);
    }
    p.end();
  }

  // ZeRO-3 and ZeRO++ hpZ --------------------------------------------------------------------------
  struct Group {
    std::string name;
    std::int64_t numel = 0, padded = 0;
    bool persistent = false;
    enum class State { Released, InFlight, Available } state = State::Released;
    int ag = -1;
  };
  std::vector<Group> groups;
  std::vector<int> moduleGroup, persistentGroup;
  std::vector<int> trace;
  bool traceComplete = false;
  std::size_t tracePos = 0;
  std::int64_t available = 0;
  std::vector<int> flights;  // reductions in flight, in issue order
  std::int64_t ipgCap = 1, ipgFill = 0;
  int ipgCur = 0, bucketSeq = 0;
  int gatherGroupKind = kWorld;  // where backward all-gathers go (hpZ: the node group)

  void zero3Setup(std::int64_t S) {
    moduleGroup.assign(sh.modules.size(), -1);
    persistentGroup.assign(sh.modules.size(), -1);
    for (std::size_t m = 0; m < sh.modules.size(); ++m) {
      std::int64_t big = 0, small = 0;
      for (auto n : sh.modules[m].params) (n < in.model.paramPersistenceThreshold ? small : big) += n;
      if (big > 0) {
        moduleGroup[m] = static_cast<int>(groups.size());
        groups.push_back({sh.modules[m].name, big, roundUp(big, S), false});
      }
      if (small > 0) {
        persistentGroup[m] = static_cast<int>(groups.size());
        groups.push_back({sh.modules[m].name + " (persistent)", small, roundUp(small, S), true, Group::State::Available});
      }
    }
    std::int64_t cap = 0;
    for (const auto& g : groups) cap += g.padded;
    ipgCap = roundUp(std::max<std::int64_t>(1, std::min(in.model.reduceBucketSize, cap)), S);
  }

  // A fetch unit (a ZeRO-3 module's parameters, an FSDP unit) is gathered on the group of `kind`;
  // with `limit` (FSDP's rate limiter) at most two gathers are in flight: issuing a third first
  // waits for the oldest.
  void gatherUnit(int gi, int kind, bool limit) {
    auto& g = groups[static_cast<std::size_t>(gi)];
    if (g.state != Group::State::Released) return;
    if (limit)
      for (std::size_t k = 0; k < groups.size() && inFlight() >= 2; ++k)
        if (groups[k].state == Group::State::InFlight) waitUnit(static_cast<int>(k));
    p.mem(MemCat::Parameters, sh.w * g.padded);
    g.ag = p.issue("all_gather param " + g.name, CollKind::AllGather, kind, sh.w * g.padded);
    g.state = Group::State::InFlight;
    available += g.padded;
  }
  void waitUnit(int gi) {
    auto& g = groups[static_cast<std::size_t>(gi)];
    if (g.state != Group::State::InFlight) return;
    p.wait(g.ag);
    g.state = Group::State::Available;
  }
  void ensureUnit(int gi, int kind, bool limit) {
    gatherUnit(gi, kind, limit);
    waitUnit(gi);
  }
  void releaseUnit(int gi) {
    auto& g = groups[static_cast<std::size_t>(gi)];
    if (g.persistent || g.state == Group::State::Released) return;
    waitUnit(gi);
    p.mem(MemCat::Parameters, -sh.w * g.padded);
    g.state = Group::State::Released;
    available -= g.padded;
  }
  int inFlight() const {
    int n = 0;
    for (const auto& g : groups) n += g.state == Group::State::InFlight;
    return n;
  }
  // ZeRO-3: backward gathers (and forward prefetches of modules used in backward) go to hpZ's node
  // group; everything else to the world.
  int zero3Kind(bool backward) const { return backward ? gatherGroupKind : kWorld; }
  void traceFetch(int m, bool backward) {
    if (!traceComplete) {
      trace.push_back(m);
      return;
    }
    const std::size_t here = tracePos++;
    const std::int64_t budget = std::min(in.model.maxLiveParameters - available, in.model.prefetchBucketSize);
    std::int64_t ahead = 0;
    int launched = 0;
    for (std::size_t j = here + 1; j < trace.size() && ahead < budget && launched < 2; ++j) {
      const int gi = moduleGroup[static_cast<std::size_t>(trace[j])];
      if (gi < 0) continue;
      auto& g = groups[static_cast<std::size_t>(gi)];
      if (g.state == Group::State::InFlight) ahead += g.padded;
      if (g.state != Group::State::Released) continue;
      // A prefetch issued in forward for a module used in backward goes where backward gathers go.
      gatherUnit(gi, zero3Kind(backward || j >= trace.size() / 2), false);
      ahead += g.padded;
      ++launched;
    }
  }
  bool shouldReleaseAfterForward(int m) const {
    const int gi = moduleGroup[static_cast<std::size_t>(m)];
    if (gi < 0) return false;
    if (available > in.model.maxLiveParameters) return true;
    if (!traceComplete || tracePos == 0) return true;
    std::int64_t dist = 0;
    for (std::size_t j = tracePos; j < trace.size(); ++j) {
      if (trace[j] == m) return dist > in.model.maxReuseDistance;
      const int g2 = moduleGroup[static_cast<std::size_t>(trace[j])];
      if (g2 >= 0) dist += groups[static_cast<std::size_t>(g2)].numel;
    }
    return true;
  }
  void progressFlights(std::size_t keep) {
    while (flights.size() > keep) {
      p.wait(flights.front());
      flights.erase(flights.begin());
    }
  }
  void flushIpg(std::int64_t S, bool overlap) {
    if (ipgFill == 0) return;
    const std::int64_t section = ipgCap / S;
    const bool whole = ipgFill == section;
    flights.push_back(p.issue("reduce_scatter grad bucket " + std::to_string(bucketSeq++), CollKind::ReduceScatter, kWorld,
                              sh.g * ipgFill * S));
    ipgFill = 0;
    if (!overlap || !whole) {
      if (!overlap) progressFlights(0);
      return;
    }
    ipgCur = (ipgCur + 1) % 2;
    progressFlights(1);
  }
  void ipgAdd(int gi, std::int64_t S, bool overlap) {
    const auto& g = groups[static_cast<std::size_t>(gi)];
    const std::int64_t chunk = g.padded / S, section = ipgCap / S;
    if (chunk > section) {
      flushIpg(S, overlap);
      flights.push_back(
          p.issue("reduce_scatter grad bucket " + std::to_string(bucketSeq++), CollKind::ReduceScatter, kWorld, sh.g * g.padded));
      if (!overlap) progressFlights(0);
      return;
    }
    if (ipgFill + chunk > section) flushIpg(S, overlap);
    ipgFill += chunk;
  }

  void zero3Step(Strategy s) {
    const std::int64_t S = in.model.gpus;
    const bool overlap = in.model.overlapComm.value_or(true);
    gatherGroupKind = s == Strategy::ZeroPPHpz ? kNode : kWorld;
    tracePos = 0;
    // Modules per block, forward order.
    std::vector<std::vector<int>> byBlock(static_cast<std::size_t>(sh.L + 2));
    for (std::size_t m = 0; m < sh.modules.size(); ++m)
      byBlock[static_cast<std::size_t>(sh.modules[m].block)].push_back(static_cast<int>(m));
    p.begin("forward");
    for (int b = 0; b <= sh.L + 1; ++b) {
      const auto& mods = byBlock[static_cast<std::size_t>(b)];
      double shareLeft = 1.0;
      for (int m : mods) {
        const int gi = moduleGroup[static_cast<std::size_t>(m)];
        if (gi >= 0) {
          traceFetch(m, false);
          ensureUnit(gi, kWorld, false);
        }
        const double share = moduleShare(sh, sh.modules[static_cast<std::size_t>(m)]);
        shareLeft -= share;
        p.compute("forward " + bn(b), fwd(b) * share);
        if (gi >= 0 && shouldReleaseAfterForward(m)) releaseUnit(gi);
      }
      if (mods.empty()) p.compute("forward " + bn(b), fwd(b));
      actIn(b);
    }
    p.end();
    p.begin("backward");
    for (int b = sh.L + 1; b >= 0; --b) {
      const auto& mods = byBlock[static_cast<std::size_t>(b)];
      if (ckpt() && b >= 1 && b <= sh.L) {
        // Reentrant checkpoint: the block's forward runs again first (modules gathered, no trace).
        recomputeIn(b);
        for (int m : mods) {
          const int gi = moduleGroup[static_cast<std::size_t>(m)];
          if (gi >= 0) ensureUnit(gi, zero3Kind(true), false);
          p.compute("recompute " + bn(b), fwd(b) * moduleShare(sh, sh.modules[static_cast<std::size_t>(m)]));
        }
      }
      for (auto it = mods.rbegin(); it != mods.rend(); ++it) {
        const int m = *it;
        const auto& mod = sh.modules[static_cast<std::size_t>(m)];
        const int gi = moduleGroup[static_cast<std::size_t>(m)];
        if (gi >= 0) {
          traceFetch(m, true);
          ensureUnit(gi, zero3Kind(true), false);
        }
        p.compute("backward " + mod.name, cp.backwardS[static_cast<std::size_t>(b)] * moduleShare(sh, mod));
        for (int x : {gi, persistentGroup[static_cast<std::size_t>(m)]}) {
          if (x < 0) continue;
          ipgAdd(x, S, overlap);
          releaseUnit(x);
        }
      }
      if (mods.empty()) p.compute("backward " + bn(b), cp.backwardS[static_cast<std::size_t>(b)]);
      recomputeOut(b);
      actOut(b);
    }
    flushIpg(S, overlap);
    progressFlights(0);
    for (std::size_t k = 0; k < groups.size(); ++k) releaseUnit(static_cast<int>(k));
    traceComplete = true;
    p.end();
    p.begin("optimizer");
    std::int64_t elems = 0;
    for (const auto& g : groups) elems += g.padded / S;
    optimizer(elems);
    for (const auto& g : groups) {
      if (!g.persistent) continue;
      p.mem(MemCat::CommBuffers, sh.w * g.padded);
      p.wait(p.issue("all_gather param " + g.name, CollKind::AllGather, kWorld, sh.w * g.padded));
      p.mem(MemCat::CommBuffers, -sh.w * g.padded);
    }
    p.end();
  }

  // FSDP full shard, shard-grad-op, HSDP ------------------------------------------------------------
  void fsdpSetup(std::int64_t N) {
    for (int b = 0; b <= sh.L + 1; ++b)
      groups.push_back(
          {bn(b), sh.blockNumel[static_cast<std::size_t>(b)], roundUp(sh.blockNumel[static_cast<std::size_t>(b)], N), false});
  }
  void fsdpStep(Strategy s) {
    const bool full = s != Strategy::FsdpGradOp;
    const bool hsdp = s == Strategy::Hsdp && p.groupSize[kReplica] > 1;
    const int shardKind = s == Strategy::Hsdp ? kShard : kWorld;
    const std::int64_t N = p.groupSize[static_cast<std::size_t>(shardKind)];
    const int last = sh.L + 1;
    const bool lim = in.limitAllGathers;
    p.begin("forward");
    for (int b = 0; b <= last; ++b) {
      ensureUnit(b, shardKind, lim);
      if (in.forwardPrefetch && b + 1 <= last) gatherUnit(b + 1, shardKind, lim);
      p.compute("forward " + bn(b), fwd(b));
      if (full && b != last) releaseUnit(b);
      actIn(b);
    }
    p.end();
    p.begin("backward");
    for (int b = last; b >= 0; --b) {
      ensureUnit(b, shardKind, lim);
      if (in.backwardPrefetch == BackwardPrefetch::Pre && b > 0) gatherUnit(b - 1, shardKind, lim);
      recomputeIn(b);
      p.compute("backward " + bn(b), bwd(b));
      recomputeOut(b);
      actOut(b);
      if (in.backwardPrefetch == BackwardPrefetch::Post && b > 0) gatherUnit(b - 1, shardKind, lim);
      const auto& g = groups[static_cast<std::size_t>(b)];
      p.mem(MemCat::CommBuffers, sh.g * g.padded / N);
      const int rs = p.issue("reduce_scatter grad " + g.name, CollKind::ReduceScatter, shardKind, sh.g * g.padded);
      flights.push_back(rs);
      if (hsdp)
        flights.push_back(p.issue("all_reduce grad replicas " + g.name, CollKind::AllReduce, kReplica, sh.g * g.padded / N, rs));
      if (full) releaseUnit(b);
    }
    progressFlights(0);
    std::int64_t rsBuf = 0;
    for (const auto& g : groups) rsBuf += sh.g * g.padded / N;
    p.mem(MemCat::CommBuffers, -rsBuf);
    for (std::size_t k = 0; k < groups.size(); ++k) releaseUnit(static_cast<int>(k));
    p.end();
    p.begin("optimizer");
    std::int64_t elems = 0;
    for (const auto& g : groups) elems += g.padded / N;
    optimizer(elems);
    p.end();
  }
};

// ----------------------------------------------------------------------------------------------
// The event-driven run

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

struct Interval {
  double a, b;
};

// Length of the union of sorted-by-start intervals clipped to [lo, hi), and the part of it also
// covered by the union of `other` (sorted, non-overlapping).
void unionAndOverlap(std::vector<Interval>& iv, const std::vector<Interval>& other, double lo, double hi, double& uni,
                     double& covered) {
  std::sort(iv.begin(), iv.end(), [](const Interval& x, const Interval& y) { return x.a < y.a; });
  std::vector<Interval> merged;
  for (auto v : iv) {
    v.a = std::max(v.a, lo);
    v.b = std::min(v.b, hi);
    if (v.b <= v.a) continue;
    if (!merged.empty() && v.a <= merged.back().b)
      merged.back().b = std::max(merged.back().b, v.b);
    else
      merged.push_back(v);
  }
  uni = 0;
  covered = 0;
  std::size_t j = 0;
  for (const auto& m : merged) {
    uni += m.b - m.a;
    while (j < other.size() && other[j].b <= m.a) ++j;
    for (std::size_t k = j; k < other.size() && other[k].a < m.b; ++k)
      covered += std::max(0.0, std::min(m.b, other[k].b) - std::max(m.a, other[k].a));
  }
}

}  // namespace

const char* memCatKey(MemCat c) {
  switch (c) {
    case MemCat::Parameters:
      return "parameters";
    case MemCat::Gradients:
      return "gradients";
    case MemCat::Optimizer:
      return "optimizer_state";
    case MemCat::Activations:
      return "activations";
    case MemCat::CommBuffers:
      return "comm_buffers";
    case MemCat::Other:
      return "other";
  }
  return "other";
}

const char* computePhaseName(ComputePhase p) {
  switch (p) {
    case ComputePhase::Forward:
      return "forward";
    case ComputePhase::Backward:
      return "backward";
    case ComputePhase::Other:
      return "other";
  }
  return "other";
}

ComputePhase computePhaseOf(const std::string& n) {
  if (n.rfind("forward ", 0) == 0 || n.rfind("recompute ", 0) == 0) return ComputePhase::Forward;
  if (n.rfind("backward ", 0) == 0) return ComputePhase::Backward;
  return ComputePhase::Other;
}

std::vector<double> blockTrainFlops(const EstimateInput& in) {
  const ModelShape& m = in.model;
  const double T = static_cast<double>(in.microBatch * in.seqLen);
  const double d = static_cast<double>(headDimOf(m));
  std::vector<double> out(static_cast<std::size_t>(m.layers + 2), 0.0);
  for (const auto& mod : moduleShapes(m)) {
    if (mod.block == 0) continue;  // a row gather, no FLOPs
    out[static_cast<std::size_t>(mod.block)] += 6.0 * static_cast<double>(mod.numel()) * T;
  }
  if (m.tiedEmbeddings) out[static_cast<std::size_t>(m.layers + 1)] += 6.0 * static_cast<double>(m.vocab * m.hidden) * T;
  for (int l = 1; l <= m.layers; ++l)
    out[static_cast<std::size_t>(l)] += 6.0 * m.heads * (2.0 * d) * static_cast<double>(in.seqLen) * T;
  return out;
}

ComputeProfile flopsComputeProfile(const EstimateInput& in, double tflops, double efficiency, double memBwGBps) {
  if (!(tflops > 0) || !(efficiency > 0 && efficiency <= 1) || !(memBwGBps > 0))
    throw std::invalid_argument("device TFLOPS and memory bandwidth must be positive and the efficiency in (0, 1]");
  ComputeProfile p;
  const auto flops = blockTrainFlops(in);
  const double rate = tflops * 1e12 * efficiency, bw = memBwGBps * 1e9 * efficiency;
  const double a = in.precision == Precision::Fp32 ? 4 : 2;
  const double T = static_cast<double>(in.microBatch * in.seqLen);
  p.forwardS.resize(flops.size());
  p.backwardS.resize(flops.size());
  for (std::size_t b = 0; b < flops.size(); ++b) {
    p.forwardS[b] = flops[b] / 3.0 / rate;
    p.backwardS[b] = 2.0 * flops[b] / 3.0 / rate;
  }
  // Embedding: gather T rows of h (read + write) forward, scatter-add the gradient backward.
  p.forwardS[0] = 2.0 * T * static_cast<double>(in.model.hidden) * a / bw;
  p.backwardS[0] = 2.0 * p.forwardS[0];
  // AdamW over fp32 state: parameter, gradient and two moments read, parameter and moments written
  // (+ the 16-bit copy with mixed precision).
  p.optimizerSPerElement = (in.precision == Precision::Fp32 ? 28.0 : 34.0) / bw;
  char buf[160];
  std::snprintf(buf, sizeof buf, "flops: %.0f TFLOPS x %.2f, memory %.0f GB/s", tflops, efficiency, memBwGBps);
  p.source = buf;
  return p;
}

ComputeProfile scaleComputeProfile(const ComputeProfile& p, const EstimateInput& measured, const EstimateInput& target) {
  const std::size_t nm = static_cast<std::size_t>(measured.model.layers + 2);
  if (p.forwardS.size() != nm || p.backwardS.size() != nm)
    throw std::invalid_argument("compute profile has " + std::to_string(p.forwardS.size()) + " blocks, the measured model " +
                                std::to_string(nm));
  const auto& a = measured.model;
  const auto& b = target.model;
  const bool same = a.vocab == b.vocab && a.hidden == b.hidden && a.layers == b.layers && a.heads == b.heads &&
                    a.kvHeads == b.kvHeads && headDimOf(a) == headDimOf(b) && a.ffn == b.ffn && a.qkNorm == b.qkNorm &&
                    a.qkvBias == b.qkvBias && a.tiedEmbeddings == b.tiedEmbeddings && measured.microBatch == target.microBatch &&
                    measured.seqLen == target.seqLen && measured.precision == target.precision;
  if (same) return p;
  ComputeProfile out;
  out.source = p.source + ", scaled by FLOPs";
  out.optimizerSPerElement = p.optimizerSPerElement;
  out.stepOverheadS = p.stepOverheadS;
  const auto fm = blockTrainFlops(measured), ft = blockTrainFlops(target);
  const int Lm = a.layers, Lt = b.layers;
  double fLayers = 0, tfLayers = 0, tbLayers = 0;
  for (int l = 1; l <= Lm; ++l) {
    fLayers += fm[static_cast<std::size_t>(l)];
    tfLayers += p.forwardS[static_cast<std::size_t>(l)];
    tbLayers += p.backwardS[static_cast<std::size_t>(l)];
  }
  out.forwardS.assign(static_cast<std::size_t>(Lt + 2), 0.0);
  out.backwardS.assign(static_cast<std::size_t>(Lt + 2), 0.0);
  for (int l = 1; l <= Lt; ++l) {
    const double f = ft[static_cast<std::size_t>(l)];
    out.forwardS[static_cast<std::size_t>(l)] = fLayers > 0 ? tfLayers * f / fLayers : 0.0;
    out.backwardS[static_cast<std::size_t>(l)] = fLayers > 0 ? tbLayers * f / fLayers : 0.0;
  }
  const double fh = fm[nm - 1], th = ft[static_cast<std::size_t>(Lt + 1)];
  out.forwardS[static_cast<std::size_t>(Lt + 1)] = fh > 0 ? p.forwardS[nm - 1] * th / fh : 0.0;
  out.backwardS[static_cast<std::size_t>(Lt + 1)] = fh > 0 ? p.backwardS[nm - 1] * th / fh : 0.0;
  const double em = static_cast<double>(measured.microBatch * measured.seqLen * a.hidden);
  const double et = static_cast<double>(target.microBatch * target.seqLen * b.hidden);
  out.forwardS[0] = p.forwardS[0] * et / em;
  out.backwardS[0] = p.backwardS[0] * et / em;
  return out;
}

SimulationResult simulate(const SimulateInput& inRef, const CancelToken* cancel, const ProgressFn& progress) {
  const auto wall0 = std::chrono::steady_clock::now();
  SimulationResult res;
  res.input = inRef;
  SimulateInput& in = res.input;
  const EstimateInput& em = in.model;
  if (in.steps < 1) throw std::invalid_argument("simulate at least one step");
  if (!(in.jitter >= 0 && in.jitter < 1)) throw std::invalid_argument("jitter must be in [0, 1)");
  for (double j : in.phaseJitter)
    if (!(j < 1)) throw std::invalid_argument("jitter per phase must be below 1");
  if (em.offloadOptimizer || em.offloadParam)
    throw std::invalid_argument("the simulator does not model CPU offload (host transfers, CPU Adam); `estimate` does");
  const MemoryEstimate memEst = estimateMemory(em, in.strategy);  // validates the input
  if (in.compute.forwardS.empty()) in.compute = flopsComputeProfile(em, 989, 0.4, 3350);
  const Shape sh = shapeOf(em);
  if (in.compute.forwardS.size() != static_cast<std::size_t>(sh.L + 2) ||
      in.compute.backwardS.size() != in.compute.forwardS.size())
    throw std::invalid_argument("the compute profile does not match the model's " + std::to_string(sh.L) + " layers");
  if (!(in.intraNode.busBwGBps > 0)) throw std::invalid_argument("the link needs a positive bandwidth");
  if (!(in.interNode.busBwGBps > 0)) in.interNode = in.intraNode;
  for (const auto& [r, f] : in.slowRanks)
    if (r < 0 || r >= em.gpus || !(f > 0))
      throw std::invalid_argument("slow rank " + std::to_string(r) + " is not a rank of " + std::to_string(em.gpus) +
                                  " with a positive factor");

  const int W = em.gpus;
  const int gpn = std::max(1, std::min(em.gpusPerNode, W));
  Program prog;
  prog.in = &in;
  prog.groupSize[kWorld] = W;
  prog.groupInter[kWorld] = W > gpn;
  int G = W;
  if (in.strategy == Strategy::Hsdp) G = fsdpShardCount(em, in.strategy);
  if (in.strategy == Strategy::ZeroPPHpz) G = effectiveShardGroup(em, in.strategy);
  prog.groupSize[kShard] = in.strategy == Strategy::Hsdp ? G : 1;
  prog.groupInter[kShard] = G > gpn;
  prog.groupSize[kReplica] = in.strategy == Strategy::Hsdp ? W / G : 1;
  prog.groupInter[kReplica] = W > gpn;
  prog.groupSize[kNode] = in.strategy == Strategy::ZeroPPHpz ? G : 1;
  prog.groupInter[kNode] = G > gpn;

  Builder bld(prog, in, sh, in.compute);
  if (in.strategy == Strategy::Zero3 || in.strategy == Strategy::ZeroPPHpz) bld.zero3Setup(W);
  if (in.strategy == Strategy::FsdpFull || in.strategy == Strategy::FsdpGradOp || in.strategy == Strategy::Hsdp)
    bld.fsdpSetup(prog.groupSize[in.strategy == Strategy::Hsdp ? kShard : kWorld]);
  for (int s = 0; s < in.steps; ++s) {
    if (cancel) cancel->throwIfCancelled();
    prog.step = s;
    prog.ops.push_back({Op::StepBegin, s, 0});
    prog.begin("ProfilerStep#" + std::to_string(s));
    switch (in.strategy) {
      case Strategy::Ddp:
      case Strategy::Zero1:
      case Strategy::Zero2:
        bld.replicated(in.strategy);
        break;
      case Strategy::Zero3:
      case Strategy::ZeroPPHpz:
        bld.zero3Step(in.strategy);
        break;
      case Strategy::FsdpFull:
      case Strategy::FsdpGradOp:
      case Strategy::Hsdp:
        bld.fsdpStep(in.strategy);
        break;
    }
    prog.compute("host overhead (measured, unattributed)", in.compute.stepOverheadS);
    prog.end();
    prog.ops.push_back({Op::StepEnd, s, 0});
  }
  // What every rank holds for the whole run (the estimator's model states; DDP's param.grad copies
  // and ZeRO-3's gathered modules come and go in the program).
  std::int64_t base[kMemCats] = {};
  base[static_cast<int>(MemCat::Parameters)] = memEst.state.parameters;
  base[static_cast<int>(MemCat::Gradients)] =
      memEst.state.gradients - (in.strategy == Strategy::Ddp && !em.gradientAsBucketView ? sh.g * sh.P : 0);
  base[static_cast<int>(MemCat::Optimizer)] = memEst.state.optimizer;
  base[static_cast<int>(MemCat::CommBuffers)] = memEst.state.buffers;

  // Group instances: for each kind, instance of rank r and its members.
  auto instanceOf = [&](int kind, int r) {
    switch (kind) {
      case kShard:
        return r / std::max(1, prog.groupSize[kShard]);
      case kReplica:
        return r % std::max(1, G);
      case kNode:
        return r / std::max(1, prog.groupSize[kNode]);
      default:
        return 0;
    }
  };
  auto membersOf = [&](int kind, int inst, std::vector<int>& out) {
    out.clear();
    const int n = prog.groupSize[static_cast<std::size_t>(kind)];
    for (int i = 0; i < n; ++i) {
      switch (kind) {
        case kShard:
        case kNode:
          out.push_back(inst * n + i);
          break;
        case kReplica:
          out.push_back(i * G + inst);
          break;
        default:
          out.push_back(i);
          break;
      }
    }
  };
  int instances[kGroupKinds] = {1, W / std::max(1, prog.groupSize[kShard]), std::max(1, G),
                                W / std::max(1, prog.groupSize[kNode])};
  if (prog.groupSize[kShard] <= 1) instances[kShard] = 0;
  if (prog.groupSize[kReplica] <= 1) instances[kReplica] = 0;
  if (prog.groupSize[kNode] <= 1) instances[kNode] = 0;

  // Process groups of the run (names as the runtime's: world, shard<k>, replica<i>) and lanes.
  std::vector<int> kindsUsed;
  for (const auto& c : prog.colls)
    if (std::find(kindsUsed.begin(), kindsUsed.end(), c.group) == kindsUsed.end()) kindsUsed.push_back(c.group);
  std::sort(kindsUsed.begin(), kindsUsed.end());
  static const char* kindNames[] = {"world", "shard", "replica", "node"};
  for (int k : kindsUsed) res.laneGroupKind.push_back(kindNames[k]);
  for (int k : kindsUsed) {
    for (int i = 0; i < std::max(1, instances[k]); ++i) {
      SimProcessGroup pg;
      pg.name = k == kWorld ? std::string("world") : std::string(kindNames[k]) + std::to_string(i);
      membersOf(k, i, pg.ranks);
      pg.size = static_cast<int>(pg.ranks.size());
      res.groups.push_back(std::move(pg));
    }
  }
  std::vector<int> laneOfKind(kGroupKinds, -1);
  for (std::size_t i = 0; i < kindsUsed.size(); ++i) laneOfKind[static_cast<std::size_t>(kindsUsed[i])] = static_cast<int>(i);

  // Ranks kept in the result: the first keepRanks, and the slow ones.
  const int keep = in.keepRanks <= 0 ? W : std::min(W, in.keepRanks);
  std::vector<int> keptIndex(static_cast<std::size_t>(W), -1);
  for (int r = 0; r < keep; ++r) keptIndex[static_cast<std::size_t>(r)] = 0;
  for (const auto& [r, f] : in.slowRanks) keptIndex[static_cast<std::size_t>(r)] = 0;
  for (int r = 0; r < W; ++r)
    if (keptIndex[static_cast<std::size_t>(r)] == 0) {
      keptIndex[static_cast<std::size_t>(r)] = static_cast<int>(res.ranks.size());
      res.ranks.push_back({});
      res.ranks.back().rank = r;
    }

  const std::size_t nColl = prog.colls.size(), nComp = prog.comps.size();
  if (cancel) cancel->throwIfCancelled();
  {
    // Start, end and issue time of every collective on every rank, start and length of every
    // compute op: refuse what would not fit a desktop's memory rather than thrash or be killed.
    const double need = (24.0 * static_cast<double>(nColl) + 16.0 * static_cast<double>(nComp)) * static_cast<double>(W);
    const double limit = 4.0 * 1024 * 1024 * 1024;
    if (need > limit) {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "simulating %d steps on %d devices needs %.1f GiB of event state (%zu collectives and %zu compute ops per "
                    "rank); simulate fewer steps (2 give the steady state)",
                    in.steps, W, need / (1024.0 * 1024 * 1024), nColl, nComp);
      throw std::invalid_argument(buf);
    }
  }
  struct Stream {
    std::vector<std::pair<int, double>> q;  // (collective, issue time)
    std::size_t head = 0;
    bool busy = false;
    double freeAt = 0;
  };
  struct RankSt {
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
  std::vector<RankSt> rs(static_cast<std::size_t>(W));
  std::vector<double> start(nColl * static_cast<std::size_t>(W), kNaN), done(nColl * static_cast<std::size_t>(W), kNaN),
      issueT(nColl * static_cast<std::size_t>(W), kNaN);
  std::vector<double> compStart(nComp * static_cast<std::size_t>(W), 0.0), compDur(nComp * static_cast<std::size_t>(W), 0.0);
  // Arrivals per (kind, instance, collective).
  std::vector<std::vector<int>> arrivals(kGroupKinds);
  std::vector<std::vector<double>> maxStart(kGroupKinds);
  for (int k = 0; k < kGroupKinds; ++k) {
    arrivals[static_cast<std::size_t>(k)].assign(static_cast<std::size_t>(instances[k]) * nColl, 0);
    maxStart[static_cast<std::size_t>(k)].assign(static_cast<std::size_t>(instances[k]) * nColl, 0.0);
  }
  for (int r = 0; r < W; ++r) {
    auto& st = rs[static_cast<std::size_t>(r)];
    for (int c = 0; c < kMemCats; ++c) st.mem[c] = base[c];
    for (int c = 0; c < kMemCats; ++c) st.total += base[c];
    st.peak = st.total;
    std::copy(std::begin(st.mem), std::end(st.mem), std::begin(st.atPeak));
    for (const auto& [sr, f] : in.slowRanks)
      if (sr == r) st.slow *= f;
    if (keptIndex[static_cast<std::size_t>(r)] >= 0)
      res.ranks[static_cast<std::size_t>(keptIndex[static_cast<std::size_t>(r)])].memory.push_back({0.0, 0, st.total});
  }

  std::vector<int> runnable;
  std::vector<std::pair<int, int>> retry;  // (rank, kind)
  std::vector<int> members;
  for (int r = W - 1; r >= 0; --r) runnable.push_back(r);

  auto keptTrace = [&](int r) -> SimRankTrace* {
    const int k = keptIndex[static_cast<std::size_t>(r)];
    return k < 0 ? nullptr : &res.ranks[static_cast<std::size_t>(k)];
  };
  auto complete = [&](int kind, int inst, int c) {
    const CollDef& cd = prog.colls[static_cast<std::size_t>(c)];
    const double end =
        maxStart[static_cast<std::size_t>(kind)][static_cast<std::size_t>(inst) * nColl + static_cast<std::size_t>(c)] + cd.durS;
    membersOf(kind, inst, members);
    for (int m : members) {
      const std::size_t idx = static_cast<std::size_t>(c) * static_cast<std::size_t>(W) + static_cast<std::size_t>(m);
      done[idx] = end;
      auto& st = rs[static_cast<std::size_t>(m)];
      auto& s = st.streams[kind];
      s.busy = false;
      s.freeAt = end;
      ++s.head;
      if (auto* tr = keptTrace(m)) {
        SimSpan sp;
        sp.lane = SimSpan::Lane::Comm;
        sp.commLane = laneOfKind[static_cast<std::size_t>(kind)];
        sp.startS = start[idx];
        sp.endS = end;
        sp.name = cd.name;
        sp.kind = SimSpan::Kind::Collective;
        sp.step = cd.step;
        sp.op = cd.kind;
        sp.bytes = cd.bytes;
        sp.groupSize = prog.groupSize[static_cast<std::size_t>(kind)];
        sp.emulated = cd.emulated;
        sp.issueS = issueT[idx];
        tr->spans.push_back(sp);
      }
      for (int k2 : kindsUsed) retry.push_back({m, k2});
      if (st.blockedOn == c) {
        st.blockedOn = -1;
        runnable.push_back(m);
      }
    }
  };
  auto tryStart = [&](int r, int kind) {
    auto& s = rs[static_cast<std::size_t>(r)].streams[kind];
    if (s.busy || s.head >= s.q.size()) return;
    const auto [c, issue] = s.q[s.head];
    double st = std::max(issue, s.freeAt);
    const int dep = prog.colls[static_cast<std::size_t>(c)].dep;
    if (dep >= 0) {
      const double d = done[static_cast<std::size_t>(dep) * static_cast<std::size_t>(W) + static_cast<std::size_t>(r)];
      if (std::isnan(d)) return;  // retried when the dependency completes
      st = std::max(st, d);
    }
    s.busy = true;
    start[static_cast<std::size_t>(c) * static_cast<std::size_t>(W) + static_cast<std::size_t>(r)] = st;
    const int inst = instanceOf(kind, r);
    const std::size_t ai = static_cast<std::size_t>(inst) * nColl + static_cast<std::size_t>(c);
    auto& cnt = arrivals[static_cast<std::size_t>(kind)][ai];
    auto& mx = maxStart[static_cast<std::size_t>(kind)][ai];
    mx = cnt == 0 ? st : std::max(mx, st);
    if (++cnt == prog.groupSize[static_cast<std::size_t>(kind)]) complete(kind, inst, c);
  };
  auto memApply = [&](int r, RankSt& st, int cat, std::int64_t delta) {
    st.mem[cat] += delta;
    st.total += delta;
    if (st.total > st.peak) {
      st.peak = st.total;
      std::copy(std::begin(st.mem), std::end(st.mem), std::begin(st.atPeak));
    }
    if (auto* tr = keptTrace(r)) tr->memory.push_back({st.t, delta, st.total});
  };

  std::int64_t processed = 0, nextReport = 1 << 20;
  const std::uint64_t totalOps = static_cast<std::uint64_t>(prog.ops.size()) * static_cast<std::uint64_t>(W);
  auto runRank = [&](int r) {
    auto& st = rs[static_cast<std::size_t>(r)];
    SimRankTrace* tr = keptTrace(r);
    while (st.pc < prog.ops.size()) {
      const Op& op = prog.ops[st.pc];
      switch (op.kind) {
        case Op::Compute: {
          double f = st.slow;
          const double jit = in.jitterOf(prog.comps[static_cast<std::size_t>(op.a)].phase);
          if (jit > 0) {
            const std::uint64_t h =
                splitmix(in.seed ^ splitmix(static_cast<std::uint64_t>(r) * 0x100000001b3ULL ^ static_cast<std::uint64_t>(op.a)));
            f *= std::max(0.1, 1.0 + jit * normalFrom(h));
          }
          const double d = prog.comps[static_cast<std::size_t>(op.a)].durS * f;
          const std::size_t ci = static_cast<std::size_t>(op.a) * static_cast<std::size_t>(W) + static_cast<std::size_t>(r);
          compStart[ci] = st.t;
          compDur[ci] = d;
          if (tr) {
            SimSpan sp;
            sp.startS = st.t;
            sp.endS = st.t + d;
            sp.name = prog.comps[static_cast<std::size_t>(op.a)].name;
            sp.step = st.steps.empty() ? 0 : static_cast<int>(st.steps.size() - 1);
            tr->spans.push_back(sp);
          }
          st.t += d;
          break;
        }
        case Op::Issue: {
          const CollDef& cd = prog.colls[static_cast<std::size_t>(op.a)];
          issueT[static_cast<std::size_t>(op.a) * static_cast<std::size_t>(W) + static_cast<std::size_t>(r)] = st.t;
          st.streams[cd.group].q.push_back({op.a, st.t});
          tryStart(r, cd.group);
          break;
        }
        case Op::Wait: {
          const double d = done[static_cast<std::size_t>(op.a) * static_cast<std::size_t>(W) + static_cast<std::size_t>(r)];
          if (std::isnan(d)) {
            st.blockedOn = op.a;
            return;
          }
          if (d > st.t) {
            if (tr) {
              SimSpan sp;
              sp.startS = st.t;
              sp.endS = d;
              sp.name = prog.colls[static_cast<std::size_t>(op.a)].name;
              sp.kind = SimSpan::Kind::Wait;
              sp.step = prog.colls[static_cast<std::size_t>(op.a)].step;
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
      if (++processed >= nextReport) {
        nextReport += 1 << 20;
        if (cancel) cancel->throwIfCancelled();
        if (progress) progress({"simulate", static_cast<std::uint64_t>(processed), totalOps, "events"});
      }
    }
  };

  while (!runnable.empty() || !retry.empty()) {
    if (!retry.empty()) {
      const auto [r, k] = retry.back();
      retry.pop_back();
      tryStart(r, k);
      continue;
    }
    const int r = runnable.back();
    runnable.pop_back();
    runRank(r);
  }
  for (int r = 0; r < W; ++r) {
    const auto& st = rs[static_cast<std::size_t>(r)];
    if (st.pc < prog.ops.size())
      throw std::logic_error(
          "simulation stalled: rank " + std::to_string(r) + " waits on " +
          prog.names[static_cast<std::size_t>(prog.colls[static_cast<std::size_t>(std::max(0, st.blockedOn))].name)]);
  }
  res.eventsSimulated = static_cast<std::int64_t>(totalOps);
  res.names = prog.names;

  // Figures per rank and step: compute busy, the union of collective spans, and the part of it not
  // covered by compute (exposed). Steady state = the steps after the first (or the only one).
  const int first = in.steps > 1 ? 1 : 0;
  double sumStep = 0, sumComp = 0, sumComm = 0, sumExp = 0;
  std::vector<Interval> comm, comp;
  for (int r = 0; r < W; ++r) {
    const auto& st = rs[static_cast<std::size_t>(r)];
    double rStep = 0;
    for (int s = first; s < in.steps; ++s) {
      const double lo = st.steps[static_cast<std::size_t>(s)].first, hi = st.steps[static_cast<std::size_t>(s)].second;
      comm.clear();
      comp.clear();
      for (std::size_t c = 0; c < nColl; ++c) {
        if (prog.colls[c].step != s) continue;
        const std::size_t idx = c * static_cast<std::size_t>(W) + static_cast<std::size_t>(r);
        comm.push_back({start[idx], done[idx]});
      }
      double compute = 0;
      for (std::size_t c = 0; c < nComp; ++c) {
        const std::size_t idx = c * static_cast<std::size_t>(W) + static_cast<std::size_t>(r);
        const double a = compStart[idx], b = a + compDur[idx];
        if (b <= lo || a >= hi) continue;
        comp.push_back({a, b});
        compute += compDur[idx];
      }
      std::sort(comp.begin(), comp.end(), [](const Interval& x, const Interval& y) { return x.a < y.a; });
      double uni = 0, covered = 0;
      unionAndOverlap(comm, comp, lo, hi, uni, covered);
      sumStep += hi - lo;
      rStep += hi - lo;
      sumComp += compute;
      sumComm += uni;
      sumExp += uni - covered;
    }
    rStep /= (in.steps - first);
    if (rStep > res.slowestRankStepS) {
      res.slowestRankStepS = rStep;
      res.slowestRank = r;
    }
    if (st.peak > res.peakBytes) res.peakBytes = st.peak;
  }
  const double n = static_cast<double>(W) * (in.steps - first);
  res.steady.stepS = sumStep / n;
  res.steady.computeS = sumComp / n;
  res.steady.commS = sumComm / n;
  res.steady.exposedCommS = sumExp / n;
  std::copy(std::begin(rs[0].atPeak), std::end(rs[0].atPeak), std::begin(res.peakByCategory));
  res.tokensPerSPerDevice = res.steady.stepS > 0 ? static_cast<double>(em.microBatch * em.seqLen) / res.steady.stepS : 0.0;
  for (const auto& c : prog.colls) {
    if (c.step != in.steps - 1) continue;
    const int gs = prog.groupSize[static_cast<std::size_t>(c.group)];
    res.messageBytesPerStep += c.bytes;
    res.wireBytesPerStep += static_cast<double>(c.bytes) *
                            ringFactor(c.kind == CollKind::ReduceScatter && c.emulated ? CollKind::AllReduce : c.kind, gs);
    ++res.collectivesPerStep;
  }
  for (auto& tr : res.ranks) {
    const auto& st = rs[static_cast<std::size_t>(tr.rank)];
    tr.steps = st.steps;
    std::sort(tr.spans.begin(), tr.spans.end(),
              [](const SimSpan& a, const SimSpan& b) { return a.startS != b.startS ? a.startS < b.startS : a.endS > b.endS; });
  }
  res.notes.push_back("compute: " + in.compute.source);
  res.notes.push_back("link: " + in.intraNode.name + (W > gpn ? ", between nodes " + in.interNode.name : ""));
  res.wallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return res;
}

}  // namespace shardscope::core::estimator
