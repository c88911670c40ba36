#include "ui/report/pdf_writer.h"

#include <QAbstractTextDocumentLayout>
#include <QColor>
#include <QFileInfo>
#include <QFont>
#include <QFontMetricsF>
#include <QPageLayout>
#include <QPageSize>
#include <QPainter>
#include <QPainterPath>
#include <QPdfWriter>
#include <QPolygonF>
#include <QRandomGenerator>
#include <QSaveFile>
#include <QTextBlock>
#include <QTextCharFormat>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextObjectInterface>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "core/report/html_writer.h"
#include "core/report/svg_chart.h"
#include "core/storage/open_guard.h"
#include "core/util/error.h"

namespace shardscope::ui {
namespace {

constexpr int kChartObjectType = QTextFormat::UserObject + 71;
constexpr int kChartIndexProperty = QTextFormat::UserProperty + 71;
constexpr double kDesignWidth = 720, kDesignHeight = 320;

QString q(const std::string& s) { return QString::fromStdString(s); }

// The legend layout of svg_chart.cpp: items flow left to right, 26 + 7 per character (at most 40).
std::vector<std::pair<double, int>> legendLayout(const core::Chart& c, double left, double right) {
  std::vector<std::pair<double, int>> pos;
  double x = left;
  int row = 0;
  for (const auto& s : c.series) {
    const double w = 26 + 7.0 * static_cast<double>(std::min<std::size_t>(s.name.size(), 40));
    if (x + w > kDesignWidth - right && x > left) {
      x = left;
      ++row;
    }
    pos.emplace_back(x, row);
    x += w + 12;
  }
  return pos;
}

int legendRows(const core::Chart& c) {
  const auto pos = legendLayout(c, 64, 16);
  return pos.empty() ? 0 : pos.back().second + 1;
}

QString elided(const QString& s, const QFontMetricsF& fm, double width) { return fm.elidedText(s, Qt::ElideRight, width); }

class ChartObjects : public QObject, public QTextObjectInterface {
  Q_OBJECT
  Q_INTERFACES(QTextObjectInterface)

 public:
  ChartObjects(std::vector<core::Chart> charts, QObject* parent) : QObject(parent), charts_(std::move(charts)) {}

  QSizeF intrinsicSize(QTextDocument* doc, int, const QTextFormat& format) override {
    const int index = format.property(kChartIndexProperty).toInt();
    const double w = std::max(100.0, doc->textWidth() - 2 * doc->documentMargin() - 4);
    if (index < 0 || static_cast<std::size_t>(index) >= charts_.size()) return QSizeF(w, 1);
    double h = w / chartAspect(charts_[static_cast<std::size_t>(index)]);
    // A chart never takes more than 60 % of a page.
    if (doc->pageSize().height() > 0) h = std::min(h, doc->pageSize().height() * 0.6);
    return QSizeF(w, h);
  }

  void drawObject(QPainter* painter, const QRectF& rect, QTextDocument*, int, const QTextFormat& format) override {
    const int index = format.property(kChartIndexProperty).toInt();
    if (index < 0 || static_cast<std::size_t>(index) >= charts_.size()) return;
    paintChart(*painter, rect, charts_[static_cast<std::size_t>(index)]);
  }

