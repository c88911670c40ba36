// PDF reports (ui/report/pdf_writer): A4 and Letter pages that poppler reads and renders, charts
// painted (their colours are on the pages), hostile names printed as text; the export dialog builds
// the report off the GUI thread, previews it and writes every format; File ▸ Export Report… opens it
// on the selected runs.
#include <QFile>
#include <QImage>
#include <QAction>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QTextBlock>
#include <QTextDocument>
#include <QtTest>

#include "core/import/kineto_importer.h"
#include "core/report/report.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"
#include "tests/ui/ui_fixture.h"
#include "ui/main/main_window.h"
#include "ui/report/export_dialog.h"
#include "ui/report/pdf_writer.h"

using namespace shardscope;
using core::Id;

namespace {

struct Proc {
  int code = -1;
  QByteArray out;
};

Proc run(const QString& program, const QStringList& args) {
  QProcess p;
  p.start(program, args);
  if (!p.waitForFinished(60000)) return {};
  return {p.exitCode(), p.readAllStandardOutput()};
}

bool havePoppler() {
  return !QStandardPaths::findExecutable("pdftoppm").isEmpty() && !QStandardPaths::findExecutable("pdfinfo").isEmpty();
}

// Share of pixels that are not (near) white, and whether a chart colour (#0072B2, series 0) shows.
struct Ink {
  double share = 0;
  bool chartBlue = false;
};
Ink inkOf(const QImage& img) {
  qint64 ink = 0;
  Ink out;
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x) {
      const QColor c = img.pixelColor(x, y);
      if (c.red() < 235 || c.green() < 235 || c.blue() < 235) ++ink;
      if (std::abs(c.red() - 0x00) < 30 && std::abs(c.green() - 0x72) < 30 && std::abs(c.blue() - 0xB2) < 30)
        out.chartBlue = true;
    }
  out.share = static_cast<double>(ink) / (static_cast<double>(img.width()) * img.height());
  return out;
}

std::string makeDb(const QTemporaryDir& dir, const std::string& secondName = "fsdp <script>alert(1)</script>") {
  const std::string path = test::pathIn(dir, "pdf.db");
  core::TraceStore store(path);
  test::RunSpec a;
  a.name = "ddp";
  a.ranks = 2;
  test::writeRun(store, a);
  test::RunSpec b;
  b.name = secondName;
  b.strategy = "fsdp";
  b.tokensPerS = 1500;
  b.peakBytes = 64ll << 20;
  test::writeRun(store, b);
  return path;
}

}  // namespace

