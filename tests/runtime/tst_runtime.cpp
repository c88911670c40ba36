// The embedded runtime end to end: real shardscope-worker processes launched by shardscope-cli, real
// Gloo collectives, a real SQLite file. Parity: every strategy (and the knobs that change its
// schedule) trains to the same losses and final full parameters as a single-process reference with
// the concatenated global batch (strategies.md §4.4), fp32, 2 and 4 ranks. Model-state bytes per
// rank against the formulas; failures (crash, kill, hang) stop every rank and store the run as failed.
#include <QFileInfo>
#include <QDir>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>

#include <cmath>
#include <fstream>
#include <memory>
#include <vector>

#include "core/analysis/memory_peaks.h"
#include "core/analysis/memory_timeline.h"
#include "core/model/memory_category.h"
#include "core/estimator/comm_model.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "tests/runtime/runtime_files.h"

using namespace shardscope;
using test::readFloats;
using test::readLosses;

namespace {

struct Result {
  int code = -1;
  QString out, err;
  double seconds = 0;
};

Result runCli(const QStringList& args, const QProcessEnvironment& extra = {}, int timeoutMs = 180000) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("SHARDSCOPE_NO_PROGRESS", "1");
  for (const auto& k : extra.keys()) env.insert(k, extra.value(k));
  p.setProcessEnvironment(env);
  QElapsedTimer t;
  t.start();
  p.start(SHARDSCOPE_CLI, args);
  if (!p.waitForFinished(timeoutMs)) {
    p.kill();
    p.waitForFinished();
    return {-3, {}, "timed out", 0};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError()), static_cast<double>(t.elapsed()) / 1000.0};
}

// Mean over ranks of each step's loss (the global batch's loss: ranks hold equal token counts).
std::vector<double> meanLosses(const std::string& base, int world) {
  if (world == 1) return readLosses(base);
  std::vector<double> sum;
  for (int r = 0; r < world; ++r) {
    auto l = readLosses(base + ".rank" + std::to_string(r));
    if (sum.empty()) sum.assign(l.size(), 0.0);
    if (l.size() != sum.size()) return {};
    for (std::size_t i = 0; i < l.size(); ++i) sum[i] += l[i] / world;
  }
  return sum;
}

constexpr int kSteps = 3;
constexpr int kMicro = 2;

}  // namespace

