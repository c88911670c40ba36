// Multi-node jobs on one machine (issue #19): the same 4-rank job started as 2 nodes x 2 ranks, by
// two `shardscope-cli run --nnodes 2` launchers on localhost, by srun's environment (the variables
// set by hand, as srun sets them: no Slurm needed) and by torchrun's, each node writing its own
// database; `shardscope-cli merge` makes each one run that equals the 1-node 4-rank job of the same
// seed: the same ranks, the same step losses (bit for bit: the same collectives in the same order).
// Also: a node that fails fails the merged run with its reason; merging again adds nothing.
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/launch/launcher.h"
#include "core/model/job.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"

using namespace shardscope;

namespace {

struct Result {
  int code = -1;
  QString out, err;
};

QProcessEnvironment baseEnv() {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("SHARDSCOPE_NO_PROGRESS", "1");
  env.insert("OMP_NUM_THREADS", "1");
  for (const char* k : {"RANK",
                        "WORLD_SIZE",
                        "LOCAL_RANK",
                        "LOCAL_WORLD_SIZE",
                        "GROUP_RANK",
                        "GROUP_WORLD_SIZE",
                        "MASTER_ADDR",
                        "MASTER_PORT",
                        "TORCHELASTIC_RUN_ID",
                        "SLURM_JOB_ID",
                        "SLURM_PROCID",
                        "SLURM_NTASKS",
                        "SLURM_NODEID",
                        "SLURM_LOCALID",
                        "SLURM_NNODES",
                        "SLURM_STEP_NUM_NODES",
                        "SLURM_STEP_TASKS_PER_NODE",
                        "SLURM_NTASKS_PER_NODE",
                        "SLURM_TASKS_PER_NODE",
                        "SLURM_STEP_NODELIST",
                        "SLURM_JOB_NODELIST",
                        "SLURM_NODELIST",
                        "SLURM_STEP_ID",
                        "SHARDSCOPE_LAUNCHER",
                        "SHARDSCOPE_FAULT"})
    env.remove(k);
  return env;
}

std::unique_ptr<QProcess> start(const QString& program, const QStringList& args, const QProcessEnvironment& env) {
  auto p = std::make_unique<QProcess>();
  p->setProcessEnvironment(env);
  p->start(program, args);
  return p;
}

Result finish(QProcess& p, int timeoutMs = 240000) {
  if (!p.waitForFinished(timeoutMs)) {
    p.kill();
    p.waitForFinished();
    return {-3, {}, "timed out"};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

// `shardscope-cli run` as node `node` of a 2-node job on localhost, writing `db`.
QStringList nodeRunArgs(const QString& db, int node, int port) {
  return {"run",
          "--db",
          db,
          "--nnodes",
          "2",
          "--node-rank",
          QString::number(node),
          "--master-addr",
          "127.0.0.1",
          "--master-port",
          QString::number(port)};
}

Result cli(const QStringList& args, const QProcessEnvironment& env = baseEnv()) {
  auto p = start(SHARDSCOPE_CLI, args, env);
  return finish(*p);
}

QString workerPath() { return QFileInfo(SHARDSCOPE_CLI).dir().filePath("../profiler/shardscope-worker"); }

const QStringList kJob = {"--strategy", "fsdp", "--model", "tiny", "--world-size", "4", "--steps", "3", "--seed", "7"};

// The 4 ranks of kJob as shardscope-worker processes started directly (as srun or torchrun would),
// each with the variables `vars` sets for its rank; every one must succeed.
void runFourWorkers(const QString& db, const std::function<void(int rank, QProcessEnvironment& env)>& vars) {
  std::vector<std::unique_ptr<QProcess>> ranks;
  for (int r = 0; r < 4; ++r) {
    QProcessEnvironment env = baseEnv();
    vars(r, env);
    QStringList args = {"--db", db, "--no-progress"};
    args << kJob;
    ranks.push_back(start(workerPath(), args, env));
  }
  for (auto& p : ranks) {
    const Result r = finish(*p);
    QVERIFY2(r.code == 0, qPrintable(r.err));
  }
}

// rank -> step -> loss, the ranks' metrics of the database's only (or given) run.
struct RunLosses {
  int ranks = 0;
  std::map<int, std::map<int, double>> loss;
  core::RunStatus status = core::RunStatus::Pending;
  std::string failureReason;
  std::string metadata;
};

RunLosses losses(const QString& db, std::optional<core::RunId> id = std::nullopt) {
  core::TraceStore store(db.toStdString(), core::Database::Mode::ReadOnly);
  const auto runs = store.runs();
  RunLosses out;
  if (runs.empty()) return out;
  const core::Run run = id ? *store.run(*id) : runs.back();
  out.status = run.status;
  out.failureReason = run.failureReason;
  out.metadata = run.metadataJson;
  const auto ranks = store.ranks(run.id);
  out.ranks = static_cast<int>(ranks.size());
  for (const auto& r : ranks)
    for (int s = 1; s <= 10; ++s)
      if (auto v = store.metric(run.id, r.id, "loss/step/" + std::to_string(s))) out.loss[r.rank][s] = *v;
  return out;
}

void compareLosses(const RunLosses& a, const RunLosses& b) {
  QCOMPARE(a.ranks, 4);
  QCOMPARE(b.ranks, 4);
  for (int r = 0; r < 4; ++r) {
    QCOMPARE(a.loss.at(r).size(), std::size_t{3});
    QCOMPARE(b.loss.at(r).size(), std::size_t{3});
    for (int s = 1; s <= 3; ++s) QCOMPARE(a.loss.at(r).at(s), b.loss.at(r).at(s));
  }
}

}  // namespace

class TestMultiNode : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  RunLosses oneNode_;

  QString path(const QString& f) const { return dir_.filePath(f); }

 private Q_SLOTS:
  void initTestCase() {
    if (!QFileInfo::exists(workerPath())) QSKIP("shardscope-worker was not built (no LibTorch)");
    QVERIFY(dir_.isValid());
    QStringList args = {"run", "--db", path("one.db")};
    args << kJob;
    const Result r = cli(args);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    oneNode_ = losses(path("one.db"));
    QVERIFY(oneNode_.status == core::RunStatus::Completed);
    QCOMPARE(oneNode_.ranks, 4);
  }

  // Two launchers on localhost, one per node, each with its own database.
  void twoLaunchersMergeToTheOneNodeJob() {
    const int port = core::pickFreePort();
    std::vector<std::unique_ptr<QProcess>> nodes;
    for (int n = 0; n < 2; ++n) {
      nodes.push_back(start(SHARDSCOPE_CLI, nodeRunArgs(path(QString("node%1.db").arg(n)), n, port) << kJob, baseEnv()));
    }
    for (auto& p : nodes) {
      const Result r = finish(*p);
      QVERIFY2(r.code == 0, qPrintable(r.err));
    }
    // Each node's database holds its part: 2 ranks, the same job id.
    const RunLosses p0 = losses(path("node0.db")), p1 = losses(path("node1.db"));
    QCOMPARE(p0.ranks, 2);
    QCOMPARE(p1.ranks, 2);
    const auto j0 = core::JobPart::fromRunMetadata(p0.metadata), j1 = core::JobPart::fromRunMetadata(p1.metadata);
    QVERIFY(j0 && j1);
    QCOMPARE(j0->id, j1->id);
    QCOMPARE(j0->nnodes, 2);
    QCOMPARE(j1->nodeRank, 1);
    QCOMPARE(j1->firstRank, 2);
    QCOMPARE(j0->launcher, std::string("shardscope-cli"));
    QVERIFY(j0->id.rfind("rdzv:127.0.0.1:" + std::to_string(port) + "/", 0) == 0);

    const Result m = cli({"merge", "--db", path("merged.db"), "--json", path("node0.db"), path("node1.db")});
    QVERIFY2(m.code == 0, qPrintable(m.err));
    const core::JsonValue j = core::parseJson(m.out.toStdString(), "merge --json");
    QCOMPARE(j.find("jobs")->items().size(), std::size_t{1});
    const core::JsonValue& job = j.find("jobs")->items()[0];
    QCOMPARE(*job.find("ranks")->asInt(), std::int64_t{4});
    QCOMPARE(job.find("status")->asString(), std::string("completed"));
    QCOMPARE(job.find("nodes")->items()[1].find("clock_offset_method")->asString(), std::string("same host"));
    const RunLosses merged = losses(path("merged.db"));
    QVERIFY(merged.status == core::RunStatus::Completed);
    compareLosses(merged, oneNode_);
    {
      core::TraceStore store(path("merged.db").toStdString(), core::Database::Mode::ReadOnly);
      QCOMPARE(store.runs().size(), std::size_t{1});
      const core::RunId id = store.runs().front().id;
      QCOMPARE(store.runs().front().worldSize, 4);
      QVERIFY(store.metric(id, std::nullopt, "step_time_ms").has_value());  // node 0's run-level figures
      QCOMPARE(store.integrityCheck(), std::string("ok"));
      // The same events as the two parts together.
      std::int64_t parts = 0, all = 0;
      for (const char* f : {"node0.db", "node1.db"}) {
        core::TraceStore s(path(f).toStdString(), core::Database::Mode::ReadOnly);
        for (const auto& c : s.runCounts()) parts += c.events;
      }
      for (const auto& c : store.runCounts()) all += c.events;
      QCOMPARE(all, parts);
    }
    // Idempotent: merging again adds nothing; the 1-node run given too is copied once.
    const Result again = cli({"merge", "--db", path("merged.db"), "--json", path("node0.db"), path("node1.db"), path("one.db")});
    QVERIFY2(again.code == 0, qPrintable(again.err));
    const core::JsonValue ja = core::parseJson(again.out.toStdString(), "merge --json");
    QVERIFY(ja.find("jobs")->items()[0].find("skipped")->asBool());
    QCOMPARE(ja.find("copied")->items().size(), std::size_t{1});
    QVERIFY(!ja.find("copied")->items()[0].find("skipped")->asBool());
    const Result third = cli({"merge", "--db", path("merged.db"), "--json", path("node0.db"), path("node1.db"), path("one.db")});
    QVERIFY2(third.code == 0, qPrintable(third.err));
    const core::JsonValue jt = core::parseJson(third.out.toStdString(), "merge --json");
    QVERIFY(jt.find("copied")->items()[0].find("skipped")->asBool());
    core::TraceStore store(path("merged.db").toStdString(), core::Database::Mode::ReadOnly);
    QCOMPARE(store.runs().size(), std::size_t{2});
    compareLosses(losses(path("merged.db"), store.runs().back().id), oneNode_);

    // A node missing: refused, naming it; --partial merges it as a failed run.
    const Result missing = cli({"merge", "--db", path("half.db"), path("node0.db")});
    QCOMPARE(missing.code == 0, false);
    QVERIFY2(missing.err.contains("node(s) 1 of 2 are missing"), qPrintable(missing.err));
    QVERIFY(!QFileInfo::exists(path("half.db")));  // nothing left behind
    const Result partial = cli({"merge", "--db", path("half.db"), "--partial", path("node0.db")});
    QVERIFY2(partial.code == 0, qPrintable(partial.err));
    const RunLosses half = losses(path("half.db"));
    QVERIFY(half.status == core::RunStatus::Failed);
    QVERIFY2(half.failureReason.find("node(s) 1 of 2 missing") != std::string::npos, half.failureReason.c_str());
    // The output given as an input is refused.
    const Result self = cli({"merge", "--db", path("merged.db"), path("merged.db")});
    QCOMPARE(self.code == 0, false);
    QVERIFY2(self.err.contains("is the output database too"), qPrintable(self.err));
  }

  // srun's variables, set by hand: SLURM_PROCID/NTASKS/LOCALID/NODEID, the tasks-per-node list, the
  // node list (the rendezvous host) and the job id (the port) — no MASTER_ADDR or MASTER_PORT, no
  // RANK: the worker reads Slurm's names, and writes DB.node<N>.
  void slurmEnvironment() {
    int port = 0;
    for (int i = 0; i < 400 && !(port >= 20000 && port < 40000); ++i) port = core::pickFreePort();
    if (!(port >= 20000 && port < 40000)) QSKIP("no free port in 20000..39999");
    const QString jobId = QString::number(100000 + (port - 20000));
    runFourWorkers(path("slurm.db"), [&](int r, QProcessEnvironment& env) {
      env.insert("SLURM_JOB_ID", jobId);
      env.insert("SLURM_STEP_ID", "0");
      env.insert("SLURM_PROCID", QString::number(r));
      env.insert("SLURM_NTASKS", "4");
      env.insert("SLURM_LOCALID", QString::number(r % 2));
      env.insert("SLURM_NODEID", QString::number(r / 2));
      env.insert("SLURM_NNODES", "2");
      env.insert("SLURM_STEP_NUM_NODES", "2");
      env.insert("SLURM_STEP_TASKS_PER_NODE", "2(x2)");
      env.insert("SLURM_STEP_NODELIST", "localhost");
    });
    if (QTest::currentTestFailed()) return;
    QVERIFY(!QFileInfo::exists(path("slurm.db")));
    QVERIFY(QFileInfo::exists(path("slurm.db.node0")));
    QVERIFY(QFileInfo::exists(path("slurm.db.node1")));
    const RunLosses p1 = losses(path("slurm.db.node1"));
    const auto job = core::JobPart::fromRunMetadata(p1.metadata);
    QVERIFY(job);
    QCOMPARE(job->launcher, std::string("slurm"));
    QCOMPARE(job->schedulerId, "slurm:" + jobId.toStdString() + ".0");
    QCOMPARE(job->master, "localhost:" + std::to_string(port));
    QVERIFY(p1.status == core::RunStatus::Completed);  // each node's leader completes its part
    const Result m = cli({"merge", "--db", path("slurm-merged.db"), path("slurm.db.node1"), path("slurm.db.node0")});
    QVERIFY2(m.code == 0, qPrintable(m.err));
    compareLosses(losses(path("slurm-merged.db")), oneNode_);
  }

  // torchrun --no-python's variables, with "{node}" in the database path.
  void torchrunEnvironment() {
    const int port = core::pickFreePort();
    runFourWorkers(path("tr-{node}.db"), [&](int r, QProcessEnvironment& env) {
      env.insert("RANK", QString::number(r));
      env.insert("WORLD_SIZE", "4");
      env.insert("LOCAL_RANK", QString::number(r % 2));
      env.insert("LOCAL_WORLD_SIZE", "2");
      env.insert("GROUP_RANK", QString::number(r / 2));
      env.insert("GROUP_WORLD_SIZE", "2");
      env.insert("MASTER_ADDR", "127.0.0.1");
      env.insert("MASTER_PORT", QString::number(port));
      env.insert("TORCHELASTIC_RUN_ID", "tst-multinode");
    });
    if (QTest::currentTestFailed()) return;
    const RunLosses p0 = losses(path("tr-0.db"));
    const auto job = core::JobPart::fromRunMetadata(p0.metadata);
    QVERIFY(job);
    QCOMPARE(job->launcher, std::string("torchrun"));
    QVERIFY(job->id.rfind("torchrun:tst-multinode/", 0) == 0);
    const Result m = cli({"merge", "--db", path("tr-merged.db"), path("tr-0.db"), path("tr-1.db")});
    QVERIFY2(m.code == 0, qPrintable(m.err));
    compareLosses(losses(path("tr-merged.db")), oneNode_);
  }

  // A rank of node 1 crashes: both parts fail, the merged run fails naming the node and its reason.
  void failedNodeFailsTheRun() {
    const int port = core::pickFreePort();
    std::vector<std::unique_ptr<QProcess>> nodes;
    for (int n = 0; n < 2; ++n) {
      QProcessEnvironment env = baseEnv();
      env.insert("SHARDSCOPE_FAULT", "3:2:crash");
      nodes.push_back(start(SHARDSCOPE_CLI,
                            nodeRunArgs(path(QString("fail%1.db").arg(n)), n, port) << "--hang-timeout-s"
                                                                                    << "30" << kJob,
                            env));
    }
    for (auto& p : nodes) {
      const Result r = finish(*p);
      QVERIFY2(r.code != 0, "a run with a crashed rank must not succeed");
    }
    const Result m = cli({"merge", "--db", path("fail-merged.db"), path("fail0.db"), path("fail1.db")});
    QVERIFY2(m.code == 0, qPrintable(m.err));
    const RunLosses merged = losses(path("fail-merged.db"));
    QVERIFY(merged.status == core::RunStatus::Failed);
    QCOMPARE(merged.ranks, 4);
    // The root cause: node 1, whose rank 3 crashed (node 0's ranks only lost their peers).
    QVERIFY2(merged.failureReason.rfind("node 1 ", 0) == 0, merged.failureReason.c_str());
    QVERIFY2(merged.failureReason.find("injected fault") != std::string::npos, merged.failureReason.c_str());
  }
};

QTEST_GUILESS_MAIN(TestMultiNode)
#include "tst_multinode.moc"
