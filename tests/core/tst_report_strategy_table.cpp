// The strategy table in reports: present in HTML (and so PDF, which renders the same HTML), Markdown
// and CSV (OUT.strategies.csv) with core's values and n/a reasons, for a comparison of the three
// fine-tuning runs (tests/common/fine_tuning_runs.h) and as the single run's row in a one-run report.
#include <QTemporaryDir>
#include <QtTest>

#include "core/report/csv_writer.h"
#include "core/report/html_writer.h"
#include "core/report/markdown_writer.h"
#include "core/report/report.h"
#include "tests/common/fine_tuning_runs.h"
#include "tests/common/test_support.h"

using namespace shardscope::core;
using shardscope::test::pathIn;

namespace {

// RFC 4180 records (CRLF), quoted fields with doubled quotes.
std::vector<std::vector<std::string>> parseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(field);
      field.clear();
    } else if (c == '\r') {
    } else if (c == '\n') {
      rows.back().push_back(field);
      field.clear();
      rows.emplace_back();
    } else {
      field += c;
    }
  }
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

std::string cellOf(const std::vector<std::vector<std::string>>& csv, std::size_t row, const std::string& key) {
  for (std::size_t k = 0; k < csv.at(0).size(); ++k)
    if (csv[0][k] == key) return csv.at(row).at(k);
  throw std::runtime_error("no column " + key);
}

}  // namespace

class TestReportStrategyTable : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::unique_ptr<TraceStore> store_;
  shardscope::test::FineTuningRuns runs_;

 private Q_SLOTS:
  void initTestCase() {
    store_ = std::make_unique<TraceStore>(pathIn(dir_, "ft.db"));
    runs_ = shardscope::test::writeFineTuningRuns(*store_);
  }

  void comparisonReport() {
    ReportOptions o;
    o.generatedAt = "2026-01-01T00:00:00Z";
    const Report rep = buildReport(*store_, {runs_.lora, runs_.full, runs_.imported}, o);
    const ReportTable t = strategyReportTable(rep);
    QCOMPARE(t.rows.size(), std::size_t{3});
    QCOMPARE(t.header.size(), strategyColumns().size() + 1);
    QVERIFY(t.caption.find("an imported trace does not record initialisation") != std::string::npos);

    const std::string html = writeHtml(rep);
    QVERIFY(html.find("id=\"strategies\"") != std::string::npos);
    QVERIFY(html.find("peak GiB/rank") != std::string::npos);  // CPU runs: host memory per rank
    // Each run's row with its values, in column order.
    const auto strat = html.find("id=\"strategies\"");
    const auto next = html.find("id=\"comparison\"");
    QVERIFY(strat < next);
    const std::string section = html.substr(strat, next - strat);
    for (const char* v : {"LoRA r=8", "fp16", "102,400", "51,200", "1,234,567", "7,654,321", "zero3", "bf16", "125,248", "1.25",
                          "2.50", "40.0", "37.5", "n/a", "save_checkpoint off"})
      QVERIFY2(section.find(v) != std::string::npos, v);

    const std::string md = writeMarkdown(rep);
    const auto mdAt = md.find("## Strategy table");
    QVERIFY(mdAt != std::string::npos && mdAt < md.find("## Comparison"));
    const std::string mdSection = md.substr(mdAt, md.find("## Comparison") - mdAt);
    QVERIFY2(mdSection.find("| fsdp | fp16 | LoRA r=8 | 2 | 0.09 | host | 0.50 | 102,400 | 51,200 | 30.0 |") != std::string::npos,
             mdSection.c_str());
    QVERIFY2(mdSection.find("| 1.25 | 125,248 | 0 | 0 |") != std::string::npos, mdSection.c_str());

    const auto csv = parseCsv(strategiesCsv(rep));
    QCOMPARE(csv.size(), std::size_t{4});
    QCOMPARE(csv[0].front(), std::string("run_id"));
    QCOMPARE(csv[0].back(), std::string("not_known"));
    QCOMPARE(cellOf(csv, 1, "run_id"), std::to_string(runs_.lora.value()));
    QCOMPARE(cellOf(csv, 1, "tuning"), std::string("LoRA r=8"));
    QCOMPARE(cellOf(csv, 1, "tokens_per_s"), std::string("102400"));
    QCOMPARE(cellOf(csv, 1, "trainable_params"), std::string("1234567"));
    QCOMPARE(cellOf(csv, 1, "checkpoint_save_s"), std::string());
    QVERIFY(cellOf(csv, 1, "not_known").find("checkpoint_save_s: the run saved no checkpoint") != std::string::npos);
    QCOMPARE(cellOf(csv, 2, "trainable_params"), std::string("125248"));
    QCOMPARE(cellOf(csv, 2, "checkpoint_save_s"), std::string("1.25"));
    QCOMPARE(cellOf(csv, 2, "skipped_steps"), std::string("0"));
    QCOMPARE(cellOf(csv, 2, "not_known"), std::string());
    QCOMPARE(cellOf(csv, 3, "comm_pct"), std::string("37.5"));
    QCOMPARE(cellOf(csv, 3, "init_time_s"), std::string());
    QVERIFY(cellOf(csv, 3, "not_known").find("init_time_s: an imported trace") != std::string::npos);
    QCOMPARE(strategiesCsvPath("out/report.csv"), std::string("out/report.strategies.csv"));
  }

  // A single-run report shows the run's row, its parameters and skipped steps included.
  void singleRunReport() {
    const Report rep = buildReport(*store_, {runs_.full});
    const ReportTable t = strategyReportTable(rep);
    QCOMPARE(t.rows.size(), std::size_t{1});
    QVERIFY(std::find(t.header.begin(), t.header.end(), "trainable") != t.header.end());
    QVERIFY(std::find(t.header.begin(), t.header.end(), "skipped") != t.header.end());
    const std::string md = writeMarkdown(rep);
    QVERIFY(md.find("## Strategy table") != std::string::npos);
    QVERIFY2(md.find("| zero3 | bf16 | full | 2 | 0.20 | host | 2.50 | 102,400 | 51,200 | 40.0 |") != std::string::npos,
             md.c_str());
    QVERIFY(writeHtml(rep).find("125,248") != std::string::npos);
    // An imported trace alone: no parameter or skipped-step columns (nothing known), the seeds' stay.
    const ReportTable ti = strategyReportTable(buildReport(*store_, {runs_.imported}));
    QVERIFY(std::find(ti.header.begin(), ti.header.end(), "trainable") == ti.header.end());
    QVERIFY(std::find(ti.header.begin(), ti.header.end(), "init s") != ti.header.end());
  }
};

QTEST_GUILESS_MAIN(TestReportStrategyTable)
#include "tst_report_strategy_table.moc"
