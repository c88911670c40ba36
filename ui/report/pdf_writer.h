#pragma once
// The report as PDF through Qt Gui only (no Widgets), for the GUI and for shardscope-cli: the Qt
// rich-text flavour of the HTML writer laid out by QTextDocument on A4 or Letter pages, with the charts
// as inline objects painted by QPainter from the report's chart data, so they are vector graphics in
// the PDF (and crisp in the preview). Needs a QGuiApplication (the offscreen platform is enough).
// Built as the library shardscope_report_qt (ui/CMakeLists.txt).
#include <QRectF>
#include <QSizeF>
#include <QString>

#include <memory>
#include <optional>
#include <string_view>

#include "core/report/report.h"

class QPainter;
class QPaintDevice;
class QPdfWriter;
class QTextCharFormat;
class QTextDocument;

namespace shardscope::ui {

enum class ReportPageSize { A4, Letter };
// "a4" / "letter" (any case); nullopt otherwise.
std::optional<ReportPageSize> reportPageSizeFromString(std::string_view name);

// Paints a chart (line with peak marker, stacked or grouped bars) into `rect`, laid out like the SVG;
// `compact`: one of two charts side by side (a narrower design, so its text stays readable).
void paintChart(QPainter& painter, const QRectF& rect, const core::Chart& chart, bool compact = false);
// Width / height of a chart as paintChart lays it out (the legend may add rows).
double chartAspect(const core::Chart& chart, bool compact = false);

// The report as a QTextDocument (owned by the caller, or by `parent` when given): the rich-text HTML
// with each chart an inline object painted by paintChart at the document's text width. Set
// `layoutDevice` to lay out for a printer/PDF (fonts in its resolution); null for the screen.
// `chartPairs`: two charts to a row (the PDF's layout).
std::unique_ptr<QTextDocument> buildReportDocument(const core::Report& report, QPaintDevice* layoutDevice = nullptr,
                                                   bool chartPairs = false);
// Registers the chart painter on a document built by buildReportDocument again (after a widget
// replaced its layout, e.g. QTextBrowser::setDocument).
void registerChartPainter(QTextDocument* document);

// The report laid out on pages of `page` (device units of `device`) as the PDF prints it: text wraps
// between words only (a table whose words do not fit gets a smaller font, never a broken word),
// headings and table captions never end a page (they move to the next one with what follows), no
// chart straddles a page break, charts two to a row.
std::unique_ptr<QTextDocument> layoutReportDocument(const core::Report& report, QPaintDevice* device, const QSizeF& page);
// Whether a character format is one of the document's charts.
bool isChartObject(const QTextCharFormat& format);

// The PDF's page set-up: A4 or Letter at 300 dpi, 13 mm margins left and right, 12 mm top and bottom; `content` is the text area
// above the `footer` band (page number line), in device units.
struct ReportPage {
  QSizeF content;
  double footer = 0;
};
ReportPage setUpReportPdf(QPdfWriter& pdf, ReportPageSize pageSize);

struct PdfResult {
  int pages = 0;
  qint64 bytes = 0;
};
// Writes the report to `path` (atomically: nothing is left behind on failure). Throws core::Error
// naming the file when it cannot be written.
PdfResult writeReportPdf(const core::Report& report, const QString& path, ReportPageSize pageSize);

}  // namespace shardscope::ui
