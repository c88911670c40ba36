// The collectives ZeRO-3 and FSDP issue per step, pinned: kind, message bytes and purpose of each,
// in issue order, on every communication lane of rank 0, for a real two-rank run of `tiny` cut to
// one layer. The sequences were recorded from the engine before its fetch policies were split out
// (ParamFetchPolicy, profiler/runtime/fetch_policy.h): any change to when a unit is gathered,
// prefetched, released or reduced shows here as a changed line.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <map>

#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"

using namespace shardscope;

namespace {

int runCli(const QStringList& args, QString* err) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("SHARDSCOPE_NO_PROGRESS", "1");
  p.setProcessEnvironment(env);
  p.start(SHARDSCOPE_CLI, args);
  if (!p.waitForFinished(240000)) {
    p.kill();
    p.waitForFinished();
    *err = "timed out";
    return -1;
  }
  *err = QString::fromUtf8(p.readAllStandardError());
  return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
}

// Per step, rank 0's collectives on each communication lane in issue order (a lane's collectives
// run in issue order on its thread): "<lane> | <op> <bytes> | <name>".
std::map<std::int64_t, QStringList> collectivesPerStep(const std::string& db) {
  core::TraceStore store(db, core::Database::Mode::ReadOnly);
  std::map<std::int64_t, QStringList> out;
  const auto runs = store.runs();
  if (runs.empty()) return out;
  const auto sum = store.summary(runs.back().id);
  std::optional<core::RankId> rank0;
  for (const auto& r : sum.ranks)
    if (r.rank == 0) rank0 = r.id;
  for (const auto& t : sum.tracks) {
    if (t.track.kind != core::TrackKind::Comm || t.track.rankId != rank0) continue;
    const std::string lane = t.track.name.substr(0, t.track.name.find(" ("));  // "comm world (gloo)": backend aside
    store.forEachEvent(
        t.track.id,
        [&](const core::Event& e) {
          if (e.collOp == core::CollectiveOp::Barrier || !e.step) return;
          out[*e.step] << QString("%1 | %2 %3 | %4")
                              .arg(QString::fromStdString(lane), QString::fromStdString(std::string(core::toString(e.collOp))))
                              .arg(e.bytes.value_or(-1))
                              .arg(QString::fromStdString(std::string(e.name)));
        },
        false);
  }
  return out;
}

// tiny, one layer, fp32: 9 sharded modules and 3 persistent norms under a threshold of 1000.
const QStringList kZero3Step1 = {
    "comm world | all_gather 65536 | all_gather param embed_tokens",
    "comm world | all_gather 16384 | all_gather param layers.0.self_attn.q_proj",
    "comm world | all_gather 8192 | all_gather param layers.0.self_attn.k_proj",
    "comm world | all_gather 8192 | all_gather param layers.0.self_attn.v_proj",
    "comm world | all_gather 16384 | all_gather param layers.0.self_attn.o_proj",
    "comm world | all_gather 45056 | all_gather param layers.0.mlp.gate_proj",
    "comm world | all_gather 45056 | all_gather param layers.0.mlp.up_proj",
    "comm world | all_gather 45056 | all_gather param layers.0.mlp.down_proj",
    "comm world | all_gather 65536 | all_gather param lm_head",
    "comm world | all_gather 65536 | all_gather param lm_head",
    "comm world | all_gather 45056 | all_gather param layers.0.mlp.down_proj",
    "comm world | all_gather 45056 | all_gather param layers.0.mlp.up_proj",
    "comm world | all_gather 45056 | all_gather param layers.0.mlp.gate_proj",
    "comm world | all_gather 16384 | all_gather param layers.0.self_attn.o_proj",
    "comm world | all_gather 8192 | all_gather param layers.0.self_attn.v_proj",
    "comm world | all_gather 8192 | all_gather param layers.0.self_attn.k_proj",
    "comm world | all_gather 16384 | all_gather param layers.0.self_attn.q_proj",
    "comm world | all_gather 65536 | all_gather param embed_tokens",
    "comm world | reduce_scatter 316160 | reduce_scatter grad bucket 0",
    "comm world | all_gather 256 | all_gather param layers.0.input_layernorm (persistent)",
    "comm world | all_gather 256 | all_gather param layers.0.post_attention_layernorm (persistent)",
    "comm world | all_gather 256 | all_gather param norm (persistent)",
};
const QStringList kZero3Step2 = {
    "comm world | all_gather 16384 | all_gather param layers.0.self_attn.q_proj",
    "comm world | all_gather 8192 | all_gather param layers.0.self_attn.k_proj",
    "comm world | all_gather 65536 | all_gather param embed_tokens",
    "comm world | all_gather 8192 | all_gather param layers.0.self_attn.v_proj",
    "comm world | all_gather 16384 | all_gather param layers.0.self_attn.o_proj",
    "comm world | all_gather 45056 | all_gather param layers.0.mlp.gate_proj",
    "comm world | all_gather 45056 | all_gather param layers.0.mlp.up_proj",
    "comm world | all_gather 45056 | all_gather param layers.0.mlp.down_proj",
    "comm world | all_gather 65536 | all_gather param lm_head",
    "comm world | reduce_scatter 316160 | reduce_scatter grad bucket 0",
    "comm world | all_gather 256 | all_gather param layers.0.input_layernorm (persistent)",
    "comm world | all_gather 256 | all_gather param layers.0.post_attention_layernorm (persistent)",
    "comm world | all_gather 256 | all_gather param norm (persistent)",
};
// FSDP has no trace: every step alike.
const QStringList kFsdpStep = {
    "comm world | all_gather 65536 | all_gather param embed_tokens",
    "comm world | all_gather 184832 | all_gather param layers.0",
    "comm world | all_gather 65792 | all_gather param lm_head",
    "comm world | all_gather 184832 | all_gather param layers.0",
    "comm world | reduce_scatter 65792 | reduce_scatter grad lm_head",
    "comm world | all_gather 65536 | all_gather param embed_tokens",
    "comm world | reduce_scatter 184832 | reduce_scatter grad layers.0",
    "comm world | reduce_scatter 65536 | reduce_scatter grad embed_tokens",
};

}  // namespace

