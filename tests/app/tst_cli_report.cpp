// `shardscope-cli report` end to end: the real executable writes every format from a real database
// (imported Kineto traces), its --json summary, and the usage, input and database errors with their
// exit codes.
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "core/analysis/comparison.h"
#include "core/storage/trace_store.h"
#include "core/util/json.h"
#include "tests/app/cli_runner.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"

using namespace shardscope;
using core::JsonValue;

namespace {

using Result = shardscope::test::CliResult;

// The CLI picks the offscreen platform itself for PDF: it must not inherit the tests' one.
Result runCli(const QStringList& args) { return shardscope::test::runCli(args, 120000, {"QT_QPA_PLATFORM"}); }

QByteArray readAll(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

class TestCliReport : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString db_;

  QString out(const QString& name) const { return dir_.filePath(name); }

 private Q_SLOTS:
  void initTestCase() {
    db_ = dir_.filePath("r.db");
    int seed = 1;
    for (const char* job : {"alpha", "<script>alert(1)</script>"}) {
      const QString sub = dir_.filePath(QString("job%1").arg(seed));
      QDir().mkpath(sub);
      for (int r = 0; r < 2; ++r) {
        test::KinetoGenOptions o;
        o.events = 8000;
        o.worldSize = 2;
        o.rank = r;
        o.steps = 3;
        o.seed = static_cast<std::uint64_t>(seed * 10 + r);
        test::generateKinetoTrace((sub + QString("/rank%1.json").arg(r)).toStdString(), o);
      }
      const Result imp = runCli({"import", "--db", db_, "--name", job, sub});
      QVERIFY2(imp.code == 0, qPrintable(imp.err));
      ++seed;
    }
    core::TraceStore store(db_.toStdString());
    store.setMetric(core::RunId{1}, std::nullopt, core::metric_keys::kTokensPerSecond, 900);
    store.setMetric(core::RunId{2}, std::nullopt, core::metric_keys::kTokensPerSecond, 1200);
  }

  void help() {
    const Result main = runCli({"--help"});
    QVERIFY(main.out.contains("report"));
    const Result r = runCli({"report", "--help"});
    QCOMPARE(r.code, 0);
    QVERIFY(r.out.contains("Usage: shardscope-cli report"));
    for (const char* o : {"--runs", "--baseline", "--format", "-o", "--page-size", "--title"}) QVERIFY2(r.out.contains(o), o);
  }

  void html() {
    const Result r =
        runCli({"report", "--db", db_, "--runs", "1,2", "--format", "html", "-o", out("r.html"), "--title", "Team & <i>"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("recommended: run 2"));
    const QByteArray html = readAll(out("r.html"));
    QVERIFY(html.startsWith("<!DOCTYPE html>"));
    QVERIFY(html.contains("<title>Team &amp; &lt;i&gt;</title>"));
    QVERIFY(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; #2"));
    for (const char* bad : {"<script", "http://", "https://", "url(", "@import"}) QVERIFY2(!html.contains(bad), bad);
    QCOMPARE(html.count("<svg"), 5);  // step breakdown, tokens/s, overlap per step, memory of each run
    QVERIFY(!QFile::exists(out("r.html") + ".tmp-"));
  }

  void markdownAndCsv() {
    Result r = runCli({"report", "--db", db_, "--runs", "2,1", "--baseline", "1", "--format", "md", "-o", out("r.md")});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QString md = QString::fromUtf8(readAll(out("r.md")));
    QVERIFY(md.startsWith("# Shardscope report: comparison of 2 runs"));
    QVERIFY(md.contains("- alpha \\#1, kineto, completed (baseline)"));
    QVERIFY(!md.contains("<script"));

    r = runCli({"report", "--db", db_, "--runs", "1,2", "--format", "csv", "-o", out("r.csv")});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QString cmp = QString::fromUtf8(readAll(out("r.csv")));
    QVERIFY(cmp.startsWith("key,metric,better,alpha #1,<script>alert(1)</script> #2,"));
    // Values, the delta unit (percent; percentage points for shares), the deltas (the baseline's empty).
    QVERIFY2(cmp.contains("\r\ntokens_per_s,throughput (tokens/s),higher,900,1200,%,,33.33"), qPrintable(cmp));
    QVERIFY2(cmp.contains(",pp,,"), qPrintable(cmp));
    const QString coll = QString::fromUtf8(readAll(out("r.collectives.csv")));
    QVERIFY(coll.startsWith("run_id,run_name,operation,process_group,"));
    QVERIFY(coll.contains("\r\n2,<script>alert(1)</script>,"));
    QVERIFY(r.out.contains("r.collectives.csv"));
    // The strategy table beside them: a row per run, hostile names still text.
    const QString strat = QString::fromUtf8(readAll(out("r.strategies.csv")));
    QVERIFY2(strat.startsWith("run_id,run_name,strategy,precision,tuning,ranks,peak_memory_gib,"), qPrintable(strat));
    QVERIFY(strat.contains("\r\n2,<script>alert(1)</script>,"));
    QCOMPARE(strat.count("\r\n"), 3);  // header + 2 runs
    QVERIFY(r.out.contains("r.strategies.csv"));
  }

  void pdf_data() {
    QTest::addColumn<QString>("size");
    QTest::addColumn<QString>("mediaBox");
    QTest::newRow("a4") << "a4"
                        << "595 x 842 pts (A4)";
    QTest::newRow("letter") << "letter"
                            << "612 x 792 pts (letter)";
  }

  void pdf() {
    QFETCH(QString, size);
    QFETCH(QString, mediaBox);
    const QString path = out("r-" + size + ".pdf");
    const Result r =
        runCli({"report", "--db", db_, "--runs", "1,2", "--format", "pdf", "--page-size", size, "-o", path, "--json"});
    if (r.code == 2 && r.err.contains("built without Qt Gui")) QSKIP("this shardscope-cli has no PDF support (GUI off)");
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const JsonValue j = core::parseJson(r.out.toStdString(), "cli");
    QCOMPARE(j.find("format")->asString(), std::string("pdf"));
    QCOMPARE(j.find("recommended_run")->asInt().value_or(0), std::int64_t(2));
    const std::int64_t pages = j.find("pages")->asInt().value_or(0);
    QVERIFY(pages >= 2);
    QCOMPARE(j.find("files")->items().at(0).find("bytes")->asInt().value_or(0), std::int64_t(QFileInfo(path).size()));
    QVERIFY(readAll(path).startsWith("%PDF-"));
    if (QStandardPaths::findExecutable("pdfinfo").isEmpty()) QSKIP("pdfinfo not installed");
    QProcess info;
    info.start("pdfinfo", {path});
    QVERIFY(info.waitForFinished(30000));
    const QString text = QString::fromUtf8(info.readAllStandardOutput());
    QVERIFY2(text.contains("Page size:       " + mediaBox), qPrintable(text));
    QVERIFY(text.contains(QRegularExpression(QString("Pages:\\s+%1\\n").arg(pages))));
  }

  void singleRunByDefault() {
    const Result r = runCli({"report", "--db", db_, "-o", out("latest.md"), "--format", "md", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const JsonValue j = core::parseJson(r.out.toStdString(), "cli");
    QCOMPARE(j.find("runs")->items().size(), std::size_t(1));
    QCOMPARE(j.find("runs")->items()[0].asInt().value_or(0), std::int64_t(2));
    QVERIFY(QString::fromUtf8(readAll(out("latest.md"))).contains("## Summary"));
  }

  void errors() {
    Result r = runCli({"report", "--db", db_, "--runs", "1,999", "-o", out("x.html")});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("no run with id 999"), qPrintable(r.err));
    QVERIFY(!QFile::exists(out("x.html")));
    r = runCli({"report", "--db", db_, "--runs", "1,abc", "-o", out("x.html")});
    QCOMPARE(r.code, 2);
    QVERIFY(r.err.contains("'abc'"));
    r = runCli({"report", "--db", db_, "--format", "docx", "-o", out("x.docx")});
    QCOMPARE(r.code, 2);
    QVERIFY(r.err.contains("--format must be html, pdf, md or csv"));
    r = runCli({"report", "--db", db_, "--format", "html"});
    QCOMPARE(r.code, 2);
    QVERIFY(r.err.contains("-o OUT is required"));
    r = runCli({"report", "--db", db_, "--runs", "1", "--baseline", "2", "-o", out("x.html")});
    QCOMPARE(r.code, 2);
    QVERIFY(r.err.contains("--baseline 2 is not one of --runs"));
    r = runCli({"report", "--db", db_, "--format", "pdf", "--page-size", "a5", "-o", out("x.pdf")});
    QCOMPARE(r.code, 2);
    r = runCli({"report", "--db", out("missing.db"), "-o", out("x.html")});
    QCOMPARE(r.code, 3);
    QVERIFY(!QFile::exists(out("missing.db")));
    r = runCli({"report", "--db", db_, "--runs", "1", "-o", out("no/such/dir/x.html")});
    QCOMPARE(r.code, 1);
    QVERIFY(r.err.contains("cannot write"));
    r = runCli({"report", "--db", db_, "--bogus", "-o", out("x.html")});
    QCOMPARE(r.code, 2);
  }
};

QTEST_GUILESS_MAIN(TestCliReport)
#include "tst_cli_report.moc"