class TestReportPdf : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void pageSizeNames() {
    QCOMPARE(ui::reportPageSizeFromString("A4").value(), ui::ReportPageSize::A4);
    QCOMPARE(ui::reportPageSizeFromString("letter").value(), ui::ReportPageSize::Letter);
    QVERIFY(!ui::reportPageSizeFromString("a5"));
  }

  void pdfA4AndLetter_data() {
    QTest::addColumn<int>("size");
    QTest::addColumn<double>("widthPt");
    QTest::addColumn<double>("heightPt");
    QTest::newRow("a4") << int(ui::ReportPageSize::A4) << 595.0 << 842.0;
    QTest::newRow("letter") << int(ui::ReportPageSize::Letter) << 612.0 << 792.0;
  }

  void pdfA4AndLetter() {
    QFETCH(int, size);
    QFETCH(double, widthPt);
    QFETCH(double, heightPt);
    QTemporaryDir dir;
    const std::string db = makeDb(dir);
    core::TraceStore store(db, core::Database::Mode::ReadOnly);
    const core::Report rep = core::buildReport(store, {core::RunId{1}, core::RunId{2}});
    QVERIFY(rep.charts.size() >= 3);
    const QString pdf = QString::fromStdString(test::pathIn(dir, "r.pdf"));
    const ui::PdfResult r = ui::writeReportPdf(rep, pdf, static_cast<ui::ReportPageSize>(size));
    QVERIFY(r.pages >= 2);
    QCOMPARE(r.bytes, QFileInfo(pdf).size());
    QFile f(pdf);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray bytes = f.readAll();
    QVERIFY(bytes.startsWith("%PDF-"));
    // Every page's MediaBox is the page size, in points.
    const QRegularExpression box(R"(/MediaBox\s*\[\s*0\s+0\s+([0-9.]+)\s+([0-9.]+)\s*\])");
    int boxes = 0;
    for (auto it = box.globalMatch(QString::fromLatin1(bytes)); it.hasNext();) {
      const auto m = it.next();
      QVERIFY2(std::abs(m.captured(1).toDouble() - widthPt) < 1.0, qPrintable(m.captured(0)));
      QVERIFY2(std::abs(m.captured(2).toDouble() - heightPt) < 1.0, qPrintable(m.captured(0)));
      ++boxes;
    }
    QCOMPARE(boxes, r.pages);
    if (!havePoppler()) QSKIP("poppler-utils (pdfinfo, pdftoppm) not installed: rendering not checked");
    const Proc info = run("pdfinfo", {pdf});
    QCOMPARE(info.code, 0);
    QVERIFY2(QString::fromLatin1(info.out).contains(QRegularExpression(QStringLiteral("Pages:\\s+%1\\n").arg(r.pages))),
             info.out.constData());
    // Every page renders, at the page's aspect ratio, and none is blank; a chart colour is on a page.
    const QString prefix = QString::fromStdString(test::pathIn(dir, "page"));
    QCOMPARE(run("pdftoppm", {"-r", "40", "-png", pdf, prefix}).code, 0);
    bool anyChart = false;
    for (int p = 1; p <= r.pages; ++p) {
      const QString png = prefix + QStringLiteral("-%1.png").arg(p, r.pages >= 10 ? 2 : 1, 10, QLatin1Char('0'));
      QImage img(png);
      QVERIFY2(!img.isNull(), qPrintable(png));
      QVERIFY(std::abs(double(img.width()) / img.height() - widthPt / heightPt) < 0.01);
      const Ink ink = inkOf(img);
      QVERIFY2(ink.share > 0.01, qPrintable(QStringLiteral("page %1 is blank").arg(p)));
      anyChart = anyChart || ink.chartBlue;
    }
    QVERIFY(anyChart);
    // The hostile run name is printed as text.
    if (!QStandardPaths::findExecutable("pdftotext").isEmpty()) {
      const Proc text = run("pdftotext", {pdf, "-"});
      QCOMPARE(text.code, 0);
      QVERIFY(text.out.contains("<script>alert(1)</script>"));
    }
  }

  // Nothing is lost between pages: with tables that span pages (bottlenecks with their detail rows)
  // and charts pushed to the next page, every section, every run's tables and the closing line are in
  // the PDF's text, each chart title exactly once.
  void everySectionIsPrinted() {
    if (QStandardPaths::findExecutable("pdftotext").isEmpty()) QSKIP("pdftotext (poppler-utils) not installed");
    QTemporaryDir dir;
    const std::string db = test::pathIn(dir, "gen.db");
    core::TraceStore store(db);
    for (int job = 0; job < 2; ++job) {
      std::vector<std::string> files;
      for (int r = 0; r < 4; ++r) {
        test::KinetoGenOptions o;
        o.events = 10000;
        o.worldSize = 4;
        o.rank = r;
        o.steps = 3;
        o.seed = static_cast<std::uint64_t>(job * 10 + r + 1);
        files.push_back(test::pathIn(dir, "j" + std::to_string(job) + "r" + std::to_string(r) + ".json"));
        test::generateKinetoTrace(files.back(), o);
      }
      core::KinetoImportOptions io;
      io.runName = job == 0 ? "first" : "second";
      core::importKineto(store, files, io);
    }
    const core::Report rep = core::buildReport(store, {core::RunId{1}, core::RunId{2}});
    // Grouped by target (else size and group): a few groups, the costliest first.
    const auto& bn = rep.runs[0].analysis.bottlenecks;
    QVERIFY(!bn.empty() && bn.size() <= 10);
    for (std::size_t k = 1; k < bn.size(); ++k) QVERIFY(bn[k - 1].totalExposedNs >= bn[k].totalExposedNs);
    const QString pdf = QString::fromStdString(test::pathIn(dir, "all.pdf"));
    const ui::PdfResult r = ui::writeReportPdf(rep, pdf, ui::ReportPageSize::A4);
    QVERIFY(r.pages >= 5);
    QProcess p;
    p.start("pdftotext", {pdf, "-"});
    QVERIFY(p.waitForFinished(30000));
    // The PDF's fonts use ligatures: pdftotext gives "ﬁ" for "fi".
    const QString text = QString::fromUtf8(p.readAllStandardOutput()).replace(QChar(0xFB01), "fi").replace(QChar(0xFB02), "fl");
    for (const char* s :
         {"Recommendation", "Reasons", "Environment", "Comparison", "Charts", "Collective bottlenecks", "Arrivals and stragglers",
          "Memory peaks", "Collectives", "Configuration", "Definitions of every figure"})
      QVERIFY2(text.contains(s), s);
    QCOMPARE(text.count("Costliest exposed collectives"), 2);
    QCOMPARE(text.count("collectives matched across ranks"), 2);
    QCOMPARE(text.count("An imported trace carries no training configuration"), 2);
    for (const auto& c : rep.charts) QCOMPARE(text.count(QString::fromStdString(c.title)), 1);
  }

  // Charts are inline objects of the document (vector in the PDF), one per chart, and a page break
  // never cuts one.
  void documentHasTheCharts() {
    QTemporaryDir dir;
    const std::string db = makeDb(dir);
    core::TraceStore store(db, core::Database::Mode::ReadOnly);
    const core::Report rep = core::buildReport(store, {core::RunId{1}, core::RunId{2}});
    auto doc = ui::buildReportDocument(rep);
    const QString text = doc->toPlainText();
    QCOMPARE(text.count(QChar::ObjectReplacementCharacter), int(rep.charts.size()));
    QVERIFY(!text.contains("SSCHART"));
    QVERIFY(text.contains("Recommendation") && text.contains("Memory peaks") && text.contains("Configuration"));
    QVERIFY(text.contains("fsdp <script>alert(1)</script>"));
    // A name that looks like a placeholder stays text (placeholders carry a random nonce).
    QTemporaryDir dir2;
    const std::string db2 = makeDb(dir2, "SSCHART0X0X");
    core::TraceStore store2(db2, core::Database::Mode::ReadOnly);
    const core::Report rep2 = core::buildReport(store2, {core::RunId{1}, core::RunId{2}});
    auto doc2 = ui::buildReportDocument(rep2);
    QCOMPARE(doc2->toPlainText().count(QChar::ObjectReplacementCharacter), int(rep2.charts.size()));
    QVERIFY(doc2->toPlainText().contains("SSCHART0X0X"));
  }

  void exportDialogWritesEveryFormat() {
    QTemporaryDir dir;
    const std::string db = makeDb(dir);
    ui::ExportReportDialog dlg(QString::fromStdString(db), {core::RunId{2}, core::RunId{1}});
    QSignalSpy built(&dlg, &ui::ExportReportDialog::reportBuilt);
    QVERIFY(!dlg.exportButton()->isEnabled());
    QVERIFY(built.wait(20000));
    QVERIFY(dlg.reportReady());
    QCOMPARE(dlg.report()->runs.at(0).id, core::RunId{2});  // the first selected run is the baseline
    QCOMPARE(dlg.report()->baseline, std::size_t(0));
    QVERIFY(dlg.exportButton()->isEnabled());
    // The preview is the report, with its charts.
    const QString preview = dlg.preview()->document()->toPlainText();
    QVERIFY(preview.contains("Comparison"));
    QCOMPARE(preview.count(QChar::ObjectReplacementCharacter), int(dlg.report()->charts.size()));
    dlg.setTitle("Team <b>report</b>");
    QVERIFY(dlg.preview()->document()->toPlainText().startsWith("Team <b>report</b>"));

    const QString base = QString::fromStdString(test::pathIn(dir, "out"));
    struct Case {
      ui::ExportReportDialog::Format f;
      const char* ext;
      const char* expect;
    };
    for (const Case& c : {Case{ui::ExportReportDialog::Format::Html, "html", "<!DOCTYPE html>"},
                          Case{ui::ExportReportDialog::Format::Markdown, "md", "# Team \\<b\\>report"},
                          Case{ui::ExportReportDialog::Format::Csv, "csv", "key,metric,better"},
                          Case{ui::ExportReportDialog::Format::Pdf, "pdf", "%PDF-"}}) {
      dlg.setFormat(c.f);
      QVERIFY(dlg.outputPath().endsWith(QString(".") + c.ext));
      const QString path = base + "." + c.ext;
      dlg.setOutputPath(path);
      QSignalSpy exported(&dlg, &ui::ExportReportDialog::exported);
      QVERIFY2(dlg.exportNow(), qPrintable(dlg.statusText()));
      QCOMPARE(exported.count(), 1);
      QFile f(path);
      QVERIFY(f.open(QIODevice::ReadOnly));
      const QByteArray head = f.read(64);
      QVERIFY2(head.startsWith(c.expect) ||
                   (c.f == ui::ExportReportDialog::Format::Markdown && head.startsWith("# Team &lt;b&gt;report")),
               head.constData());
    }
    QVERIFY(QFile::exists(base + ".collectives.csv"));
    QVERIFY(QFile::exists(base + ".strategies.csv"));
    // A file that cannot be written: the dialog says why and stays open.
    dlg.setFormat(ui::ExportReportDialog::Format::Html);
    dlg.setOutputPath(QString::fromStdString(test::pathIn(dir, "no/such/dir/r.html")));
    QVERIFY(!dlg.exportNow());
    QVERIFY(dlg.statusText().startsWith("Export failed"));
  }

  void exportDialogReportsAMissingRun() {
    QTemporaryDir dir;
    const std::string db = makeDb(dir);
    ui::ExportReportDialog dlg(QString::fromStdString(db), {core::RunId{1}, core::RunId{99}});
    QSignalSpy failed(&dlg, &ui::ExportReportDialog::buildFailed);
    QVERIFY(failed.wait(20000));
    QVERIFY2(failed.at(0).at(0).toString().contains("no run with id 99"), qPrintable(failed.at(0).at(0).toString()));
    QVERIFY(!dlg.exportButton()->isEnabled());
    QVERIFY(!dlg.exportNow());
  }

  void fileMenuOpensTheDialog() {
    QTemporaryDir dir;
    const std::string db = makeDb(dir);
    ui::MainWindow w;
    w.setInteractive(false);
    QSignalSpy loaded(&w, &ui::MainWindow::runsLoaded);
    QVERIFY(w.openDatabase(QString::fromStdString(db)));
    QVERIFY(loaded.wait(10000));
    QAction* a = w.action("actionExportReport");
    QVERIFY(a);
    w.selectRuns({core::RunId{2}, core::RunId{1}});
    QTRY_VERIFY(a->isEnabled());
    a->trigger();
    auto* dlg = w.findChild<ui::ExportReportDialog*>();
    QVERIFY(dlg);
    QTRY_VERIFY_WITH_TIMEOUT(dlg->reportReady(), 20000);
    QCOMPARE(dlg->report()->runs.size(), std::size_t(2));
    QCOMPARE(dlg->report()->runs[0].id, core::RunId{2});
    dlg->reject();
  }
};

QTEST_MAIN(TestReportPdf)
#include "tst_report_pdf.moc"
