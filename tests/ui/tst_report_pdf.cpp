// PDF reports (ui/report/pdf_writer): A4 and Letter pages that poppler reads and renders, charts
// painted (their colours are on the pages), hostile names printed as text; a 3-run comparison that
// paginates (a few pages, no word or number broken in a table cell, no heading at the bottom of a
// page, no chart cut); the app and the reports draw with one palette; the export dialog builds the
// report off the GUI thread, previews it and writes every format; File ▸ Export Report… opens it on
// the selected runs.
#include <QFile>
#include <QImage>
#include <QAbstractTextDocumentLayout>
#include <QAction>
#include <QBuffer>
#include <QPainter>
#include <QPdfWriter>
#include <QTextBoundaryFinder>
#include <QTextLayout>
#include <QTextTable>
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

#include <cmath>
#include <functional>

#include "core/estimator/comm_model.h"
#include "core/estimator/simulator.h"
#include "core/estimator/simulator_store.h"
#include "core/import/kineto_importer.h"
#include "core/report/palette.h"
#include "core/report/report.h"
#include "core/storage/trace_store.h"
#include "tests/common/test_support.h"
#include "tests/tools/kineto_generator.h"
#include "tests/ui/ui_fixture.h"
#include "ui/charts/chart_style.h"
#include "ui/main/main_window.h"
#include "ui/report/export_dialog.h"
#include "ui/report/pdf_writer.h"

using namespace shardscope;
using core::Id;

