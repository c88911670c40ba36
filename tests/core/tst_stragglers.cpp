// Stragglers: collectives matched across ranks, clock offsets removed, the late rank found.
#include <QTemporaryDir>
#include <QtTest>

#include <functional>

#include "core/analysis/stragglers.h"
#include "core/import/kineto_importer.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

// `n` all-reduces of a `world`-rank job seen from `rank`: its arrival is `late(k)` µs after the
// earliest at collective k; all its times shifted by `clock` µs.
std::string rankTrace(int rank, int world, int n, const std::function<int(int)>& late, long clock) {
  std::string s = "{\"distributedInfo\": {\"rank\": " + std::to_string(rank) + ", \"world_size\": " + std::to_string(world) +
                  ", \"pg_config\": [{\"pg_name\": \"0\", \"pg_size\": " + std::to_string(world) + ", \"ranks\": [";
  for (int r = 0; r < world; ++r) s += (r ? ", " : "") + std::to_string(r);
  s += "]}]}, \"traceEvents\": [";
  for (int k = 0; k < n; ++k) {
    const long start = clock + 1000 * k + 100 + late(k);
    const long end = clock + 1000 * k + 400;  // a collective ends together everywhere
    if (k) s += ",";
    s += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce_Sum_f32_RING_LL\", \"pid\": 0, "
         "\"tid\": 21, \"ts\": " +
         std::to_string(start) + ", \"dur\": " + std::to_string(end - start) +
         ", \"args\": {\"stream\": 21, \"Collective name\": \"allreduce\", \"Process Group Name\": \"0\", \"Group size\": " +
         std::to_string(world) + "}}";
  }
  return s + "]}";
}

std::string rankTrace(int rank, int late, long clock, int n = 3) {
  return rankTrace(
      rank, 2, n, [late](int) { return late; }, clock);
}

StragglerReport importAndDetect(QTemporaryDir& dir, int world, int n, const std::function<int(int rank, int k)>& late) {
  TraceStore store(pathIn(dir, "t.db"));
  std::vector<std::string> files;
  for (int r = 0; r < world; ++r)
    files.push_back(writeFile(dir, "rank" + std::to_string(r) + ".json",
                              rankTrace(
                                  r, world, n, [&](int k) { return late(r, k); }, 0)));
  const auto res = importKineto(store, files);
  return detectStragglers(store, res.runIds.at(0));
}

}  // namespace

class TestStragglers : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void lateRankIsFound_data() {
    QTest::addColumn<long>("clock");
    QTest::newRow("same clock") << 0L;
    QTest::newRow("rank 1 clock 5 ms ahead") << 5000L;
  }

  void lateRankIsFound() {
    QFETCH(long, clock);
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(
        store, {writeFile(dir, "rank0.json", rankTrace(0, 0, 0)), writeFile(dir, "rank1.json", rankTrace(1, 30, clock))});
    const auto r = detectStragglers(store, res.runIds.at(0));
    QCOMPARE(r.matched, std::int64_t(3));
    QCOMPARE(r.ranks.size(), std::size_t(2));
    QCOMPARE(r.ranks[1].clockOffsetNs, TimeNs(clock * 1000));
    // Last at 3 of 3 with 2 ranks: a coin gives that 1 time in 8, too few to name anyone.
    QVERIFY(!r.straggler.has_value());
    QCOMPARE(*r.mostWaitedFor, 1);
    QVERIFY(QString::fromStdString(r.evidence).contains("too few collectives"));
    QCOMPARE(r.stragglerPValue, 0.125);
    QCOMPARE(r.ranks[1].lastCount, std::int64_t(3));
    QCOMPARE(r.groups.size(), std::size_t(1));
    QCOMPARE(r.groups[0].mostOftenLast, 1);
    QCOMPARE(r.groups[0].waitNs, TimeNs(90'000));
    QCOMPARE(r.ranks[1].causedWaitNs, TimeNs(90'000));  // 30 µs at each of 3 collectives
    QCOMPARE(r.ranks[1].lateNs, TimeNs(90'000));
    QCOMPARE(r.ranks[0].causedWaitNs, TimeNs(0));
    QCOMPARE(r.maxSkewNs, TimeNs(30'000));
  }

  // The rule of docs/METRICS.md: named only when last far more often than chance, significantly, and
  // the main cause of the waiting.
  void stragglerRule() {
    {
      // Rank 1 last at all 30: named.
      QTemporaryDir dir;
      const auto r = importAndDetect(dir, 2, 30, [](int rank, int) { return rank == 1 ? 30 : 0; });
      QCOMPARE(r.straggler.value_or(-1), 1);
      QVERIFY(r.stragglerPValue < 1e-8);
      QVERIFY(QString::fromStdString(r.evidence).endsWith("the straggler"));
    }
    {
      // A coin toss: each rank last about half the time (rank 0 at 21 of 40): nobody.
      QTemporaryDir dir;
      const auto r =
          importAndDetect(dir, 2, 40, [](int rank, int k) { return (rank == 0) == (k % 2 == 0 || k % 7 == 0) ? 20 : 0; });
      QVERIFY(!r.straggler.has_value());
      QVERIFY(r.mostWaitedFor.has_value());
      QVERIFY(QString::fromStdString(r.evidence).contains("no straggler"));
    }
    {
      // 8 ranks, rank 7 last at 24 of 40 (60 %, chance 12.5 %): named; the others share the rest.
      QTemporaryDir dir;
      const auto r = importAndDetect(dir, 8, 40, [](int rank, int k) {
        if (k % 5 < 3) return rank == 7 ? 50 : rank;  // rank 7 clearly last
        return rank == (k % 7) ? 50 : rank;           // someone else last
      });
      QCOMPARE(r.ranks.size(), std::size_t(8));
      QCOMPARE(r.ranks[7].lastCount, std::int64_t(24));
      QCOMPARE(r.straggler.value_or(-1), 7);
      QCOMPARE(r.groups.at(0).mostOftenLast, 7);
      QCOMPARE(r.groups.at(0).matched, std::int64_t(40));
    }
    // The binomial tail itself.
    QCOMPARE(binomialUpperTail(0, 10, 0.5), 1.0);
    QVERIFY(std::abs(binomialUpperTail(10, 10, 0.5) - 1.0 / 1024) < 1e-12);
    QVERIFY(std::abs(binomialUpperTail(428, 815, 0.5) - 0.0846) < 0.01);  // the 2-rank CPU run of the issue: chance
  }

  void singleRankHasNoStraggler() {
    QTemporaryDir dir;
    TraceStore store(pathIn(dir, "t.db"));
    const auto res = importKineto(store, {writeFile(dir, "rank0.json", rankTrace(0, 0, 0))});
    const auto r = detectStragglers(store, res.runIds.at(0));
    QCOMPARE(r.matched, std::int64_t(0));
    QVERIFY(!r.straggler.has_value());
  }
};

QTEST_GUILESS_MAIN(TestStragglers)
#include "tst_stragglers.moc"
