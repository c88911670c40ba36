// The one formatting convention (core/util/units.h) and the one steady-state rule
// (core/analysis/step_breakdown.h): every surface reads them, so their outputs are pinned here.
#include <QtTest>

#include "core/analysis/step_breakdown.h"
#include "core/util/units.h"

using namespace shardscope::core;

class TestUnits : public QObject {
  Q_OBJECT
  static QString q(const std::string& s) { return QString::fromStdString(s); }

 private Q_SLOTS:
  void bytesAreBinary() {
    QCOMPARE(q(formatBytes(0)), QString("0 B"));
    QCOMPARE(q(formatBytes(1023)), QString("1023 B"));
    QCOMPARE(q(formatBytes(1536)), QString("1.50 KiB"));
    QCOMPARE(q(formatBytes(64.0 * 1024 * 1024)), QString("64.00 MiB"));
    QCOMPARE(q(formatBytes(64e6)), QString("61.04 MiB"));
    QCOMPARE(q(formatBytes(34443085312.0, 1)), QString("32.1 GiB"));
    QCOMPARE(q(formatBytes(-2048)), QString("-2.00 KiB"));
  }
  void numbers() {
    QCOMPARE(q(formatFixed(3.14159, 3)), QString("3.142"));
    QCOMPARE(q(formatGrouped(1234567.891, 2)), QString("1,234,567.89"));
    QCOMPARE(q(formatGrouped(-1234.5, 1)), QString("-1,234.5"));
    QCOMPARE(q(formatGrouped(999, 0)), QString("999"));
    QCOMPARE(q(formatCount(1000)), QString("1,000"));
    QCOMPARE(q(formatCount(-12345678)), QString("-12,345,678"));
    QCOMPARE(q(formatPercent(12.345)), QString("12.3 %"));
    QCOMPARE(q(formatPercent(47.03, 0)), QString("47 %"));
    QCOMPARE(q(formatSi(1.5e6, "events/s")), QString("1.50 Mevents/s"));
    QCOMPARE(q(formatSi(850, "B")), QString("850 B"));
  }
  void times() {
    QCOMPARE(q(formatMsFromNs(3714625000)), QString("3714.625 ms"));
    QCOMPARE(q(formatMs(12346.0)), QString("12.35 s"));
    QCOMPARE(q(formatMs(123.44)), QString("123.4 ms"));
    QCOMPARE(q(formatMs(1.234)), QString("1.23 ms"));
    QCOMPARE(q(formatMs(0.0)), QString("0.000 ms"));
    QCOMPARE(q(formatMs(0.0042)), QString("4.20 \u00b5s"));
    QCOMPARE(q(formatDurationNs(850)), QString("850 ns"));
    QCOMPARE(q(formatDurationNs(4200)), QString("4.20 \u00b5s"));
    QCOMPARE(q(formatDurationNs(12345678)), QString("12.35 ms"));
    QCOMPARE(q(formatDurationNs(1234567890)), QString("1.235 s"));
    QCOMPARE(q(formatSeconds(0.85)), QString("850 ms"));
    QCOMPARE(q(formatSeconds(1234.5)), QString("1,234.50 s"));
  }
  void steadyStateRule() {
    // Runs we trained or simulated: the first step is the warm-up, left out when others follow.
    CountedSteps c = countedStepNumbers({3, 1, 2, 2, 1}, RunSource::Runtime);
    QCOMPARE(c.first, std::int64_t(2));
    QCOMPARE(c.last, std::int64_t(3));
    QCOMPARE(c.count, std::int64_t(2));
    QVERIFY(c.warmupLeftOut);
    QVERIFY(!c.counts(1) && c.counts(2) && c.counts(3) && !c.counts(4));
    QCOMPARE(QString(describeStepRule(c)), QString("steps after the first (warm-up) step, mean over ranks"));
    // One step only: it is what there is.
    c = countedStepNumbers({5}, RunSource::Simulated);
    QCOMPARE(c.count, std::int64_t(1));
    QVERIFY(!c.warmupLeftOut && c.counts(5));
    // Imported traces keep every step (the profiler's schedule skipped its own warm-up).
    c = countedStepNumbers({1009, 1010, 1011}, RunSource::Kineto);
    QCOMPARE(c.count, std::int64_t(3));
    QVERIFY(!c.warmupLeftOut && c.counts(1009));
    // No step at all: the whole trace (step -1) counts once.
    c = countedStepNumbers({-1, -1}, RunSource::Kineto);
    QCOMPARE(c.count, std::int64_t(1));
    QVERIFY(c.counts(-1));
    QCOMPARE(QString(describeStepRule(c)), QString("the whole trace (it has no steps)"));
    QCOMPARE(countedStepNumbers({}, RunSource::Runtime).count, std::int64_t(0));
    QVERIFY(leavesOutWarmup(RunSource::Runtime) && leavesOutWarmup(RunSource::Simulated) && !leavesOutWarmup(RunSource::Kineto));
  }
};

QTEST_GUILESS_MAIN(TestUnits)
#include "tst_units.moc"
