// The estimator (core/estimator): parameter counts of every preset, model-state bytes per strategy
// against the formulas of strategies.md (numbers computed by hand here), DeepSpeed's own estimator
// formulas, activations, communication volumes (docs/RUNTIME.md's measured table), alpha-beta times
// and the fit, fits / does not fit, and the ranking.
#include <QtTest>

#include <cmath>
#include <string>

#include "core/estimator/comm_model.h"
#include "core/estimator/memory_estimator.h"
#include "core/estimator/recommend.h"
#include "core/util/error.h"

using namespace shardscope::core;
using namespace shardscope::core::estimator;

namespace {

constexpr std::int64_t kGiB = 1024LL * 1024 * 1024;

ModelShape preset(const char* name) {
  auto m = modelShapePreset(name);
  if (!m) qFatal("missing preset %s", name);
  return *m;
}

EstimateInput input(const char* model, int gpus, Precision p) {
  EstimateInput in;
  in.model = preset(model);
  in.gpus = gpus;
  in.gpusPerNode = std::min(gpus, 8);
  in.precision = p;
  return in;
}

// Independent count from the shape (strategies.md §2.7): Ψ = V·h·2 + h + L·(2h + 2·h·q + 2·h·kv + 3·h·f)
// for untied models without biases or q/k norms.
std::int64_t handCount(std::int64_t V, std::int64_t h, std::int64_t L, std::int64_t heads, std::int64_t kv, std::int64_t d,
                       std::int64_t f) {
  const std::int64_t q = heads * d, kvd = kv * d;
  return 2 * V * h + h + L * (2 * h + 2 * h * q + 2 * h * kvd + 3 * h * f);
}

const Collective* find(const CommEstimate& c, CollKind k) {
  for (const auto& col : c.collectives)
    if (col.kind == k) return &col;
  return nullptr;
}
std::int64_t bytesOf(const CommEstimate& c, CollKind k) {
  std::int64_t b = 0;
  for (const auto& col : c.collectives)
    if (col.kind == k) b += col.messageBytes;
  return b;
}

}  // namespace

