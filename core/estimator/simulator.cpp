#include "core/estimator/simulator.h"

#include "core/estimator/calibration.h"

#include "core/model/memory_category.h"

#include "core/estimator/interference.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "core/analysis/step_breakdown.h"
#include "core/estimator/recommend.h"
#include "core/estimator/simulator_program.h"
#include "core/util/units.h"

// simulate() in four parts: check (here), build (simulator_schedule.cpp), run
// (simulator_engine.cpp), collect (here); the public helpers around it (names of categories and
// phases, compute profiles from FLOPs or a measured run) and the result's JSON.

namespace shardscope::core::estimator {
using namespace detail;
namespace {

std::int64_t headDimOf(const ModelShape& m) { return m.headDim > 0 ? m.headDim : m.hidden / std::max(1, m.heads); }

// ----------------------------------------------------------------------------------------------
// Check

// Refuses what the simulator cannot simulate (in the order a user meets the problems: steps,
// jitter, offload, what estimateMemory refuses, the compute profile, the link, slow ranks) and
// completes the input: the FLOPs profile when none is given, the inter-node link when none is.
// Returns the memory estimate (the baseline every rank holds).
MemoryEstimate checkInput(SimulateInput& in) {
  const EstimateInput& em = in.model;
  if (in.steps < 1) throw std::invalid_argument("simulate at least one step");
  if (!(in.jitter >= 0 && in.jitter < 1)) throw std::invalid_argument("jitter must be in [0, 1)");
  for (double j : in.phaseJitter)
    if (!(j < 1)) throw std::invalid_argument("jitter per phase must be below 1");
  if (em.offloadOptimizer || em.offloadParam)
    throw std::invalid_argument("the simulator does not model CPU offload (host transfers, CPU Adam); `estimate` does");
  if (em.selective != EstimateInput::Selective::None)
    throw std::invalid_argument("the simulator does not model selective activation checkpointing yet; `estimate` does");
  MemoryEstimate memEst = estimateMemory(em, in.strategy);  // validates the input
  // Without a profile: the default device (H100 SXM: 989 TFLOPS dense bf16, 3350 GB/s) at the assumed efficiency.
  if (in.compute.forwardS.empty()) in.compute = flopsComputeProfile(em, 989, calib::kEfficiency, 3350);
  const int layers = em.model.layers;
  if (in.compute.forwardS.size() != static_cast<std::size_t>(layers + 2) ||
      in.compute.backwardS.size() != in.compute.forwardS.size())
    throw std::invalid_argument("the compute profile does not match the model's " + std::to_string(layers) + " layers");
  if (!(in.intraNode.busBwGBps > 0)) throw std::invalid_argument("the link needs a positive bandwidth");
  if (!(in.interNode.busBwGBps > 0)) in.interNode = in.intraNode;
  for (const auto& [r, f] : in.slowRanks)
    if (r < 0 || r >= em.gpus || !(f > 0))
      throw std::invalid_argument("slow rank " + std::to_string(r) + " is not a rank of " + std::to_string(em.gpus) +
                                  " with a positive factor");
  return memEst;
}

// Start, end and issue time of every collective on every rank, start and length of every compute
// op: refuses what would not fit a desktop's memory rather than thrash or be killed.
void checkRunFits(const Program& prog, const SimulateInput& in) {
  const int W = prog.layout.world;
  const std::size_t nColl = prog.colls.size(), nComp = prog.comps.size();
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

// ----------------------------------------------------------------------------------------------
// The result's frame: process groups and lanes, and the ranks whose traces are kept

// Process groups of the run (names as the runtime's: world, shard<k>, replica<i>) and the comm
// lanes (one per group kind used).
void describeGroups(const Program& prog, SimulationResult& res) {
  static const char* kindNames[] = {"world", "shard", "replica", "node"};
  for (int k : prog.kindsUsed) res.laneGroupKind.push_back(kindNames[k]);
  for (int k : prog.kindsUsed) {
    for (int i = 0; i < std::max(1, prog.layout.instances[k]); ++i) {
      SimProcessGroup pg;
      pg.name = k == kWorld ? std::string("world") : std::string(kindNames[k]) + std::to_string(i);
      prog.layout.membersOf(k, i, pg.ranks);
      pg.size = static_cast<int>(pg.ranks.size());
      res.groups.push_back(std::move(pg));
    }
  }
}

// Ranks kept in the result: the first keepRanks, and the slow ones. Returns each rank's index in
// res.ranks (-1: not kept).
std::vector<int> keepRanks(const SimulateInput& in, SimulationResult& res) {
  const int W = in.model.gpus;
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
  return keptIndex;
}

// ----------------------------------------------------------------------------------------------
// Collect

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

// Figures per rank and step: compute busy, the union of collective spans, and the part of it not
// covered by compute (exposed). Steady state = the steps core's rule counts for a simulated run
// (core/analysis/step_breakdown.h: the steps after the first, or the only one). Then
// the memory peak, the traffic of the last step and the kept ranks' steps, spans in time order.
void collect(const Program& prog, const RunRecord& rec, SimulationResult& res) {
  const SimulateInput& in = res.input;
  const int W = rec.world;
  const std::size_t nColl = prog.colls.size(), nComp = prog.comps.size();
  std::vector<std::int64_t> stepNumbers(static_cast<std::size_t>(std::max(0, in.steps)));
  std::iota(stepNumbers.begin(), stepNumbers.end(), std::int64_t{0});
  const CountedSteps counted = countedStepNumbers(stepNumbers, RunSource::Simulated);
  const int first = static_cast<int>(counted.first), last = static_cast<int>(counted.last);
  const int steadySteps = static_cast<int>(counted.count);
  double sumStep = 0, sumComp = 0, sumComm = 0, sumExp = 0;
  std::vector<Interval> comm, comp;
  for (int r = 0; r < W; ++r) {
    const RankRun& st = rec.ranks[static_cast<std::size_t>(r)];
    double rStep = 0;
    for (int s = first; s <= last; ++s) {
      const double lo = st.steps[static_cast<std::size_t>(s)].first, hi = st.steps[static_cast<std::size_t>(s)].second;
      comm.clear();
      comp.clear();
      for (std::size_t c = 0; c < nColl; ++c) {
        if (prog.colls[c].step != s) continue;
        const std::size_t idx = rec.at(c, r);
        comm.push_back({rec.collStart[idx], rec.collDone[idx]});
      }
      double compute = 0;
      for (std::size_t c = 0; c < nComp; ++c) {
        const std::size_t idx = rec.at(c, r);
        const double a = rec.compStart[idx], b = a + rec.compDur[idx];
        if (b <= lo || a >= hi) continue;
        comp.push_back({a, b});
        compute += rec.compDur[idx];
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
    rStep /= steadySteps;
    if (rStep > res.slowestRankStepS) {
      res.slowestRankStepS = rStep;
      res.slowestRank = r;
    }
    if (st.peak > res.peakBytes) res.peakBytes = st.peak;
  }
  const double n = static_cast<double>(W) * steadySteps;
  res.steady.stepS = sumStep / n;
  res.steady.computeS = sumComp / n;
  res.steady.commS = sumComm / n;
  res.steady.exposedCommS = sumExp / n;
  std::copy(std::begin(rec.ranks[0].atPeak), std::end(rec.ranks[0].atPeak), std::begin(res.peakByCategory));
  res.tokensPerSPerDevice =
      res.steady.stepS > 0 ? static_cast<double>(in.model.microBatch * in.model.seqLen) / res.steady.stepS : 0.0;
  for (const auto& c : prog.colls) {
    if (c.step != in.steps - 1) continue;
    const int gs = prog.layout.size[c.group];
    res.messageBytesPerStep += c.bytes;
    res.wireBytesPerStep += static_cast<double>(c.bytes) *
                            ringFactor(c.kind == CollKind::ReduceScatter && c.emulated ? CollKind::AllReduce : c.kind, gs);
    ++res.collectivesPerStep;
  }
  for (auto& tr : res.ranks) {
    tr.steps = rec.ranks[static_cast<std::size_t>(tr.rank)].steps;
    std::sort(tr.spans.begin(), tr.spans.end(),
              [](const SimSpan& a, const SimSpan& b) { return a.startS != b.startS ? a.startS < b.startS : a.endS > b.endS; });
  }
}

}  // namespace

const char* memCatKey(MemCat c) {
  // The simulator's categories are a subset of core's (gathered parameters are counted as
  // parameters): its stored keys are core's.
  MemoryCategory m = MemoryCategory::Other;
  switch (c) {
    case MemCat::Parameters:
      m = MemoryCategory::Parameters;
      break;
    case MemCat::Gradients:
      m = MemoryCategory::Gradients;
      break;
    case MemCat::Optimizer:
      m = MemoryCategory::OptimizerState;
      break;
    case MemCat::Activations:
      m = MemoryCategory::Activations;
      break;
    case MemCat::CommBuffers:
      m = MemoryCategory::CommBuffers;
      break;
    case MemCat::Other:
      break;
  }
  return memoryCategoryKey(m).data();  // literals: NUL-terminated
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

namespace {

// LoRA: forward and backward FLOPs per block. Frozen weights: 2 FLOPs per element and token forward,
// 2 backward (the input gradient only); adapters 2 forward, 4 backward; attention scores 1/3, 2/3.
void loraBlockFlops(const EstimateInput& in, std::vector<double>& fwd, std::vector<double>& bwd) {
  const ModelShape& m = in.model;
  const double T = static_cast<double>(in.microBatch * in.seqLen);
  const double d = static_cast<double>(headDimOf(m));
  fwd.assign(static_cast<std::size_t>(m.layers + 2), 0.0);
  bwd.assign(fwd.size(), 0.0);
  for (const auto& mod : moduleShapes(in)) {
    if (mod.block == 0) continue;  // a row gather, no FLOPs
    const auto b = static_cast<std::size_t>(mod.block);
    std::int64_t adapters = 0;
    for (auto a : mod.adapters) adapters += a;
    fwd[b] += 2.0 * static_cast<double>(mod.numel() + adapters) * T;
    bwd[b] += (2.0 * static_cast<double>(mod.numel()) + 4.0 * static_cast<double>(adapters)) * T;
  }
  const auto head = static_cast<std::size_t>(m.layers + 1);
  if (m.tiedEmbeddings) {
    fwd[head] += 2.0 * static_cast<double>(m.vocab * m.hidden) * T;
    bwd[head] += 2.0 * static_cast<double>(m.vocab * m.hidden) * T;
  }
  for (int l = 1; l <= m.layers; ++l) {
    const double attn = 2.0 * m.heads * (2.0 * d) * static_cast<double>(in.seqLen) * T;
    fwd[static_cast<std::size_t>(l)] += attn;
    bwd[static_cast<std::size_t>(l)] += 2.0 * attn;
  }
}

}  // namespace

std::vector<double> blockTrainFlops(const EstimateInput& in) {
  if (in.loraRank > 0) {
    std::vector<double> fwd, bwd;
    loraBlockFlops(in, fwd, bwd);
    for (std::size_t b = 0; b < fwd.size(); ++b) fwd[b] += bwd[b];
    return fwd;
  }
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
  if (in.loraRank > 0) {
    std::vector<double> fwd, bwd;
    loraBlockFlops(in, fwd, bwd);
    for (std::size_t b = 0; b < flops.size(); ++b) {
      p.forwardS[b] = fwd[b] / rate;
      p.backwardS[b] = bwd[b] / rate;
    }
  } else {
    for (std::size_t b = 0; b < flops.size(); ++b) {
      p.forwardS[b] = flops[b] / 3.0 / rate;
      p.backwardS[b] = 2.0 * flops[b] / 3.0 / rate;
    }
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
                    measured.seqLen == target.seqLen && measured.precision == target.precision &&
                    measured.loraRank == target.loraRank &&
                    (measured.loraRank == 0 || (measured.loraTargets == target.loraTargets && measured.qlora == target.qlora));
  if (same) return p;
  ComputeProfile out;
  out.source = p.source + ", scaled by FLOPs";
  out.optimizerSPerElement = p.optimizerSPerElement;
  out.optimizerSPerModelElement = p.optimizerSPerModelElement;
  out.stepOverheadS = p.stepOverheadS;
  out.checkpointedForwardShare = p.checkpointedForwardShare;
  out.recomputeShare = p.recomputeShare;
  out.checkpointProbed = p.checkpointProbed;
  out.recomputeMeasured = p.recomputeMeasured;
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

namespace {

// Interference (interference.h): runs the program, stretches each forward/backward compute op by
// (1 + k·f) of its mean overlap f with the rank's in-flight collectives, and runs it again, until
// no op moves by more than 0.5 % (at most 6 rounds; each new duration is averaged with the last, so
// the rounds cannot oscillate between two schedules).
void settleInterference(Program& prog, const SimulateInput& in, SimulationResult& res, const CancelToken* cancel) {
  const int W = in.model.gpus;
  std::vector<double> base(prog.comps.size()), collBase(prog.colls.size());
  for (std::size_t c = 0; c < prog.comps.size(); ++c) base[c] = prog.comps[c].durS;
  for (std::size_t c = 0; c < prog.colls.size(); ++c) collBase[c] = prog.colls[c].durS;
  const std::vector<int> noneKept(static_cast<std::size_t>(W), -1);
  std::vector<SimRankTrace> none;
  double meanStretch = 0, commStretch = 0;
  int rounds = 0;
  for (; rounds < 6; ++rounds) {
    const RunRecord rec = runProgram(prog, in, noneKept, none, cancel, {});
    std::vector<double> fsum(prog.comps.size(), 0.0), gsum(prog.colls.size(), 0.0);
    for (int r = 0; r < W; ++r) {
      std::vector<std::pair<double, double>> busy;
      busy.reserve(prog.comps.size());
      for (std::size_t c = 0; c < prog.comps.size(); ++c) {
        const std::size_t idx = rec.at(c, r);
        busy.push_back({rec.compStart[idx], rec.compStart[idx] + rec.compDur[idx]});
      }
      busy = mergeIntervals(std::move(busy));
      for (std::size_t c = 0; c < prog.colls.size(); ++c) {
        const std::size_t idx = rec.at(c, r);
        if (std::isfinite(rec.collStart[idx]) && std::isfinite(rec.collDone[idx]))
          gsum[c] += overlapFraction(rec.collStart[idx], rec.collDone[idx], busy);
      }
      std::vector<std::pair<double, double>> iv;
      iv.reserve(prog.colls.size());
      for (std::size_t c = 0; c < prog.colls.size(); ++c) {
        const std::size_t idx = rec.at(c, r);
        if (std::isfinite(rec.collStart[idx]) && std::isfinite(rec.collDone[idx]))
          iv.push_back({rec.collStart[idx], rec.collDone[idx]});
      }
      iv = mergeIntervals(std::move(iv));
      for (std::size_t c = 0; c < prog.comps.size(); ++c) {
        const std::size_t idx = rec.at(c, r);
        fsum[c] += overlapFraction(rec.compStart[idx], rec.compStart[idx] + rec.compDur[idx], iv);
      }
    }
    double moved = 0, stretch = 0, total = 0;
    for (std::size_t c = 0; c < prog.comps.size(); ++c) {
      CompDef& cd = prog.comps[c];
      if (cd.phase == ComputePhase::Other || !(base[c] > 0) || !(in.interference > 0)) continue;
      const double target = base[c] * (1.0 + in.interference * fsum[c] / W);
      const double next = rounds == 0 ? target : 0.5 * (cd.durS + target);
      moved = std::max(moved, std::fabs(next - cd.durS) / cd.durS);
      cd.durS = next;
      stretch += next;
      total += base[c];
    }
    meanStretch = total > 0 ? stretch / total - 1.0 : 0.0;
    double cstretch = 0, ctotal = 0;
    for (std::size_t c = 0; c < prog.colls.size(); ++c) {
      CollDef& cd = prog.colls[c];
      if (!(collBase[c] > 0)) continue;
      const double m = cd.kind == CollKind::AllReduce || cd.emulated ? in.commInterferenceAllReduce : in.commInterferenceOther;
      const double target = collBase[c] * (1.0 + m * gsum[c] / W);
      const double next = rounds == 0 ? target : 0.5 * (cd.durS + target);
      moved = std::max(moved, std::fabs(next - cd.durS) / cd.durS);
      cd.durS = next;
      cstretch += next;
      ctotal += collBase[c];
    }
    commStretch = ctotal > 0 ? cstretch / ctotal - 1.0 : 0.0;
    if (moved < 0.005) break;
  }
  res.notes.push_back("interference: compute " + formatFixed(meanStretch * 100, 1) + "% slower where collectives overlap it (k " +
                      formatFixed(in.interference, 2) + "), collectives " + formatFixed(commStretch * 100, 1) +
                      "% slower where compute runs beside them (m " + formatFixed(in.commInterferenceAllReduce, 2) + " / " +
                      formatFixed(in.commInterferenceOther, 2) + "), " + std::to_string(rounds + 1) + " rounds");
}

}  // namespace

SimulationResult simulate(const SimulateInput& inRef, const CancelToken* cancel, const ProgressFn& progress) {
  const auto wall0 = std::chrono::steady_clock::now();
  SimulationResult res;
  res.input = inRef;
  SimulateInput& in = res.input;
  const MemoryEstimate memEst = checkInput(in);

  Program prog = buildProgram(in, shapeOf(in.model), memEst, cancel);
  describeGroups(prog, res);
  const std::vector<int> keptIndex = keepRanks(in, res);
  if (cancel) cancel->throwIfCancelled();
  checkRunFits(prog, in);
  if (in.interference > 0 || in.commInterferenceAllReduce > 0 || in.commInterferenceOther > 0)
    settleInterference(prog, in, res, cancel);

  const RunRecord rec = runProgram(prog, in, keptIndex, res.ranks, cancel, progress);
  res.eventsSimulated = static_cast<std::int64_t>(rec.totalOps);
  res.names = prog.names;

  collect(prog, rec, res);
  const int W = in.model.gpus;
  const int gpn = std::max(1, std::min(in.model.gpusPerNode, W));
  res.notes.push_back("compute: " + in.compute.source);
  res.notes.push_back("link: " + in.intraNode.name + (W > gpn ? ", between nodes " + in.interNode.name : ""));
  res.wallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return res;
}

JsonValue toJson(const PredictionNotes& p) {
  JsonValue j = JsonValue::object();
  j.set("calibration_run", JsonValue::number(p.calibrationRun));
  j.set("change", JsonValue::string(p.change));
  JsonValue e = JsonValue::array();
  for (const auto& x : p.extrapolation) e.push(JsonValue::string(x));
  j.set("extrapolation", std::move(e));
  j.set("load_factor", JsonValue::number(p.loadFactor));
  JsonValue iv = JsonValue::array();
  iv.push(JsonValue::number(p.lowS));
  iv.push(JsonValue::number(p.highS));
  j.set("interval_s", std::move(iv));
  j.set("rel_se", JsonValue::number(p.relSe));
  j.set("interval_basis", JsonValue::string(p.intervalBasis));
  if (!p.checkpointing.empty()) j.set("checkpointing", JsonValue::string(p.checkpointing));
  j.set("link", JsonValue::string(p.link));
  j.set("interference", JsonValue::string(p.interference));
  return j;
}

JsonValue toJson(const SimulationResult& r) {
  JsonValue o = JsonValue::object();
  o.set("strategy", JsonValue::string(strategyName(r.input.strategy)));
  o.set("step_s", JsonValue::number(r.steady.stepS));
  o.set("compute_s", JsonValue::number(r.steady.computeS));
  o.set("comm_s", JsonValue::number(r.steady.commS));
  o.set("exposed_comm_s", JsonValue::number(r.steady.exposedCommS));
  o.set("overlap", JsonValue::number(r.steady.overlap()));
  o.set("slowest_rank", JsonValue::number(static_cast<std::int64_t>(r.slowestRank)));
  o.set("slowest_rank_step_s", JsonValue::number(r.slowestRankStepS));
  o.set("peak_bytes", JsonValue::number(r.peakBytes));
  o.set("tokens_per_s_per_device", JsonValue::number(r.tokensPerSPerDevice));
  o.set("collectives_per_step", JsonValue::number(r.collectivesPerStep));
  o.set("message_bytes_per_step", JsonValue::number(r.messageBytesPerStep));
  o.set("wire_bytes_per_step", JsonValue::number(r.wireBytesPerStep));
  o.set("events_simulated", JsonValue::number(r.eventsSimulated));
  o.set("wall_s", JsonValue::number(r.wallS));
  if (r.prediction) o.set("prediction", toJson(*r.prediction));
  return o;
}

}  // namespace shardscope::core::estimator
