// LoRA fine-tuning in the embedded runtime, end to end (real shardscope-worker ranks, real Gloo, a
// real SQLite file): the trainable parameter count is the formula's; every strategy trains to the
// losses and final parameters of a single-process LoRA reference; the frozen base weights are bit
// for bit their initial values; gradients are reduced for the adapters only (DDP's all-reduce,
// ZeRO-1/2's partition, FSDP's reduce-scatter) while ZeRO-3/FSDP gather base and adapters together;
// fp16 is refused cleanly where this LibTorch has no fp16 kernels.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include "core/model/model_presets.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"
#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"
#include "tests/runtime/runtime_files.h"

using namespace shardscope;
using test::readFloats;
using test::readLosses;
using test::runCli;

namespace {

struct Param {
  std::string name;
  std::int64_t numel = 0;
  bool trainable = true;
};

std::vector<Param> readManifest(const std::string& path) {
  std::vector<Param> out;
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty()) return out;
  const core::JsonValue j = core::parseJson(text, path);
  for (const auto& p : j.find("params")->items())
    out.push_back({p.find("name")->asString(), *p.find("numel")->asInt(), p.find("trainable")->asBool()});
  return out;
}

// FSDP's unit of a parameter: its block ("embed_tokens", "layers.N", "lm_head" for the final norm
// and the head).
std::string blockOf(const std::string& name) {
  if (name.rfind("embed_tokens", 0) == 0) return "embed_tokens";
  if (name.rfind("layers.", 0) == 0) return name.substr(0, name.find('.', 7));
  return "lm_head";
}

std::int64_t roundUp(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

constexpr int kSteps = 3;
constexpr int kRank = 4;
const char* const kTargets = "q,v,gate,down";

}  // namespace

