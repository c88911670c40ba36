// LoRA and QLoRA in the estimator and simulator (docs/ESTIMATOR.md, "Fine-tuning: LoRA and QLoRA"):
// trainable parameters, memory by category, collective bytes per kind and compute, each against
// the formula written out here from the model's shape (never the estimator's own helpers), for
// the tiny preset and for the seeds' Qwen3 setup; full fine-tuning left exactly as it was.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <string>

#include "core/estimator/comm_model.h"
#include "core/estimator/memory_estimator.h"
#include "core/estimator/recommend.h"
#include "core/estimator/scenarios.h"
#include "core/estimator/simulator.h"

using namespace shardscope::core;
using namespace shardscope::core::estimator;

namespace {

// The shapes by hand (their published configs / model_presets.cpp).
struct Hand {
  std::int64_t V, h, L, heads, kv, d, f;
  bool qkNorm;
  std::int64_t q() const { return heads * d; }
  std::int64_t kvd() const { return kv * d; }
  // Ψ of an untied Llama-style model without biases: embedding + head, final norm, per layer two
  // norms, q/k/v/o, gate/up/down (and the q/k norms).
  std::int64_t P() const { return 2 * V * h + h + L * (2 * h + 2 * h * q() + 2 * h * kvd() + 3 * h * f + (qkNorm ? 2 * d : 0)); }
  // Norm elements (16-bit under QLoRA, and whole on every rank under ZeRO-3 at the default threshold).
  std::int64_t norms() const { return h + L * (2 * h + (qkNorm ? 2 * d : 0)); }
  // Projection weights of one layer.
  std::int64_t projections() const { return 2 * h * q() + 2 * h * kvd() + 3 * h * f; }
  // Σ over the seven targets of r·(in + out), one layer.
  std::int64_t adaptersPerLayer(std::int64_t r) const {
    return r * ((h + q()) + (h + kvd()) + (h + kvd()) + (q() + h) + (h + f) + (h + f) + (f + h));
  }
};
const Hand kTiny{256, 64, 2, 4, 2, 16, 176, false};
const Hand kQwen3{151936, 4096, 36, 32, 8, 128, 12288, true};

EstimateInput lora(const char* model, int gpus, int r, Precision p = Precision::Bf16) {
  EstimateInput in;
  in.model = *modelShapePreset(model);
  in.gpus = gpus;
  in.gpusPerNode = gpus;
  in.precision = p;
  in.loraRank = r;
  in.loraAlpha = 2.0 * r;
  return in;
}

std::int64_t bytesOf(const CommEstimate& c, CollKind k) {
  std::int64_t b = 0;
  for (const auto& col : c.collectives)
    if (col.kind == k) b += col.messageBytes;
  return b;
}

std::int64_t roundUp(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

}  // namespace

class TestEstimatorLora : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void shapesByHand() {
    QCOMPARE(kTiny.P(), parameterCount(*modelShapePreset("tiny")));
    QCOMPARE(kQwen3.P(), parameterCount(*modelShapePreset("qwen3-8b")));
  }

