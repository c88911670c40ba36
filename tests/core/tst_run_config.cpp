// RunConfig: defaults, flags, our JSON (round trip, warnings, refusals), validate(), the DeepSpeed
// mapping both ways and the help text, all driven by the one key table.
#include <QtTest>

#include <algorithm>
#include <string>
#include <vector>

#include "core/config/run_config.h"
#include "core/util/error.h"
#include "core/util/json.h"

using namespace shardscope::core;

namespace {

// The message of the Error `f` throws; fails the test when it throws nothing.
template <class F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// QCOMPARE would reach toString(Strategy) by ADL (it returns string_view, not char*): compare names.
std::string name(Strategy s) { return std::string(toString(s)); }
std::string name(std::optional<Strategy> s) { return s ? std::string(toString(*s)) : std::string("<none>"); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool anyContains(const std::vector<std::string>& v, const std::string& part) {
  for (const auto& s : v)
    if (contains(s, part)) return true;
  return false;
}

// One set-valued knob: every name of its table round-trips through toString / knobFromString, the
// flag, toJson and parseRunConfigJson; a name outside the table gets the keyed message listing
// `allowed` for the flag and for JSON, and validate() names the key for an unnamed (cast) value.
template <class E>
void checkEnumKnob(E RunConfig::*member, const std::string& key, const std::string& allowed) {
  const std::string flag = "--" + [&] {
    std::string f = key;
    for (char& ch : f)
      if (ch == '_') ch = '-';
    return f;
  }();
  std::vector<std::string_view> seen;
  for (const auto& n : knobNames<E>()) {
    QVERIFY2(std::find(seen.begin(), seen.end(), n.name) == seen.end(), key.c_str());  // one spelling each
    seen.push_back(n.name);
    QVERIFY(toString(n.value) == n.name);
    QVERIFY(knobFromString<E>(n.name) == n.value);
    RunConfig c;
    applyFlag(c, flag, n.name);
    QVERIFY2(c.*member == n.value, (key + " " + std::string(n.name)).c_str());
    applyFlag(c, flag, " " + std::string(n.name) + " ");  // flag values are trimmed
    QVERIFY(c.*member == n.value);
    const JsonValue j = toJson(c);
    QVERIFY(j.find(key) && j.find(key)->isString());
    QCOMPARE(j.find(key)->asString(), std::string(n.name));
    const RunConfig back = parseRunConfigJson(j, "cfg.json", nullptr);
    QVERIFY(back == c);
  }
  QVERIFY(!knobFromString<E>("bogus"));
  QVERIFY(!knobFromString<E>(std::string(toString(knobNames<E>().back().value)) + "x"));
  RunConfig c;
  QCOMPARE(errorOf([&] { applyFlag(c, flag, "bogus"); }), flag + ": must be " + allowed + " (got 'bogus')");
  QCOMPARE(errorOf([&] { parseRunConfigJson(parseJson("{\"" + key + "\": \"Bogus\"}", "cfg.json"), "cfg.json", nullptr); }),
           "cfg.json: " + key + ": must be " + allowed + " (got \"Bogus\")");
  QCOMPARE(errorOf([&] { parseRunConfigJson(parseJson("{\"" + key + "\": 1}", "cfg.json"), "cfg.json", nullptr); }),
           "cfg.json: " + key + ": expected a string (got 1)");
  c.*member = static_cast<E>(99);
  QCOMPARE(errorOf([&] { validate(c); }), "run config: " + key + " (" + flag + "): must be " + allowed + " (got 99)");
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// A realistic ms-swift style ZeRO-3 file (swift's zero3.json with its "auto" values resolved the way
// the HF integration would for a 4096-hidden model, reduce bucket shrunk to 1e7 as the ZeRO++
// tutorial does).
const char* kSwiftZero3 = R"({
  "fp16": {"enabled": false, "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
           "hysteresis": 2, "min_loss_scale": 1},
  "bf16": {"enabled": true},
  "zero_optimization": {
    "stage": 3,
    "offload_optimizer": {"device": "none", "pin_memory": true},
    "offload_param": {"device": "none", "pin_memory": true},
    "overlap_comm": true,
    "contiguous_gradients": true,
    "sub_group_size": 1e9,
    "reduce_bucket_size": 1e7,
    "stage3_prefetch_bucket_size": 15099494,
    "stage3_param_persistence_threshold": 40960,
    "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9,
    "stage3_gather_16bit_weights_on_model_save": true
  },
  "optimizer": {"type": "AdamW", "params": {"lr": 2e-5, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.1}},
  "gradient_accumulation_steps": 4,
  "gradient_clipping": 1.0,
  "steps_per_print": 2000,
  "train_batch_size": 64,
  "train_micro_batch_size_per_gpu": 2,
  "wall_clock_breakdown": false
})";

RunConfig nonDefaultConfig() {
  RunConfig c;
  c.strategy = Strategy::Hsdp;
  c.model = "qwen2.5-7b";
  c.layers = 3;
  c.worldSize = 8;
  c.nnodes = 2;
  c.nodeRank = 1;
  c.nprocPerNode = 4;
  c.steps = 7;
  c.seed = 18446744073709551615ull;  // the largest seed survives JSON
  c.microBatch = 3;
  c.seqLen = 257;
  c.gradAccum = 5;
  c.dataFile = "/tmp/some \"quoted\" file.txt";
  c.optimizer = OptimizerKind::Sgd;
  c.lr = 0.1 + 0.2;  // not representable in short decimal: exercises shortest round-trip formatting
  c.weightDecay = 1e-4;
  c.beta1 = 0.8;
  c.beta2 = 0.99;
  c.eps = 1e-6;
  c.momentum = 0.5;
  c.gradClip = 2.5;
  c.precision = Precision::Bf16;
  c.reduceDtype = ReduceDtype::Fp32;
  c.gpuTrace = GpuTrace::Kernels;
  c.device = ComputeDevice::Cpu;
  c.backend = CommBackend::Gloo;
  c.bucketCapMb = 12.5;
  c.firstBucketMb = 0.25;
  c.gradientAsBucketView = true;
  c.reduceBucketSize = 123456789;
  c.allgatherBucketSize = 7;
  c.overlapComm = false;
  c.contiguousGradients = false;
  c.prefetchBucketSize = 0;
  c.paramPersistenceThreshold = 1;
  c.maxLiveParameters = 2;
  c.maxReuseDistance = 3;
  c.offloadOptimizer = Offload::None;
  c.offloadParam = Offload::Cpu;
  c.backwardPrefetch = BackwardPrefetch::Post;
  c.forwardPrefetch = true;
  c.limitAllGathers = false;
  c.shardGroupSize = 2;
  c.activationCheckpointing = true;
  c.saveCheckpoint = true;
  c.consolidateCheckpoint = true;
  c.checkpointDir = "ckpt";
  c.capture = false;
  c.hangTimeoutS = 12.75;
  c.flushIntervalS = 0.125;
  c.loraRank = 8;
  c.loraAlpha = 32;
  c.loraTargets = "q,v,down";
  c.lossScale = 64;
  c.initialScalePower = 10;
  c.lossScaleWindow = 200;
  c.hysteresis = 4;
  c.minLossScale = 0.25;
  return c;
}

}  // namespace