class TestRuntime : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::string db_;
  struct Ref {
    std::vector<double> losses;
    std::vector<float> params;
  };
  std::map<QString, Ref> refs_;  // per optimizer/model/accum

  QStringList common(const QString& model, const QString& optimizer, int accum) const {
    return {"--model",
            model,
            "--steps",
            QString::number(kSteps),
            "--seq-len",
            "16",
            "--optimizer",
            optimizer,
            "--lr",
            optimizer == "sgd" ? "0.05" : "0.003",
            "--grad-accum",
            QString::number(accum),
            "--seed",
            "3",
            "--hang-timeout-s",
            "60"};
  }

  const Ref& reference(const QString& model, const QString& optimizer, int world, int accum) {
    const QString key = model + "/" + optimizer + "/" + QString::number(world) + "/" + QString::number(accum);
    auto it = refs_.find(key);
    if (it != refs_.end()) return it->second;
    const std::string base = test::pathIn(dir_, "ref" + std::to_string(refs_.size()));
    QStringList args = {"run",
                        "--db",
                        QString::fromStdString(db_),
                        "--strategy",
                        "ddp",
                        "--world-size",
                        "1",
                        "--micro-batch",
                        QString::number(kMicro * world),
                        "--dump-params",
                        QString::fromStdString(base + ".params"),
                        "--dump-losses",
                        QString::fromStdString(base + ".loss")};
    args << common(model, optimizer, accum);
    const Result r = runCli(args);
    if (r.code != 0) qWarning() << r.err;
    Ref ref;
    ref.losses = readLosses(base + ".loss");
    ref.params = readFloats(base + ".params");
    return refs_[key] = ref;
  }

  void checkParity(const QString& strategy, int world, const QStringList& knobs, const QString& model = "odd",
                   const QString& optimizer = "sgd", int accum = 1) {
    const Ref& ref = reference(model, optimizer, world, accum);
    QCOMPARE(static_cast<int>(ref.losses.size()), kSteps);
    QVERIFY(!ref.params.empty());
    const std::string base = test::pathIn(dir_, "run" + std::to_string(++runs_));
    QStringList args = {"run",
                        "--db",
                        QString::fromStdString(db_),
                        "--strategy",
                        strategy,
                        "--world-size",
                        QString::number(world),
                        "--micro-batch",
                        QString::number(kMicro),
                        "--dump-params",
                        QString::fromStdString(base + ".params"),
                        "--dump-losses",
                        QString::fromStdString(base + ".loss")};
    args << common(model, optimizer, accum) << knobs;
    const Result r = runCli(args);
    QVERIFY2(r.code == 0, qPrintable(strategy + " " + knobs.join(' ') + ": " + r.err.right(2000)));
    const auto losses = meanLosses(base + ".loss", world);
    QCOMPARE(losses.size(), ref.losses.size());
    for (std::size_t i = 0; i < losses.size(); ++i)
      QVERIFY2(std::abs(losses[i] - ref.losses[i]) <= 1e-5 * std::abs(ref.losses[i]) + 1e-6,
               qPrintable(QString("%1 %2 step %3: loss %4 vs reference %5")
                              .arg(strategy, knobs.join(' '))
                              .arg(i + 1)
                              .arg(losses[i], 0, 'g', 10)
                              .arg(ref.losses[i], 0, 'g', 10)));
    const auto params = readFloats(base + ".params");
    QCOMPARE(params.size(), ref.params.size());
    double worst = 0;
    std::size_t worstAt = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const double d = std::abs(static_cast<double>(params[i]) - ref.params[i]) - 1.3e-5 * std::abs(ref.params[i]);
      if (d > worst) {
        worst = d;
        worstAt = i;
      }
    }
    QVERIFY2(worst <= 2e-5, qPrintable(QString("%1 %2: parameter %3 differs from the reference by %4")
                                           .arg(strategy, knobs.join(' '))
                                           .arg(worstAt)
                                           .arg(worst)));
  }
  int runs_ = 0;

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = test::pathIn(dir_, "runtime.db");
  }

  void parity_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("world");
    QTest::addColumn<QStringList>("knobs");
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<int>("accum");
    const QStringList none;
    QTest::newRow("ddp") << "ddp" << 2 << none << "sgd" << 1;
    QTest::newRow("ddp tiny buckets, bucket views")
        << "ddp" << 2 << QStringList{"--bucket-cap-mb", "0.004", "--first-bucket-mb", "0.001", "--gradient-as-bucket-view"}
        << "sgd" << 1;
    QTest::newRow("ddp adamw accum 2 checkpointing") << "ddp" << 2 << QStringList{"--activation-checkpointing"} << "adamw" << 2;
    QTest::newRow("zero1 small buckets") << "zero1" << 2
                                         << QStringList{"--reduce-bucket-size", "3000", "--allgather-bucket-size", "2000"}
                                         << "sgd" << 1;
    QTest::newRow("zero2 overlap") << "zero2" << 2 << QStringList{"--reduce-bucket-size", "5000", "--overlap-comm", "true"}
                                   << "adamw" << 1;
    QTest::newRow("zero2 no overlap accum 2")
        << "zero2" << 2 << QStringList{"--reduce-bucket-size", "5000", "--overlap-comm", "false"} << "sgd" << 2;
    QTest::newRow("zero3 defaults") << "zero3" << 2 << none << "sgd" << 1;
    QTest::newRow("zero3 partitioned, prefetch, release")
        << "zero3" << 2 << QStringList{"--stage3-param-persistence-threshold", "100",  "--max-reuse-distance", "0",
                                       "--stage3-prefetch-bucket-size",        "4000", "--reduce-bucket-size", "3000"}
        << "adamw" << 1;
    QTest::newRow("zero3 4 ranks checkpointing accum 2")
        << "zero3" << 4
        << QStringList{"--param-persistence-threshold", "0", "--activation-checkpointing", "--overlap-comm", "false"} << "sgd"
        << 2;
    QTest::newRow("fsdp") << "fsdp" << 2 << none << "adamw" << 1;
    QTest::newRow("fsdp post, forward prefetch, no limit")
        << "fsdp" << 2 << QStringList{"--backward-prefetch", "post", "--forward-prefetch", "--limit-all-gathers", "false"}
        << "sgd" << 1;
    QTest::newRow("fsdp no prefetch, checkpointing, 4 ranks")
        << "fsdp" << 4 << QStringList{"--backward-prefetch", "none", "--activation-checkpointing"} << "sgd" << 1;
    QTest::newRow("fsdp_grad_op") << "fsdp_grad_op" << 2 << none << "sgd" << 2;
    QTest::newRow("hsdp 2x2") << "hsdp" << 4 << QStringList{"--shard-group-size", "2"} << "adamw" << 1;
  }
  void parity() {
    QFETCH(QString, strategy);
    QFETCH(int, world);
    QFETCH(QStringList, knobs);
    QFETCH(QString, optimizer);
    QFETCH(int, accum);
    checkParity(strategy, world, knobs, "odd", optimizer, accum);
  }

  // A DeepSpeed JSON is an accepted input: its zero_optimization block picks ZeRO-3 and its knobs.
  void deepspeedConfig() {
    const std::string ds =
        test::writeFile(dir_, "ds_zero3.json",
                        "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 1,"
                        " \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.05, \"momentum\": 0.9}},"
                        " \"zero_optimization\": {\"stage\": 3, \"overlap_comm\": true, \"reduce_bucket_size\": 4000,"
                        " \"stage3_param_persistence_threshold\": 50, \"stage3_prefetch_bucket_size\": 3000,"
                        " \"stage3_max_reuse_distance\": 0}}");
    checkParity("zero3", 2, {"--deepspeed", QString::fromStdString(ds)});
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const auto runs = store.runs();
    QVERIFY(!runs.empty());
    const auto& last = runs.back();
    QCOMPARE(QString::fromStdString(last.strategy), QString("zero3"));
    QVERIFY2(last.configJson.find("\"reduce_bucket_size\":4000") != std::string::npos, last.configJson.c_str());
  }

  // Workers started by torchrun --no-python / srun: the environment gives the ranks, rank 0 creates
  // the run and shares its id; a sharded checkpoint is saved and consolidated.
  void externalLaunchAndCheckpoint() {
    const QString worker = QFileInfo(QString(SHARDSCOPE_CLI)).dir().filePath("../profiler/shardscope-worker");
    QVERIFY(QFileInfo::exists(worker));
    const std::string ckpt = test::pathIn(dir_, "ckpt");
    std::vector<std::unique_ptr<QProcess>> procs;
    for (int r = 0; r < 2; ++r) {
      auto p = std::make_unique<QProcess>();
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      env.insert("MASTER_ADDR", "127.0.0.1");
      env.insert("MASTER_PORT", QString::number(29000 + QCoreApplication::applicationPid() % 5000));
      env.insert("RANK", QString::number(r));
      env.insert("WORLD_SIZE", "2");
      env.insert("LOCAL_RANK", QString::number(r));
      env.insert("OMP_NUM_THREADS", "1");
      p->setProcessEnvironment(env);
      p->start(worker, {"--db", QString::fromStdString(db_), "--run-name", "external", "--strategy", "fsdp", "--model", "tiny",
                        "--steps", "3", "--seq-len", "16", "--micro-batch", "2", "--save-checkpoint", "--consolidate-checkpoint",
                        "--checkpoint-dir", QString::fromStdString(ckpt)});
      procs.push_back(std::move(p));
    }
    for (auto& p : procs) {
      QVERIFY(p->waitForFinished(120000));
      QVERIFY2(p->exitCode() == 0, p->readAllStandardError().constData());
    }
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    std::optional<core::Run> run;
    for (const auto& x : store.runs())
      if (x.name == "external") run = x;
    QVERIFY(run);
    QVERIFY(run->status == core::RunStatus::Completed);
    QCOMPARE(static_cast<int>(store.ranks(run->id).size()), 2);
    QVERIFY(store.metric(run->id, std::nullopt, "checkpoint_save_s").value_or(-1) >= 0);
    // Shards: parameters + two Adam moments, 4 bytes each, half of the (padded) model per rank.
    const double psi = 125248;
    std::int64_t shardBytes = 0;
    for (int r = 0; r < 2; ++r)
      shardBytes += QFileInfo(QString::fromStdString(ckpt + "/rank" + std::to_string(r) + ".bin")).size();
    QVERIFY2(std::abs(static_cast<double>(shardBytes) - 12 * psi) < 12 * 64, qPrintable(QString::number(shardBytes)));
    QCOMPARE(QFileInfo(QString::fromStdString(ckpt + "/consolidated.bin")).size(), static_cast<qint64>(4 * psi));
  }

  // Model-state bytes each rank holds, measured over the tensors it owns, against strategies.md's
  // formulas for fp32 Adam (4 bytes param, 4 grad, 8 optimizer state; plus padding to the shards).
  void modelStateBytes() {
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    const double psi = 48.0 * 259 * 2 + 2 * (48 + 48 * 48 + 2 * 48 * 16 + 48 * 48 + 48 + 3 * 48 * 131) + 48;
    int checked = 0;
    for (const auto& run : store.runs()) {
      if (run.status != core::RunStatus::Completed || run.worldSize < 2) continue;
      if (run.configJson.find("\"model\":\"odd\"") == std::string::npos) continue;
      if (run.configJson.find("\"optimizer\":\"adamw\"") == std::string::npos) continue;
      const double N = run.worldSize;
      for (const auto& rank : store.ranks(run.id)) {
        const double p = store.metric(run.id, rank.id, "model_state.parameters_bytes").value_or(-1);
        const double g = store.metric(run.id, rank.id, "model_state.gradients_bytes").value_or(-1);
        const double o = store.metric(run.id, rank.id, "model_state.optimizer_bytes").value_or(-1);
        double ep = 0, eg = 0, eo = 0, slack = 0;
        const std::string& s = run.strategy;
        const bool bucketView = run.configJson.find("\"gradient_as_bucket_view\":true") != std::string::npos;
        if (s == "ddp") {
          ep = 4 * psi, eg = (bucketView ? 4 : 8) * psi, eo = 8 * psi, slack = 4 * N;
        } else if (s == "zero1") {
          ep = 4 * psi, eg = 4 * psi, eo = 8 * psi / N, slack = 16 * N;
        } else if (s == "zero2") {
          ep = 4 * psi, eg = 4 * psi / N, eo = 8 * psi / N, slack = 16 * N;
        } else if (s == "hsdp") {
          const double G = 2;
          ep = 4 * psi / G, eg = 4 * psi / G, eo = 8 * psi / G, slack = 16.0 * 40 * G;
        } else if (s == "fsdp" || s == "zero3") {
          // zero3 keeps parameters below the persistence threshold whole on every rank.
          if (s == "zero3" && run.configJson.find("\"stage3_param_persistence_threshold\":100000") != std::string::npos) continue;
          ep = 4 * psi / N, eg = 4 * psi / N, eo = 8 * psi / N, slack = 16.0 * 40 * N + 4.0 * 48 * 20;
        } else {
          continue;
        }
        QVERIFY2(std::abs(p - ep) <= slack && std::abs(g - eg) <= slack && std::abs(o - eo) <= slack,
                 qPrintable(QString("run %1 (%2) rank %3: params %4 grads %5 optimizer %6; expected %7 %8 %9")
                                .arg(run.id.value())
                                .arg(QString::fromStdString(s))
                                .arg(rank.rank)
                                .arg(p)
                                .arg(g)
                                .arg(o)
                                .arg(ep)
                                .arg(eg)
                                .arg(eo)));
        ++checked;
      }
    }
    QVERIFY2(checked >= 6, qPrintable(QString("only %1 ranks checked").arg(checked)));
  }

  // What a run stores: ranks, compute and communication lanes, steps, collectives with bytes and
  // group, memory records, metrics; readable while the run goes (WAL) and after.
  // A checkpointed block's recomputation is its own span inside the backward ("recompute <block>",
  // the compute lane), once per layer, step and micro-batch on every rank, in DDP, ZeRO-3 and FSDP
  // alike; a run without checkpointing has none.
  void recomputeSpans() {
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    int checked = 0, plain = 0;
    for (const auto& r : store.runs()) {
      if (r.status != core::RunStatus::Completed || r.source != core::RunSource::Runtime) continue;
      const bool ckpt = r.configJson.find("\"activation_checkpointing\":true") != std::string::npos;
      std::map<std::string, int> recomputes;  // by block name, over the ranks and steps
      double recomputeS = 0;
      for (const auto& t : store.summary(r.id).tracks) {
        if (t.track.kind != core::TrackKind::CpuThread || t.track.name.rfind("compute", 0) != 0) continue;
        store.forEachEvent(t.track.id, [&](const core::Event& e) {
          if (e.name.rfind("recompute ", 0) != 0) return;
          QVERIFY2(e.step.has_value(), std::string(e.name).c_str());
          ++recomputes[std::string(e.name)];
          recomputeS += static_cast<double>(e.endNs - e.startNs) * 1e-9;
        });
      }
      if (!ckpt) {
        QVERIFY2(recomputes.empty(), qPrintable(QString::fromStdString(r.strategy + ": recompute spans without checkpointing")));
        ++plain;
        continue;
      }
      ++checked;
      const std::string what = r.strategy + " " + std::to_string(r.worldSize) + " ranks";
      QVERIFY2(recomputeS > 0, what.c_str());
      // Every transformer block of the test model (2 layers) is recomputed; nothing else is.
      QCOMPARE(static_cast<int>(recomputes.size()), 2);
      QVERIFY2(recomputes.count("recompute layers.0") && recomputes.count("recompute layers.1"), what.c_str());
    }
    QVERIFY2(checked >= 3, qPrintable(QString("%1 checkpointed runs").arg(checked)));
    QVERIFY(plain > 0);
  }

  void captureContents() {
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    std::optional<core::RunId> fsdpRun;
    for (const auto& r : store.runs())
      if (r.strategy == "fsdp" && r.status == core::RunStatus::Completed && r.worldSize == 2) fsdpRun = r.id;
    QVERIFY(fsdpRun);
    const auto sum = store.summary(*fsdpRun);
    QCOMPARE(static_cast<int>(sum.ranks.size()), 2);
    QVERIFY(sum.collectiveCount > 0);
    QCOMPARE(static_cast<int>(store.steps(*fsdpRun).size()), 2 * kSteps);
    int ag = 0, rs = 0, probe = 0, loaded = 0, loadedWarmup = 0;
    for (const auto& t : sum.tracks) {
      if (t.track.kind != core::TrackKind::Comm) continue;
      store.forEachEvent(t.track.id, [&](const core::Event& e) {
        if (e.collOp == core::CollectiveOp::Barrier) return;
        QVERIFY(e.bytes && *e.bytes > 0);
        QVERIFY(e.processGroupId.has_value());
        // The link probe and the loaded probe (before step 1, outside every step): counted apart.
        if (core::isLinkProbeName(e.name)) {
          QVERIFY(!e.step.has_value());
          if (core::isLoadedProbeName(e.name)) {
            QVERIFY(e.collOp == core::CollectiveOp::AllGather);
            ++(e.name.find("warmup") != std::string::npos ? loadedWarmup : loaded);
          } else {
            ++probe;
          }
          return;
        }
        QCOMPARE(e.groupSize.value_or(0), 2);
        QVERIFY(e.endNs >= e.startNs);
        ag += e.collOp == core::CollectiveOp::AllGather;
        rs += e.collOp == core::CollectiveOp::ReduceScatter;
        if (e.collOp == core::CollectiveOp::ReduceScatter)
          QVERIFY(e.argsJson.find("\"emulated_by\":\"all_reduce\"") != std::string::npos);
      });
    }
    // FSDP full shard, 4 units (embedding, 2 blocks, head): per step 4 forward all-gathers, 2 more
    // in backward (the head is kept, the embedding is gathered last) ... at least one per unit and
    // pass, and one reduce-scatter per unit per step.
    QCOMPARE(rs, 2 * 4 * kSteps);
    // The probe: 7 sizes x 3 ops x 10 timed instances, plus a warm-up per size up to 1 MiB (all of
    // them for this model), on each of the 2 ranks.
    QCOMPARE(probe, 2 * 7 * 3 * (10 + 1));
    // The loaded probe: per size of a layer's modules, 2 warm-ups and 24 timed all-gathers per rank;
    // read back as one matched sample per timed instance, apart from the idle probe's.
    QVERIFY(loaded > 0);
    QCOMPARE(loaded % (2 * 24), 0);
    QCOMPARE(loadedWarmup * 12, loaded);
    const auto samples = core::estimator::runCollectiveSamples(store, *fsdpRun);
    QCOMPARE(static_cast<int>(samples.loaded.size()), loaded / 2);
    for (const auto& s : samples.loaded) {
      QVERIFY(s.matched);
      QVERIFY(s.kind == core::estimator::CollKind::AllGather);
      QVERIFY(s.durationS > 0);
    }
    QCOMPARE(static_cast<int>(samples.probe.size()), 7 * 3 * 10);
    QVERIFY2(ag >= 2 * 6 * kSteps, qPrintable(QString::number(ag)));
    QVERIFY(store.metric(*fsdpRun, std::nullopt, "tokens_per_s").value_or(0) > 0);
    for (const auto& r : sum.ranks) {
      QVERIFY(!store.memoryEvents(r.id).empty());
      QVERIFY(store.metric(*fsdpRun, r.id, "peak_allocated_bytes").value_or(0) > 0);
      QVERIFY(store.metric(*fsdpRun, r.id, "peak_breakdown.activations").value_or(0) > 0);
      QVERIFY(store.metric(*fsdpRun, r.id, "peak_breakdown.gathered_parameters").has_value());
    }
    // The memory analysis finds the same peak as the allocator and attaches its breakdown.
    const auto peaks = core::computeMemoryPeaks(store, *fsdpRun);
    QCOMPARE(static_cast<int>(peaks.size()), 2);
    for (const auto& p : peaks) {
      std::int64_t sumBytes = 0;
      for (const auto& [cat, bytes] : p.breakdown) sumBytes += bytes;
      QCOMPARE(static_cast<int>(p.breakdown.size()), core::kMemoryCategoryCount);  // gathered parameters apart (issue 46)
      QCOMPARE(sumBytes, p.peakAllocatedBytes);
      QVERIFY(p.step.has_value());
      QVERIFY2(!p.operation.empty(), "no operation at the peak");
    }
    // The breakdown over time (issue 46): one timeline per rank, whose categories sum to the total
    // allocated at every memory record and equal the peak's breakdown at the peak.
    const auto timelines = core::memoryCategoryTimelines(store, *fsdpRun);
    QCOMPARE(static_cast<int>(timelines.size()), 2);
    for (std::size_t i = 0; i < timelines.size(); ++i) {
      const auto& tl = timelines[i];
      QCOMPARE(tl.rank, static_cast<int>(i));
      QVERIFY(std::find(tl.categories.begin(), tl.categories.end(), core::MemoryCategory::GatheredParameters) !=
              tl.categories.end());
      const core::RankId rankId = sum.ranks[i].id;
      std::vector<core::MemoryEvent> records = store.memoryEvents(rankId);
      QVERIFY(!records.empty());
      int checked = 0;
      for (std::size_t k = 0; k < records.size(); ++k) {
        if (k + 1 < records.size() && records[k + 1].tsNs == records[k].tsNs) continue;  // the last at one time
        QCOMPARE(tl.totalAt(records[k].tsNs), records[k].totalAllocated);
        ++checked;
      }
      QVERIFY(checked > 10);
      const core::MemoryPeak& p = peaks[i];
      QCOMPARE(p.rank, tl.rank);
      for (const auto& [cat, bytes] : tl.at(p.allocatedAtNs)) {
        const std::string key(core::memoryCategoryKey(cat));
        const auto it = std::find_if(p.breakdown.begin(), p.breakdown.end(), [&](const auto& kv) { return kv.first == key; });
        QVERIFY2(it != p.breakdown.end(), key.c_str());
        QCOMPARE(bytes, it->second);
      }
    }
  }

  // --precision bf16 on CPU: parameters and activations in bf16 in the compute graph, fp32 master
  // weights and optimizer state, for every strategy. Losses track fp32 within bf16's precision over
  // 10 steps; on `small`, activations at the memory peak are at most 0.6x those of fp32.
  void bf16MixedPrecision_data() {
    QTest::addColumn<QString>("strategy");
    for (const char* s : {"ddp", "zero2", "zero3", "fsdp", "fsdp_grad_op"}) QTest::newRow(s) << QString(s);
  }
  void bf16MixedPrecision() {
    QFETCH(QString, strategy);
    std::map<QString, std::vector<double>> losses;
    std::map<QString, core::RunId> runIds;
    for (const QString precision : {"fp32", "bf16"}) {
      const std::string base = test::pathIn(dir_, "bf16_" + strategy.toStdString() + "_" + precision.toStdString());
      const QString name = "mp " + strategy + " " + precision;
      const Result r = runCli({"run",
                               "--db",
                               QString::fromStdString(db_),
                               "--name",
                               name,
                               "--strategy",
                               strategy,
                               "--world-size",
                               "2",
                               "--model",
                               "tiny",
                               "--steps",
                               "10",
                               "--seq-len",
                               "32",
                               "--micro-batch",
                               "2",
                               "--seed",
                               "5",
                               "--precision",
                               precision,
                               "--dump-losses",
                               QString::fromStdString(base)});
      QVERIFY2(r.code == 0, qPrintable(precision + ": " + r.err.right(1500)));
      losses[precision] = meanLosses(base, 2);
      core::TraceStore store(db_, core::Database::Mode::ReadOnly);
      for (const auto& run : store.runs())
        if (run.name == name.toStdString()) runIds[precision] = run.id;
    }
    const auto& a = losses["fp32"];
    const auto& b = losses["bf16"];
    QCOMPARE(a.size(), std::size_t(10));
    QCOMPARE(b.size(), std::size_t(10));
    for (std::size_t i = 0; i < a.size(); ++i)
      QVERIFY2(std::abs(a[i] - b[i]) <= 0.02 * std::abs(a[i]),
               qPrintable(QString("step %1: fp32 %2, bf16 %3").arg(i).arg(a[i]).arg(b[i])));
    QVERIFY2(b.back() < b.front() - 0.1, "bf16 training does not learn");
    QVERIFY2(a != b, "bf16 gave exactly the fp32 losses: it did not compute in bf16");
    // What the compute graph got: 2-byte parameters and activations in bf16, 4-byte in fp32.
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    for (const auto& [precision, id] : runIds) {
      const double want = precision == "bf16" ? 2 : 4;
      for (const auto& rk : store.ranks(id)) {
        QCOMPARE(store.metric(id, rk.id, "compute.param_dtype_bytes").value_or(0), want);
        QCOMPARE(store.metric(id, rk.id, "compute.activation_dtype_bytes").value_or(0), want);
      }
    }
  }

  // scaled_dot_product_attention against the eager attention, where this LibTorch has both (2.x):
  // the same losses in fp32. On LibTorch 1.13 sdpa is refused with a message naming the version.
  void sdpaMatchesEager() {
    std::map<QString, std::vector<double>> losses;
    for (const QString attention : {"eager", "sdpa"}) {
      const std::string base = test::pathIn(dir_, "attn_" + attention.toStdString());
      const Result r = runCli({"run",
                               "--db",
                               QString::fromStdString(db_),
                               "--strategy",
                               "fsdp",
                               "--world-size",
                               "2",
                               "--model",
                               "tiny",
                               "--steps",
                               "5",
                               "--seq-len",
                               "32",
                               "--micro-batch",
                               "2",
                               "--seed",
                               "9",
                               "--attention",
                               attention,
                               "--dump-losses",
                               QString::fromStdString(base)});
      if (attention == "sdpa" && r.code != 0 && r.err.contains("needs LibTorch 2.0")) {
        QVERIFY2(r.err.contains("use --attention eager"), qPrintable(r.err));
        QSKIP("this LibTorch has no scaled_dot_product_attention (1.x): refused with a clear message");
      }
      QVERIFY2(r.code == 0, qPrintable(attention + ": " + r.err.right(1500)));
      losses[attention] = meanLosses(base, 2);
    }
    QCOMPARE(losses["sdpa"].size(), std::size_t(5));
    for (std::size_t i = 0; i < 5; ++i)
      QVERIFY2(std::abs(losses["sdpa"][i] - losses["eager"][i]) < 1e-4,
               qPrintable(QString("step %1: eager %2, sdpa %3").arg(i).arg(losses["eager"][i]).arg(losses["sdpa"][i])));
  }

  // --reduce-dtype bf16 sends gradients in bf16 where the backend can sum bf16 (NCCL; Gloo in
  // LibTorch 2.x), and the losses still track fp32 reduction. Gloo in LibTorch 1.13 cannot: an
  // explicit bf16 is refused naming the backend, and unset falls back to fp32 (rank metadata).
  void bf16GradientReduction() {
    const QStringList common{"--db",          QString::fromStdString(db_),
                             "--strategy",    "zero2",
                             "--world-size",  "2",
                             "--model",       "tiny",
                             "--steps",       "6",
                             "--seq-len",     "32",
                             "--micro-batch", "2",
                             "--seed",        "4",
                             "--precision",   "bf16"};
    const std::string fp32Base = test::pathIn(dir_, "rd_fp32");
    Result r = runCli(
        QStringList{"run", "--name", "rd fp32", "--reduce-dtype", "fp32", "--dump-losses", QString::fromStdString(fp32Base)} +
        common);
    QVERIFY2(r.code == 0, qPrintable(r.err.right(1500)));
    const std::string bf16Base = test::pathIn(dir_, "rd_bf16");
    r = runCli(
        QStringList{"run", "--name", "rd bf16", "--reduce-dtype", "bf16", "--dump-losses", QString::fromStdString(bf16Base)} +
        common);
    if (r.code != 0 && r.err.contains("cannot sum bf16")) {
      QVERIFY2(r.err.contains("use --reduce-dtype fp32"), qPrintable(r.err));
      // Unset under bf16: falls back to fp32 and says so.
      r = runCli(QStringList{"run", "--name", "rd unset"} + common);
      QVERIFY2(r.code == 0, qPrintable(r.err.right(1500)));
      core::TraceStore store(db_, core::Database::Mode::ReadOnly);
      for (const auto& run : store.runs())
        if (run.name == "rd unset")
          for (const auto& rk : store.ranks(run.id))
            QVERIFY2(QString::fromStdString(rk.metadataJson).contains("\"reduce_dtype\":\"fp32\""), rk.metadataJson.c_str());
      QSKIP("this backend cannot sum bf16 (Gloo in LibTorch 1.x): refused and fallen back as documented");
    }
    QVERIFY2(r.code == 0, qPrintable(r.err.right(1500)));
    const auto a = meanLosses(fp32Base, 2), b = meanLosses(bf16Base, 2);
    QCOMPARE(b.size(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) QVERIFY(std::abs(a[i] - b[i]) <= 0.02 * std::abs(a[i]));
  }

  void bf16HalvesActivations() {
    std::map<QString, double> act;
    for (const QString precision : {"fp32", "bf16"}) {
      const QString name = "act " + precision;
      const Result r = runCli({"run", "--db", QString::fromStdString(db_), "--name", name, "--strategy", "ddp", "--world-size",
                               "2", "--model", "small", "--steps", "2", "--precision", precision});
      QVERIFY2(r.code == 0, qPrintable(r.err.right(1500)));
      core::TraceStore store(db_, core::Database::Mode::ReadOnly);
      for (const auto& run : store.runs())
        if (run.name == name.toStdString())
          act[precision] = store.metric(run.id, store.ranks(run.id).front().id, "peak_breakdown.activations").value_or(0);
    }
    QVERIFY(act["fp32"] > 0);
    QVERIFY2(act["bf16"] <= 0.6 * act["fp32"], qPrintable(QString("activations at the peak: bf16 %1 MiB, fp32 %2 MiB")
                                                              .arg(act["bf16"] / 1048576.0)
                                                              .arg(act["fp32"] / 1048576.0)));
  }

  void badConfigRefusedBeforeLaunch() {
    const auto before = [&] {
      core::TraceStore store(db_, core::Database::Mode::ReadOnly);
      return store.runs().size();
    }();
    Result r = runCli(
        {"run", "--db", QString::fromStdString(db_), "--strategy", "hsdp", "--world-size", "4", "--shard-group-size", "3"});
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains("shard_group_size"), qPrintable(r.err));
    const std::string ds = test::writeFile(dir_, "bad-ds.json", "{\"zero_optimization\": {\"stage\": 4}}");
    r = runCli({"run", "--db", QString::fromStdString(db_), "--deepspeed", QString::fromStdString(ds)});
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains("zero_optimization.stage"), qPrintable(r.err));
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    QCOMPARE(store.runs().size(), before);  // nothing launched, nothing stored
  }

  void failures_data() {
    QTest::addColumn<QString>("kind");
    QTest::newRow("crash") << "crash";
    QTest::newRow("kill") << "kill";
    QTest::newRow("hang") << "hang";
  }
  void failures() {
    QFETCH(QString, kind);
    QProcessEnvironment env;
    env.insert("SHARDSCOPE_FAULT", "1:30:" + kind);
    const Result r =
        runCli({"run", "--db", QString::fromStdString(db_), "--strategy", "fsdp", "--world-size", "2", "--model", "tiny",
                "--steps", "34", "--seq-len", "16", "--micro-batch", "2",
                // Only the hang case needs the short hang timeout; for the others a slow start on a
                // loaded machine must not be mistaken for a hang before the fault happens.
                "--hang-timeout-s", kind == "hang" ? "4" : "30", "--flush-interval-s", "0.05", "--name", "fault " + kind},
               env, 60000);
    QCOMPARE(r.code, 1);
    QVERIFY2(r.seconds < 30, qPrintable(QString::number(r.seconds)));
    core::TraceStore store(db_, core::Database::Mode::ReadOnly);
    std::optional<core::Run> run;
    for (const auto& x : store.runs())
      if (x.name == "fault " + kind.toStdString()) run = x;
    QVERIFY(run);
    QVERIFY(run->status == core::RunStatus::Failed);
    QVERIFY2(!run->failureReason.empty(), "no reason stored");
    if (kind != "hang") QVERIFY2(run->failureReason.find("rank 1") != std::string::npos, run->failureReason.c_str());
    if (kind == "crash") QVERIFY2(run->failureReason.find("injected fault") != std::string::npos, run->failureReason.c_str());
    if (kind == "kill") QVERIFY2(run->failureReason.find("SIGKILL") != std::string::npos, run->failureReason.c_str());
    // What was captured before the failure is kept: rank 1 got through steps 1-29, and a kill -9 loses
    // at most what came after the last flush (every 0.05 s here; 29 steps of `tiny` take longer than
    // that even on an idle machine). How many steps that is depends on the machine's speed, so the
    // check is that the kept steps are the first ones, without a gap, none after the fault.
    std::vector<std::int64_t> rank1;
    for (const auto& s : store.steps(run->id))
      for (const auto& rk : store.ranks(run->id))
        if (rk.id == s.rankId && rk.rank == 1) rank1.push_back(s.step);
    std::sort(rank1.begin(), rank1.end());
    QVERIFY2(!rank1.empty(), "nothing of rank 1 was kept");
    for (std::size_t i = 0; i < rank1.size(); ++i) QCOMPARE(rank1[i], std::int64_t(i + 1));
    QVERIFY2(rank1.back() <= 29, qPrintable(QString::number(rank1.back())));
    QVERIFY(store.summary(run->id).eventCount > 0);
  }
};

QTEST_GUILESS_MAIN(TestRuntime)
#include "tst_runtime.moc"