class TestCollectiveSequence : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  std::map<std::int64_t, QStringList> run(const QString& name, const QStringList& knobs) {
    const std::string db = test::pathIn(dir_, name.toStdString() + ".db");
    QStringList args = {"run",
                        "--db",
                        QString::fromStdString(db),
                        "--world-size",
                        "2",
                        "--model",
                        "tiny",
                        "--layers",
                        "1",
                        "--steps",
                        "3",
                        "--seq-len",
                        "16",
                        "--micro-batch",
                        "2",
                        "--seed",
                        "3",
                        "--hang-timeout-s",
                        "120",
                        "--device",
                        "cpu"};
    args << knobs;
    QString err;
    const int code = runCli(args, &err);
    if (code != 0) qWarning().noquote() << err.right(2000);
    return code == 0 ? collectivesPerStep(db) : std::map<std::int64_t, QStringList>{};
  }

  static void compareLines(const QStringList& actual, const QStringList& expected, const char* what) {
    if (actual != expected) {
      qWarning().noquote() << what << "actual:\n" + actual.join('\n');
      qWarning().noquote() << what << "expected:\n" + expected.join('\n');
    }
    QCOMPARE(actual, expected);
  }

 private Q_SLOTS:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  // ZeRO-3: the first step records the fetch trace (gather before each module, release after,
  // gather again in backward); later steps prefetch along it and keep the small model gathered
  // (max reuse distance); one bucketed reduce-scatter; the persistent norms re-gathered after the
  // step.
  void zero3() {
    const auto steps = run("zero3", {"--strategy", "zero3", "--param-persistence-threshold", "1000"});
    QCOMPARE(static_cast<int>(steps.size()), 3);
    compareLines(steps.at(1), kZero3Step1, "zero3 step 1");
    compareLines(steps.at(2), kZero3Step2, "zero3 step 2");
    compareLines(steps.at(3), kZero3Step2, "zero3 step 3");
  }

  // FSDP FULL_SHARD with backward prefetch "pre": a gather per unit in forward, the head kept, the
  // previous unit prefetched before each unit's backward, a reduce-scatter per unit.
  void fsdp() {
    const auto steps = run("fsdp", {"--strategy", "fsdp"});
    QCOMPARE(static_cast<int>(steps.size()), 3);
    for (int s = 1; s <= 3; ++s) compareLines(steps.at(s), kFsdpStep, qPrintable(QString("fsdp step %1").arg(s)));
  }
};

QTEST_GUILESS_MAIN(TestCollectiveSequence)
#include "tst_collective_sequence.moc"