 private:
  std::vector<core::Chart> charts_;
};

// QTextDocument moves a line that does not fit to the next page only for text; a tall inline object
// can straddle the page break. Charts that do are pushed to the next page (the layout is then redone,
// which may move later charts: repeated until none straddles).
void keepChartsOnOnePage(QTextDocument& doc, double pageH) {
  std::vector<QTextBlock> charts;
  for (QTextBlock b = doc.begin(); b.isValid(); b = b.next())
    for (auto it = b.begin(); !it.atEnd(); ++it)
      if (it.fragment().charFormat().objectType() == kChartObjectType) {
        charts.push_back(b);
        break;
      }
  for (std::size_t pass = 0; pass <= charts.size(); ++pass) {
    bool moved = false;
    for (const QTextBlock& b : charts) {
      const QRectF r = doc.documentLayout()->blockBoundingRect(b);
      if (r.height() >= pageH) continue;
      const auto first = static_cast<long>(std::floor(r.top() / pageH));
      const auto last = static_cast<long>(std::floor((r.bottom() - 1) / pageH));
      if (first == last || b.blockFormat().pageBreakPolicy() & QTextFormat::PageBreak_AlwaysBefore) continue;
      QTextCursor c(b);
      QTextBlockFormat f = b.blockFormat();
      f.setPageBreakPolicy(QTextFormat::PageBreak_AlwaysBefore);
      c.setBlockFormat(f);
      // A format change relayouts incrementally, and QTextDocumentLayout then stops painting after
      // the first page-spanning table (stale check points): lay the whole document out again.
      doc.markContentsDirty(0, doc.characterCount());
      (void)doc.pageCount();
      moved = true;
      break;  // the layout below this block changed
    }
    if (!moved) break;
  }
}

}  // namespace

std::optional<ReportPageSize> reportPageSizeFromString(std::string_view name) {
  std::string s(name);
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (s == "a4") return ReportPageSize::A4;
  if (s == "letter") return ReportPageSize::Letter;
  return std::nullopt;
}

double chartAspect(const core::Chart& chart) { return kDesignWidth / (kDesignHeight + legendRows(chart) * 18.0 + 8); }

void paintChart(QPainter& p, const QRectF& rect, const core::Chart& c) {
  const int rows = legendRows(c);
  const double height = kDesignHeight + rows * 18.0 + 8;
  const double left = 64, top = 36, right = 16, bottom = 44 + rows * 18.0 + 8;
  const double plotW = kDesignWidth - left - right, plotH = height - top - bottom;
  p.save();
  p.setRenderHint(QPainter::Antialiasing, true);
  p.translate(rect.topLeft());
  const double scale = std::min(rect.width() / kDesignWidth, rect.height() / height);
  p.scale(scale, scale);
  p.setClipRect(QRectF(0, 0, kDesignWidth, height), Qt::IntersectClip);
  p.fillRect(QRectF(0, 0, kDesignWidth, height), Qt::white);
  QFont font(QStringLiteral("DejaVu Sans"));
  font.setStyleHint(QFont::SansSerif);
  font.setPixelSize(12);
  QFont titleFont = font;
  titleFont.setPixelSize(14);
  titleFont.setBold(true);
  QFont small = font;
  small.setPixelSize(10);
  const QColor textColor(0x44, 0x44, 0x44);

  p.setFont(titleFont);
  p.setPen(QColor(0x22, 0x22, 0x22));
  p.drawText(QPointF(left, 20), elided(q(c.title), QFontMetricsF(titleFont), kDesignWidth - left - right));
  p.setFont(font);
  const QFontMetricsF fm(font);

  const core::ChartRange range = core::chartRange(c);
  const core::AxisTicks yt = core::niceTicks(range.y0, range.y1, 5);
  auto yPix = [&](double v) { return top + plotH * (1.0 - (v - yt.lo) / (yt.hi - yt.lo)); };
  for (double v : yt.values) {
    const double y = yPix(v);
    p.setPen(QPen(QColor(0xe3, 0xe3, 0xe3), 1));
    p.drawLine(QPointF(left, y), QPointF(kDesignWidth - right, y));
    p.setPen(textColor);
    const QString label = q(core::tickLabel(v));
    p.drawText(QPointF(left - 6 - fm.horizontalAdvance(label), y + 4), label);
  }
  if (!c.yLabel.empty()) {
    p.save();
    p.translate(14, top + plotH / 2);
    p.rotate(-90);
    const QString label = elided(q(c.yLabel), fm, plotH);
    p.setPen(textColor);
    p.drawText(QPointF(-fm.horizontalAdvance(label) / 2, 0), label);
    p.restore();
  }
  const double axisY = top + plotH;
  p.setPen(QPen(QColor(0x88, 0x88, 0x88), 1));
  p.drawLine(QPointF(left, axisY), QPointF(kDesignWidth - right, axisY));
  auto centered = [&](double x, double y, const QString& s) { p.drawText(QPointF(x - fm.horizontalAdvance(s) / 2, y), s); };

  if (c.kind == core::Chart::Kind::Line) {
    const core::AxisTicks xt = core::niceTicks(range.x0, range.x1, 6);
    const double x0 = range.x0, x1 = range.x1;
    auto xPix = [&](double v) { return left + plotW * (x1 > x0 ? (v - x0) / (x1 - x0) : 0.5); };
    p.setPen(textColor);
    for (double v : xt.values) {
      if (v < x0 - 1e-9 * (x1 - x0) || v > x1 + 1e-9 * (x1 - x0)) continue;
      centered(xPix(v), axisY + 16, q(core::tickLabel(v)));
    }
    for (std::size_t si = 0; si < c.series.size(); ++si) {
      const auto& s = c.series[si];
      const QColor color(core::chartColor(si));
      QPolygonF line;
      auto flush = [&] {
        if (line.size() > 1) {
          p.setPen(QPen(color, 1.5));
          p.drawPolyline(line);
        }
        line.clear();
      };
      const std::size_t n = std::min(s.x.size(), s.y.size());
      for (std::size_t i = 0; i < n; ++i) {
        if (!s.y[i]) {
          flush();
          continue;
        }
        const QPointF pt(xPix(s.x[i]), yPix(*s.y[i]));
        line << pt;
        if (n <= 40) {
          p.setPen(Qt::NoPen);
          p.setBrush(color);
          p.drawEllipse(pt, 2.5, 2.5);
          p.setBrush(Qt::NoBrush);
        }
      }
      flush();
    }
    if (c.marker) {
      const QPointF m(xPix(c.marker->x), yPix(c.marker->y));
      const QColor red(0xD0, 0, 0);
      p.setPen(QPen(red, 2));
      p.setBrush(Qt::NoBrush);
      p.drawEllipse(m, 5, 5);
      const QString label = q(c.marker->label);
      const bool toRight = m.x() < left + plotW * 0.6;
      const double ty = std::max(top + 10, m.y() - 8);
      p.drawText(QPointF(toRight ? m.x() + 8 : m.x() - 8 - fm.horizontalAdvance(label), ty), label);
    }
  } else {
    const std::size_t groups = c.categories.size();
    const double slot = groups ? plotW / static_cast<double>(groups) : plotW;
    for (std::size_t k = 0; k < groups; ++k) {
      const double cx = left + slot * (static_cast<double>(k) + 0.5);
      p.setPen(QColor(0x33, 0x33, 0x33));
      centered(cx, axisY + 16, elided(q(c.categories[k]), fm, slot - 4));
      if (c.kind == core::Chart::Kind::StackedBars) {
        const double bw = std::min(80.0, slot * 0.6);
        double acc = 0;
        for (std::size_t si = 0; si < c.series.size(); ++si) {
          const auto& s = c.series[si];
          if (k >= s.y.size() || !s.y[k] || *s.y[k] <= 0) continue;
          const double yTop = yPix(acc + *s.y[k]), yBot = yPix(acc);
          p.fillRect(QRectF(cx - bw / 2, yTop, bw, std::max(0.0, yBot - yTop)), QColor(core::chartColor(si)));
          acc += *s.y[k];
        }
        p.setPen(QColor(0x22, 0x22, 0x22));
        centered(cx, yPix(acc) - 4, q(core::tickLabel(acc)));
      } else {
        const std::size_t n = std::max<std::size_t>(1, c.series.size());
        const double bw = std::min(48.0, slot * 0.7 / static_cast<double>(n));
        p.setFont(small);
        const QFontMetricsF sfm(small);
        for (std::size_t si = 0; si < c.series.size(); ++si) {
          const auto& s = c.series[si];
          if (k >= s.y.size() || !s.y[k]) continue;
          const double x = cx - bw * static_cast<double>(n) / 2 + bw * static_cast<double>(si);
          const double yv = yPix(*s.y[k]), y0 = yPix(std::max(0.0, yt.lo));
          p.fillRect(QRectF(x, std::min(yv, y0), bw * 0.9, std::abs(y0 - yv)), QColor(core::chartColor(si)));
          p.setPen(QColor(0x22, 0x22, 0x22));
          const QString label = q(core::tickLabel(*s.y[k]));
          p.drawText(QPointF(x + bw * 0.45 - sfm.horizontalAdvance(label) / 2, std::min(yv, y0) - 4), label);
        }
        p.setFont(font);
      }
    }
  }
  p.setPen(textColor);
  if (!c.xLabel.empty()) centered(left + plotW / 2, axisY + 34, q(c.xLabel));
  const auto legend = legendLayout(c, left, right);
  for (std::size_t si = 0; si < c.series.size(); ++si) {
    const double lx = legend[si].first;
    const double ly = kDesignHeight + 12 + legend[si].second * 18.0;
    p.fillRect(QRectF(lx, ly - 10, 18, 10), QColor(core::chartColor(si)));
    p.setPen(QColor(0x33, 0x33, 0x33));
    p.drawText(QPointF(lx + 24, ly), elided(q(c.series[si].name), fm, 7.0 * 40));
  }
  p.restore();
}

std::unique_ptr<QTextDocument> buildReportDocument(const core::Report& report, QPaintDevice* layoutDevice) {
  auto doc = std::make_unique<QTextDocument>();
  if (layoutDevice) doc->documentLayout()->setPaintDevice(layoutDevice);
  QFont base(QStringLiteral("DejaVu Sans"));
  base.setStyleHint(QFont::SansSerif);
  base.setPointSizeF(9);
  doc->setDefaultFont(base);
  // Placeholders carry a random nonce: no string from a trace can forge one.
  const QString nonce = QString::number(QRandomGenerator::global()->generate64(), 16);
  auto marker = [&](std::size_t i) { return QStringLiteral("SSCHART%1X%2X").arg(nonce).arg(i); };
  core::HtmlOptions opt;
  opt.qtRichText = true;
  opt.chartPlaceholder = [&](std::size_t i) { return "<p align=\"center\">" + marker(i).toStdString() + "</p>"; };
  doc->setHtml(q(core::writeHtml(report, opt)));
  doc->setMetaInformation(QTextDocument::DocumentTitle, q(report.title));
  auto* handler = new ChartObjects(report.charts, doc.get());
  handler->setObjectName(QStringLiteral("shardscopeChartObjects"));
  doc->documentLayout()->registerHandler(kChartObjectType, handler);
  for (std::size_t i = 0; i < report.charts.size(); ++i) {
    QTextCursor found = doc->find(marker(i), 0, QTextDocument::FindCaseSensitively);
    if (found.isNull()) continue;
    QTextCharFormat fmt;
    fmt.setObjectType(kChartObjectType);
    fmt.setProperty(kChartIndexProperty, static_cast<int>(i));
    found.insertText(QString(QChar::ObjectReplacementCharacter), fmt);
  }
  return doc;
}

void registerChartPainter(QTextDocument* document) {
  if (!document) return;
  if (auto* handler = document->findChild<ChartObjects*>(QStringLiteral("shardscopeChartObjects")))
    document->documentLayout()->registerHandler(kChartObjectType, handler);
}

PdfResult writeReportPdf(const core::Report& report, const QString& path, ReportPageSize pageSize) {
  core::refuseToReplaceDatabase(path.toStdString(), "saving the PDF there");
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly))
    throw core::Error(path.toStdString() + ": cannot write: " + file.errorString().toStdString());
  PdfResult result;
  {
    QPdfWriter pdf(&file);
    pdf.setResolution(300);
    pdf.setPageSize(QPageSize(pageSize == ReportPageSize::A4 ? QPageSize::A4 : QPageSize::Letter));
    pdf.setPageMargins(QMarginsF(15, 15, 15, 15), QPageLayout::Millimeter);
    pdf.setTitle(q(report.title));
    pdf.setCreator(QStringLiteral("Shardscope ") + q(report.toolVersion));
    const double pageW = pdf.width(), fullH = pdf.height();
    const double footer = pdf.resolution() * 0.3;  // 0.3 inch for the page number line
    const double pageH = fullH - footer;
    auto doc = buildReportDocument(report, &pdf);
    doc->setDocumentMargin(0);
    doc->setPageSize(QSizeF(pageW, pageH));
    keepChartsOnOnePage(*doc, pageH);
    QPainter painter;
    if (!painter.begin(&pdf)) throw core::Error(path.toStdString() + ": cannot start the PDF");
    const int pages = std::max(1, doc->pageCount());
    QFont footFont(QStringLiteral("DejaVu Sans"));
    footFont.setPointSizeF(7.5);
    for (int i = 0; i < pages; ++i) {
      if (i > 0) pdf.newPage();
      painter.save();
      painter.setClipRect(QRectF(0, 0, pageW, pageH));
      painter.translate(0, -i * pageH);
      QAbstractTextDocumentLayout::PaintContext ctx;
      ctx.clip = QRectF(0, i * pageH, pageW, pageH);
      ctx.palette.setColor(QPalette::Text, Qt::black);
      doc->documentLayout()->draw(&painter, ctx);
      painter.restore();
      painter.setFont(footFont);
      painter.setPen(QColor(0x66, 0x66, 0x66));
      const QRectF foot(0, pageH + footer * 0.25, pageW, footer * 0.75);
      painter.drawText(foot, Qt::AlignLeft | Qt::AlignVCenter,
                       QFontMetricsF(footFont, &pdf).elidedText(q(report.title), Qt::ElideRight, pageW * 0.7));
      painter.drawText(foot, Qt::AlignRight | Qt::AlignVCenter, QStringLiteral("%1 / %2").arg(i + 1).arg(pages));
    }
    painter.end();
    result.pages = pages;
  }
  if (!file.commit()) throw core::Error(path.toStdString() + ": cannot write: " + file.errorString().toStdString());
  result.bytes = QFileInfo(path).size();
  return result;
}

}  // namespace shardscope::ui

#include "pdf_writer.moc"