  void trainableCounts() {
    // Σ over layers and targets of r·(in + out).
    QCOMPARE(trainableParameterCount(lora("tiny", 2, 4)), kTiny.L * kTiny.adaptersPerLayer(4));
    QCOMPARE(trainableParameterCount(lora("qwen3-8b", 4, 8)), std::int64_t{21823488});
    QCOMPARE(trainableParameterCount(lora("qwen3-8b", 4, 8)), kQwen3.L * kQwen3.adaptersPerLayer(8));
    QCOMPARE(frozenParameterCount(lora("qwen3-8b", 4, 8)), kQwen3.P());
    // Targets: q and v only.
    auto qv = lora("tiny", 2, 4);
    qv.loraTargets = "q_proj, v_proj";
    QCOMPARE(trainableParameterCount(qv), kTiny.L * 4 * ((kTiny.h + kTiny.q()) + (kTiny.h + kTiny.kvd())));
    // Full fine-tuning: everything trains, nothing is frozen.
    auto full = lora("tiny", 2, 0);
    QCOMPARE(trainableParameterCount(full), kTiny.P());
    QCOMPARE(frozenParameterCount(full), std::int64_t{0});
    // Bad settings are refused with the reason.
    auto bad = lora("tiny", 2, 4);
    bad.loraTargets = "q,attn";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, (void)estimateMemory(bad, Strategy::Ddp));
    auto q32 = lora("tiny", 2, 4, Precision::Fp32);
    q32.qlora = true;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, (void)estimateMemory(q32, Strategy::Ddp));
    auto q0 = lora("tiny", 2, 0);
    q0.qlora = true;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, (void)estimateMemory(q0, Strategy::Ddp));
  }

  void nf4BytesPerParam() {
    // 4 bits + an 8-bit absmax per 64 + an fp32 scale per 256 absmaxes: 0.5 + 1/64 + 4/16384.
    QCOMPARE(kNf4BytesPerParam, 0.515869140625);
    const std::int64_t n = 4096LL * 4096;
    QCOMPARE(nf4Bytes(n), n / 2 + n / 64 + 4 * (n / 64 / 256));
    QCOMPARE(static_cast<double>(nf4Bytes(n)) / static_cast<double>(n), 0.515869140625);
    // Partial blocks round up: 65 weights = 33 bytes + 2 absmax + 1 fp32 scale.
    QCOMPARE(nf4Bytes(65), std::int64_t{33 + 2 + 4});
  }

  void replicatedStrategies() {
    // Tiny, 2 ranks, bf16, r = 4: DDP, ZeRO-1, ZeRO-2 hold the whole frozen base (2 B/param).
    const auto in = lora("tiny", 2, 4);
    const std::int64_t T = kTiny.L * kTiny.adaptersPerLayer(4), P = kTiny.P(), W = 2, Tp = roundUp(T, W);
    const auto ddp = estimateMemory(in, Strategy::Ddp);
    QCOMPARE(ddp.state.frozen, 2 * P);
    QCOMPARE(ddp.state.parameters, 2 * T);
    QCOMPARE(ddp.state.gradients, 2 * T + 2 * T);  // the buckets and param.grad
    QCOMPARE(ddp.state.optimizer, 12 * T);         // fp32 master + Adam's two moments
    const auto z1 = estimateMemory(in, Strategy::Zero1);
    QCOMPARE(z1.state.frozen, 2 * P);
    QCOMPARE(z1.state.parameters, 2 * Tp);
    QCOMPARE(z1.state.gradients, 2 * Tp);
    QCOMPARE(z1.state.optimizer, 12 * Tp / W);
    const auto z2 = estimateMemory(in, Strategy::Zero2);
    QCOMPARE(z2.state.gradients, 2 * Tp / W);
    QCOMPARE(z2.state.buffers, 2 * Tp);  // the IPG bucket, capped at the trainable elements

    // Communication: the adapters' gradients only; ZeRO-1/2 all-gather the updated adapters.
    const auto cd = commVolume(in, Strategy::Ddp);
    QCOMPARE(bytesOf(cd, CollKind::AllReduce), 2 * T);
    QCOMPARE(bytesOf(cd, CollKind::AllGather), std::int64_t{0});
    const auto c1 = commVolume(in, Strategy::Zero1);
    QCOMPARE(bytesOf(c1, CollKind::AllReduce), 2 * Tp);
    QCOMPARE(bytesOf(c1, CollKind::AllGather), 2 * Tp);
  }

  void fsdp() {
    const auto in = lora("tiny", 2, 4);
    const std::int64_t A = kTiny.adaptersPerLayer(4), P = kTiny.P(), N = 2;
    const std::int64_t T = kTiny.L * A;
    const auto m = estimateMemory(in, Strategy::FsdpFull);
    // Shards of the trainable flat parameter: fp32 parameter, fp32 gradient, Adam.
    QCOMPARE(m.state.parameters, 4 * roundUp(A, N) / N * kTiny.L);
    QCOMPARE(m.state.gradients, 4 * T / N);
    QCOMPARE(m.state.optimizer, 8 * T / N);
    // The frozen base sharded in the compute dtype: 2Ψ/N (every unit's bytes divide evenly here).
    QCOMPARE(m.state.frozen, 2 * P / N);
    // Gathered at the start of backward: the head unit (norm + lm_head) and the last block.
    const std::int64_t head = 2 * (kTiny.h + kTiny.V * kTiny.h);
    const std::int64_t block = 2 * A + 2 * (2 * kTiny.h + kTiny.projections());
    QCOMPARE(m.atPeak.gathered, head + block);
    // All-gathers carry base + adapters, forward (every unit) and backward (the root kept);
    // reduce-scatters only the units with adapters (the blocks).
    const auto c = commVolume(in, Strategy::FsdpFull);
    QCOMPARE(bytesOf(c, CollKind::AllGather), (2 * T + 2 * P) + (2 * T + 2 * P - head));
    QCOMPARE(bytesOf(c, CollKind::ReduceScatter), 2 * T);
    for (const auto& col : c.collectives)
      if (col.kind == CollKind::ReduceScatter) QCOMPARE(col.count, std::int64_t{kTiny.L});
    const auto g = commVolume(in, Strategy::FsdpGradOp);
    QCOMPARE(bytesOf(g, CollKind::AllGather), 2 * T + 2 * P);
  }

  void zero3() {
    // Threshold 0: every tensor partitioned; reuse distance 0: gathered again for backward.
    auto in = lora("tiny", 2, 4);
    in.paramPersistenceThreshold = 0;
    in.maxReuseDistance = 0;
    const std::int64_t T = kTiny.L * kTiny.adaptersPerLayer(4), P = kTiny.P(), W = 2;
    const auto m = estimateMemory(in, Strategy::Zero3);
    QCOMPARE(m.state.parameters, 2 * T / W);
    QCOMPARE(m.state.frozen, 2 * P / W);
    QCOMPARE(m.state.gradients, 2 * T / W);
    QCOMPARE(m.state.optimizer, 12 * T / W);
    const auto c = commVolume(in, Strategy::Zero3);
    QCOMPARE(bytesOf(c, CollKind::AllGather), 2 * (2 * T + 2 * P));
    QCOMPARE(bytesOf(c, CollKind::ReduceScatter), 2 * T);
    // One gather per module with parameters: embedding, 9 per layer, final norm, head.
    for (const auto& col : c.collectives)
      if (col.kind == CollKind::AllGather && col.phase == CommPhase::Forward) QCOMPARE(col.count, 1 + 9 * kTiny.L + 2);
  }

  void qwen3Scenario() {
    // The seeds' setup: Qwen3-8B, r = 8 on all seven projections, bf16, 4 GPUs.
    const Scenario* sc = findScenario("qwen3-lora-4xa10");
    QVERIFY(sc);
    const auto in = lora("qwen3-8b", 4, 8);
    const std::int64_t T = 21823488, P = kQwen3.P(), W = 4;
    QCOMPARE(P, std::int64_t{8190735360});
    // DDP: 2Ψ frozen on every GPU (15.26 GiB), adapters 2T + grads 4T + Adam 12T.
    const auto ddp = estimateMemory(in, Strategy::Ddp);
    QCOMPARE(ddp.state.frozen, 2 * P);
    QCOMPARE(ddp.state.parameters + ddp.state.gradients + ddp.state.optimizer, 18 * T);
    // FSDP: the base sharded, 2Ψ/4 (every unit's bytes divide by 2·4).
    const auto fsdp = estimateMemory(in, Strategy::FsdpFull);
    QCOMPARE(fsdp.state.frozen, 2 * P / W);
    QCOMPARE(fsdp.state.parameters + fsdp.state.gradients + fsdp.state.optimizer, 16 * T / W);
    // ZeRO-3 at DeepSpeed's default persistence threshold (1e5): every adapter tensor (at most
    // 12288·8 = 98,304 elements) and every norm stays whole on every rank; the projections,
    // embedding and head are sharded.
    const auto z3 = estimateMemory(in, Strategy::Zero3);
    QCOMPARE(z3.state.frozen, 2 * (P - kQwen3.norms()) / W + 2 * kQwen3.norms());
    QCOMPARE(z3.state.parameters, 2 * (T / W + T));
    QCOMPARE(z3.state.gradients, 2 * T / W);
    QCOMPARE(z3.state.optimizer, 12 * T / W);
    const auto c3 = commVolume(in, Strategy::Zero3);
    QCOMPARE(bytesOf(c3, CollKind::AllGather), 2 * (2 * (P - kQwen3.norms())) + 2 * T);  // fwd + bwd + persistent
    QCOMPARE(bytesOf(c3, CollKind::ReduceScatter), 2 * T);
    const auto cd = commVolume(in, Strategy::Ddp);
    QCOMPARE(bytesOf(cd, CollKind::AllReduce), 2 * T);
    const auto cf = commVolume(in, Strategy::FsdpFull);
    const std::int64_t head = 2 * (kQwen3.h + kQwen3.V * kQwen3.h);
    QCOMPARE(bytesOf(cf, CollKind::AllGather), 2 * (2 * P + 2 * T) - head);
    QCOMPARE(bytesOf(cf, CollKind::ReduceScatter), 2 * T);
  }

  void qloraQwen3() {
    auto in = lora("qwen3-8b", 4, 8);
    in.qlora = true;
    const std::int64_t P = kQwen3.P(), W = 4;
    const std::int64_t proj = kQwen3.L * kQwen3.projections();
    // Every projection weight here divides into whole blocks: n/2 + n/64 + 4·n/16384 per tensor.
    const std::int64_t nf4 = proj / 2 + proj / 64 + 4 * (proj / 16384);
    const std::int64_t base = nf4 + 2 * (P - proj);  // embedding, head and norms in 16 bits
    const auto ddp = estimateMemory(in, Strategy::Ddp);
    QCOMPARE(ddp.state.frozen, base);
    QVERIFY(ddp.state.frozen < estimateMemory(lora("qwen3-8b", 4, 8), Strategy::Ddp).state.frozen / 2);
    // The transient dequantised copy of the largest projection (gate/up/down: 4096 x 12288) is a buffer.
    QCOMPARE(ddp.atPeak.buffers, 2 * kQwen3.h * kQwen3.f);
    // FSDP shards and gathers the quantised bytes.
    const auto fsdp = estimateMemory(in, Strategy::FsdpFull);
    QCOMPARE(fsdp.state.frozen, base / W);
    const std::int64_t T = 21823488;
    const auto cf = commVolume(in, Strategy::FsdpFull);
    const std::int64_t head = 2 * (kQwen3.h + kQwen3.V * kQwen3.h);
    QCOMPARE(bytesOf(cf, CollKind::AllGather), 2 * (base + 2 * T) - head);
    QCOMPARE(bytesOf(cf, CollKind::ReduceScatter), 2 * T);
  }

  void computeAndActivations() {
    const auto in = lora("qwen3-8b", 4, 8);
    const double tokens = 2048, T = 21823488;
    const double nonEmbed = static_cast<double>(kQwen3.P() - kQwen3.V * kQwen3.h);
    const double attn = 2.0 * kQwen3.L * kQwen3.heads * 2.0 * kQwen3.d * 2048;
    const StepFlops f = stepFlops(in);
    // Frozen weights skip their weight-gradient GEMM: 2 + 2 FLOPs per weight and token instead of 2 + 4.
    QCOMPARE(f.forward, (2 * nonEmbed + 2 * T + attn) * tokens);
    QCOMPARE(f.backward, (2 * nonEmbed + 4 * T + 2 * attn) * tokens);
    auto full = in;
    full.loraRank = 0;
    const StepFlops ff = stepFlops(full);
    QVERIFY(f.forward + f.backward < 0.7 * (ff.forward + ff.backward));
    // Activations: each target also saves its r-wide intermediate (2 bytes, 7 targets, L layers).
    QCOMPARE(activationBytes(in) - activationBytes(full), kQwen3.L * 2048 * 2 * 8 * 7);
  }

  void fullFineTuningUnchanged() {
    // lora off = the full fine-tuning formulas (strategies.md): 16Ψ for DDP's states (+2Ψ param.grad).
    auto in = lora("tiny", 2, 0);
    const std::int64_t P = kTiny.P();
    const auto ddp = estimateMemory(in, Strategy::Ddp);
    QCOMPARE(ddp.state.frozen, std::int64_t{0});
    QCOMPARE(ddp.state.modelStates(), 18 * P);
    QCOMPARE(bytesOf(commVolume(in, Strategy::Ddp), CollKind::AllReduce), 2 * P);
  }

  void recommendationSaysWhy() {
    RecommendInput ri;
    ri.model = lora("qwen3-8b", 4, 8);
    ri.model.activationCheckpointing = true;
    ri.deviceBytes = devicePreset("a10")->memoryBytes;
    ri.deviceTflops = devicePreset("a10")->bf16Tflops;
    ri.intraNode = *linkPreset("pcie4");
    ri.interNode = ri.intraNode;
    for (const auto& a : recommend(ri)) {
      QVERIFY(!a.reasons.empty());
      const std::string& why = a.reasons.front();
      QVERIFY2(why.find("21,823,488 trainable") != std::string::npos, why.c_str());
      if (a.strategy == Strategy::Ddp) QVERIFY2(why.find("replicated on every GPU") != std::string::npos, why.c_str());
      if (a.strategy == Strategy::FsdpFull) QVERIFY2(why.find("is sharded") != std::string::npos, why.c_str());
    }
    // Without checkpointing on 24 GB the replicated 15 GiB base no longer leaves room: DDP does not fit.
    ri.model.activationCheckpointing = false;
    ri.model.seqLen = 4096;
    for (const auto& a : recommend(ri))
      if (a.strategy == Strategy::Ddp) QVERIFY(!a.fit.fits);
  }

  void simulatorIssuesAdapterCollectives() {
    // The simulator's program: all-gathers of base + adapters, reduce-scatters of adapters only,
    // the frozen projections' backward cheaper than their full backward.
    SimulateInput si;
    si.model = lora("tiny", 2, 4);
    si.strategy = Strategy::FsdpFull;
    si.intraNode = *linkPreset("nvlink-h100");
    si.steps = 2;
    const auto r = simulate(si);
    const std::int64_t T = kTiny.L * kTiny.adaptersPerLayer(4), P = kTiny.P();
    std::int64_t ag = 0, rs = 0, ar = 0;
    for (const auto& sp : r.ranks.front().spans) {
      if (sp.kind != SimSpan::Kind::Collective || sp.step != 1) continue;
      (sp.op == CollKind::AllGather ? ag : sp.op == CollKind::ReduceScatter ? rs : ar) += sp.bytes;
    }
    const std::int64_t head = 2 * (kTiny.h + kTiny.V * kTiny.h);
    QCOMPARE(rs, 2 * T);
    QCOMPARE(ag, 2 * (2 * T + 2 * P) - head);
    QCOMPARE(ar, std::int64_t{0});
    QCOMPARE(r.messageBytesPerStep, commVolume(si.model, Strategy::FsdpFull).messageBytes);
    // DDP: one all-reduce of the adapters' gradients.
    si.strategy = Strategy::Ddp;
    QCOMPARE(simulate(si).messageBytesPerStep, 2 * T);
    // Backward of a block from FLOPs: 2 per frozen weight and token + 4 per adapter + 2/3 of attention.
    const auto cp = flopsComputeProfile(si.model, 100, 1, 1000);
    const double tokens = static_cast<double>(si.model.microBatch * si.model.seqLen);
    const double attn = 2.0 * kTiny.heads * 2.0 * kTiny.d * static_cast<double>(si.model.seqLen) * tokens;
    const double frozen = static_cast<double>(2 * kTiny.h + kTiny.projections());
    const double expected = (2.0 * frozen + 4.0 * static_cast<double>(kTiny.adaptersPerLayer(4))) * tokens + 2.0 * attn;
    QVERIFY(std::abs(cp.backwardS[1] - expected / 100e12) < 1e-9 * expected / 100e12);
  }
};

QTEST_APPLESS_MAIN(TestEstimatorLora)
#include "tst_estimator_lora.moc"
