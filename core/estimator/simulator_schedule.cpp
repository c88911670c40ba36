// Build: the program every rank runs, replayed from a strategy's rules the way the runtime's
// engines apply them (profiler/runtime/engine.cpp), one micro-batch per step: DDP buckets,
// ZeRO-1/2 reduction and all-gather buckets, ZeRO-3 trace prefetch and release, FSDP units with
// their prefetch and rate limiter, HSDP replicas.
#include <algorithm>
#include <stdexcept>

#include "core/estimator/simulator_program.h"

namespace shardscope::core::estimator::detail {
namespace {

std::int64_t roundUp(std::int64_t n, std::int64_t m) { return m <= 1 ? n : (n + m - 1) / m * m; }

std::string blockName(int b, int layers) {
  if (b == 0) return "embed_tokens";
  if (b == layers + 1) return "lm_head";
  return "layers." + std::to_string(b - 1);
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
  // The forward pass of a block: a checkpointed one runs without autograd's graph
  // (the profile's checkpointedForwardShare of it); its recomputation in backward adds recomputeShare of fwd(b).
  double fwdPass(int b) const { return ckpt() && b >= 1 && b <= sh.L ? fwd(b) * cp.checkpointedForwardShare : fwd(b); }
  // The recomputation of a checkpointed block inside its backward.
  double recompute(int b) const { return ckpt() && b >= 1 && b <= sh.L ? fwd(b) * cp.recomputeShare : 0.0; }
  double bwd(int b) const { return cp.backwardS[static_cast<std::size_t>(b)] + recompute(b); }
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
  void optimizer(std::int64_t elements) {
    p.compute("optimizer step",
              cp.optimizerSPerModelElement * static_cast<double>(sh.T) + cp.optimizerSPerElement * static_cast<double>(elements));
  }

  // DDP, ZeRO-1, ZeRO-2 --------------------------------------------------------------------------
  void replicated(Strategy s) {
    // The trainable parameters only (the adapters with LoRA): the frozen base is neither reduced
    // nor gathered.
    const std::int64_t W = in.model.gpus, P = sh.T, g = sh.g, w = sh.w;
    const std::int64_t Pp = roundUp(P, W), part = Pp / W;
    // Parameters in layout order with their block (the runtime's flat order).
    std::vector<std::pair<std::int64_t, int>> params;
    for (const auto& m : sh.modules)
      for (auto n : sh.trainable(m)) params.push_back({n, m.block});
    p.begin("forward");
    for (int b = 0; b <= sh.L + 1; ++b) {
      p.compute("forward " + bn(b), fwdPass(b));
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
        if (!in.model.gradientAsBucketView) p.mem(MemCat::Gradients, g * sh.blockTrainable[static_cast<std::size_t>(b)]);
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
    // Bytes one gather moves and holds (the frozen base's included), and the padded trainable
    // elements whose gradients are reduced (all of them for full fine-tuning).
    std::int64_t gatherBytes = 0, gradPadded = 0;
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
    const std::int64_t thr = in.model.paramPersistenceThreshold;
    for (std::size_t m = 0; m < sh.modules.size(); ++m) {
      const auto& mod = sh.modules[m];
      std::int64_t big = 0, small = 0, fBig = 0, fBigBytes = 0;
      for (auto n : sh.trainable(mod)) (n < thr ? small : big) += n;
      if (mod.frozen)  // the frozen base's large tensors are sharded and gathered with the module
        for (std::size_t i = 0; i < mod.params.size(); ++i)
          if (mod.params[i] >= thr) {
            fBig += mod.params[i];
            fBigBytes += mod.quantised && i == 0 ? nf4Bytes(mod.params[i]) : sh.w * mod.params[i];
          }
      if (big > 0 || fBig > 0) {
        moduleGroup[m] = static_cast<int>(groups.size());
        Group g{mod.name, big + fBig, roundUp(big, S) + roundUp(fBig, S), false};
        g.gatherBytes = sh.w * roundUp(big, S) + roundUp(fBigBytes, sh.w * S);
        g.gradPadded = roundUp(big, S);
        groups.push_back(std::move(g));
      }
      if (small > 0) {
        persistentGroup[m] = static_cast<int>(groups.size());
        Group g{mod.name + " (persistent)", small, roundUp(small, S), true, Group::State::Available};
        g.gatherBytes = sh.w * g.padded;
        g.gradPadded = g.padded;
        groups.push_back(std::move(g));
      }
    }
    std::int64_t cap = 0;
    for (const auto& g : groups) cap += g.gradPadded;
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
    p.mem(MemCat::Parameters, g.gatherBytes);
    g.ag = p.issue("all_gather param " + g.name, CollKind::AllGather, kind, g.gatherBytes);
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
    p.mem(MemCat::Parameters, -g.gatherBytes);
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
    if (g.gradPadded == 0) return;  // the frozen base only: no gradient
    const std::int64_t chunk = g.gradPadded / S, section = ipgCap / S;
    if (chunk > section) {
      flushIpg(S, overlap);
      flights.push_back(p.issue("reduce_scatter grad bucket " + std::to_string(bucketSeq++), CollKind::ReduceScatter, kWorld,
                                sh.g * g.gradPadded));
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
      for (int m : mods) {
        const int gi = moduleGroup[static_cast<std::size_t>(m)];
        if (gi >= 0) {
          traceFetch(m, false);
          ensureUnit(gi, kWorld, false);
        }
        const double share = moduleShare(sh, sh.modules[static_cast<std::size_t>(m)]);
        p.compute("forward " + bn(b), fwdPass(b) * share);
        if (gi >= 0 && shouldReleaseAfterForward(m)) releaseUnit(gi);
      }
      if (mods.empty()) p.compute("forward " + bn(b), fwdPass(b));
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
          p.compute("recompute " + bn(b), recompute(b) * moduleShare(sh, sh.modules[static_cast<std::size_t>(m)]));
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
    for (const auto& g : groups) elems += g.gradPadded / S;
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
    for (int b = 0; b <= sh.L + 1; ++b) {
      const auto u = static_cast<std::size_t>(b);
      Group g{bn(b), sh.blockNumel[u], roundUp(sh.blockNumel[u], N), false};
      // The trainable flat parameter (fp32 shards, gathered in the compute dtype) and, with LoRA,
      // the frozen base's (compute dtype or NF4 bytes), padded to the shard count.
      g.gradPadded = roundUp(sh.blockTrainable[u], N);
      g.gatherBytes = sh.w * g.gradPadded + roundUp(sh.blockFrozenBytes[u], sh.w * N);
      groups.push_back(std::move(g));
    }
  }
  void fsdpStep(Strategy s) {
    const bool full = s != Strategy::FsdpGradOp;
    const bool hsdp = s == Strategy::Hsdp && p.layout.size[kReplica] > 1;
    const int shardKind = s == Strategy::Hsdp ? kShard : kWorld;
    const std::int64_t N = p.layout.size[shardKind];
    const int last = sh.L + 1;
    const bool lim = in.limitAllGathers;
    p.begin("forward");
    for (int b = 0; b <= last; ++b) {
      ensureUnit(b, shardKind, lim);
      if (in.forwardPrefetch && b + 1 <= last) gatherUnit(b + 1, shardKind, lim);
      p.compute("forward " + bn(b), fwdPass(b));
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
      if (g.gradPadded > 0) {  // a unit without trainable parameters reduces nothing
        p.mem(MemCat::CommBuffers, sh.g * g.gradPadded / N);
        const int rs = p.issue("reduce_scatter grad " + g.name, CollKind::ReduceScatter, shardKind, sh.g * g.gradPadded);
        flights.push_back(rs);
        if (hsdp)
          flights.push_back(
              p.issue("all_reduce grad replicas " + g.name, CollKind::AllReduce, kReplica, sh.g * g.gradPadded / N, rs));
      }
      if (full) releaseUnit(b);
    }
    progressFlights(0);
    std::int64_t rsBuf = 0;
    for (const auto& g : groups) rsBuf += sh.g * g.gradPadded / N;
    p.mem(MemCat::CommBuffers, -rsBuf);
    for (std::size_t k = 0; k < groups.size(); ++k) releaseUnit(static_cast<int>(k));
    p.end();
    p.begin("optimizer");
    std::int64_t elems = 0;
    for (const auto& g : groups) elems += g.gradPadded / N;
    optimizer(elems);
    p.end();
  }
};

}  // namespace

// ----------------------------------------------------------------------------------------------
// The program and the shape

int Program::name(const std::string& s) {
  auto it = nameIdx_.find(s);
  if (it != nameIdx_.end()) return it->second;
  names.push_back(s);
  return nameIdx_[s] = static_cast<int>(names.size() - 1);
}

void Program::compute(const std::string& n, double durS) {
  if (!(durS > 0)) return;
  comps.push_back({name(n), durS, computePhaseOf(n)});
  ops.push_back({Op::Compute, static_cast<int>(comps.size() - 1), 0});
}

int Program::issue(const std::string& n, CollKind k, int group, std::int64_t bytes, int dep) {
  CollDef c;
  c.name = name(n);
  c.kind = k;
  c.group = group;
  c.bytes = bytes;
  c.emulated = k == CollKind::ReduceScatter && in->comm.emulatedReduceScatter;
  c.dep = dep;
  c.step = step;  // durS: once the program is built and its waits known (buildProgram)
  colls.push_back(c);
  const int idx = static_cast<int>(colls.size() - 1);
  ops.push_back({Op::Issue, idx, 0});
  return idx;
}

namespace {

// The link a collective runs on (a group that spans nodes: the slower one), whether it reduces
// like an all-reduce, and its wire bytes per device.
struct OnLink {
  const LinkModel& link;
  bool allReduceLike;
  double wireBytes;
};
OnLink onLink(const Program& p, const CollDef& c) {
  const LinkModel& intra = p.in->intraNode;
  const LinkModel& inter = p.in->interNode;
  const bool ar = c.kind == CollKind::AllReduce || c.emulated;
  return {p.layout.inter[c.group] && inter.busBwGBps < intra.busBwGBps ? inter : intra, ar,
          static_cast<double>(c.bytes) * ringFactor(ar ? CollKind::AllReduce : c.kind, p.layout.size[c.group])};
}

}  // namespace

double Program::instanceTime(const CollDef& c) const {
  if (layout.size[c.group] <= 1) return 0;
  const OnLink o = onLink(*this, c);
  return o.link.instanceS(o.allReduceLike, o.wireBytes, c.onDemand ? WaitKind::OnDemand : WaitKind::Ahead, layout.size[c.group]);
}

const LinkModel::InRunSize* Program::inRunSize(const CollDef& c) const {
  if (layout.size[c.group] <= 1) return nullptr;
  const OnLink o = onLink(*this, c);
  return o.link.inRunSize(o.allReduceLike, o.wireBytes, c.onDemand ? WaitKind::OnDemand : WaitKind::Ahead, layout.size[c.group]);
}

Shape shapeOf(const EstimateInput& in) {
  Shape s;
  s.L = in.model.layers;
  s.modules = moduleShapes(in);
  s.lora = in.loraRank > 0;
  const bool fp32 = in.precision == Precision::Fp32;
  s.w = s.g = fp32 ? 4 : 2;
  s.blockNumel.assign(static_cast<std::size_t>(s.L + 2), 0);
  s.blockTrainable.assign(s.blockNumel.size(), 0);
  s.blockFrozenBytes.assign(s.blockNumel.size(), 0);
  for (const auto& m : s.modules) {
    const auto b = static_cast<std::size_t>(m.block);
    s.blockNumel[b] += m.numel();
    for (auto n : s.trainable(m)) s.blockTrainable[b] += n;
    s.blockFrozenBytes[b] += frozenBytes(m, s.w);
  }
  s.P = parameterCount(in.model);
  s.T = s.lora ? trainableParameterCount(in) : s.P;
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

// ----------------------------------------------------------------------------------------------
// Build

Program buildProgram(const SimulateInput& in, const Shape& sh, const MemoryEstimate& me, const CancelToken* cancel) {
  Program prog;
  prog.in = &in;
  prog.layout = groupLayout(in);
  Builder bld(prog, in, sh, in.compute);
  if (in.strategy == Strategy::Zero3 || in.strategy == Strategy::ZeroPPHpz) bld.zero3Setup(prog.layout.world);
  if (in.strategy == Strategy::FsdpFull || in.strategy == Strategy::FsdpGradOp || in.strategy == Strategy::Hsdp)
    bld.fsdpSetup(prog.layout.size[in.strategy == Strategy::Hsdp ? kShard : kWorld]);
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
  // How each collective is waited on (CollDef::onDemand): on demand where the rank computes nothing
  // between its issue and the first wait that needs it (its own, or one on a later collective of
  // the same stream, which runs in order). Its time is then its class's where the link measured one
  // (LinkModel::instanceS).
  {
    std::vector<std::size_t> issuedAt(prog.colls.size(), 0);
    std::vector<std::vector<std::size_t>> open(kGroupKinds);  // per stream: issued, not yet waited on
    std::size_t lastCompute = 0;
    bool anyCompute = false;
    for (std::size_t i = 0; i < prog.ops.size(); ++i) {
      const Op& op = prog.ops[i];
      const auto c = static_cast<std::size_t>(op.a);
      if (op.kind == Op::Compute) {
        lastCompute = i;
        anyCompute = true;
      } else if (op.kind == Op::Issue) {
        issuedAt[c] = i;
        open[static_cast<std::size_t>(prog.colls[c].group)].push_back(c);
      } else if (op.kind == Op::Wait) {
        auto& q = open[static_cast<std::size_t>(prog.colls[c].group)];
        const auto upTo = std::find(q.begin(), q.end(), c);
        if (upTo == q.end()) continue;  // waited on before
        for (auto it = q.begin(); it != upTo + 1; ++it) prog.colls[*it].onDemand = !anyCompute || lastCompute < issuedAt[*it];
        q.erase(q.begin(), upTo + 1);
      }
    }
    for (auto& c : prog.colls) {
      c.durS = prog.instanceTime(c);
      const auto* own = prog.inRunSize(c);
      c.lastLateness = own ? own->lastLateness : -1.0;
    }
  }
  // The frozen base (LoRA) is a parameter to the runtime's peak_breakdown.
  prog.baseline[static_cast<int>(MemCat::Parameters)] = me.state.parameters + me.state.frozen;
  prog.baseline[static_cast<int>(MemCat::Gradients)] =
      me.state.gradients - (in.strategy == Strategy::Ddp && !in.model.gradientAsBucketView ? sh.g * sh.T : 0);
  prog.baseline[static_cast<int>(MemCat::Optimizer)] = me.state.optimizer;
  prog.baseline[static_cast<int>(MemCat::CommBuffers)] = me.state.buffers;
  for (const auto& c : prog.colls)
    if (std::find(prog.kindsUsed.begin(), prog.kindsUsed.end(), c.group) == prog.kindsUsed.end())
      prog.kindsUsed.push_back(c.group);
  std::sort(prog.kindsUsed.begin(), prog.kindsUsed.end());
  for (std::size_t i = 0; i < prog.kindsUsed.size(); ++i) prog.laneOfKind[prog.kindsUsed[i]] = static_cast<int>(i);
  return prog;
}

}  // namespace shardscope::core::estimator::detail
