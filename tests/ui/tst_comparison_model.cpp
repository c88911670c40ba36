// ComparisonModel: a hand-made comparison under QAbstractItemModelTester; formatting with units,
// deltas and their better/worse state, best per row, a new baseline, CSV.
#include <QAbstractItemModelTester>
#include <QtTest>

#include "ui/models/comparison_model.h"

using namespace shardscope;
using ui::ComparisonModel;

namespace {

core::Comparison sample() {
  core::Comparison c;
  c.runs = {core::RunId{11}, core::RunId{12}, core::RunId{13}};
  c.names = {"ddp", "fsdp, full shard", "zero3"};
  c.baseline = 0;
  auto row = [&](std::string key, std::string label, bool lower, std::vector<std::optional<double>> v) {
    core::ComparisonRow r;
    r.key = std::move(key);
    r.label = std::move(label);
    r.lowerIsBetter = lower;
    r.values = std::move(v);
    r.deltaPct.assign(r.values.size(), std::nullopt);
    for (std::size_t i = 0; i < r.values.size(); ++i)
      if (r.values[i] && r.values[0] && *r.values[0] != 0) r.deltaPct[i] = (*r.values[i] - *r.values[0]) / *r.values[0] * 100.0;
    std::size_t have = 0;
    for (std::size_t i = 0; i < r.values.size(); ++i) {
      if (!r.values[i]) continue;
      ++have;
      if (!r.best || (lower ? *r.values[i] < *r.values[*r.best] : *r.values[i] > *r.values[*r.best])) r.best = i;
    }
    if (have < 2) r.best.reset();
    c.rows.push_back(std::move(r));
  };
  row("step_time_ms", "step time (ms, mean over ranks and steps)", true, {600.0, 540.0, 500.0});
  row("tokens_per_s", "throughput (tokens/s)", false, {1710.0, 1900.0, std::nullopt});
  row("exposed_comm_pct", "exposed communication (% of step)", true, {10.0, 12.5, 10.0});
  row("peak_allocated_gib", "peak memory allocated (GiB, max over ranks)", true, {0.125, 0.1, 2.5});
  row("checkpoint_save_s", "checkpoint save (s)", true, {std::nullopt, std::nullopt, std::nullopt});
  row("init_time_s", "initialisation (s)", true, {0.0, 0.36, 1.5});
  return c;
}

}  // namespace

