// `shardscope-cli simulate` end to end: FLOPs mode (table and JSON), simulated runs stored and read
// back by `info`, a real runtime run (where the worker is built) profiled and simulated beside its
// measurement, and usage errors.
#include <QtTest>

#include <cmath>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include "tests/app/cli_runner.h"

using shardscope::test::runCli;

class TestCliSimulator : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void flopsModeJson() {
    const auto r = runCli(
        {"simulate", "--model", "llama3-8b", "--gpus", "16", "--gpus-per-node", "8", "--strategy", "fsdp,zero3,hsdp", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto doc = QJsonDocument::fromJson(r.out.toUtf8()).object();
    const auto sims = doc["simulations"].toArray();
    QCOMPARE(sims.size(), 3);
    for (const auto& v : sims) {
      const auto o = v.toObject();
      QVERIFY(o["step_s"].toDouble() > o["compute_s"].toDouble() * 0.999);
      QVERIFY(o["exposed_comm_s"].toDouble() <= o["comm_s"].toDouble() + 1e-12);
      QVERIFY(o["peak_bytes"].toDouble() > 1e9);
      QVERIFY(!o.contains("run_id"));  // no --db: nothing stored
    }
    // HSDP keeps the big gathers inside the node: less exposed communication than FSDP across nodes.
    QVERIFY(sims[2].toObject()["exposed_comm_s"].toDouble() < sims[0].toObject()["exposed_comm_s"].toDouble());
  }

  // Several strategies from FLOPs: where the simulation orders two otherwise than the estimate, it
  // says so and which part of the step moved (core/estimator/ranking_check.h). The seeds' Llama-2-7B
  // on 8 x A100: ZeRO-3 ahead of FSDP in the simulation, FSDP ahead in the estimate.
  void rankingAgainstTheEstimate() {
    const auto r = runCli({"simulate", "--scenario", "llama-7b-full-8xa100", "--strategy", "fsdp,zero3", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto rev = QJsonDocument::fromJson(r.out.toUtf8()).object()["ranking_vs_estimate"].toArray();
    QCOMPARE(rev.size(), 1);
    QVERIFY2(rev[0].toString().startsWith("Simulation ranks zero3 ahead of fsdp") &&
                 rev[0].toString().contains("exposed communication moved most"),
             qPrintable(rev[0].toString()));
    const auto t = runCli({"simulate", "--scenario", "llama-7b-full-8xa100", "--strategy", "fsdp,zero3"});
    QVERIFY(t.out.contains(rev[0].toString()));
    const auto same =
        runCli({"simulate", "--model", "small", "--gpus", "4", "--link", "gloo-cpu-local", "--strategy", "ddp,fsdp"});
    QVERIFY2(same.out.contains("The simulation ranks these strategies in the estimate's order."), qPrintable(same.out));
  }

  void storesSimulatedRuns() {
    QTemporaryDir dir;
    const QString db = dir.filePath("sim.db");
    auto r = runCli({"simulate", "--db", db, "--model", "small", "--gpus", "4", "--strategy", "ddp,fsdp", "--link",
                     "gloo-cpu-local", "--tflops", "0.05", "--efficiency", "1", "--name", "what-if"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("fsdp"));
    r = runCli({"info", "--db", db});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("what-if ddp") && r.out.contains("what-if fsdp") && r.out.contains("simulated"), qPrintable(r.out));
    r = runCli({"analyze", "--db", db, "--run", "2"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("reduce_scatter"));
  }

  void profilesARealRun() {
    if (!shardscope::test::workerBuilt()) QSKIP("shardscope-worker is not built (no LibTorch)");
    QTemporaryDir dir;
    const QString db = dir.filePath("runs.db");
    auto r = runCli({"run", "--db", db, "--strategy", "fsdp", "--world-size", "2", "--steps", "4", "--model", "tiny"}, 180000);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = runCli({"simulate", "--db", db, "--profile-run", "1", "--strategy", "fsdp,ddp,zero3", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto doc = QJsonDocument::fromJson(r.out.toUtf8()).object();
    const auto measured = doc["profile_run"].toObject();
    QCOMPARE(measured["strategy"].toString(), QString("fsdp"));
    const double mstep = measured["step_s"].toDouble();
    QVERIFY(mstep > 0);
    const auto sims = doc["simulations"].toArray();
    QCOMPARE(sims.size(), 3);
    // The same strategy, from its own compute and link: the step within a factor of two even on a
    // loaded CI machine (docs/ESTIMATOR.md has the measured accuracy).
    const double sstep = sims[0].toObject()["step_s"].toDouble();
    QVERIFY2(sstep > 0.5 * mstep && sstep < 2.0 * mstep, qPrintable(QString("%1 vs %2: %3").arg(sstep).arg(mstep).arg(r.out)));
    // The run's own rank-to-rank variation is measured and used (capped at 0.9 for the simulation).
    // How large it is depends on the machine: two ranks of a tiny model sharing two cores with other
    // tests measured 1.04 once, so only its sanity is checked here, and the cap below.
    const double jitter = measured["compute_jitter"].toDouble();
    QVERIFY2(jitter >= 0 && std::isfinite(jitter), qPrintable(r.out));
    QCOMPARE(doc["jitter"].toDouble(), std::min(0.9, measured["compute_jitter"].toDouble()));
    QCOMPARE(doc["steps"].toInt(), 4);  // the run's
    QVERIFY2(sims[2].toObject()["run_id"].toInt() == 4, qPrintable(r.out));
    r = runCli({"info", "--db", db});
    QVERIFY2(r.out.contains("[simulated, completed, zero3]"), qPrintable(r.out));

    // The link comes from the run's probe: 7 sizes from 4 KiB to the model's fp32 bytes, 3 ops,
    // 5 timed repeats each (the warm-ups are not read), matched across the 2 ranks.
    const auto cal = doc["link_calibration"].toObject();
    QCOMPARE(cal["source"].toString(), QString("probe"));
    QCOMPARE(cal["probe_samples"].toInt(), 7 * 3 * 10);
    QCOMPARE(cal["min_bytes"].toInt(), 4096);
    QCOMPARE(cal["group_size"].toInt(), 2);
    QVERIFY(cal["well_conditioned"].toBool());
    // Without forward prefetch every forward all-gather is waited on at once (issued, then waited
    // on with nothing computed between): the two blocks' over 3 counted steps, 6 of one size, are
    // timed apart as on demand (the runtime's issue and wait times read back).
    QVERIFY2(cal["in_run_sizes_on_demand"].toInt() >= 1, qPrintable(cal["note"].toString()));
    // Each simulation is a prediction from run 1: fsdp replays it, ddp and zero3 change strategy.
    QCOMPARE(sims[0].toObject()["prediction"].toObject()["change"].toString(), QString("replay"));
    QCOMPARE(sims[1].toObject()["prediction"].toObject()["change"].toString(), QString("strategy"));
    for (const auto& v : sims) {
      const auto o = v.toObject();
      const auto iv = o["prediction"].toObject()["interval_s"].toArray();
      QVERIFY(iv[0].toDouble() < o["step_s"].toDouble() && o["step_s"].toDouble() < iv[1].toDouble());
      QCOMPARE(o["prediction"].toObject()["calibration_run"].toInt(), 1);
    }
    // The run's checkpointing probe: each rank timed a block of the model plainly and checkpointed;
    // a prediction that turns checkpointing on says it takes their shares.
    const auto ck = measured["checkpointing"].toObject();
    QCOMPARE(ck["source"].toString(), QString("probe"));
    QVERIFY2(ck["forward_share"].toDouble() > 0.3 && ck["forward_share"].toDouble() < 1.5, qPrintable(r.out));
    QVERIFY2(ck["recompute_share"].toDouble() > 0.2 && ck["recompute_share"].toDouble() < 2.0, qPrintable(r.out));
    r = runCli({"simulate", "--db", db, "--profile-run", "1", "--activation-checkpointing", "--dry-run", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto ckp =
        QJsonDocument::fromJson(r.out.toUtf8()).object()["simulations"].toArray()[0].toObject()["prediction"].toObject();
    QCOMPARE(ckp["change"].toString(), QString("knob"));
    QVERIFY2(ckp["checkpointing"].toString().contains("the run's checkpointing probe"), qPrintable(r.out));
    // More ranks than the host has cores for (one thread each): refused with the reason, unless allowed.
    const auto host = measured["host"].toObject();
    QVERIFY2(host["cpus"].toInt() >= 1, qPrintable(r.out));
    const QString crowd = QString::number(host["cpus"].toInt() / std::max(1, host["intra_op_threads"].toInt()) + 2);
    r = runCli({"simulate", "--db", db, "--profile-run", "1", "--gpus", crowd, "--dry-run", "--json"});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("share cores") && r.err.contains("--allow-extrapolation"), qPrintable(r.err));
    r = runCli({"simulate", "--db", db, "--profile-run", "1", "--gpus", crowd, "--dry-run", "--json", "--allow-extrapolation"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto ex =
        QJsonDocument::fromJson(r.out.toUtf8()).object()["simulations"].toArray()[0].toObject()["prediction"].toObject();
    QCOMPARE(ex["change"].toString(), QString("scale"));
    QVERIFY(ex["load_factor"].toDouble() > 1.0);
    QVERIFY2(QJsonDocument(ex["extrapolation"].toArray()).toJson().contains("host load"), qPrintable(r.out));
    // Stored, the prediction stays one in reports: what it was calibrated on and what it extrapolates.
    r = runCli({"simulate", "--db", db, "--profile-run", "1", "--gpus", crowd, "--allow-extrapolation", "--name", "crowded"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = runCli({"info", "--db", db, "--json"});
    const auto runs = QJsonDocument::fromJson(r.out.toUtf8()).object()["runs"].toArray();
    const QString last = QString::number(runs.last().toObject()["id"].toInt());
    const QString md = dir.filePath("r.md");
    r = runCli({"report", "--db", db, "--runs", last, "--format", "md", "-o", md});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QFile f(md);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(f.readAll());
    QVERIFY2(
        text.contains("| prediction | from run 1 (scale)") && text.contains("| extrapolation |") && text.contains("host load"),
        qPrintable(text.left(4000)));
    // The probe's collectives are calibration: no analysis counts them as the run's traffic.
    r = runCli({"analyze", "--db", db, "--run", "1"});
    QVERIFY2(r.code == 0 && !r.out.contains("link probe"), qPrintable(r.out));
  }

  void usageErrors() {
    QCOMPARE(runCli({"simulate", "--model", "tiny", "--gpus", "2"}).code, 2);  // no strategy
    QCOMPARE(runCli({"simulate", "--model", "tiny", "--gpus", "2", "--strategy", "zero3", "--steps", "0"}).code, 2);
    QCOMPARE(runCli({"simulate", "--model", "tiny", "--gpus", "2", "--strategy", "zero3", "--jitter", "2"}).code, 2);
    QCOMPARE(runCli({"simulate", "--model", "tiny", "--gpus", "2", "--strategy", "zero3", "--slow-rank", "x"}).code, 2);
    const auto off = runCli({"simulate", "--model", "tiny", "--gpus", "2", "--strategy", "zero3", "--offload-optimizer"});
    QCOMPARE(off.code, 2);
    QVERIFY(off.err.contains("offload"));
    QTemporaryDir dir;
    const QString db = dir.filePath("sim.db");
    QCOMPARE(runCli({"simulate", "--db", db, "--model", "tiny", "--gpus", "2", "--strategy", "ddp"}).code, 0);
    const auto missing = runCli({"simulate", "--db", db, "--profile-run", "7"});
    QCOMPARE(missing.code, 1);
    QVERIFY2(missing.err.contains("no run with id 7"), qPrintable(missing.err));
    // A simulated run has no measured compute to profile.
    const auto notOurs = runCli({"simulate", "--db", db, "--profile-run", "1"});
    QCOMPARE(notOurs.code, 1);
    QVERIFY2(notOurs.err.contains("run 1 is simulated"), qPrintable(notOurs.err));
  }
};

QTEST_GUILESS_MAIN(TestCliSimulator)
#include "tst_cli_simulator.moc"
