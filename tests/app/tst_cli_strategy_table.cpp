// `compare-runs` prints the strategy table first (aligned text, then n/a reasons) and has it in
// --json as "strategy_table" (one object per run, null for n/a); the rest of its output follows.
#include <QTemporaryDir>
#include <QtTest>

#include "core/analysis/strategy_table.h"
#include "core/util/json.h"
#include "tests/app/cli_runner.h"
#include "tests/common/fine_tuning_runs.h"
#include "tests/common/test_support.h"

using namespace shardscope;
using core::JsonValue;

class TestCliStrategyTable : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString db_, ids_;
  test::FineTuningRuns runs_;

 private Q_SLOTS:
  void initTestCase() {
    db_ = QString::fromStdString(test::pathIn(dir_, "ft.db"));
    core::TraceStore store(db_.toStdString());
    runs_ = test::writeFineTuningRuns(store);
    ids_ = QStringLiteral("%1,%2,%3").arg(runs_.lora.value()).arg(runs_.full.value()).arg(runs_.imported.value());
  }

  void text() {
    const auto r = test::runCli({"compare-runs", "--db", db_, "--runs", ids_});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QStringList lines = r.out.split('\n');
    // The table comes first: its title, the header, then one line per run.
    QVERIFY2(lines.value(0).startsWith("strategy table"), qPrintable(r.out));
    const QString header = lines.value(1);
    for (const char* h : {"run", "strategy", "precision", "tuning", "peak GiB/rank", "memory", "init s", "tokens/s",
                          "tokens/s/rank", "comm %", "exposed %", "ckpt save s", "trainable", "frozen", "skipped"})
      QVERIFY2(header.contains(h), h);
    const QString lora = lines.value(2), full = lines.value(3), imported = lines.value(4);
    QVERIFY2(lora.trimmed().startsWith("fsdp lora #"), qPrintable(lora));
    const QStringList loraCells = lora.mid(lora.indexOf("fsdp ", 3)).split(' ', Qt::SkipEmptyParts);
    // strategy, precision, "LoRA", "r=8", ranks, peak, memory, init, tokens/s, per GPU, comm, exposed,
    // ckpt, trainable, frozen, skipped
    QCOMPARE(loraCells.value(0), QString("fsdp"));
    QCOMPARE(loraCells.value(1), QString("fp16"));
    QCOMPARE(loraCells.value(3), QString("r=8"));
    QCOMPARE(loraCells.value(4), QString("2"));
    QCOMPARE(loraCells.value(5), QString("0.09"));  // 97 MiB
    QCOMPARE(loraCells.value(6), QString("host"));
    QCOMPARE(loraCells.value(7), QString("0.50"));
    QCOMPARE(loraCells.value(8), QString("102,400"));
    QCOMPARE(loraCells.value(9), QString("51,200"));
    QCOMPARE(loraCells.value(10), QString("30.0"));
    QCOMPARE(loraCells.value(12), QString("n/a"));  // no checkpoint saved
    QCOMPARE(loraCells.value(13), QString("1,234,567"));
    QCOMPARE(loraCells.value(14), QString("7,654,321"));
    QCOMPARE(loraCells.value(15), QString("3"));
    QVERIFY2(full.contains(" zero3 ") && full.contains(" bf16 ") && full.contains(" full ") && full.contains(" 125,248 ") &&
                 full.contains(" 1.25 ") && full.contains(" 2.50 ") && full.contains(" 40.0 "),
             qPrintable(full));
    QVERIFY2(imported.count("n/a") == 12, qPrintable(imported));
    // Aligned: every row as wide as the header, the columns at the same offsets.
    QCOMPARE(header.indexOf("skipped") + 7, lora.size());
    QCOMPARE(lora.size(), full.size());
    // The reasons follow, then what compare-runs printed before.
    QVERIFY2(r.out.contains("n/a:\n"), qPrintable(r.out));
    QVERIFY(r.out.contains(QStringLiteral("imported #%1: ").arg(runs_.imported.value())));
    QVERIFY(r.out.contains("an imported trace does not record initialisation"));
    QVERIFY(r.out.contains("save_checkpoint off"));
    QVERIFY(r.out.indexOf("baseline: run") > r.out.indexOf("n/a:"));
    QVERIFY(r.out.contains("step time (ms, mean of counted steps)"));
  }

  void json() {
    const auto r = test::runCli({"compare-runs", "--db", db_, "--runs", ids_, "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const JsonValue j = core::parseJson(r.out.toStdString(), "compare-runs --json");
    const JsonValue* t = j.find("strategy_table");
    QVERIFY(t && t->isArray());
    QCOMPARE(t->items().size(), std::size_t{3});
    const JsonValue& a = t->items()[0];
    QCOMPARE(a.find("run_id")->asDouble(), static_cast<double>(runs_.lora.value()));
    QCOMPARE(a.find("strategy")->asString(), std::string("fsdp"));
    QCOMPARE(a.find("tuning")->asString(), std::string("LoRA r=8"));
    QCOMPARE(a.find("tokens_per_s")->asDouble(), 102400.0);
    QCOMPARE(a.find("tokens_per_s_per_gpu")->asDouble(), 51200.0);
    QCOMPARE(a.find("comm_pct")->asDouble(), 30.0);
    QCOMPARE(a.find("peak_memory_gib")->asDouble(), 97.0 / 1024.0);
    QCOMPARE(a.find("trainable_params")->asDouble(), 1234567.0);
    QCOMPARE(a.find("skipped_steps")->asDouble(), 3.0);
    QVERIFY(a.find("checkpoint_save_s")->isNull());
    QVERIFY(a.find("not_known")->find("checkpoint_save_s")->asString().find("save_checkpoint off") != std::string::npos);
    const JsonValue& b = t->items()[1];
    QCOMPARE(b.find("trainable_params")->asDouble(), 125248.0);
    QCOMPARE(b.find("frozen_params")->asDouble(), 0.0);
    QCOMPARE(b.find("skipped_steps")->asDouble(), 0.0);
    QCOMPARE(b.find("checkpoint_save_s")->asDouble(), 1.25);
    const JsonValue& i = t->items()[2];
    for (const auto& c : core::strategyColumns()) {
      const std::string key(c.key);
      const bool na = key != "ranks" && key != "comm_pct" && key != "exposed_comm_pct";
      QVERIFY2(i.find(key) && i.find(key)->isNull() == na, key.c_str());
      QVERIFY2((i.find("not_known")->find(key) != nullptr) == na, key.c_str());
    }
    // The same figures as the comparison's rows (one truth).
    for (const auto& row : j.find("rows")->items())
      if (row.find("key")->asString() == "comm_pct") QCOMPARE(row.find("values")->items()[1].asDouble(), 40.0);
  }
};

QTEST_GUILESS_MAIN(TestCliStrategyTable)
#include "tst_cli_strategy_table.moc"