class TestLora : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::string db_;
  std::vector<double> refLosses_;
  std::vector<float> refParams_, initParams_;  // initParams_: the reference's layout, base weights at their initial values
  std::vector<Param> manifest_;
  int runs_ = 0;

  QStringList common(int world) const {
    return {"--model",          "odd",   "--steps",        QString::number(kSteps),
            "--seq-len",        "16",    "--micro-batch",  QString::number(4 / world),
            "--optimizer",      "adamw", "--lr",           "0.003",
            "--seed",           "3",     "--lora-rank",    QString::number(kRank),
            "--lora-alpha",     "8",     "--lora-targets", kTargets,
            "--hang-timeout-s", "60"};
  }

  // Runs and returns the base path of its dumps (params, params.json, losses).
  std::string run(const QString& strategy, int world, const QStringList& knobs, const QStringList& instead = {}) {
    const std::string base = test::pathIn(dir_, "run" + std::to_string(++runs_));
    QStringList args = {"run",
                        "--db",
                        QString::fromStdString(db_),
                        "--strategy",
                        strategy,
                        "--world-size",
                        QString::number(world),
                        "--dump-params",
                        QString::fromStdString(base + ".params"),
                        "--dump-losses",
                        QString::fromStdString(base + ".loss"),
                        "--name",
                        QString::fromStdString("lora run" + std::to_string(runs_))};
    args << (instead.isEmpty() ? common(world) : instead) << knobs;
    const test::CliResult r = runCli(args, 240000);
    if (r.code != 0) qWarning().noquote() << strategy << knobs.join(' ') << r.err.right(3000);
    return r.code == 0 ? base : std::string();
  }

  std::vector<double> meanLosses(const std::string& base, int world) const {
    if (world == 1) return readLosses(base + ".loss");
    std::vector<double> sum;
    for (int r = 0; r < world; ++r) {
      auto l = readLosses(base + ".loss.rank" + std::to_string(r));
      if (sum.empty()) sum.assign(l.size(), 0.0);
      if (l.size() != sum.size()) return {};
      for (std::size_t i = 0; i < l.size(); ++i) sum[i] += l[i] / world;
    }
    return sum;
  }

  core::RunId lastRun() const {
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    return store.runs().back().id;
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = test::pathIn(dir_, "lora.db");
    // The reference: one process with the global batch; and the initial weights (lr 0: nothing moves).
    const std::string ref = run("ddp", 1, {});
    QVERIFY(!ref.empty());
    refLosses_ = readLosses(ref + ".loss");
    refParams_ = readFloats(ref + ".params");
    manifest_ = readManifest(ref + ".params.json");
    // The initial weights: full fine-tuning of the same seed with SGD at lr 1e-30, which moves no
    // weight of this model (normal draws of 0.02 and ones; no zero-initialised base weight).
    const std::string init = run("ddp", 1, {},
                                 {"--model", "odd", "--steps", "1", "--seq-len", "16", "--micro-batch", "4", "--optimizer", "sgd",
                                  "--momentum", "0", "--lr", "1e-30", "--seed", "3"});
    QVERIFY(!init.empty());
    const auto initAll = readFloats(init + ".params");
    std::map<std::string, std::pair<std::size_t, std::int64_t>> at;  // name -> (offset, numel) in the full-model dump
    std::size_t o = 0;
    for (const auto& p : readManifest(init + ".params.json")) {
      at[p.name] = {o, p.numel};
      o += static_cast<std::size_t>(p.numel);
    }
    QCOMPARE(o, initAll.size());
    initParams_.assign(refParams_.size(), 0.0f);
    std::size_t off = 0;
    for (const auto& p : manifest_) {
      if (!p.trainable) {
        QVERIFY2(at.count(p.name) && at[p.name].second == p.numel, p.name.c_str());
        std::copy_n(initAll.begin() + static_cast<std::ptrdiff_t>(at[p.name].first), p.numel,
                    initParams_.begin() + static_cast<std::ptrdiff_t>(off));
      }
      off += static_cast<std::size_t>(p.numel);
    }
    QCOMPARE(static_cast<int>(refLosses_.size()), kSteps);
    QCOMPARE(refParams_.size(), initParams_.size());
  }

  // Σ over layers and targets of r·(in + out), from the preset's shapes written out here.
  void trainableCountIsTheFormula() {
    const core::ModelPreset* m = core::findModelPreset("odd");
    QVERIFY(m);
    const std::int64_t h = m->hidden, q = m->heads * m->headDim, kv = m->kvHeads * m->headDim, f = m->ffn;
    // targets q, v, gate, down: q [q x h], v [kv x h], gate [f x h], down [h x f]
    const std::int64_t perLayer = kRank * ((h + q) + (h + kv) + (h + f) + (f + h));
    const std::int64_t expected = m->layers * perLayer;
    std::int64_t trainable = 0, frozen = 0, adapters = 0;
    for (const auto& p : manifest_) {
      (p.trainable ? trainable : frozen) += p.numel;
      const bool adapter = p.name.find(".lora_A.") != std::string::npos || p.name.find(".lora_B.") != std::string::npos;
      QVERIFY2(adapter == p.trainable, p.name.c_str());  // only adapters train
      if (adapter) ++adapters;
    }
    QCOMPARE(trainable, expected);
    QCOMPARE(adapters, static_cast<std::int64_t>(m->layers) * 4 * 2);
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const core::RunId first = store.runs().front().id;
    QCOMPARE(store.metric(first, std::nullopt, "trainable_params").value_or(-1), static_cast<double>(expected));
    QCOMPARE(store.metric(first, std::nullopt, "frozen_params").value_or(-1), static_cast<double>(frozen));
    QCOMPARE(store.metric(first, std::nullopt, "skipped_steps").value_or(-1), 0.0);
    // The checkpointing probe ran through on the LoRA model too (a frozen embedding's output needs
    // the same leaf the engines make for a checkpointed block, or its backward has nothing to
    // propagate and the probe throws: then nothing is recorded). Its shares are not checked here:
    // next to other tests on 2 cores a timing can fall outside the bounds and be left unrecorded.
    const auto rank0 = store.ranks(first).front().id;
    QVERIFY(store.metric(first, rank0, "ckpt_probe_s").value_or(0) > 0);
  }

  void strategies_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("world");
    QTest::addColumn<QStringList>("knobs");
    const QStringList none;
    QTest::newRow("ddp") << "ddp" << 2 << QStringList{"--bucket-cap-mb", "0.01"};
    QTest::newRow("ddp checkpointing") << "ddp" << 2 << QStringList{"--activation-checkpointing"};
    QTest::newRow("zero1") << "zero1" << 2 << QStringList{"--reduce-bucket-size", "3000"};
    QTest::newRow("zero2") << "zero2" << 2 << QStringList{"--reduce-bucket-size", "2000", "--overlap-comm", "true"};
    QTest::newRow("zero3 defaults") << "zero3" << 2 << none;
    QTest::newRow("zero3 all partitioned, prefetch")
        << "zero3" << 2 << QStringList{"--stage3-param-persistence-threshold", "0", "--stage3-prefetch-bucket-size", "4000"};
    QTest::newRow("fsdp") << "fsdp" << 2 << none;
    QTest::newRow("fsdp post, checkpointing")
        << "fsdp" << 2 << QStringList{"--backward-prefetch", "post", "--activation-checkpointing"};
    QTest::newRow("fsdp_grad_op") << "fsdp_grad_op" << 2 << none;
    QTest::newRow("hsdp 2x2") << "hsdp" << 4 << QStringList{"--shard-group-size", "2"};
  }
  void strategies() {
    QFETCH(QString, strategy);
    QFETCH(int, world);
    QFETCH(QStringList, knobs);
    const std::string base = run(strategy, world, knobs);
    QVERIFY(!base.empty());
    // Losses: the reference's.
    const auto losses = meanLosses(base, world);
    QCOMPARE(losses.size(), refLosses_.size());
    for (std::size_t i = 0; i < losses.size(); ++i)
      QVERIFY2(
          std::abs(losses[i] - refLosses_[i]) <= 1e-5 * std::abs(refLosses_[i]) + 1e-6,
          qPrintable(
              QString("step %1: loss %2 vs reference %3").arg(i + 1).arg(losses[i], 0, 'g', 10).arg(refLosses_[i], 0, 'g', 10)));
    // Parameters: adapters as the reference's, base weights bit for bit their initial values.
    const auto params = readFloats(base + ".params");
    QCOMPARE(params.size(), refParams_.size());
    std::size_t off = 0;
    std::int64_t movedAdapters = 0;
    for (const auto& p : manifest_) {
      for (std::int64_t i = 0; i < p.numel; ++i, ++off) {
        if (!p.trainable) {
          QVERIFY2(std::memcmp(&params[off], &initParams_[off], sizeof(float)) == 0,
                   qPrintable(QString::fromStdString(p.name) + " changed at element " + QString::number(i)));
          continue;
        }
        movedAdapters += params[off] != 0.0f && p.name.find(".lora_B.") != std::string::npos;  // B starts at zero
        const double d = std::abs(static_cast<double>(params[off]) - refParams_[off]) - 1.3e-5 * std::abs(refParams_[off]);
        QVERIFY2(d <= 2e-5,
                 qPrintable(QString::fromStdString(p.name) + " differs from the reference at element " + QString::number(i)));
      }
    }
    QVERIFY2(movedAdapters > 0, "no adapter weight changed");

    // Collectives: what each moves against the formula.
    std::int64_t trainable = 0;
    std::map<std::string, std::int64_t> unitTrainable, unitFrozen;
    for (const auto& p : manifest_) {
      if (p.trainable) trainable += p.numel;
      (p.trainable ? unitTrainable : unitFrozen)[blockOf(p.name)] += p.numel;
    }
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const core::RunId id = lastRun();
    const auto ranks = store.ranks(id);
    QCOMPARE(static_cast<int>(ranks.size()), world);
    // FSDP-like: the units are sharded over the shard group (HSDP's 2 ranks, else every rank).
    const bool fsdpLike = strategy.startsWith("fsdp") || strategy == "hsdp";
    const int shard = strategy == "hsdp" ? 2 : world;
    for (const auto& r : ranks) {
      const double ar = store.metric(id, r.id, "comm.bytes_per_step.all_reduce").value_or(0);
      const double ag = store.metric(id, r.id, "comm.bytes_per_step.all_gather").value_or(0);
      const double rs = store.metric(id, r.id, "comm.bytes_per_step.reduce_scatter").value_or(0);
      if (strategy == "ddp" || strategy == "zero1" || strategy == "zero2") {
        // Gradients of the adapters only, all-reduced once per step.
        QCOMPARE(ar, static_cast<double>(trainable * 4));
        QCOMPARE(rs, 0.0);
        // ZeRO-1/2 gather the updated partitions of the adapters; DDP gathers nothing.
        QCOMPARE(ag, strategy == "ddp" ? 0.0 : static_cast<double>(roundUp(trainable, world) * 4));
      }
      if (fsdpLike) {
        // One reduce-scatter per unit with adapters (the layers), of the adapters only; HSDP then
        // all-reduces each adapter gradient shard across the replicas.
        std::int64_t expectRs = 0, expectAr = 0;
        for (const auto& [unit, n] : unitTrainable) {
          expectRs += roundUp(n, shard) * 4;
          expectAr += roundUp(n, shard) / shard * 4;
        }
        QCOMPARE(rs, static_cast<double>(expectRs));
        QCOMPARE(ar, strategy == "hsdp" ? static_cast<double>(expectAr) : 0.0);
        // Every unit's base and adapters are gathered at least once per step (forward).
        std::int64_t forward = 0;
        for (const auto& [unit, n] : unitFrozen) forward += roundUp(n, shard) * 4;
        for (const auto& [unit, n] : unitTrainable) forward += roundUp(n, shard) * 4;
        QVERIFY2(ag >= static_cast<double>(forward), qPrintable(QString("%1 < %2").arg(ag).arg(forward)));
      }
    }
    // Each all-gather instance of FSDP is a unit's base ("param U (frozen)") or its adapters
    // ("param U"), of exactly that part's padded bytes; the reduce-scatters name adapter units only.
    if (fsdpLike) {
      for (const auto& t : store.tracks(id)) {
        if (t.kind != core::TrackKind::Comm) continue;
        store.forEachEvent(t.id, [&](const core::Event& e) {
          if (!e.bytes || core::isLinkProbeName(e.name) || e.name.find("consolidate") != std::string::npos) return;
          if (e.collOp == core::CollectiveOp::AllGather) {
            const std::string n(e.name.substr(e.name.find("param ") + 6));
            const bool frozen = n.size() > 9 && n.compare(n.size() - 9, 9, " (frozen)") == 0;
            const std::string unit = frozen ? n.substr(0, n.size() - 9) : n;
            const std::int64_t expect = roundUp(frozen ? unitFrozen[unit] : unitTrainable[unit], shard) * 4;
            QCOMPARE(*e.bytes, expect);
          } else if (e.collOp == core::CollectiveOp::ReduceScatter || e.collOp == core::CollectiveOp::AllReduce) {
            const std::string unit(
                e.name.substr(e.name.find(e.collOp == core::CollectiveOp::AllReduce ? "grad replicas " : "grad ") +
                              (e.collOp == core::CollectiveOp::AllReduce ? 14 : 5)));
            QVERIFY2(unitTrainable.count(unit) && unitTrainable[unit] > 0, unit.c_str());
          }
        });
      }
    }
  }

  // fp16 needs half kernels on the device: on a CPU without them the run is refused with the reason
  // and nothing is left half-done.
  void fp16RefusedWhereNoKernels() {
    QStringList args = {"run",
                        "--db",
                        QString::fromStdString(db_),
                        "--model",
                        "tiny",
                        "--steps",
                        "2",
                        "--world-size",
                        "2",
                        "--precision",
                        "fp16",
                        "--device",
                        "cpu",
                        "--seq-len",
                        "16",
                        "--hang-timeout-s",
                        "60"};
    const test::CliResult r = runCli(args, 240000);
    if (r.code == 0) QSKIP("this LibTorch has fp16 kernels on the CPU: the loss-scaling path runs instead (see docs/RUNTIME.md)");
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("--precision fp16") && r.err.contains("no fp16 kernels on cpu") && r.err.contains("bf16"),
             qPrintable(r.err));
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    QCOMPARE(QString::fromStdString(std::string(core::toString(store.runs().back().status))), QString("failed"));
  }
};

QTEST_GUILESS_MAIN(TestLora)
#include "tst_lora.moc"