class TestEstimator : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Issue 47: torchtitan's selective checkpointing. Every 2nd block checkpointed keeps exactly the
  // mean of none and full (half the blocks each way); the op policy keeps each block's input, the
  // attention output and every other matmul's output: between full and none, and recomputes the
  // k, o and up projections: a third of Llama 3 8B's forward at 8k tokens. Compute grows with what
  // is recomputed; a policy that cannot be combined is refused.
  void selectiveCheckpointing() {
    EstimateInput none = input("llama3-8b", 8, Precision::Bf16);
    none.microBatch = 1;
    none.seqLen = 8192;
    EstimateInput full = none, layer = none, op = none;
    full.activationCheckpointing = true;
    layer.selective = EstimateInput::Selective::Layers;
    layer.sacEvery = 2;
    op.selective = EstimateInput::Selective::Ops;
    const auto mNone = activationMoments(none), mFull = activationMoments(full), mLayer = activationMoments(layer),
               mOp = activationMoments(op);
    QCOMPARE(mLayer.headBackward, (mNone.headBackward + mFull.headBackward) / 2);
    QVERIFY(mFull.headBackward < mOp.headBackward && mOp.headBackward < mLayer.headBackward);
    QVERIFY(activationBytes(op) < activationBytes(none));
    // Kept per block with the op policy, bf16, per token: input h, attention output q, q, v, gate, down
    // (h + q + q + kv + f + h elements) and the fp32 log-sum-exp per head.
    const std::int64_t T = 8192, h = 4096, q = 4096, kv = 1024, f = 14336;
    const std::int64_t kept = T * (2 * (h + q + q + kv + f + h) + 4 * 32);
    QCOMPARE(mOp.headBackward - mFull.headBackward, 32 * (kept - T * h * 2));
    QCOMPARE(recomputedForwardFraction(none), 0.0);
    QCOMPARE(recomputedForwardFraction(full), 1.0);
    QCOMPARE(recomputedForwardFraction(layer), 0.5);
    const double opShare = recomputedForwardFraction(op);
    QVERIFY2(opShare > 0.25 && opShare < 0.40, std::to_string(opShare).c_str());
    RecommendInput ri;
    ri.model = none;
    const double cNone = assess(ri, Strategy::FsdpFull).computeS;
    ri.model = op;
    const double cOp = assess(ri, Strategy::FsdpFull).computeS;
    ri.model = layer;
    const double cLayer = assess(ri, Strategy::FsdpFull).computeS;
    ri.model = full;
    const double cFull = assess(ri, Strategy::FsdpFull).computeS;
    QVERIFY(cNone < cOp && cOp < cLayer && cLayer < cFull);
    QCOMPARE(cFull - cNone, 2 * (cLayer - cNone));
    EstimateInput both = op;
    both.activationCheckpointing = true;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, activationMoments(both));
    EstimateInput eager = op;
    eager.attention = AttentionKind::Eager;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, activationMoments(eager));
    QCOMPARE(selectiveName(layer), std::string("layer:2"));
    QCOMPARE(selectiveName(op), std::string("op"));
  }

  void publishedParameterCounts() {
    // strategies.md §2.7 (HF configs; torchtitan).
    QCOMPARE(parameterCount(preset("llama3-8b")), std::int64_t{8030261248});
    QCOMPARE(parameterCount(preset("llama3-70b")), std::int64_t{70553706496});
    QCOMPARE(parameterCount(preset("qwen3-8b")), std::int64_t{8190735360});
    QCOMPARE(parameterCount(preset("qwen2.5-7b")), std::int64_t{7615616512});
    QCOMPARE(blockParameterCount(preset("llama3-8b")), std::int64_t{218112000});
    QCOMPARE(blockParameterCount(preset("qwen3-8b")), std::int64_t{192946432});
    QCOMPARE(blockParameterCount(preset("qwen2.5-7b")), std::int64_t{233057792});
    QCOMPARE(handCount(128256, 4096, 32, 32, 8, 128, 14336), std::int64_t{8030261248});
    // LL: the embedding (= lm_head) V·h.
    QCOMPARE(largestModuleParameters(preset("llama3-8b")), std::int64_t{525336576});
    QCOMPARE(largestModuleParameters(preset("qwen3-8b")), std::int64_t{622329856});
    // Tied embeddings count the shared weight once.
    auto tied = preset("llama3-8b");
    tied.tiedEmbeddings = true;
    QCOMPARE(parameterCount(tied), std::int64_t{8030261248 - 525336576});
  }

  void runtimePresetCounts() {
    // The runtime's presets (profiler/runtime/model.cpp), counted independently from their shapes,
    // and the figures docs/RUNTIME.md prints.
    QCOMPARE(parameterCount(preset("tiny")), handCount(256, 64, 2, 4, 2, 16, 176));
    QCOMPARE(parameterCount(preset("odd")), handCount(259, 48, 2, 3, 1, 16, 131));
    QCOMPARE(parameterCount(preset("small")), handCount(2048, 256, 4, 8, 4, 32, 688));
    QCOMPARE(parameterCount(preset("medium")), handCount(8192, 512, 8, 8, 4, 64, 1376));
    QCOMPARE(parameterCount(preset("tiny")), std::int64_t{125248});
    QCOMPARE(parameterCount(preset("odd")), std::int64_t{75120});
    QCOMPARE(parameterCount(preset("small")), std::int64_t{3950848});
    QCOMPARE(parameterCount(preset("medium")), std::int64_t{31597056});
    // --layers cuts the depth like the runtime's.
    QCOMPARE(parameterCount(*modelShapePreset("small", 2)), handCount(2048, 256, 2, 8, 4, 32, 688));
    // FSDP units: embedding, blocks, norm + head.
    const auto units = fsdpUnitSizes(preset("tiny"));
    QCOMPARE(units.size(), std::size_t{4});
    QCOMPARE(units[0], std::int64_t{16384});
    QCOMPARE(units[1], std::int64_t{46208});
    QCOMPARE(units[3], std::int64_t{16448});
    QVERIFY(!modelShapePreset("gpt-5"));
  }

  void customShapeValidation() {
    ModelShape m;
    m.vocab = 1000;
    m.hidden = 64;
    m.layers = 2;
    m.heads = 6;
    m.kvHeads = 4;
    m.ffn = 128;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, validateShape(m));  // 6 heads, 4 kv heads
    m.kvHeads = 3;
    validateShape(m);
    m.hidden = 0;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, validateShape(m));
  }

  void modelStatesBf16Formulas() {
    // Llama-3-8B, N = 8, bf16 + fp32 Adam: strategies.md §2.1/§2.9 (Ψ divisible by 8: no padding).
    const std::int64_t P = 8030261248, N = 8;
    auto in = input("llama3-8b", 8, Precision::Bf16);
    in.paramPersistenceThreshold = 0;  // no persistent parameters: exactly 16Ψ/N for ZeRO-3
    in.gradientAsBucketView = true;    // DDP = 16Ψ
    const auto ddp = estimateMemory(in, Strategy::Ddp);
    QCOMPARE(ddp.state.modelStates(), 16 * P);
    QCOMPARE(std::round(static_cast<double>(16 * P) / kGiB * 10) / 10, 119.7);  // §2.10's table
    in.gradientAsBucketView = false;
    QCOMPARE(estimateMemory(in, Strategy::Ddp).state.gradients, 4 * P);  // + the param.grad copy
    const auto z1 = estimateMemory(in, Strategy::Zero1);
    QCOMPARE(z1.state.parameters, 2 * P);
    QCOMPARE(z1.state.gradients, 2 * P);
    QCOMPARE(z1.state.optimizer, 12 * P / N);
    const auto z2 = estimateMemory(in, Strategy::Zero2);
    QCOMPARE(z2.state.parameters + z2.state.gradients + z2.state.optimizer, 2 * P + 14 * P / N);
    QCOMPARE(z2.state.buffers, std::int64_t{500000000} * 2);  // one reduce bucket in bf16 (overlap_comm off)
    const auto z3 = estimateMemory(in, Strategy::Zero3);
    QCOMPARE(z3.state.parameters + z3.state.gradients + z3.state.optimizer, 16 * P / N);
    QCOMPARE(z3.state.buffers, std::int64_t{500000000} * 2 * 2);  // two IPG buckets (overlap_comm on)
    // Ψ > stage3_max_reuse_distance/2: the live set is LL + the prefetch bucket.
    QCOMPARE(z3.atPeak.gathered, 2 * (std::int64_t{525336576} + 50000000));
    const auto fsdp = estimateMemory(in, Strategy::FsdpFull);
    QCOMPARE(fsdp.state.modelStates(), 16 * P / N);
    // Gathered at the peak: the head unit (h + V·h) and one block, in bf16.
    QCOMPARE(fsdp.atPeak.gathered, 2 * ((4096 + std::int64_t{525336576}) + 218112000));
    const auto gradOp = estimateMemory(in, Strategy::FsdpGradOp);
    QCOMPARE(gradOp.atPeak.gathered, 2 * P);
    // HSDP over 16 devices, groups of 8: the same state per device as FSDP over 8.
    auto in16 = in;
    in16.gpus = 16;
    in16.gpusPerNode = 8;
    QCOMPARE(estimateMemory(in16, Strategy::Hsdp).state.modelStates(), 16 * P / 8);
    QCOMPARE(estimateMemory(in16, Strategy::FsdpFull).state.modelStates(), 16 * P / 16);
    // hpZ: ZeRO-3 over 16 + the secondary 2Ψ/8 partition.
    const auto hpz = estimateMemory(in16, Strategy::ZeroPPHpz);
    const auto z3x16 = estimateMemory(in16, Strategy::Zero3);
    QCOMPARE(hpz.state.parameters - z3x16.state.parameters, 2 * P / 8);
    // Optimizer offload: the optimizer state leaves the device for the host.
    in.offloadOptimizer = true;
    const auto z3off = estimateMemory(in, Strategy::Zero3);
    QCOMPARE(z3off.state.optimizer, std::int64_t{0});
    QCOMPARE(z3off.cpuBytes, 12 * P / N);
    in.offloadParam = true;
    const auto z3all = estimateMemory(in, Strategy::Zero3);
    QCOMPARE(z3all.state.parameters, std::int64_t{0});
    QCOMPARE(z3all.state.gradients, std::int64_t{0});
    QCOMPARE(z3all.cpuBytes, 16 * P / N);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, estimateMemory(in, Strategy::Zero2));  // offload_param needs ZeRO-3/FSDP
  }

  void modelStatesRuntimeFp32() {
    // The runtime's model_state.* for tiny on 2 ranks (docs/RUNTIME.md: Ψ = 125,248, S = 4Ψ).
    const std::int64_t S = 4 * 125248;
    const auto in = input("tiny", 2, Precision::Fp32);
    const auto ddp = estimateMemory(in, Strategy::Ddp);
    QCOMPARE(ddp.state.parameters, S);
    QCOMPARE(ddp.state.gradients, 2 * S);  // flat gradients + param.grad copies
    QCOMPARE(ddp.state.optimizer, 2 * S);
    QCOMPARE(ddp.atPeak.gradients, S);  // the copies are made after the activation peak
    const auto z1 = estimateMemory(in, Strategy::Zero1);
    QCOMPARE(z1.state.gradients, S);
    QCOMPARE(z1.state.optimizer, S);
    const auto z2 = estimateMemory(in, Strategy::Zero2);
    QCOMPARE(z2.state.gradients, S / 2);
    QCOMPARE(z2.state.buffers, S);  // IPG bucket of min(reduce_bucket_size, Ψ) elements
    // ZeRO-3: every tiny parameter is below the 1e5 persistence threshold: whole on every rank
    // beside its shard; two IPG buckets.
    const auto z3 = estimateMemory(in, Strategy::Zero3);
    QCOMPARE(z3.state.parameters, S + S / 2);
    QCOMPARE(z3.state.buffers, 2 * S);
    QCOMPARE(z3.atPeak.gathered, std::int64_t{0});
    const auto fsdp = estimateMemory(in, Strategy::FsdpFull);
    QCOMPARE(fsdp.state.parameters, S / 2);
    QCOMPARE(fsdp.atPeak.gathered, 4 * (16448 + 46208));  // head + the last block
    QCOMPARE(fsdp.atPeak.buffers, 4 * 46208);             // one block's unsharded gradient
    // odd on 2 ranks: Ψ = 75,120 is even, but FSDP pads each unit to a multiple of the ranks.
    const auto odd = input("odd", 2, Precision::Fp32);
    std::int64_t shard = 0;
    for (auto u : fsdpUnitSizes(odd.model)) shard += (u + 1) / 2;
    QCOMPARE(estimateMemory(odd, Strategy::FsdpFull).state.parameters, 4 * shard);
  }

  void peakPhases() {
    // ZeRO-1/2: the all-gather after the step can be the peak when activations are small: it
    // gathers into the parameters, so only the backend's staging of the gathered buffer (w·Ψ) is
    // added; in allgather_bucket_size pieces, one piece's.
    auto in = input("medium", 2, Precision::Fp32);
    in.microBatch = 1;
    in.seqLen = 16;
    const std::int64_t S = 4 * std::int64_t{31597056};
    const auto z1 = estimateMemory(in, Strategy::Zero1);
    QCOMPARE(z1.peakBytes, z1.state.modelStates() + S);
    QCOMPARE(z1.atPeak.activations, std::int64_t{0});
    auto pieces = in;
    pieces.allgatherBucketSize = 31597056 / 2 / 4;  // a quarter of a rank's partition
    QCOMPARE(estimateMemory(pieces, Strategy::Zero1).peakBytes, z1.state.modelStates() + S / 4);
    // DDP: the end of backward (all param.grad copies) wins over a small activation peak.
    const auto ddp = estimateMemory(in, Strategy::Ddp);
    QCOMPARE(ddp.peakBytes, ddp.state.modelStates());
    // With large activations the start of backward is the peak.
    in.microBatch = 8;
    in.seqLen = 512;
    const auto ddp2 = estimateMemory(in, Strategy::Ddp);
    QCOMPARE(ddp2.peakBytes, ddp2.state.modelStates() - S + activationBytes(in));
    // HSDP on one node of 4: two replicas of shard groups of 2 (the runtime's default); 16 devices on
    // 2 nodes: groups of a node.
    auto h = input("tiny", 4, Precision::Fp32);
    QCOMPARE(effectiveShardGroup(h, Strategy::Hsdp), 2);
    QCOMPARE(effectiveShardGroup(h, Strategy::ZeroPPHpz), 4);
    h.gpus = 16;
    h.gpusPerNode = 8;
    QCOMPARE(effectiveShardGroup(h, Strategy::Hsdp), 8);
    h.shardGroupSize = 4;
    QCOMPARE(effectiveShardGroup(h, Strategy::Hsdp), 4);
  }

  void activations() {
    // Our runtime (eager, fp32), tiny, micro-batch 4 x 128 tokens, by hand:
    //   per layer T·(4·(12h + 4f) + 8) + T·4·heads·s + s² = 3,018,752 + 1,048,576 + 16,384
    //   head T·(12V + 16h + 20) + 8·s·head_dim = 2,107,392 + 16,384
    auto in = input("tiny", 2, Precision::Fp32);
    in.microBatch = 4;
    in.seqLen = 128;
    QCOMPARE(activationBytes(in), 2 * (3018752 + 1048576 + 16384) + 2107392 + 16384);
    // The counting allocator measured 10,283,148 activation + 8,192 input bytes at the peak of
    // that run (docs/ESTIMATOR.md): within 0.01 %.
    QVERIFY(std::fabs(static_cast<double>(activationBytes(in)) - 10291340.0) / 10291340.0 < 1e-4);
    // Checkpointing keeps each block's input and recomputes one block.
    in.activationCheckpointing = true;
    // At the head's backward: the inputs kept and the head's activations; at a block's backward:
    // the inputs, the block recomputed and what flows back through it (two hidden rows and the
    // probabilities' gradient, T·4·(2h + heads·s)). The head's are gone by then.
    const auto am = activationMoments(in);
    QCOMPARE(am.headBackward, std::int64_t{2 * (512 * 64 * 4) + 2107392 + 16384});
    QCOMPARE(am.blockBackward, std::int64_t{2 * (512 * 64 * 4) + (3018752 + 1048576 + 16384) + 512 * 4 * (2 * 64 + 4 * 128)});
    QCOMPARE(activationBytes(in), am.blockBackward);
    in.activationCheckpointing = false;
    QCOMPARE(activationMoments(in).blockBackward, std::int64_t{0});
    in.activationCheckpointing = true;
    // Fused attention, bf16 (strategies.md §2.6): 12h + 4·kv_dim + 8f = 167,936 B per token per layer
    // for Llama-3-8B.
    auto l1 = input("llama3-8b", 8, Precision::Bf16);
    l1.model.layers = 1;
    l1.microBatch = 1;
    l1.seqLen = 2048;
    auto l2 = l1;
    l2.model.layers = 2;
    QCOMPARE(effectiveAttention(l1), AttentionKind::Flash);
    QCOMPARE(activationBytes(l2) - activationBytes(l1), std::int64_t{2048} * 167936);
    // Activations are per device: independent of the strategy, scale with the micro-batch.
    auto b2 = l2;
    b2.microBatch = 2;
    QCOMPARE(activationBytes(b2), 2 * activationBytes(l2));
  }

  void deepspeedFormulas() {
    // strategies.md §2.2, DeepSpeed's doc example shapes (t5-3b-like Ψ, LL = 32M, 1 node × 8).
    const std::int64_t P = 2851000000, LL = 32000000;
    auto z2 = deepspeedZero2(P, 8, 1, /*cpuOffload=*/false);
    QCOMPARE(z2.gpuBytes, std::int64_t{5702000000} + 6414750000);  // 2Ψ + int(18Ψ/8)
    QCOMPARE(z2.cpuBytes, std::int64_t{136848000000});             // Ψ·4·gpn·1.5 (127.45 GiB)
    z2 = deepspeedZero2(P, 8, 1, true);
    QCOMPARE(z2.gpuBytes, 2 * P);
    QCOMPARE(z2.cpuBytes, std::int64_t{136848000000});  // Ψ·max(4·8, 16)·1.5
    z2 = deepspeedZero2(P, 2, 1, true);
    QCOMPARE(z2.cpuBytes, std::int64_t{68424000000});  // max(4·2, 16) = 16
    auto z3 = deepspeedZero3(P, LL, 8, 1, false, false);
    QCOMPARE(z3.gpuBytes, std::int64_t{128000000} + 6414750000);
    QCOMPARE(z3.cpuBytes, std::int64_t{1536000000});  // zero_init: LL·4·gpn·1.5
    QCOMPARE(z3.largestLayerBytes, std::int64_t{128000000});
    z3 = deepspeedZero3(P, LL, 8, 1, false, false, /*zeroInit=*/false);
    QCOMPARE(z3.cpuBytes, std::int64_t{136848000000});
    z3 = deepspeedZero3(P, LL, 8, 1, true, false);
    QCOMPARE(z3.gpuBytes, std::int64_t{128000000} + 712750000);  // 4·LL + 2Ψ/8
    QCOMPARE(z3.cpuBytes, std::int64_t{68424000000});            // Ψ·16·1.5
    z3 = deepspeedZero3(P, LL, 8, 1, true, true);
    QCOMPARE(z3.gpuBytes, std::int64_t{128000000});
    QCOMPARE(z3.cpuBytes, std::int64_t{76977000000});  // Ψ·18·1.5
    // Two nodes: gpus_factor = 1/2; without zero_init max(4·gpn, 18/nodes).
    const std::int64_t L8 = 8030261248, LL8 = 525336576;
    z3 = deepspeedZero3(L8, LL8, 8, 2, true, true);
    QCOMPARE(z3.cpuBytes, std::int64_t{108408526848});  // Ψ·18·0.5·1.5
    z3 = deepspeedZero3(L8, LL8, 8, 2, true, true, false);
    QCOMPARE(z3.cpuBytes, std::int64_t{385452539904});  // Ψ·32·1.5
    // strategies.md §2.10: Llama-3-8B, 1 × 8: ZeRO-3 18.78 GiB, ZeRO-2 31.78 GiB.
    QCOMPARE(std::round(static_cast<double>(deepspeedZero3(L8, LL8, 8, 1, false, false).gpuBytes) / kGiB * 100) / 100, 18.78);
    QCOMPARE(std::round(static_cast<double>(deepspeedZero2(L8, 8, 1, false).gpuBytes) / kGiB * 100) / 100, 31.78);
    QCOMPARE(std::round(static_cast<double>(deepspeedZero3(L8, LL8, 8, 1, true, false).gpuBytes) / kGiB * 100) / 100, 3.83);
    // DeepSpeed's int() truncation of 18Ψ/N.
    QCOMPARE(deepspeedZero2(7, 1, 3, false).gpuBytes, std::int64_t{14 + 42});
  }

  void commVolumesRuntime() {
    // docs/RUNTIME.md, measured on tiny with 2 ranks (Gloo: reduce-scatter = all-reduce).
    const auto in = input("tiny", 2, Precision::Fp32);
    CommOptions gloo;
    gloo.emulatedReduceScatter = true;
    const std::int64_t S = 500992;
    const auto ddp = commVolume(in, Strategy::Ddp, gloo);
    QCOMPARE(bytesOf(ddp, CollKind::AllReduce), S);
    QCOMPARE(ddp.wireBytes, static_cast<double>(S));
    for (Strategy s : {Strategy::Zero1, Strategy::Zero2}) {
      const auto c = commVolume(in, s, gloo);
      QCOMPARE(bytesOf(c, CollKind::AllReduce), S);
      QCOMPARE(bytesOf(c, CollKind::AllGather), S);
      QCOMPARE(c.wireBytes, 751488.0);
    }
    const auto z3 = commVolume(in, Strategy::Zero3, gloo);
    QCOMPARE(bytesOf(z3, CollKind::AllGather), S);  // persistent parameters re-gathered after the step
    QCOMPARE(bytesOf(z3, CollKind::ReduceScatter), S);
    QCOMPARE(z3.wireBytes, 751488.0);
    const auto fsdp = commVolume(in, Strategy::FsdpFull, gloo);
    QCOMPARE(bytesOf(fsdp, CollKind::AllGather), std::int64_t{936192});
    QCOMPARE(bytesOf(fsdp, CollKind::ReduceScatter), S);
    QCOMPARE(fsdp.wireBytes, 969088.0);
    QCOMPARE(find(fsdp, CollKind::AllGather)->count, std::int64_t{4});
    // With a real reduce-scatter the FSDP wire volume drops to (n-1)/n·S for the reduction.
    const auto nccl = commVolume(in, Strategy::FsdpFull);
    QCOMPARE(nccl.wireBytes, 936192.0 / 2 + S / 2.0);
  }

  void commVolumesRingTheory() {
    // Llama-3-8B, N = 8, bf16 (strategies.md §3.3): DDP 2(N-1)/N·2Ψ = 28.1 GB; ZeRO-3 3(N-1)/N·2Ψ = 42.2 GB.
    const double P = 8030261248.0;
    auto in = input("llama3-8b", 8, Precision::Bf16);
    in.paramPersistenceThreshold = 0;
    QCOMPARE(commVolume(in, Strategy::Ddp).wireBytes, 2.0 * 7 / 8 * 2 * P);
    QCOMPARE(commVolume(in, Strategy::Zero3).wireBytes, 3.0 * 7 / 8 * 2 * P);
    QCOMPARE(commVolume(in, Strategy::FsdpGradOp).wireBytes, 2.0 * 7 / 8 * 2 * P);
    // ZeRO-1/2 as DeepSpeed does them: all-reduce + all-gather = 3(N-1)/N.
    QCOMPARE(commVolume(in, Strategy::Zero2).wireBytes, 3.0 * 7 / 8 * 2 * P);
    // A small model stays gathered (2Ψ < stage3_max_reuse_distance): no backward all-gather.
    auto small = input("small", 8, Precision::Bf16);
    small.paramPersistenceThreshold = 0;
    QCOMPARE(commVolume(small, Strategy::Zero3).wireBytes, 2.0 * 7 / 8 * 2 * 3950848.0);
    // HSDP over 2 nodes x 8: in-node as FSDP over 8, plus an all-reduce of Ψ/8 across the 2 replicas.
    auto in16 = input("llama3-8b", 16, Precision::Bf16);
    in16.gpusPerNode = 8;
    const auto hsdp = commVolume(in16, Strategy::Hsdp);
    const Collective* cross = find(hsdp, CollKind::AllReduce);
    QVERIFY(cross);
    QCOMPARE(cross->groupSize, 2);
    QVERIFY(cross->interNode);
    QCOMPARE(cross->wireBytes(), 2.0 * 1 / 2 * 2 * P / 8);  // 2Ψ·B·(W-G)/(G·W)
    // hpZ: the backward all-gather stays inside the node.
    auto hp = in16;
    hp.paramPersistenceThreshold = 0;
    const auto hpz = commVolume(hp, Strategy::ZeroPPHpz);
    int inNode = 0;
    for (const auto& c : hpz.collectives)
      if (c.kind == CollKind::AllGather && c.phase == CommPhase::Backward) {
        QCOMPARE(c.groupSize, 8);
        QVERIFY(!c.interNode);
        ++inNode;
      }
    QCOMPARE(inNode, 1);
  }

  void alphaBetaTimes() {
    QCOMPARE(ringFactor(CollKind::AllReduce, 8), 1.75);
    QCOMPARE(ringFactor(CollKind::AllGather, 8), 0.875);
    QCOMPARE(ringFactor(CollKind::ReduceScatter, 1), 0.0);
    LinkModel link{"test", 100, 0, 10, ""};
    CommEstimate c;
    Collective ar;
    ar.kind = CollKind::AllReduce;
    ar.groupSize = 8;
    ar.count = 4;
    ar.messageBytes = 1000000000;
    c.collectives.push_back(ar);
    Collective ag = ar;
    ag.kind = CollKind::AllGather;
    ag.count = 1;
    ag.interNode = true;
    c.collectives.push_back(ag);
    const LinkModel slow{"slow", 10, 0, 50, ""};
    commTime(c, link, slow);
    QVERIFY(std::fabs(c.collectives[0].timeS - (4 * 10e-6 + 1.75e9 / 100e9)) < 1e-12);
    QVERIFY(std::fabs(c.collectives[1].timeS - (50e-6 + 0.875e9 / 10e9)) < 1e-12);  // across nodes: the slow link
    QVERIFY(std::fabs(c.timeS - c.collectives[0].timeS - c.collectives[1].timeS) < 1e-15);
    // NVLink all-reduce uses its own (NVLS) bandwidth.
    const auto nv = *linkPreset("nvlink-h100");
    QCOMPARE(nv.arBw(), 480.0);
    QCOMPARE(nv.busBwGBps, 370.0);
    for (const auto& n : linkPresetNames()) QVERIFY2(linkPreset(n).has_value(), n.c_str());
    QVERIFY(!linkPreset("carrier-pigeon"));
  }

  void alphaBetaFit() {
    // Synthetic instances from alpha = 50 us, busBw = 2 GB/s: the fit recovers them.
    std::vector<CollectiveSample> s;
    for (std::int64_t bytes : {10000, 100000, 1000000, 5000000}) {
      for (CollKind k : {CollKind::AllReduce, CollKind::AllGather}) {
        CollectiveSample x;
        x.kind = k;
        x.groupSize = 4;
        x.messageBytes = bytes;
        x.durationS = 50e-6 + static_cast<double>(bytes) * ringFactor(k, 4) / 2e9;
        s.push_back(x);
      }
    }
    CollectiveSample emu;  // Gloo's reduce-scatter costs an all-reduce
    emu.kind = CollKind::ReduceScatter;
    emu.emulatedReduceScatter = true;
    emu.groupSize = 4;
    emu.messageBytes = 2000000;
    emu.durationS = 50e-6 + 2e6 * 1.5 / 2e9;
    s.push_back(emu);
    const auto f = fitLink(s, "fit");
    QVERIFY(std::fabs(f.link.alphaUs - 50) < 1e-6);
    QVERIFY(std::fabs(f.link.busBwGBps - 2) < 1e-9);
    QCOMPARE(f.samples, std::int64_t{9});
    QVERIFY(f.r2 > 0.999999);
    QVERIFY(f.meanAbsRelError < 1e-9);
    // Not enough information: refused with a reason; one size only: the bandwidth, no latency,
    // and the note says so.
    QVERIFY_THROWS_EXCEPTION(Error, fitLink({s[0]}, "x"));
    auto same = s[0];
    same.durationS *= 3;
    const auto one = fitLink({s[0], same}, "x");
    QCOMPARE(one.link.arAlphaUs(), 0.0);
    QVERIFY(std::abs(static_cast<double>(s[0].messageBytes) * ringFactor(s[0].kind, 4) / (one.link.arBw() * 1e9) -
                     2 * s[0].durationS) < 1e-12);
    QVERIFY2(one.link.note.find("bandwidth only") != std::string::npos, one.link.note.c_str());
  }

  void alphaBetaFitUnderNoise() {
    // One size per kind (ZeRO-1: one gradient all-reduce, one parameter all-gather per step): each
    // kind's prediction is its mean, not a line made up from two sizes of different kinds.
    std::vector<CollectiveSample> s;
    auto add = [&](CollKind k, std::int64_t bytes, double d) {
      CollectiveSample x;
      x.kind = k;
      x.groupSize = 4;
      x.messageBytes = bytes;
      x.durationS = d;
      s.push_back(x);
    };
    for (double d : {0.030, 0.040, 0.050}) add(CollKind::AllReduce, 16000000, d);
    for (double d : {0.020, 0.080, 0.125}) add(CollKind::AllGather, 16000000, d);
    auto f = fitLink(s, "one size");
    const double arWire = 16e6 * ringFactor(CollKind::AllReduce, 4), agWire = 16e6 * ringFactor(CollKind::AllGather, 4);
    QVERIFY2(std::abs(f.link.arAlphaUs() * 1e-6 + arWire / (f.link.arBw() * 1e9) - 0.040) < 1e-9,
             qPrintable(QString::number(f.link.arBw())));
    QVERIFY(std::abs(f.link.alphaUs * 1e-6 + agWire / (f.link.busBwGBps * 1e9) - 0.075) < 1e-9);
    // Durations that do not grow with size (noise over a narrow range): still a link, bandwidth
    // only, not an error (a short noisy run must still be simulated).
    s.clear();
    add(CollKind::AllGather, 1000000, 0.004);
    add(CollKind::AllGather, 1200000, 0.003);
    f = fitLink(s, "flat");
    QCOMPARE(f.link.alphaUs, 0.0);
    QVERIFY(f.link.busBwGBps > 0);
    QVERIFY(f.link.note.find("bandwidth only") != std::string::npos);
    // Stretched instances (every fourth three times as long, as when a rank is descheduled): the
    // fit follows the mean duration at every size (1.5x the clean line), where weighting by the
    // observations would have followed the fast ones.
    s.clear();
    for (std::int64_t bytes : {100000, 1000000, 4000000, 16000000})
      for (double stretch : {1.0, 1.0, 1.0, 3.0})
        add(CollKind::AllGather, bytes, stretch * (100e-6 + static_cast<double>(bytes) * 0.75 / 1e9));
    f = fitLink(s, "stretched");
    for (std::int64_t bytes : {100000, 16000000}) {
      const double pred = f.link.alphaUs * 1e-6 + static_cast<double>(bytes) * 0.75 / (f.link.busBwGBps * 1e9);
      const double mean = 1.5 * (100e-6 + static_cast<double>(bytes) * 0.75 / 1e9);
      QVERIFY2(std::abs(pred - mean) < 0.01 * mean,
               qPrintable(QString("%1 B: fit %2 s, mean %3 s").arg(bytes).arg(pred).arg(mean)));
    }
    // A narrow range of sizes whose line would need a negative latency (the larger ones happened
    // to run slower): the line through the origin, which keeps the total time, not a clipped
    // latency with the steep slope (which would put every small one at three times its time).
    s.clear();
    double total = 0;
    for (int i = 0; i < 30; ++i) add(CollKind::AllReduce, 1400000, 0.004), total += 0.004;
    for (int i = 0; i < 10; ++i) add(CollKind::AllReduce, 2100000, 0.010), total += 0.010;
    f = fitLink(s, "narrow");
    QCOMPARE(f.link.arAlphaUs(), 0.0);
    double predicted = 0;
    for (const auto& x : s)
      predicted += static_cast<double>(x.messageBytes) * ringFactor(CollKind::AllReduce, 4) / (f.link.arBw() * 1e9);
    QVERIFY2(std::abs(predicted - total) < 0.1 * total,
             qPrintable(QString("fit %1 s in all, measured %2 s").arg(predicted).arg(total)));
  }

  void fits() {
    const std::int64_t dev = 80 * kGiB;
    const std::int64_t usable = 77309411328;  // 80 GiB · 0.9
    QVERIFY(checkFit(usable, dev, 0.1).fits);
    QVERIFY(!checkFit(usable + 1, dev, 0.1).fits);
    QCOMPARE(checkFit(usable + 1, dev, 0.1).freeBytes, std::int64_t{-1});
    QVERIFY(checkFit(dev, dev, 0.0).fits);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, checkFit(1, dev, 1.0));
    // Llama-3-8B on 8 x 80 GiB: DDP (18Ψ = 134.6 GiB) does not fit, FSDP does; Llama-3-70B's
    // 16Ψ/8 = 131.4 GiB of model states does not fit on 8 devices but does on 64.
    const auto in = input("llama3-8b", 8, Precision::Bf16);
    QVERIFY(!checkFit(estimateMemory(in, Strategy::Ddp).peakBytes, dev, 0.1).fits);
    QVERIFY(checkFit(estimateMemory(in, Strategy::FsdpFull).peakBytes, dev, 0.1).fits);
    auto big = input("llama3-70b", 8, Precision::Bf16);
    big.activationCheckpointing = true;  // without it 2048 tokens of activations alone need 52 GiB
    QVERIFY(!checkFit(estimateMemory(big, Strategy::Zero3).peakBytes, dev, 0.1).fits);
    big.gpus = 64;
    QVERIFY(checkFit(estimateMemory(big, Strategy::Zero3).peakBytes, dev, 0.1).fits);
    QCOMPARE(parseByteSize("80GiB").value(), 80 * kGiB);
    QCOMPARE(parseByteSize("141 GB").value(), std::int64_t{141000000000});
    QCOMPARE(parseByteSize("1.5TiB").value(), 1536 * kGiB);
    QCOMPARE(parseByteSize("4096").value(), std::int64_t{4096});
    QVERIFY(!parseByteSize("eighty"));
    QVERIFY(!parseByteSize("80XB"));
    QVERIFY(!parseByteSize("0GiB"));
    QCOMPARE(formatBytes(1536.0), std::string("1.50 KiB"));
  }

  void strategyNames() {
    for (Strategy s : allStrategies()) QVERIFY(strategyFromString(strategyName(s)).value() == s);
    QVERIFY(strategyFromString("FULL-SHARD").value() == Strategy::FsdpFull);
    QVERIFY(strategyFromString("shard_grad_op").value() == Strategy::FsdpGradOp);
    QVERIFY(strategyFromString("hybrid_shard").value() == Strategy::Hsdp);
    QVERIFY(strategyFromString("hpz").value() == Strategy::ZeroPPHpz);
    QVERIFY(!strategyFromString("zero4"));
  }

  void recommendation() {
    RecommendInput ri;
    ri.model = input("llama3-8b", 8, Precision::Bf16);
    ri.intraNode = *linkPreset("nvlink-h100");
    ri.interNode = *linkPreset("ib-ndr");
    ri.deviceBytes = 80 * kGiB;
    auto r = recommend(ri);
    QCOMPARE(r.size(), std::size_t{6});  // hsdp and hpZ only across nodes
    bool seenMiss = false;
    for (std::size_t i = 0; i < r.size(); ++i) {
      QCOMPARE(r[i].rank, static_cast<int>(i) + 1);
      if (!r[i].fit.fits) seenMiss = true;
      QVERIFY2(!(seenMiss && r[i].fit.fits), "a strategy that fits is ranked after one that does not");
      if (i > 0 && r[i].fit.fits == r[i - 1].fit.fits) QVERIFY(r[i].stepS >= r[i - 1].stepS);
      QVERIFY(!r[i].reasons.empty());
    }
    QCOMPARE(strategyName(r.back().strategy), strategyName(Strategy::Ddp));  // the only one that does not fit
    QVERIFY(!r.back().fit.fits);
    QCOMPARE(r.front().relativeStepTime, 1.0);
    QVERIFY(r.front().reasons[0].rfind("fits", 0) == 0);
    QVERIFY(r.back().reasons[0].rfind("does not fit", 0) == 0);
    // On 24 GiB devices (with activation checkpointing) only the fully sharded strategies fit;
    // ZeRO-1/2 fall behind them.
    ri.deviceBytes = 24 * kGiB;
    ri.model.activationCheckpointing = true;
    r = recommend(ri);
    QVERIFY(r.front().strategy == Strategy::FsdpFull || r.front().strategy == Strategy::Zero3);
    for (const auto& a : r)
      if (a.strategy == Strategy::Zero1 || a.strategy == Strategy::Zero2 || a.strategy == Strategy::Ddp) QVERIFY(!a.fit.fits);
    // Everything fits (small model) and the link is slow: the least traffic wins. DDP all-reduces 2Ψ,
    // ZeRO-1 moves 3Ψ after backward, so DDP ranks first.
    RecommendInput slow;
    slow.model = input("small", 8, Precision::Bf16);
    slow.intraNode = *linkPreset("eth-25g");
    slow.interNode = slow.intraNode;
    slow.candidates = {Strategy::Zero1, Strategy::Ddp};
    r = recommend(slow);
    QCOMPARE(r.size(), std::size_t{2});
    QCOMPARE(strategyName(r[0].strategy), strategyName(Strategy::Ddp));
    QVERIFY(r[1].relativeStepTime > 1.0);
    // Explicitly asked for an impossible combination: the reason surfaces.
    slow.model.gpus = 12;
    slow.model.shardGroupSize = 5;
    slow.candidates = {Strategy::Hsdp};
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, recommend(slow));
  }
};

QTEST_GUILESS_MAIN(TestEstimator)
#include "tst_estimator.moc"
