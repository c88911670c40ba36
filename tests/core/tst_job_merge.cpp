// Merging the per-node databases of a multi-node job (core/merge/job_merge.h), on traces made here:
// a 4-rank job whose node 1 (ranks 2, 3) ran with its clock 5 ms ahead. The merge must find that
// offset on the collective ends and remove it, keep every event under its own name (string ids
// differ between the files), join the process groups, refuse parts that do not fit, be idempotent,
// and write nothing when it fails or is cancelled.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>

#include "core/analysis/stragglers.h"
#include "core/import/kineto_importer.h"
#include "core/merge/job_merge.h"
#include "core/model/job.h"
#include "core/storage/run_writer.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

constexpr int kCollectives = 12;

// `kCollectives` all-reduces of a `world`-rank job seen from `rank`, all times shifted by `clockUs`;
// rank r arrives r·10 µs after the start, every rank's collective ends at the same time.
std::string rankTrace(int rank, int world, long clockUs, const std::string& extraName = "") {
  std::string s = "{\"distributedInfo\": {\"rank\": " + std::to_string(rank) + ", \"world_size\": " + std::to_string(world) +
                  ", \"pg_config\": [{\"pg_name\": \"0\", \"pg_size\": " + std::to_string(world) + ", \"ranks\": [";
  for (int r = 0; r < world; ++r) s += (r ? ", " : "") + std::to_string(r);
  s += "]}]}, \"traceEvents\": [";
  if (!extraName.empty())  // interned first in its file: shifts every later string id
    s += "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"" + extraName +
         "\", \"pid\": 1, \"tid\": 1, \"ts\": " + std::to_string(clockUs) + ", \"dur\": 5},";
  for (int k = 0; k < kCollectives; ++k) {
    const long start = clockUs + 1000 * k + 100 + 10 * rank;
    const long end = clockUs + 1000 * k + 400;
    if (k) s += ",";
    s += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce_Sum_f32_RING_LL\", \"pid\": 0, "
         "\"tid\": 21, \"ts\": " +
         std::to_string(start) + ", \"dur\": " + std::to_string(end - start) +
         ", \"args\": {\"stream\": 21, \"Collective name\": \"allreduce\", \"Process Group Name\": \"0\", \"Group size\": " +
         std::to_string(world) + "}}";
  }
  return s + "]}";
}

JobPart part(int node, const std::string& host, const std::string& id = "slurm:77.0/abc") {
  JobPart j;
  j.id = id;
  j.schedulerId = "slurm:77.0";
  j.launcher = "slurm";
  j.nnodes = 2;
  j.nodeRank = node;
  j.firstRank = 2 * node;
  j.ranksOnNode = 2;
  j.host = host;
  j.master = "a:20077";
  return j;
}

// The node's database: its two ranks imported as one run, recorded as the node's part.
std::string nodeDb(QTemporaryDir& dir, int node, const std::string& host, long clockUs, int world = 4,
                   const std::string& jobId = "slurm:77.0/abc", const std::string& name = "") {
  const std::string db = pathIn(dir, name.empty() ? "node" + std::to_string(node) + ".db" : name);
  TraceStore store(db);
  if (node == 1) {  // another run first, so that this file's string ids differ from node 0's
    importKineto(store, {writeFile(dir, "other.json", rankTrace(0, 1, 0, "an op only node 1 has"))});
  }
  std::vector<std::string> files;
  for (int r = 2 * node; r < 2 * node + 2; ++r)
    files.push_back(writeFile(dir, name + "rank" + std::to_string(r) + ".json", rankTrace(r, world, clockUs)));
  const auto res = importKineto(store, files);
  setRunJob(store, res.runIds.at(0), part(node, host, jobId));
  return db;
}

std::vector<RunCounts> counts(const std::string& db) {
  TraceStore s(db, Database::Mode::ReadOnly);
  return s.runCounts();
}

}  // namespace

class TestJobMerge : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void alignsNodeClocksOnCollectiveEnds() {
    QTemporaryDir dir;
    const std::string a = nodeDb(dir, 0, "host-a", 0), b = nodeDb(dir, 1, "host-b", 5000);
    const std::string out = pathIn(dir, "merged.db");
    const MergeResult res = mergeDatabases(out, {a, b});
    QCOMPARE(res.jobs.size(), std::size_t{1});
    const MergedJob& j = res.jobs[0];
    QCOMPARE(j.ranks, 4);
    QCOMPARE(j.nodes.size(), std::size_t{2});
    QCOMPARE(j.nodes[0].clockOffsetNs, TimeNs{0});
    QCOMPARE(j.nodes[1].clockOffsetNs, TimeNs{5'000'000});  // node 1's clock was 5 ms ahead
    QVERIFY(QString::fromStdString(j.nodes[1].offsetMethod).startsWith("collectives"));
    QCOMPARE(res.copied.size(), std::size_t{1});  // node 1's other run

