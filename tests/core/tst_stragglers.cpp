// Stragglers: collectives matched across ranks, clock offsets removed, the late rank found.
#include <QTemporaryDir>
#include <QtTest>

#include "core/analysis/stragglers.h"
#include "core/import/kineto_importer.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;
using shardscope::test::writeFile;

namespace {

// Three all-reduces; `late` µs late arrival on this rank; all times shifted by `clock` µs.
std::string rankTrace(int rank, int late, long clock) {
  std::string s = "{\"distributedInfo\": {\"rank\": " + std::to_string(rank) +
                  ", \"world_size\": 2, \"pg_config\": [{\"pg_name\": \"0\", \"pg_size\": 2, \"ranks\": [0, 1]}]}, "
                  "\"traceEvents\": [";
  for (int k = 0; k < 3; ++k) {
    const long start = clock + 1000 * k + 100 + late;
    const long end = clock + 1000 * k + 200;  // a collective ends together everywhere
    if (k) s += ",";
    s += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce_Sum_f32_RING_LL\", \"pid\": 0, "
         "\"tid\": 21, \"ts\": " + std::to_string(start) + ", \"dur\": " + std::to_string(end - start) +
         ", \"args\": {\"stream\": 21, \"Collective name\": \"allreduce\", \"Process Group Name\": \"0\", \"Group size\": 2}}";
  }
  return s + "]}";
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
    const auto res = importKineto(store, {writeFile(dir, "rank0.json", rankTrace(0, 0, 0)),
                                          writeFile(dir, "rank1.json", rankTrace(1, 30, clock))});
    const auto r = detectStragglers(store, res.runIds.at(0));
    QCOMPARE(r.matched, std::int64_t(3));
    QCOMPARE(r.ranks.size(), std::size_t(2));
    QCOMPARE(r.ranks[1].clockOffsetNs, TimeNs(clock * 1000));
    QCOMPARE(*r.straggler, 1);
    QCOMPARE(r.ranks[1].lastCount, std::int64_t(3));
    QCOMPARE(r.ranks[1].causedWaitNs, TimeNs(90'000));  // 30 µs at each of 3 collectives
    QCOMPARE(r.ranks[1].lateNs, TimeNs(90'000));
    QCOMPARE(r.ranks[0].causedWaitNs, TimeNs(0));
    QCOMPARE(r.maxSkewNs, TimeNs(30'000));
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