// QVERIFY and QCOMPARE for a function that returns a value (-1 when the check fails).
#define QVERIFY_R(cond) QVERIFY2_R(cond, "")
#define QVERIFY2_R(cond, message)                                                                  \
  do {                                                                                             \
    if (!QTest::qVerify(static_cast<bool>(cond), #cond, (message), __FILE__, __LINE__)) return -1; \
  } while (false)
#define QCOMPARE_R(actual, expected)                                                           \
  do {                                                                                         \
    if (!QTest::qCompare(actual, expected, #actual, #expected, __FILE__, __LINE__)) return -1; \
  } while (false)

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

// Three simulated 8-rank runs of Llama 3 8B (ddp, fsdp, zero3; 6 steps): the comparison of issue
// #46, which took 17 A4 pages with words broken in the strategy table ("strat egy", "8, 030,2 61,24 8").
std::string makeSimulatedDb(const QTemporaryDir& dir) {
  namespace est = core::estimator;
  const std::string path = test::pathIn(dir, "sim.db");
  core::TraceStore store(path);
  est::SimulateInput base;
  base.model.model = *est::modelShapePreset("llama3-8b");
  base.model.gpus = 8;
  base.model.gpusPerNode = 8;
  base.intraNode = base.interNode = *est::linkPreset("nvlink-h100");
  base.steps = 6;
  base.keepRanks = 8;
  for (est::Strategy s : {est::Strategy::Ddp, est::Strategy::FsdpFull, est::Strategy::Zero3}) {
    est::SimulateInput si = base;
    si.strategy = s;
    est::writeSimulatedRun(store, est::simulate(si), "sim " + est::strategyName(s) + " llama3-8b x8");
  }
  return path;
}

// Top of the first line of a block, in document coordinates.
double lineTop(QTextDocument& doc, const QTextBlock& b, int line) {
  return doc.documentLayout()->blockBoundingRect(b).top() + b.layout()->lineAt(line).y();
}

// The next thing after root item `it` that holds text: its first line's bottom (a table's first
// row under its header).
double firstContentBottom(QTextDocument& doc, QTextFrame::iterator it) {
  for (; !it.atEnd(); ++it) {
    if (QTextFrame* f = it.currentFrame()) {
      auto* t = qobject_cast<QTextTable*>(f);
      while (t && !t->childFrames().isEmpty()) t = qobject_cast<QTextTable*>(t->childFrames().first());
      if (!t) return doc.documentLayout()->frameBoundingRect(f).top();
      const int row = std::min(t->format().headerRowCount(), t->rows() - 1);
      const QTextBlock b = t->cellAt(row, 0).firstCursorPosition().block();
      return lineTop(doc, b, 0) + b.layout()->lineAt(0).height();
    }
    const QTextBlock b = it.currentBlock();
    if (b.length() > 1 && b.layout()->lineCount() > 0) return lineTop(doc, b, 0) + b.layout()->lineAt(0).height();
  }
  return -1;
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
    QVERIFY(r.pages >= 3);
    QProcess p;
    p.start("pdftotext", {pdf, "-"});
    QVERIFY(p.waitForFinished(30000));
    // The PDF's fonts use ligatures: pdftotext gives "ﬁ" for "fi".
    const QString text = QString::fromUtf8(p.readAllStandardOutput()).replace(QChar(0xFB01), "fi").replace(QChar(0xFB02), "fl");
    for (const char* s :
         {"Recommendation", "Reasons", "Environment", "Comparison", "Charts", "Collective bottlenecks", "Arrivals and stragglers",
          "Memory peaks", "Collectives", "Configuration", "Definitions of every figure"})
      QVERIFY2(text.contains(s), s);
    // A comparison's per-run tables are one table with a line per run (the caption once).
    QCOMPARE(text.count("Costliest exposed collectives"), 1);
    // Both runs are in every per-run table (strategy table, comparison, bottlenecks, arrivals, memory
    // peaks...), counted in the text with its line breaks as spaces: a name wrapped in a narrow cell is
    // still one name, so the count does not depend on the layout (the recommendation names the
    // baseline more often: no equality).
    const QString flat = QString(text).replace(QRegularExpression(QStringLiteral("\\s+")), QStringLiteral(" "));
    QVERIFY2(flat.count("first #1") >= 5, qPrintable(QString::number(flat.count("first #1"))));
    QVERIFY2(flat.count("second #2") >= 5, qPrintable(QString::number(flat.count("second #2"))));
    QCOMPARE(text.count("collectives matched across ranks"), 2);
    QCOMPARE(text.count("An imported trace carries no training configuration"), 2);
    for (const auto& c : rep.charts) QCOMPARE(text.count(QString::fromStdString(c.title)), 1);
  }

  // The checks of threeRunComparisonPaginates on pages of `size`; returns the page count.
  static int checkPagination(const core::Report& rep, QPdfWriter& device, const QSizeF& size) {
    auto doc = ui::layoutReportDocument(rep, &device, size);
    const double pageH = size.height();
    auto pageOf = [&](double y) { return static_cast<int>(std::floor(y / pageH)); };

    // Table cells: lines end at break opportunities and fit their cell.
    int cellLines = 0, tables = 0;
    std::function<void(QTextFrame*)> visit = [&](QTextFrame* frame) {
      for (QTextFrame* child : frame->childFrames()) {
        if (auto* table = qobject_cast<QTextTable*>(child)) {
          ++tables;
          const int end = table->lastPosition();
          for (QTextBlock b = table->firstCursorPosition().block(); b.isValid() && b.position() <= end; b = b.next()) {
            const QTextLayout* tl = b.layout();
            QTextBoundaryFinder lines(QTextBoundaryFinder::Line, b.text());
            for (int i = 0; i < tl->lineCount(); ++i) {
              const QTextLine line = tl->lineAt(i);
              ++cellLines;
              QVERIFY2(line.naturalTextWidth() <= line.width() + 1.0,
                       qPrintable(QStringLiteral("overflows its cell: ") + b.text()));
              if (i + 1 == tl->lineCount()) continue;
              // A line may end after a space (the layout breaks at any) or at a line-break
              // opportunity (after "tokens/s/": Unicode's line-breaking rules say where).
              const int at = line.textStart() + line.textLength();
              lines.setPosition(at);
              QVERIFY2(lines.isAtBoundary() || (at > 0 && b.text().at(at - 1).isSpace()),
                       qPrintable(QStringLiteral("broken inside a word: ") + b.text().left(line.textStart() + line.textLength()) +
                                  QStringLiteral(" | ") + b.text().mid(line.textStart() + line.textLength())));
            }
          }
        }
        visit(child);
      }
    };
    visit(doc->rootFrame());
    if (QTest::currentTestFailed()) return -1;
    QVERIFY_R(tables >= 10);
    QVERIFY_R(cellLines > 300);

    // Headings (and captions, marked to stay with what follows) share a page with the next content.
    int headings = 0;
    for (auto it = doc->rootFrame()->begin(); !it.atEnd(); ++it) {
      const QTextBlock b = it.currentBlock();
      if (it.currentFrame() || !b.isValid() || b.blockFormat().headingLevel() == 0) continue;
      ++headings;
      auto next = it;
      ++next;
      const double after = firstContentBottom(*doc, next);
      if (after < 0) continue;
      QVERIFY2_R(pageOf(lineTop(*doc, b, 0)) == pageOf(after - 1),
                 qPrintable(QStringLiteral("heading left at a page bottom: ") + b.text()));
    }
    QVERIFY_R(headings >= 10);

    // Charts: every one laid out, none across a page break.
    int charts = 0;
    for (QTextBlock b = doc->begin(); b.isValid(); b = b.next())
      for (auto it = b.begin(); !it.atEnd(); ++it) {
        if (!ui::isChartObject(it.fragment().charFormat())) continue;
        ++charts;
        const QTextLayout* tl = b.layout();
        for (int i = 0; i < tl->lineCount(); ++i) {
          const QTextLine line = tl->lineAt(i);
          if (it.fragment().position() - b.position() < line.textStart() ||
              it.fragment().position() - b.position() >= line.textStart() + line.textLength())
            continue;
          const double top = lineTop(*doc, b, i);
          QVERIFY_R(line.height() > pageH * 0.1);
          QCOMPARE_R(pageOf(top), pageOf(top + line.height() - 1));
        }
      }
    QCOMPARE_R(charts, int(rep.charts.size()));

    return doc->pageCount();
  }

  // The comparison of three 8-rank runs fits in six A4 pages, laid out as the PDF prints it: every
  // line of a table cell ends where a line may break (never inside a word or a number such as
  // 8,030,261,248) and fits its cell; no heading or table caption is the last thing on its page; no
  // chart straddles a page break.
  void threeRunComparisonPaginates() {
    QTemporaryDir dir;
    const std::string db = makeSimulatedDb(dir);
    core::TraceStore store(db, core::Database::Mode::ReadOnly);
    core::ReportOptions opt;
    opt.generatedAt = "2026-01-01T00:00:00Z";
    const core::Report rep = core::buildReport(store, {core::RunId{1}, core::RunId{2}, core::RunId{3}}, opt);
    QCOMPARE(rep.runs.size(), std::size_t(3));
    QVERIFY(rep.charts.size() >= 5);
    QBuffer sink;
    QVERIFY(sink.open(QIODevice::WriteOnly));
    QPdfWriter device(&sink);
    const ui::ReportPage page = ui::setUpReportPdf(device, ui::ReportPageSize::A4);
    // A4 as printed, and shorter pages, where other headings fall at page bottoms.
    int a4Pages = 0;
    for (double share : {1.0, 0.93, 0.81, 0.74, 0.62}) {
      const QSizeF size(page.content.width(), page.content.height() * share);
      const int pages = checkPagination(rep, device, size);
      if (QTest::currentTestFailed()) return;
      if (share == 1.0) a4Pages = pages;
    }
    QVERIFY2(a4Pages <= 6, qPrintable(QString::number(a4Pages)));

    // The PDF itself: the same pages, numbers whole in its text.
    const QString pdf = QString::fromStdString(test::pathIn(dir, "three.pdf"));
    const ui::PdfResult r = ui::writeReportPdf(rep, pdf, ui::ReportPageSize::A4);
    QCOMPARE(r.pages, a4Pages);
    if (!QStandardPaths::findExecutable("pdftotext").isEmpty()) {
      const Proc text = run("pdftotext", {"-layout", pdf, "-"});
      QCOMPARE(text.code, 0);
      QVERIFY(text.out.contains("8,030,261,248"));
      QVERIFY(text.out.contains("strategy"));
      QVERIFY(!text.out.contains("strat egy"));
    }
  }

  // One palette: the app's series, bar and delta colours are core's, the reports' too, run by run.
  void appAndReportsShareOnePalette() {
    for (int i = 0; i < 2 * static_cast<int>(core::palette::seriesCount()); ++i) {
      const QColor app = ui::charts::seriesColor(i);
      QCOMPARE(app.rgb() & 0xFFFFFFu, core::palette::series(static_cast<std::size_t>(i)));
      QCOMPARE(QColor(QString::fromStdString(core::chartColor(static_cast<std::size_t>(i)))), app);
    }
    QCOMPARE(QColor(QString::fromStdString(core::chartColor(0))), QColor(0x00, 0x72, 0xB2));  // Okabe-Ito blue first
    QCOMPARE(ui::charts::barColor().rgb() & 0xFFFFFFu, core::palette::kBar);
    QCOMPARE(ui::charts::bestBarColor().rgb() & 0xFFFFFFu, core::palette::kBestBar);
    QCOMPARE(ui::charts::betterColor().rgb() & 0xFFFFFFu, core::palette::kBetter);
    QCOMPARE(ui::charts::worseColor().rgb() & 0xFFFFFFu, core::palette::kWorse);
    QCOMPARE(ui::charts::stepPartColor(core::palette::StepPart::ExposedCommunication).rgb() & 0xFFFFFFu,
             core::palette::stepPart(core::palette::StepPart::ExposedCommunication));
    // The report's charts: a run's line has the colour of its index, the step parts theirs, the
    // throughput bars the app's bar colours.
    QTemporaryDir dir;
    const std::string db = makeDb(dir);
    core::TraceStore store(db, core::Database::Mode::ReadOnly);
    const core::Report rep = core::buildReport(store, {core::RunId{1}, core::RunId{2}});
    for (const auto& c : rep.charts) {
      if (c.id == "overlap-per-step")
        for (std::size_t si = 0; si < c.series.size(); ++si)
          QCOMPARE(QColor::fromRgb(core::chartMarkColor(c, si, std::string::npos)),
                   ui::charts::seriesColor(static_cast<int>(si)));
      if (c.id == "step-breakdown") {
        QCOMPARE(c.title, std::string("Where a step goes (mean of counted steps)"));
        QCOMPARE(c.series.at(2).name, std::string("other device work"));
        QCOMPARE(QColor::fromRgb(core::chartMarkColor(c, 1, 0)),
                 ui::charts::stepPartColor(core::palette::StepPart::ExposedCommunication));
      }
      if (c.id == "tokens-per-second") {
        QVERIFY(c.best.has_value());
        QCOMPARE(QColor::fromRgb(core::chartMarkColor(c, 0, *c.best)), ui::charts::bestBarColor());
        QCOMPARE(QColor::fromRgb(core::chartMarkColor(c, 0, 1 - *c.best)), ui::charts::barColor());
      }
    }
    // Painted into the PDF's pages with those colours.
    QImage img(720, 340, QImage::Format_RGB32);
    img.fill(Qt::white);
    QPainter painter(&img);
    for (const auto& c : rep.charts)
      if (c.id == "tokens-per-second") ui::paintChart(painter, QRectF(0, 0, 720, 340), c);
    painter.end();
    bool best = false, ordinary = false;
    for (int y = 0; y < img.height(); ++y)
      for (int x = 0; x < img.width(); ++x) {
        best = best || img.pixelColor(x, y) == ui::charts::bestBarColor();
        ordinary = ordinary || img.pixelColor(x, y) == ui::charts::barColor();
      }
    QVERIFY(best && ordinary);
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