    TraceStore store(out, Database::Mode::ReadOnly);
    const RunId run = j.run;
    // Aligned: the collectives of every rank now end together, so the analysis sees no offset.
    const StragglerReport rep = detectStragglers(store, run);
    QCOMPARE(rep.matched, std::int64_t{kCollectives});
    for (const auto& r : rep.ranks) QCOMPARE(r.clockOffsetNs, TimeNs{0});
    // Every event under its own name, every rank there, one process group.
    const auto ranks = store.ranks(run);
    QCOMPARE(ranks.size(), std::size_t{4});
    for (int i = 0; i < 4; ++i) QCOMPARE(ranks[static_cast<std::size_t>(i)].rank, i);
    std::int64_t collectives = 0;
    for (const auto& t : store.tracks(run))
      store.forEachEvent(t.id, [&](const Event& e) {
        QCOMPARE(std::string(e.name), std::string("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
        QVERIFY(e.collOp == CollectiveOp::AllReduce);
        QVERIFY(e.processGroupId.has_value());
        ++collectives;
      });
    QCOMPARE(collectives, std::int64_t{4 * kCollectives});
    const auto pgs = store.processGroups(run);
    QCOMPARE(pgs.size(), std::size_t{1});
    QCOMPARE(pgs[0].name, std::string("0"));
    // The first end of rank 3 equals rank 0's (400 µs after the start of the trace's clock).
    TimeNs firstEnd[4] = {};
    for (const auto& t : store.tracks(run)) {
      int rank = -1;
      for (const auto& r : ranks)
        if (r.id == t.rankId) rank = r.rank;
      store.forEachEvent(t.id, [&](const Event& e) {
        if (firstEnd[rank] == 0 || e.endNs < firstEnd[rank]) firstEnd[rank] = e.endNs;
      });
    }
    QCOMPARE(firstEnd[3], firstEnd[0]);
    // The metadata has the nodes and their offsets.
    const auto job = JobPart::fromRunMetadata(store.run(run)->metadataJson);
    QVERIFY(job);
    QCOMPARE(job->id, std::string("slurm:77.0/abc"));
    QVERIFY(store.run(run)->metadataJson.find("\"clock_offset_ns\":5000000") != std::string::npos);
    QCOMPARE(store.integrityCheck(), std::string("ok"));
    // The copied run kept its op under its name too.
    bool found = false;
    for (const auto& t : store.tracks(res.copied[0].run))
      store.forEachEvent(t.id, [&](const Event& e) { found = found || e.name == "an op only node 1 has"; });
    QVERIFY(found);
  }

  // Nodes on one host share a clock: not shifted unless asked.
  void sameHostIsNotShifted() {
    QTemporaryDir dir;
    const std::string a = nodeDb(dir, 0, "vm", 0), b = nodeDb(dir, 1, "vm", 5000);
    const MergeResult res = mergeDatabases(pathIn(dir, "m.db"), {a, b});
    QCOMPARE(res.jobs[0].nodes[1].clockOffsetNs, TimeNs{0});
    QCOMPARE(res.jobs[0].nodes[1].offsetMethod, std::string("same host"));
    MergeOptions o;
    o.align = ClockAlign::Collectives;
    const MergeResult forced = mergeDatabases(pathIn(dir, "m2.db"), {a, b}, o);
    QCOMPARE(forced.jobs[0].nodes[1].clockOffsetNs, TimeNs{5'000'000});
    o.align = ClockAlign::None;
    const std::string c = nodeDb(dir, 1, "host-c", 5000, 4, "slurm:77.0/abc", "c.db");
    const MergeResult none = mergeDatabases(pathIn(dir, "m3.db"), {a, c}, o);
    QCOMPARE(none.jobs[0].nodes[1].clockOffsetNs, TimeNs{0});
    QCOMPARE(none.jobs[0].nodes[1].offsetMethod, std::string("none"));
  }

  void idempotent() {
    QTemporaryDir dir;
    const std::string a = nodeDb(dir, 0, "host-a", 0), b = nodeDb(dir, 1, "host-b", 5000);
    const std::string out = pathIn(dir, "merged.db");
    const MergeResult first = mergeDatabases(out, {a, b});
    const auto before = counts(out);
    // Again, with the inputs in another order and one given twice: nothing added.
    const MergeResult second = mergeDatabases(out, {b, a, b});
    QVERIFY(second.jobs[0].skipped);
    QVERIFY(second.jobs[0].run == first.jobs[0].run);
    QVERIFY(second.copied[0].skipped);
    QCOMPARE(second.events, std::int64_t{0});
    const auto after = counts(out);
    QCOMPARE(after.size(), before.size());
    // A copy of a node's file is the same part: taken once.
    std::filesystem::copy_file(b, pathIn(dir, "copy-of-node1.db"));
    const MergeResult third = mergeDatabases(pathIn(dir, "m3.db"), {a, b, pathIn(dir, "copy-of-node1.db")});
    QCOMPARE(third.jobs.size(), std::size_t{1});
    QCOMPARE(third.jobs[0].ranks, 4);
  }

  void refusesWhatDoesNotFit() {
    QTemporaryDir dir;
    const std::string a = nodeDb(dir, 0, "host-a", 0);
    const std::string out = pathIn(dir, "out.db");
    auto refused = [&](const std::vector<std::string>& in, const char* text) {
      try {
        mergeDatabases(out, in);
      } catch (const Error& e) {
        QVERIFY2(QString(e.what()).contains(text), e.what());
        QVERIFY(!std::filesystem::exists(out));  // nothing left behind
        return;
      }
      QVERIFY2(false, (std::string("merge did not refuse: ") + text).c_str());
    };
    refused({a}, "node(s) 1 of 2 are missing");
    refused({a, pathIn(dir, "none.db")}, "no such file");
    refused({out, a}, "no such file");
    {
      const std::string w = nodeDb(dir, 1, "host-b", 0, 6, "slurm:77.0/abc", "w.db");
      refused({a, w}, "world sizes differ");
    }
    {
      const std::string b = nodeDb(dir, 1, "host-b", 0, 4, "slurm:77.0/abc", "b1.db");
      const std::string b2 = nodeDb(dir, 1, "host-b", 700, 4, "slurm:77.0/abc", "b2.db");
      refused({a, b, b2}, "node 1 appears twice with different data");
    }
    // --partial: the run is made, failed, naming what is missing.
    MergeOptions o;
    o.partial = true;
    const MergeResult res = mergeDatabases(out, {a}, o);
    QVERIFY(res.jobs[0].status == RunStatus::Failed);
    QCOMPARE(res.jobs[0].missingNodes, std::vector<int>{1});
    QVERIFY(res.jobs[0].failureReason.find("node(s) 1 of 2 missing") != std::string::npos);
  }

  void failedNodeFailsTheRun() {
    QTemporaryDir dir;
    const std::string a = nodeDb(dir, 0, "host-a", 0), b = nodeDb(dir, 1, "host-b", 0);
    {
      TraceStore s(a);
      setRunOutcome(s, s.runs().back().id, RunStatus::Failed, "rank 0: Connection closed by peer");
      TraceStore t(b);
      setRunOutcome(t, t.runs().back().id, RunStatus::Failed, "rank 3 exited with code 2: out of memory");
    }
    const MergeResult res = mergeDatabases(pathIn(dir, "m.db"), {a, b});
    QVERIFY(res.jobs[0].status == RunStatus::Failed);
    // The node with an error of its own, not the one that lost its peers.
    QCOMPARE(res.jobs[0].failureReason, std::string("node 1 (host-b): rank 3 exited with code 2: out of memory"));
  }

  void cancelledWritesNothing() {
    QTemporaryDir dir;
    const std::string a = nodeDb(dir, 0, "host-a", 0), b = nodeDb(dir, 1, "host-b", 5000);
    CancelToken cancel;
    cancel.cancel();
    // A new OUT: not created.
    QVERIFY_THROWS_EXCEPTION(Cancelled, mergeDatabases(pathIn(dir, "new.db"), {a, b}, {}, &cancel));
    QVERIFY(!std::filesystem::exists(pathIn(dir, "new.db")));
    // An existing OUT: as it was.
    const std::string out = pathIn(dir, "m.db");
    {
      TraceStore s(out);
      importKineto(s, {writeFile(dir, "mine.json", rankTrace(0, 1, 0))});
    }
    const auto before = counts(out);
    QVERIFY_THROWS_EXCEPTION(Cancelled, mergeDatabases(out, {a, b}, {}, &cancel));
    const auto after = counts(out);
    QCOMPARE(after.size(), before.size());
    QCOMPARE(after[0].events, before[0].events);
  }
};

QTEST_APPLESS_MAIN(TestJobMerge)
#include "tst_job_merge.moc"