class TestComparisonModel : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void modelTester() {
    ComparisonModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(m.rowCount(), 0);
    QCOMPARE(m.columnCount(), 0);
    m.setComparison(sample());
    QCOMPARE(m.columnCount(), 4);
    QCOMPARE(m.rowCount(), 5);  // the checkpoint row has no value anywhere: left out
    QCOMPARE(m.rowOfKey("checkpoint_save_s"), -1);
    m.setBaseline(2);
    m.setBaseline(1);
    m.clear();
    QCOMPARE(m.rowCount(), 0);
    m.setComparison(sample());
    m.setComparison(sample());
  }

  void valuesDeltasAndBest() {
    ComparisonModel m;
    m.setComparison(sample());
    const int step = m.rowOfKey("step_time_ms");
    QVERIFY(step >= 0);
    QCOMPARE(m.data(m.index(step, 0)).toString(), QString("step time (mean over ranks and steps)"));
    QCOMPARE(m.data(m.index(step, 1)).toString(), QString("600.0 ms"));  // the baseline: no delta
    QCOMPARE(m.data(m.index(step, 2)).toString(), QString("540.0 ms (-10.0%)"));
    QCOMPARE(m.data(m.index(step, 3), ComparisonModel::DeltaTextRole).toString(), QString("(-16.7%)"));
    QCOMPARE(m.data(m.index(step, 3), ComparisonModel::ExactValueRole).toDouble(), 500.0);
    QCOMPARE(m.data(m.index(step, 2), ComparisonModel::DeltaStateRole).toInt(), int(ComparisonModel::DeltaState::Better));
    QVERIFY(m.data(m.index(step, 3), ComparisonModel::IsBestRole).toBool());
    QVERIFY(!m.data(m.index(step, 1), ComparisonModel::IsBestRole).toBool());
    QVERIFY(m.data(m.index(step, 3), Qt::FontRole).value<QFont>().bold());
    QVERIFY(!m.data(m.index(step, 2), Qt::FontRole).isValid());
    QVERIFY(m.data(m.index(step, 3), Qt::ToolTipRole).toString().contains("step_time_ms = 500"));

    const int tps = m.rowOfKey("tokens_per_s");
    QCOMPARE(m.data(m.index(tps, 0)).toString(), QString("throughput"));
    QCOMPARE(m.data(m.index(tps, 2)).toString(), QString("1,900 tok/s (+11.1%)"));
    QCOMPARE(m.data(m.index(tps, 2), ComparisonModel::DeltaStateRole).toInt(), int(ComparisonModel::DeltaState::Better));
    QCOMPARE(m.data(m.index(tps, 3)).toString(), QString("—"));
    QVERIFY(!m.data(m.index(tps, 3), ComparisonModel::ExactValueRole).isValid());

    const int exposed = m.rowOfKey("exposed_comm_pct");
    QCOMPARE(m.data(m.index(exposed, 2)).toString(), QString("12.5 % (+25.0%)"));
    QCOMPARE(m.data(m.index(exposed, 2), ComparisonModel::DeltaStateRole).toInt(), int(ComparisonModel::DeltaState::Worse));
    QCOMPARE(m.data(m.index(exposed, 3), ComparisonModel::DeltaTextRole).toString(), QString("(±0.0%)"));
    QCOMPARE(m.data(m.index(exposed, 3), ComparisonModel::DeltaStateRole).toInt(), int(ComparisonModel::DeltaState::Same));
    QVERIFY(m.data(m.index(exposed, 1), ComparisonModel::IsBestRole).toBool());  // a tie goes to the first

    const int peak = m.rowOfKey("peak_allocated_gib");
    QCOMPARE(m.data(m.index(peak, 0)).toString(), QString("peak memory allocated (max over ranks)"));
    QCOMPARE(m.data(m.index(peak, 1)).toString(), QString("128.0 MiB"));
    QCOMPARE(m.data(m.index(peak, 3), ComparisonModel::ValueTextRole).toString(), QString("2.5 GiB"));
    QVERIFY(m.data(m.index(peak, 2), ComparisonModel::IsBestRole).toBool());

    // A zero baseline has no delta.
    const int init = m.rowOfKey("init_time_s");
    QCOMPARE(m.data(m.index(init, 1)).toString(), QString("0 ms"));
    QCOMPARE(m.data(m.index(init, 3)).toString(), QString("1.50 s"));
    QVERIFY(!m.data(m.index(init, 2), ComparisonModel::DeltaPctRole).isValid());

    QCOMPARE(m.headerData(1, Qt::Horizontal).toString(),
             QString("ddp #11 (baseline)"));  // name and id: two runs may share a name
    QCOMPARE(m.headerData(2, Qt::Horizontal).toString(), QString("fsdp, full shard #12"));
  }

  void newBaselineRecomputesDeltas() {
    ComparisonModel m;
    m.setComparison(sample());
    QSignalSpy changed(&m, &QAbstractItemModel::dataChanged);
    m.setBaseline(2);
    QCOMPARE(changed.size(), 1);
    QCOMPARE(m.baseline(), std::size_t(2));
    QCOMPARE(m.headerData(3, Qt::Horizontal).toString(), QString("zero3 #13 (baseline)"));
    const int step = m.rowOfKey("step_time_ms");
    QCOMPARE(m.data(m.index(step, 1), ComparisonModel::DeltaPctRole).toDouble(), (600.0 - 500.0) / 500.0 * 100.0);
    QCOMPARE(m.data(m.index(step, 1), ComparisonModel::DeltaStateRole).toInt(), int(ComparisonModel::DeltaState::Worse));
    QVERIFY(!m.data(m.index(step, 3), ComparisonModel::DeltaPctRole).isValid());
    QVERIFY(m.data(m.index(step, 3), ComparisonModel::IsBestRole).toBool());  // best does not depend on the baseline
    // Throughput has no baseline value now: no deltas at all.
    const int tps = m.rowOfKey("tokens_per_s");
    QVERIFY(!m.data(m.index(tps, 1), ComparisonModel::DeltaPctRole).isValid());
    QCOMPARE(m.data(m.index(tps, 1)).toString(), QString("1,710 tok/s"));
  }

  void csv() {
    ComparisonModel m;
    QVERIFY(m.toCsv().isEmpty());
    m.setComparison(sample());
    const QStringList lines = m.toCsv().trimmed().split('\n');
    QCOMPARE(lines.size(), 1 + m.rowCount());
    QCOMPARE(lines[0], QString("figure,key,ddp,\"fsdp, full shard\",zero3,\"fsdp, full shard delta %\",zero3 delta %"));
    QCOMPARE(lines[1], QString("\"step time (ms, mean over ranks and steps)\",step_time_ms,600,540,500,-10,%1")
                           .arg(QString::number((500.0 - 600.0) / 600.0 * 100.0, 'g', 17)));
    QVERIFY(lines[2].startsWith("throughput (tokens/s),tokens_per_s,1710,1900,,"));
    // A run named like a formula stays text in a spreadsheet (core's one escaper).
    auto c = sample();
    c.names[0] = "=HYPERLINK(\"x\")";
    m.setComparison(c);
    QVERIFY(m.toCsv().startsWith("figure,key,\"'=HYPERLINK(\"\"x\"\")\","));
  }

  void formatting() {
    QCOMPARE(ComparisonModel::formatValue("step_time_ms", 0.5), QString("0.500 ms"));
    QCOMPARE(ComparisonModel::formatValue("step_time_ms", 12345.0), QString("12.35 s"));
    QCOMPARE(ComparisonModel::formatValue("peak_allocated_gib_rank3", 1.0), QString("1.0 GiB"));
    QCOMPARE(ComparisonModel::formatValue("compute_pct", 87.321), QString("87.3 %"));
    QCOMPARE(ComparisonModel::formatDelta(241.33), QString("(+241.3%)"));
    QCOMPARE(ComparisonModel::formatDelta(-0.01), QString("(±0.0%)"));
    QCOMPARE(ComparisonModel::formatDelta(-99.5), QString("(-99.5%)"));
    QCOMPARE(ComparisonModel::formatDelta(899.0), QString("(+899.0%)"));
    QCOMPARE(ComparisonModel::formatDelta(1400.0), QString("(×15.0)"));
    QCOMPARE(ComparisonModel::formatDelta(139890.7), QString("(×1,400)"));
  }
};

QTEST_MAIN(TestComparisonModel)
#include "tst_comparison_model.moc"