class TestRunConfig : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void strategyNames() {
    for (Strategy s : allStrategies()) QCOMPARE(name(strategyFromString(toString(s))), name(s));
    QCOMPARE(toString(Strategy::FsdpFull), std::string_view("fsdp"));
    QCOMPARE(toString(Strategy::FsdpGradOp), std::string_view("fsdp_grad_op"));
    QCOMPARE(name(strategyFromString("fsdp_full")), name(Strategy::FsdpFull));
    QCOMPARE(name(strategyFromString("FULL_SHARD")), name(Strategy::FsdpFull));
    QCOMPARE(name(strategyFromString("shard_grad_op")), name(Strategy::FsdpGradOp));
    QCOMPARE(name(strategyFromString("hybrid-shard")), name(Strategy::Hsdp));
    QVERIFY(!strategyFromString("zero4"));
    QCOMPARE(name(strategyFromString(" Zero++ ")), name(Strategy::ZeroPPHpz));
    QCOMPARE(allStrategies().size(), runtimeStrategies().size() + 1);
    // The runtime refuses what only the estimator models, naming the key.
    RunConfig hpz;
    const std::string msg = errorOf([&] { applyFlag(hpz, "strategy", "zeropp_hpz"); });
    QVERIFY2(contains(msg, "--strategy") && contains(msg, "estimate and simulate only"), msg.c_str());
    QVERIFY(!strategyFromString(""));
  }

  void enumKnobNames() {
    checkEnumKnob(&RunConfig::precision, "precision", "fp32, bf16 or fp16");
    checkEnumKnob(&RunConfig::reduceDtype, "reduce_dtype", "\"\", fp32 or bf16");
    checkEnumKnob(&RunConfig::attention, "attention", "auto, sdpa or eager");
    checkEnumKnob(&RunConfig::device, "device", "auto, cpu or cuda");
    checkEnumKnob(&RunConfig::backend, "backend", "auto, gloo or nccl");
    checkEnumKnob(&RunConfig::optimizer, "optimizer", "adamw or sgd");
    checkEnumKnob(&RunConfig::offloadOptimizer, "offload_optimizer", "none or cpu");
    checkEnumKnob(&RunConfig::offloadParam, "offload_param", "none or cpu");
    checkEnumKnob(&RunConfig::backwardPrefetch, "backward_prefetch", "pre, post or none");
    checkEnumKnob(&RunConfig::gpuTrace, "gpu_trace", "launches, full, kernels or off");
    // The help's type column lists each table (an absent reduce_dtype is not a listed choice).
    for (const RunConfigKeyInfo& k : runConfigKeys()) {
      if (k.key == "reduce_dtype") QCOMPARE(k.type, std::string("fp32|bf16"));
      if (k.key == "gpu_trace") QCOMPARE(k.type, std::string("launches|full|kernels|off"));
      if (k.key == "backward_prefetch") QCOMPARE(k.defaultText, std::string("pre"));
    }
  }

  void defaults() {
    const RunConfig c;
    validate(c);  // the defaults are a valid run
    QCOMPARE(name(c.strategy), name(Strategy::Ddp));
    QCOMPARE(c.model, std::string("tiny"));
    QCOMPARE(c.worldSize, 2);
    QCOMPARE(c.reduceBucketSize, std::int64_t(500000000));
    QCOMPARE(c.prefetchBucketSize, std::int64_t(50000000));
    QVERIFY(!c.overlapComm.has_value());
    QCOMPARE(effectiveOverlapComm(c), false);
    RunConfig z3;
    z3.strategy = Strategy::Zero3;
    QCOMPARE(effectiveOverlapComm(z3), true);
    z3.overlapComm = false;
    QCOMPARE(effectiveOverlapComm(z3), false);
    QCOMPARE(effectiveNprocPerNode(c), 2);
  }

  void shardGroupSize_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("world");
    QTest::addColumn<int>("nnodes");
    QTest::addColumn<int>("nproc");
    QTest::addColumn<int>("group");
    QTest::addColumn<int>("expected");
    QTest::newRow("hsdp 1 node of 8") << "hsdp" << 8 << 1 << 0 << 0 << 4;
    QTest::newRow("hsdp 1 node of 4") << "hsdp" << 4 << 1 << 0 << 0 << 2;
    QTest::newRow("hsdp 1 node of 2") << "hsdp" << 2 << 1 << 0 << 0 << 2;
    QTest::newRow("hsdp 1 node of 6") << "hsdp" << 6 << 1 << 0 << 0 << 3;
    QTest::newRow("hsdp 1 node of 3") << "hsdp" << 3 << 1 << 0 << 0 << 3;
    QTest::newRow("hsdp 2 nodes of 4") << "hsdp" << 8 << 2 << 0 << 0 << 4;
    QTest::newRow("hsdp 2 nodes nproc 4") << "hsdp" << 8 << 2 << 4 << 0 << 4;
    QTest::newRow("hsdp explicit") << "hsdp" << 8 << 1 << 0 << 8 << 8;
    QTest::newRow("zero3 = world") << "zero3" << 8 << 2 << 0 << 0 << 8;
    QTest::newRow("ddp = 1") << "ddp" << 8 << 1 << 0 << 0 << 1;
  }
  void shardGroupSize() {
    QFETCH(QString, strategy);
    QFETCH(int, world);
    QFETCH(int, nnodes);
    QFETCH(int, nproc);
    QFETCH(int, group);
    QFETCH(int, expected);
    RunConfig c;
    c.strategy = *strategyFromString(strategy.toStdString());
    c.worldSize = world;
    c.nnodes = nnodes;
    c.nprocPerNode = nproc;
    c.shardGroupSize = group;
    QCOMPARE(effectiveShardGroupSize(c), expected);
    validate(c);
  }

  void flags() {
    RunConfig c;
    applyFlag(c, "--world-size", "8");
    applyFlag(c, "strategy", "full_shard");
    applyFlag(c, "--bucket-cap-mb", "12.5");
    applyFlag(c, "--reduce-bucket-size", "5e8");
    applyFlag(c, "--allgather-bucket-size", "200000000");
    applyFlag(c, "--stage3-prefetch-bucket-size", "1.5e7");  // DeepSpeed spelling is an alias
    applyFlag(c, "--seed", "42");
    applyFlag(c, "--lr", "3e-4");
    applyFlag(c, "--model", "llama3-8b");
    applyFlag(c, "--precision", "bf16");
    applyFlag(c, "--data-file", "corpus.txt");
    QCOMPARE(toString(c.gpuTrace), toString(GpuTrace::Launches));  // the default: launch and wait calls only
    applyFlag(c, "--gpu-trace", "full");
    QCOMPARE(toString(c.gpuTrace), toString(GpuTrace::Full));
    QVERIFY_THROWS_EXCEPTION(std::exception, applyFlag(c, "--gpu-trace", "everything"));
    QCOMPARE(c.worldSize, 8);
    QCOMPARE(name(c.strategy), name(Strategy::FsdpFull));
    QCOMPARE(c.bucketCapMb, 12.5);
    QCOMPARE(c.reduceBucketSize, std::int64_t(500000000));
    QCOMPARE(c.allgatherBucketSize, std::int64_t(200000000));
    QCOMPARE(c.prefetchBucketSize, std::int64_t(15000000));
    QCOMPARE(c.seed, std::uint64_t(42));
    QCOMPARE(c.lr, 3e-4);
    QCOMPARE(c.model, std::string("llama3-8b"));
    QCOMPARE(toString(c.precision), toString(Precision::Bf16));
    QCOMPARE(c.dataFile, std::string("corpus.txt"));

    // Booleans: every accepted spelling; a bare flag (empty value) means true.
    for (const char* t : {"true", "1", "on", "ON", "yes"}) {
      applyFlag(c, "--forward-prefetch", "false");
      applyFlag(c, "--forward-prefetch", t);
      QVERIFY2(c.forwardPrefetch, t);
    }
    for (const char* f : {"false", "0", "off", "No"}) {
      applyFlag(c, "--capture", "true");
      applyFlag(c, "--capture", f);
      QVERIFY2(!c.capture, f);
    }
    applyFlag(c, "--capture", "");
    QVERIFY(c.capture);
    applyFlag(c, "--overlap-comm", "off");
    QCOMPARE(c.overlapComm, std::optional<bool>(false));
    applyFlag(c, "--overlap-comm", "auto");
    QVERIFY(!c.overlapComm.has_value());

    QVERIFY(isRunConfigFlag("--world-size"));
    QVERIFY(isRunConfigFlag("world_size"));
    QVERIFY(!isRunConfigFlag("--wrold-size"));
    QVERIFY(isRunConfigBoolFlag("--capture"));
    QVERIFY(isRunConfigBoolFlag("--overlap-comm"));
    QVERIFY(!isRunConfigBoolFlag("--steps"));
  }

  void flagErrors_data() {
    QTest::addColumn<QString>("flag");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("expected");
    QTest::newRow("unknown") << "--wrold-size"
                             << "2"
                             << "unknown option --wrold-size";
    QTest::newRow("not an int") << "--world-size"
                                << "two"
                                << "--world-size: expected an integer (got 'two')";
    QTest::newRow("fraction") << "--steps"
                              << "2.5"
                              << "--steps: expected an integer";
    QTest::newRow("int overflow") << "--steps"
                                  << "1e12"
                                  << "--steps: expected an integer";
    QTest::newRow("below min") << "--world-size"
                               << "0"
                               << "--world-size: must be at least 1 (got 0)";
    QTest::newRow("bad bool") << "--capture"
                              << "maybe"
                              << "--capture: expected true or false (got 'maybe')";
    QTest::newRow("bad choice") << "--optimizer"
                                << "adam"
                                << "--optimizer: must be adamw or sgd (got 'adam')";
    QTest::newRow("bad model") << "--model"
                               << "qwen3-7b"
                               << "--model: must be tiny, odd, small, medium";
    QTest::newRow("bad strategy") << "--strategy"
                                  << "zero4"
                                  << "--strategy: must be one of ddp|zero1";
    QTest::newRow("negative size") << "--reduce-bucket-size"
                                   << "-5"
                                   << "--reduce-bucket-size: must be at least 1";
    QTest::newRow("nan") << "--lr"
                         << "nan"
                         << "--lr: expected a number";
    QTest::newRow("lr zero") << "--lr"
                             << "0"
                             << "--lr: must be greater than 0";
    QTest::newRow("beta") << "--beta2"
                          << "1"
                          << "--beta2: must be in [0, 1) (got 1)";
    QTest::newRow("negative seed") << "--seed"
                                   << "-1"
                                   << "--seed: expected a non-negative integer";
  }
  void flagErrors() {
    QFETCH(QString, flag);
    QFETCH(QString, value);
    QFETCH(QString, expected);
    RunConfig c;
    const std::string msg = errorOf([&] { applyFlag(c, flag.toStdString(), value.toStdString()); });
    QVERIFY2(contains(msg, expected.toStdString()), msg.c_str());
  }

  void jsonRoundTrip() {
    for (const RunConfig& c : {RunConfig{}, nonDefaultConfig()}) {
      const JsonValue j = toJson(c);
      // Every key of the table is stored.
      for (const auto& k : runConfigKeys()) QVERIFY2(j.find(k.key) != nullptr, k.key.c_str());
      QCOMPARE(j.members().size(), runConfigKeys().size());
      std::vector<std::string> warnings;
      const RunConfig back = parseRunConfigJson(parseJson(j.dump(), "cfg.json"), "cfg.json", &warnings);
      QVERIFY2(back == c, j.dump().c_str());
      QVERIFY2(warnings.empty(), joined(warnings).c_str());
    }
    validate(nonDefaultConfig());
    // overlap_comm unset is stored as null and read back unset.
    QVERIFY(toJson(RunConfig{}).find("overlap_comm")->isNull());
    QCOMPARE(toJson(nonDefaultConfig()).find("seed")->asString(), std::string("18446744073709551615"));
  }

  void jsonPartialAndAliases() {
    std::vector<std::string> warnings;
    const RunConfig c =
        parseRunConfigJson(parseJson(R"({"strategy": "zero3", "world_size": 4, "stage3_param_persistence_threshold": 1e4,
                      "reduce_bucket_size": 5e8, "overlap_comm": null, "wrold_size": 8})",
                                     "cfg.json"),
                           "cfg.json", &warnings);
    QCOMPARE(name(c.strategy), name(Strategy::Zero3));
    QCOMPARE(c.worldSize, 4);
    QCOMPARE(c.paramPersistenceThreshold, std::int64_t(10000));
    QCOMPARE(c.steps, RunConfig{}.steps);  // absent keys keep their default
    QCOMPARE(warnings.size(), std::size_t(1));
    QCOMPARE(warnings[0], std::string("cfg.json: unknown key wrold_size (ignored)"));
  }

  void jsonErrors_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<QString>("expected");
    QTest::newRow("string for int") << R"({"world_size": "2"})"
                                    << R"(cfg.json: world_size: expected an integer (got "2"))";
    QTest::newRow("number for bool") << R"({"capture": 1})"
                                     << "cfg.json: capture: expected true or false (got 1)";
    QTest::newRow("bad choice") << R"({"precision": "fp8"})"
                                << R"(cfg.json: precision: must be fp32, bf16 or fp16 (got "fp8"))";
    QTest::newRow("bad lora target") << R"({"lora_rank": 8, "lora_targets": "q,qkv"})"
                                     << "cfg.json: lora_targets: unknown projection qkv";
    QTest::newRow("bad gpu_trace") << R"({"gpu_trace": "all"})"
                                   << R"(cfg.json: gpu_trace: must be launches, full, kernels or off (got "all"))";
    QTest::newRow("bad strategy") << R"({"strategy": 3})"
                                  << "cfg.json: strategy: expected a string (got 3)";
    QTest::newRow("negative") << R"({"max_live_parameters": -1})"
                              << "cfg.json: max_live_parameters: must be at least 0 (got -1)";
    QTest::newRow("alias names itself") << R"({"stage3_max_reuse_distance": -1})"
                                        << "cfg.json: stage3_max_reuse_distance: must be at least 0";
    QTest::newRow("not an object") << "[1]"
                                   << "cfg.json: the run config must be a JSON object";
  }
  void jsonErrors() {
    QFETCH(QString, json);
    QFETCH(QString, expected);
    const std::string msg = errorOf([&] { parseRunConfigJson(parseJson(json.toStdString(), "cfg.json"), "cfg.json", nullptr); });
    QVERIFY2(contains(msg, expected.toStdString()), msg.c_str());
  }

  void validation_data() {
    QTest::addColumn<QString>("flags");  // "name=value;name=value"
    QTest::addColumn<QString>("expected");
    QTest::newRow("nnodes divides") << "world-size=4;nnodes=3"
                                    << "nnodes (--nnodes): must divide world_size";
    QTest::newRow("node rank") << "world-size=4;nnodes=2;node-rank=2"
                               << "node_rank (--node-rank): must be less than nnodes";
    QTest::newRow("nproc") << "world-size=4;nnodes=2;nproc-per-node=4"
                           << "nproc_per_node (--nproc-per-node)";
    QTest::newRow("group divides") << "strategy=hsdp;world-size=6;shard-group-size=4"
                                   << "shard_group_size (--shard-group-size): must divide world_size";
    QTest::newRow("group not hsdp") << "strategy=zero3;world-size=4;shard-group-size=2"
                                    << "shard_group_size (--shard-group-size): only applies to strategy hsdp";
    QTest::newRow("offload param ddp") << "offload-param=cpu"
                                       << "offload_param (--offload-param): only with zero3";
    QTest::newRow("offload param zero2") << "strategy=zero2;offload-param=cpu"
                                         << "offload_param";
    QTest::newRow("offload optimizer fsdp") << "strategy=fsdp;offload-optimizer=cpu"
                                            << "offload_optimizer (--offload-optimizer): only with zero1, zero2 or zero3";
    QTest::newRow("nccl on cpu") << "device=cpu;backend=nccl"
                                 << "backend (--backend): nccl needs";
    QTest::newRow("consolidate alone") << "consolidate-checkpoint=true"
                                       << "consolidate_checkpoint (--consolidate-checkpoint): needs save_checkpoint";
    QTest::newRow("save without dir") << "save-checkpoint=true"
                                      << "checkpoint_dir (--checkpoint-dir): must be set";
  }
  void validation() {
    QFETCH(QString, flags);
    QFETCH(QString, expected);
    RunConfig c;
    for (const QString& kv : flags.split(';')) {
      const auto parts = kv.split('=');
      applyFlag(c, parts[0].toStdString(), parts[1].toStdString());
    }
    const std::string msg = errorOf([&] { validate(c); });
    QVERIFY2(contains(msg, "run config: " + expected.toStdString()), msg.c_str());
  }

  void validationOfDirectValues() {
    // Values set directly on the struct (not through a parser) are checked too.
    RunConfig c;
    c.seqLen = 1;
    QVERIFY(contains(errorOf([&] { validate(c); }), "seq_len (--seq-len): must be at least 2 (got 1)"));
    c = RunConfig{};
    c.model = "gpt2";
    QVERIFY(contains(errorOf([&] { validate(c); }),
                     "model (--model): must be tiny, odd, small, medium, llama3-8b, llama3-70b, llama2-7b, qwen3-8b or "
                     "qwen2.5-7b (got \"gpt2\")"));
    c = RunConfig{};
    c.worldSize = 0;
    QVERIFY(contains(errorOf([&] { validate(c); }), "world_size (--world-size): must be at least 1 (got 0)"));
    c = RunConfig{};
    c.steps = 0;
    QVERIFY(contains(errorOf([&] { validate(c); }), "steps (--steps)"));
    c = RunConfig{};
    c.microBatch = 0;
    QVERIFY(contains(errorOf([&] { validate(c); }), "micro_batch (--micro-batch)"));
    c = RunConfig{};
    c.lr = -1;
    QVERIFY(contains(errorOf([&] { validate(c); }), "lr (--lr): must be greater than 0"));
    c = RunConfig{};
    c.backwardPrefetch = static_cast<BackwardPrefetch>(7);  // only a cast makes an unnamed value
    QVERIFY(contains(errorOf([&] { validate(c); }), "backward_prefetch (--backward-prefetch): must be pre, post or none"));
    // Offload of parameters is fine where parameters are sharded.
    for (Strategy s : {Strategy::Zero3, Strategy::FsdpFull, Strategy::FsdpGradOp, Strategy::Hsdp}) {
      c = RunConfig{};
      c.strategy = s;
      c.offloadParam = Offload::Cpu;
      validate(c);
    }
  }

  void deepSpeedSwiftZero3() {
    RunConfig base;
    base.worldSize = 8;
    std::vector<std::string> warnings;
    const RunConfig c = fromDeepSpeedJson(parseJson(kSwiftZero3, "ds.json"), "ds.json", base, &warnings);
    QCOMPARE(name(c.strategy), name(Strategy::Zero3));
    QCOMPARE(c.overlapComm, std::optional<bool>(true));
    QCOMPARE(c.contiguousGradients, true);
    QCOMPARE(c.reduceBucketSize, std::int64_t(10000000));
    QCOMPARE(c.prefetchBucketSize, std::int64_t(15099494));
    QCOMPARE(c.paramPersistenceThreshold, std::int64_t(40960));
    QCOMPARE(c.maxLiveParameters, std::int64_t(1000000000));
    QCOMPARE(c.maxReuseDistance, std::int64_t(1000000000));
    QCOMPARE(toString(c.offloadOptimizer), toString(Offload::None));
    QCOMPARE(toString(c.offloadParam), toString(Offload::None));
    QCOMPARE(toString(c.precision), toString(Precision::Bf16));
    QCOMPARE(toString(c.optimizer), toString(OptimizerKind::AdamW));
    QCOMPARE(c.lr, 2e-5);
    QCOMPARE(c.beta1, 0.9);
    QCOMPARE(c.beta2, 0.999);
    QCOMPARE(c.eps, 1e-8);
    QCOMPARE(c.weightDecay, 0.1);
    QCOMPARE(c.microBatch, 2);
    QCOMPARE(c.gradAccum, 4);
    QCOMPARE(c.gradClip, 1.0);
    QCOMPARE(c.worldSize, 8);  // not DeepSpeed's business: kept from base
    validate(c);
    // sub_group_size is ignored (default value: nothing changes); the 16-bit gather on save has our own flags.
    QVERIFY2(anyContains(warnings,
                         "ds.json: zero_optimization.sub_group_size is not implemented by Shardscope and is ignored (1e9 is "
                         "DeepSpeed's default"),
             joined(warnings).c_str());
    QVERIFY2(anyContains(warnings, "zero_optimization.stage3_gather_16bit_weights_on_model_save is ignored"),
             joined(warnings).c_str());
    // Disabled fp16's loss scaling, offload tuning of an offload that is off, logging keys: silent.
    QVERIFY2(!anyContains(warnings, "fp16"), joined(warnings).c_str());
    QVERIFY2(!anyContains(warnings, "pin_memory"), joined(warnings).c_str());
    QVERIFY2(!anyContains(warnings, "steps_per_print"), joined(warnings).c_str());
    QCOMPARE(warnings.size(), std::size_t(2));
  }

  void deepSpeedWarnings() {
    std::vector<std::string> warnings;
    const RunConfig c =
        fromDeepSpeedJson(parseJson(R"({"zero_optimization": {"stage": 2, "reduce_scatter": false, "allgather_partitions": true,
                       "zero_quantized_weights": true, "foo": 1,
                       "offload_optimizer": {"device": "cpu", "pin_memory": true, "bar": 2}},
                     "scheduler": {"type": "WarmupLR"}, "mystery": true,
                     "optimizer": {"type": "Adam", "params": {"lr": 1e-4, "adam_w_mode": false, "momentum": 0.9}}})",
                                    "ds.json"),
                          "ds.json", RunConfig{}, &warnings);
    QCOMPARE(name(c.strategy), name(Strategy::Zero2));
    QCOMPARE(toString(c.offloadOptimizer), toString(Offload::Cpu));
    QCOMPARE(toString(c.precision), toString(Precision::Fp32));
    const std::string all = joined(warnings);
    QVERIFY2(contains(all,
                      "ds.json: zero_optimization.reduce_scatter is not implemented by Shardscope and is ignored: "
                      "the value false changes DeepSpeed's behaviour (default true)"),
             all.c_str());
    QVERIFY2(contains(all,
                      "zero_optimization.allgather_partitions is not implemented by Shardscope and is ignored (true is "
                      "DeepSpeed's default"),
             all.c_str());
    QVERIFY2(
        contains(all, "zero_optimization.zero_quantized_weights is not implemented by Shardscope and is ignored: the value true"),
        all.c_str());
    QVERIFY2(contains(all, "ds.json: unknown key zero_optimization.foo (ignored)"), all.c_str());
    QVERIFY2(contains(all, "zero_optimization.offload_optimizer.pin_memory is not implemented"), all.c_str());
    QVERIFY2(contains(all, "unknown key zero_optimization.offload_optimizer.bar"), all.c_str());
    QVERIFY2(contains(all, "scheduler is not implemented by Shardscope and is ignored"), all.c_str());
    QVERIFY2(contains(all, "ds.json: unknown key mystery (ignored)"), all.c_str());
    QVERIFY2(contains(all, "optimizer.params.adam_w_mode is not implemented by Shardscope and is ignored: the value false"),
             all.c_str());
    QVERIFY2(contains(all, "optimizer.params.momentum does not apply to adamw"), all.c_str());
    QCOMPARE(warnings.size(), std::size_t(10));
  }

  void deepSpeedMappings() {
    std::vector<std::string> w;
    auto ds = [&](const char* json, RunConfig base = RunConfig{}) {
      return fromDeepSpeedJson(parseJson(json, "ds.json"), "ds.json", base, &w);
    };
    QCOMPARE(name(ds("{}").strategy), name(Strategy::Ddp));
    QCOMPARE(name(ds(R"({"zero_optimization": {"stage": 0}})").strategy), name(Strategy::Ddp));
    QCOMPARE(name(ds(R"({"zero_optimization": {"stage": 1}})").strategy), name(Strategy::Zero1));
    QCOMPARE(name(ds(R"({"zero_optimization": {"stage": 2}})").strategy), name(Strategy::Zero2));
    QCOMPARE(name(ds(R"({"zero_optimization": {"stage": 3}})").strategy), name(Strategy::Zero3));
    // MiCS is HSDP.
    const RunConfig mics = ds(R"({"zero_optimization": {"stage": 3, "mics_shard_size": 4}})");
    QCOMPARE(name(mics.strategy), name(Strategy::Hsdp));
    QCOMPARE(mics.shardGroupSize, 4);
    // Deprecated offload switch; stage3_ keys without the prefix.
    const RunConfig old = ds(R"({"zero_optimization": {"stage": 2, "cpu_offload": true, "prefetch_bucket_size": 7}})");
    QCOMPARE(toString(old.offloadOptimizer), toString(Offload::Cpu));
    QCOMPARE(old.prefetchBucketSize, std::int64_t(7));
    QCOMPARE(toString(ds(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}})").offloadParam),
             toString(Offload::Cpu));
    // Batch sizes derived the way DeepSpeed does.
    RunConfig four;
    four.worldSize = 4;
    RunConfig d = ds(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2})", four);
    QCOMPARE(d.gradAccum, 4);
    d = ds(R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})", four);
    QCOMPARE(d.microBatch, 4);
    d = ds(R"({"train_batch_size": 32})", four);
    QCOMPARE(d.microBatch, 8);
    QCOMPARE(d.gradAccum, 1);
    // SGD, bf16 alias, reduction dtype.
    d = ds(R"({"optimizer": {"type": "SGD", "params": {"lr": 0.5, "momentum": 0.8}}, "bfloat16": {"enabled": true},
              "communication_data_type": "fp32"})");
    QCOMPARE(toString(d.optimizer), toString(OptimizerKind::Sgd));
    QCOMPARE(d.momentum, 0.8);
    QCOMPARE(d.lr, 0.5);
    QCOMPARE(toString(d.precision), toString(Precision::Bf16));
    QCOMPARE(toString(d.reduceDtype), toString(ReduceDtype::Fp32));
  }

  void deepSpeedRefusals_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<QString>("expected");
    QTest::newRow("stage 4") << R"({"zero_optimization": {"stage": 4}})"
                             << "ds.json: zero_optimization.stage: must be 0, 1, 2 or 3 (got 4)";
    QTest::newRow("stage string") << R"({"zero_optimization": {"stage": "3"}})"
                                  << R"(ds.json: zero_optimization.stage: must be 0, 1, 2 or 3 (got "3"))";
    QTest::newRow("negative bucket") << R"({"zero_optimization": {"stage": 2, "reduce_bucket_size": -5}})"
                                     << "ds.json: zero_optimization.reduce_bucket_size: must be at least 1 (got -5)";
    QTest::newRow("fractional bucket") << R"({"zero_optimization": {"stage": 2, "allgather_bucket_size": 2.5}})"
                                       << "ds.json: zero_optimization.allgather_bucket_size: expected an element count";
    QTest::newRow("negative stage3") << R"({"zero_optimization": {"stage": 3, "stage3_max_live_parameters": -1}})"
                                     << "ds.json: zero_optimization.stage3_max_live_parameters: must be at least 0";
    QTest::newRow("overlap type") << R"({"zero_optimization": {"overlap_comm": "yes"}})"
                                  << R"(ds.json: zero_optimization.overlap_comm: expected true, false or auto (got "yes"))";
    QTest::newRow("auto") << R"({"zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"}})"
                          << "ds.json: zero_optimization.reduce_bucket_size: \"auto\" must be resolved first";
    QTest::newRow("auto top") << R"({"train_micro_batch_size_per_gpu": "auto"})"
                              << "ds.json: train_micro_batch_size_per_gpu: \"auto\" must be resolved";
    QTest::newRow("auto nested") << R"({"bf16": {"enabled": "auto"}})"
                                 << "ds.json: bf16.enabled: \"auto\" must be resolved";
    QTest::newRow("fp16 and bf16") << R"({"bf16": {"enabled": true}, "fp16": {"enabled": true}})"
                                   << "ds.json: fp16.enabled: bf16 and fp16 cannot both be enabled";
    QTest::newRow("lora bias") << R"({"lora": {"r": 8, "bias": "all"}})"
                               << R"(ds.json: lora.bias: only "none" is supported)";
    QTest::newRow("lora targets") << R"({"lora": {"r": 8, "target_modules": ["q_proj", "fc1"]}})"
                                  << "ds.json: lora.target_modules: unknown projection fc1";
    QTest::newRow("nvme") << R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/x"}}})"
                          << "ds.json: zero_optimization.offload_param.device: NVMe offload (ZeRO-Infinity) is not supported";
    QTest::newRow("nvme optimizer") << R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme"}}})"
                                    << "ds.json: zero_optimization.offload_optimizer.device: NVMe offload";
    QTest::newRow("optimizer") << R"({"optimizer": {"type": "Lamb", "params": {"lr": 1e-3}}})"
                               << R"(ds.json: optimizer.type: Shardscope implements Adam/AdamW and SGD only (got "Lamb"))";
    QTest::newRow("betas") << R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9]}}})"
                           << "ds.json: optimizer.params.betas: expected two numbers";
    QTest::newRow("beta range") << R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9, 1.5]}}})"
                                << "ds.json: optimizer.params.betas[1]: must be in [0, 1) (got 1.5)";
    QTest::newRow("lr") << R"({"optimizer": {"type": "AdamW", "params": {"lr": -1}}})"
                        << "ds.json: optimizer.params.lr: must be greater than 0";
    QTest::newRow("inconsistent batch")
        << R"({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})"
        << "ds.json: train_batch_size: must equal train_micro_batch_size_per_gpu x gradient_accumulation_steps x world size = 2 "
           "x 4 x 2 = 16 (got 30)";
    QTest::newRow("indivisible batch") << R"({"train_batch_size": 7, "train_micro_batch_size_per_gpu": 2})"
                                       << "ds.json: train_batch_size: is not a multiple";
    QTest::newRow("micro zero") << R"({"train_micro_batch_size_per_gpu": 0})"
                                << "ds.json: train_micro_batch_size_per_gpu: must be at least 1 (got 0)";
    QTest::newRow("clip") << R"({"gradient_clipping": -1})"
                          << "ds.json: gradient_clipping: must be at least 0";
    QTest::newRow("fp16 comm") << R"({"communication_data_type": "fp16"})"
                               << "ds.json: communication_data_type: fp16 reduction is not supported";
    QTest::newRow("zero type") << R"({"zero_optimization": 3})"
                               << "ds.json: zero_optimization: must be a JSON object";
    QTest::newRow("shardscope object") << R"({"shardscope": {"world_size": "x"}})"
                                       << R"(ds.json: shardscope.world_size: expected an integer (got "x"))";
    QTest::newRow("root") << "[]"
                          << "ds.json: a DeepSpeed config must be a JSON object";
  }
  // DeepSpeed's fp16 block and a PEFT-style lora block map onto the knobs, and back.
  void deepSpeedFp16AndLora() {
    std::vector<std::string> warnings;
    const RunConfig c = fromDeepSpeedJson(parseJson(R"({"fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 12,
      "loss_scale_window": 500, "hysteresis": 3, "min_loss_scale": 0.5},
      "lora": {"r": 16, "lora_alpha": 32, "target_modules": ["q_proj", "v_proj"], "lora_dropout": 0.0, "task_type": "CAUSAL_LM"}})",
                                                    "ds.json"),
                                          "ds.json", RunConfig{}, &warnings);
    QVERIFY(c.precision == Precision::Fp16);
    QCOMPARE(c.lossScale, 0.0);
    QCOMPARE(c.initialScalePower, 12);
    QCOMPARE(c.lossScaleWindow, 500);
    QCOMPARE(c.hysteresis, 3);
    QCOMPARE(c.minLossScale, 0.5);
    QCOMPARE(c.loraRank, 16);
    QCOMPARE(c.loraAlpha, 32.0);
    QCOMPARE(loraTargetList(c.loraTargets), (std::vector<std::string>{"q", "v"}));
    validate(c);
    const RunConfig back = fromDeepSpeedJson(toDeepSpeedJson(c), "again", RunConfig{}, nullptr);
    QVERIFY(back.precision == Precision::Fp16);
    QCOMPARE(back.initialScalePower, 12);
    QCOMPARE(back.hysteresis, 3);
    QCOMPARE(back.loraRank, 16);
    QCOMPARE(loraTargetList(back.loraTargets), (std::vector<std::string>{"q", "v"}));
    // Disabled fp16: its scaling keys change nothing.
    const RunConfig off = fromDeepSpeedJson(parseJson(R"({"fp16": {"enabled": false, "initial_scale_power": 3}})", "ds.json"),
                                            "ds.json", RunConfig{}, nullptr);
    QVERIFY(off.precision == Precision::Fp32);
    QCOMPARE(off.initialScalePower, 16);
  }

  void loraTargets() {
    std::string problem;
    QCOMPARE(loraTargetList("down, q_proj,Q,all", &problem),
             (std::vector<std::string>{"q", "k", "v", "o", "gate", "up", "down"}));
    QVERIFY(problem.empty());
    QCOMPARE(loraTargetList("v,q", &problem), (std::vector<std::string>{"q", "v"}));
    loraTargetList("q,wq", &problem);
    QCOMPARE(problem, std::string("unknown projection wq (known: q, k, v, o, gate, up, down, all-linear)"));
    loraTargetList(" , ", &problem);
    QCOMPARE(problem, std::string("must name at least one projection (q, k, v, o, gate, up, down)"));
  }

  void deepSpeedRefusals() {
    QFETCH(QString, json);
    QFETCH(QString, expected);
    const std::string msg =
        errorOf([&] { fromDeepSpeedJson(parseJson(json.toStdString(), "ds.json"), "ds.json", RunConfig{}, nullptr); });
    QVERIFY2(contains(msg, expected.toStdString()), msg.c_str());
  }

  void toDeepSpeedRoundTrip() {
    std::vector<RunConfig> configs;
    for (Strategy s : runtimeStrategies()) {
      RunConfig c;
      c.strategy = s;
      configs.push_back(c);
      RunConfig d = nonDefaultConfig();
      d.strategy = s;
      d.shardGroupSize = s == Strategy::Hsdp ? 2 : 0;
      d.offloadParam = (s == Strategy::Ddp || s == Strategy::Zero1 || s == Strategy::Zero2) ? Offload::None : Offload::Cpu;
      d.offloadOptimizer = (s == Strategy::Zero1 || s == Strategy::Zero2 || s == Strategy::Zero3) ? Offload::Cpu : Offload::None;
      validate(d);
      configs.push_back(d);
      d.optimizer = OptimizerKind::AdamW;
      d.reduceDtype = ReduceDtype::SameAsParams;
      d.overlapComm.reset();
      configs.push_back(d);
    }
    for (const RunConfig& c : configs) {
      const JsonValue ds = toDeepSpeedJson(c);
      std::vector<std::string> warnings;
      const RunConfig back = fromDeepSpeedJson(parseJson(ds.dump(), "ds.json"), "ds.json", RunConfig{}, &warnings);
      QVERIFY2(back == c, ds.dump().c_str());
      QVERIFY2(warnings.empty(), (joined(warnings) + ds.dump()).c_str());
    }
  }

  void toDeepSpeedContent() {
    RunConfig c;
    c.strategy = Strategy::Zero3;
    c.worldSize = 4;
    c.microBatch = 2;
    c.gradAccum = 3;
    c.precision = Precision::Bf16;
    c.reduceBucketSize = 10000000;
    JsonValue ds = toDeepSpeedJson(c);
    QCOMPARE(*ds.find("train_batch_size")->asInt(), std::int64_t(24));
    QCOMPARE(*ds.find("train_micro_batch_size_per_gpu")->asInt(), std::int64_t(2));
    QCOMPARE(ds.find("bf16")->find("enabled")->asBool(), true);
    const JsonValue* z = ds.find("zero_optimization");
    QCOMPARE(*z->find("stage")->asInt(), std::int64_t(3));
    QCOMPARE(*z->find("reduce_bucket_size")->asInt(), std::int64_t(10000000));
    QCOMPARE(*z->find("stage3_param_persistence_threshold")->asInt(), std::int64_t(100000));
    QVERIFY(z->find("allgather_bucket_size") == nullptr);  // stage 3 does not use it
    QCOMPARE(ds.find("optimizer")->find("type")->asString(), std::string("AdamW"));
    QVERIFY(ds.find("shardscope")->find("strategy") == nullptr);  // the stage says it all
    QCOMPARE(*ds.find("shardscope")->find("world_size")->asInt(), std::int64_t(4));

    c.strategy = Strategy::FsdpFull;
    ds = toDeepSpeedJson(c);
    QCOMPARE(*ds.find("zero_optimization")->find("stage")->asInt(), std::int64_t(3));
    QCOMPARE(ds.find("shardscope")->find("strategy")->asString(), std::string("fsdp"));
    QVERIFY(contains(ds.find("shardscope")->find("note")->asString(), "closest is ZeRO stage 3"));
    QCOMPARE(ds.find("shardscope")->find("backward_prefetch")->asString(), std::string("pre"));

    c.strategy = Strategy::FsdpGradOp;
    QCOMPARE(*toDeepSpeedJson(c).find("zero_optimization")->find("stage")->asInt(), std::int64_t(2));

    c.strategy = Strategy::Hsdp;
    ds = toDeepSpeedJson(c);
    QCOMPARE(*ds.find("zero_optimization")->find("mics_shard_size")->asInt(), std::int64_t(2));
    QCOMPARE(ds.find("shardscope")->find("strategy")->asString(), std::string("hsdp"));
  }

  void helpListsEveryKey() {
    const std::string help = runConfigHelp();
    for (const char* group :
         {"Model & data:", "Parallelism:", "Optimizer:", "Precision:", "DDP:", "ZeRO:", "FSDP/HSDP:", "Checkpointing & capture:"})
      QVERIFY2(contains(help, group), group);
    const auto keys = runConfigKeys();
    QVERIFY(keys.size() >= 45);
    for (const auto& k : keys) {
      QVERIFY2(contains(help, "  " + k.flag + " <" + k.type + ">"), k.flag.c_str());
      QVERIFY2(contains(help, k.help), k.key.c_str());
      QCOMPARE(k.flag, "--" + QString::fromStdString(k.key).replace('_', '-').toStdString());
      QVERIFY2(!k.help.empty() && !k.group.empty() && !k.type.empty(), k.key.c_str());
      QVERIFY2(isRunConfigFlag(k.flag), k.flag.c_str());
    }
    // One line per knob.
    int lines = 0;
    for (const auto& k : keys) {
      const auto pos = help.find("  " + k.flag + " ");
      QVERIFY(pos != std::string::npos);
      const auto eol = help.find('\n', pos);
      QVERIFY2(help.substr(pos, eol - pos).find("[default: ") != std::string::npos, k.key.c_str());
      ++lines;
    }
    QCOMPARE(lines, int(keys.size()));
    QVERIFY(contains(help, "--world-size <int>"));
    QVERIFY(contains(help, "[default: 500000000]"));
    QVERIFY(contains(help, "--strategy <ddp|zero1|zero2|zero3|fsdp|fsdp_grad_op|hsdp>"));
  }
};

QTEST_APPLESS_MAIN(TestRunConfig)
#include "tst_run_config.moc"
