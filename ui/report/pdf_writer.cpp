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
#include <QTextTable>

#include <algorithm>
#include <cctype>
#include <functional>
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
constexpr int kChartHalfProperty = QTextFormat::UserProperty + 72;
// Design sizes (user units: 12-unit text) of a chart across the page and of one of a pair.
constexpr double kDesignWidth = 720, kDesignHeight = 320;
constexpr double kCompactWidth = 460, kCompactHeight = 290;
// Headings and table captions stay with what follows them (the Qt-flavour HTML marks captions so).
constexpr int kKeepWithNextState = 1;
// A table's text is never made smaller than this to fit the page, nor than the second to wrap less.
constexpr double kMinTablePointSize = 5.0;
constexpr double kSnugTablePointSize = 6.5;

QString q(const std::string& s) { return QString::fromStdString(s); }

QColor markColor(const core::Chart& c, std::size_t series, std::size_t category) {
  return QColor::fromRgb(core::chartMarkColor(c, series, category));
}

struct Design {
  double width, height;
};
Design designOf(bool compact) { return compact ? Design{kCompactWidth, kCompactHeight} : Design{kDesignWidth, kDesignHeight}; }

// The legend layout of svg_chart.cpp: items flow left to right, 26 + 7 per character (at most 40).
std::vector<std::pair<double, int>> legendLayout(const core::Chart& c, double left, double right, double width) {
  std::vector<std::pair<double, int>> pos;
  double x = left;
  int row = 0;
  for (const auto& s : c.series) {
    const double w = 26 + 7.0 * static_cast<double>(std::min<std::size_t>(s.name.size(), 40));
    if (x + w > width - right && x > left) {
      x = left;
      ++row;
    }
    pos.emplace_back(x, row);
    x += w + 12;
  }
  return pos;
}

int legendRows(const core::Chart& c, double width) {
  const auto pos = legendLayout(c, 64, 16, width);
  return pos.empty() ? 0 : pos.back().second + 1;
}

QString elided(const QString& s, const QFontMetricsF& fm, double width) { return fm.elidedText(s, Qt::ElideRight, width); }

// A category label on at most two lines, broken between words ("sim fsdp llama3-8b x8" / "#2").
QStringList twoLines(const QString& s, const QFontMetricsF& fm, double width) {
  if (fm.horizontalAdvance(s) <= width) return {s};
  const QStringList words = s.split(QLatin1Char(' '), Qt::SkipEmptyParts);
  QString first;
  int used = 0;
  for (; used < words.size(); ++used) {
    const QString next = first.isEmpty() ? words[used] : first + QLatin1Char(' ') + words[used];
    if (!first.isEmpty() && fm.horizontalAdvance(next) > width) break;
    first = next;
  }
  const QString rest = words.mid(used).join(QLatin1Char(' '));
  if (rest.isEmpty()) return {elided(first, fm, width)};
  return {elided(first, fm, width), elided(rest, fm, width)};
}

class ChartObjects : public QObject, public QTextObjectInterface {
  Q_OBJECT
  Q_INTERFACES(QTextObjectInterface)

 public:
  ChartObjects(std::vector<core::Chart> charts, QObject* parent) : QObject(parent), charts_(std::move(charts)) {}

  QSizeF intrinsicSize(QTextDocument* doc, int, const QTextFormat& format) override {
    const int index = format.property(kChartIndexProperty).toInt();
    const bool half = format.property(kChartHalfProperty).toBool();
    const double full = std::max(100.0, doc->textWidth() - 2 * doc->documentMargin() - 4);
    // One of a pair fills its cell (half the width) but for a gap between the two.
    const double w = half ? full / 2 - full * 0.015 - 2 : full;
    if (index < 0 || static_cast<std::size_t>(index) >= charts_.size()) return QSizeF(w, 1);
    double h = w / chartAspect(charts_[static_cast<std::size_t>(index)], half);
    // A chart never takes more than 60 % of a page.
    if (doc->pageSize().height() > 0) h = std::min(h, doc->pageSize().height() * 0.6);
    return QSizeF(w, h);
  }

  void drawObject(QPainter* painter, const QRectF& rect, QTextDocument*, int, const QTextFormat& format) override {
    const int index = format.property(kChartIndexProperty).toInt();
    if (index < 0 || static_cast<std::size_t>(index) >= charts_.size()) return;
    paintChart(*painter, rect, charts_[static_cast<std::size_t>(index)], format.property(kChartHalfProperty).toBool());
  }

 private:
  std::vector<core::Chart> charts_;
};

// Lays the document out again from scratch: a format change relayouts incrementally, and
// QTextDocumentLayout then stops painting after the first page-spanning table (stale check points).
void relayout(QTextDocument& doc) {
  doc.markContentsDirty(0, doc.characterCount());
  (void)doc.pageCount();
}

void forEachTable(QTextFrame* frame, const std::function<void(QTextTable*)>& fn) {
  for (QTextFrame* child : frame->childFrames()) {
    if (auto* t = qobject_cast<QTextTable*>(child)) fn(t);
    forEachTable(child, fn);
  }
}

// Every text fragment of a table's cells, in order.
void forEachCellFragment(QTextTable* table, const std::function<void(const QTextFragment&)>& fn) {
  for (int r = 0; r < table->rows(); ++r)
    for (int c = 0; c < table->columns(); ++c) {
      const QTextTableCell cell = table->cellAt(r, c);
      if (cell.row() != r || cell.column() != c) continue;
      const int end = cell.lastCursorPosition().position();
      for (QTextBlock b = cell.firstCursorPosition().block(); b.isValid() && b.position() <= end; b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it)
          if (it.fragment().isValid()) fn(it.fragment());
    }
}

double pointSizeOf(const QTextCharFormat& f, const QTextDocument& doc) {
  const double pt = f.fontPointSize();
  return pt > 0 ? pt : doc.defaultFont().pointSizeF();
}

// The width of a paragraph's longest line unwrapped (QTextLayout::maximumWidth is that of the
// wrapped lines once laid out in a column).
double naturalWidth(const QTextDocument& doc, const QTextBlock& b) {
  QPaintDevice* device = doc.documentLayout()->paintDevice();
  double widest = 0, line = 0;
  for (auto it = b.begin(); !it.atEnd(); ++it) {
    const QTextFragment f = it.fragment();
    if (!f.isValid()) continue;
    const QFontMetricsF fm(f.charFormat().font().resolve(doc.defaultFont()), device);
    const QStringList parts = f.text().split(QChar::LineSeparator);
    for (qsizetype i = 0; i < parts.size(); ++i) {
      if (i > 0) {
        widest = std::max(widest, line);
        line = 0;
      }
      line += fm.horizontalAdvance(parts[i]);
    }
  }
  return std::max(widest, line);
}

bool tableHoldsChart(QTextTable* table) {
  bool chart = false;
  forEachCellFragment(table, [&](const QTextFragment& f) { chart = chart || f.charFormat().objectType() == kChartObjectType; });
  return chart;
}

// A table's columns measured: the width of each column's longest word and of its longest line
// unwrapped (cells that span columns aside), and the room the page leaves them (device units).
struct ColumnWidths {
  std::vector<double> least, most;
  double sumLeast = 0, sumMost = 0, room = 0;
  // How much of the wish for unwrapped lines the room grants: 1 all of it, 0 none (words only).
  double slack() const {
    if (sumMost <= room) return 1.0;
    if (sumLeast >= room) return 0.0;
    return (room - sumLeast) / (sumMost - sumLeast);
  }
};

ColumnWidths measureColumns(const QTextDocument& doc, QTextTable* table, double width) {
  ColumnWidths m;
  const int columns = table->columns();
  const double scale = doc.documentLayout()->paintDevice() ? doc.documentLayout()->paintDevice()->logicalDpiX() / 96.0 : 1.0;
  const QTextTableFormat tf = table->format();
  const double padding = 2 * tf.cellPadding() * scale + 2 * tf.border() * scale + 1;
  m.least.assign(static_cast<std::size_t>(columns), 0);
  m.most.assign(static_cast<std::size_t>(columns), 0);
  for (int r = 0; r < table->rows(); ++r)
    for (int c = 0; c < columns; ++c) {
      const QTextTableCell cell = table->cellAt(r, c);
      if (cell.row() != r || cell.column() != c || cell.columnSpan() > 1) continue;
      const auto col = static_cast<std::size_t>(c);
      const int end = cell.lastCursorPosition().position();
      for (QTextBlock b = cell.firstCursorPosition().block(); b.isValid() && b.position() <= end; b = b.next()) {
        const QTextLayout* tl = b.layout();
        if (!tl) continue;
        m.least[col] = std::max(m.least[col], tl->minimumWidth() + padding);
        m.most[col] = std::max(m.most[col], naturalWidth(doc, b) + padding);
      }
    }
  for (std::size_t c = 0; c < m.least.size(); ++c) {
    m.most[c] = std::max(m.most[c], m.least[c]);
    m.sumLeast += m.least[c];
    m.sumMost += m.most[c];
  }
  m.room = width - static_cast<double>(columns + 1) * tf.border() * scale;
  return m;
}

// Column widths from the content, as a browser's automatic table layout shares them: every column
// gets the width of its longest word, and what is left of the page goes to the columns that would
// wrap, each taking no more than its text needs on one line (so a column of short numbers does not
// wrap while a long name has room). QTextDocument measures a column's unwrapped width from the
// lines already wrapped in it, and shares by that.
void shareColumns(QTextTable* table, const ColumnWidths& m) {
  if (m.least.size() < 2 || m.sumMost <= 0) return;
  // What is left over the longest words goes out in equal parts, a column taking no more than its
  // text needs on one line (short columns first have all they want, long ones share the rest).
  std::vector<double> share = m.least;
  double left = m.room - m.sumLeast;
  for (int round = 0; round < 64 && left > 0.5; ++round) {
    std::size_t wanting = 0;
    for (std::size_t c = 0; c < share.size(); ++c) wanting += share[c] < m.most[c] - 0.01 ? 1 : 0;
    if (wanting == 0) break;
    const double part = left / static_cast<double>(wanting);
    for (std::size_t c = 0; c < share.size(); ++c) {
      if (share[c] >= m.most[c] - 0.01) continue;
      const double give = std::min(part, m.most[c] - share[c]);
      share[c] += give;
      left -= give;
    }
  }
  double sum = 0;
  for (double w : share) sum += w;
  QVector<QTextLength> constraints;
  for (double w : share) constraints.append(QTextLength(QTextLength::PercentageLength, 100.0 * w / sum));
  QTextTableFormat f = table->format();
  f.setColumnWidthConstraints(constraints);
  table->setFormat(f);
}

// The width a table may take: the page's, or for a table in a cell of a layout table (two halves
// side by side) that cell's share of it.
double availableWidth(QTextTable* table, double pageWidth) {
  auto* parent = qobject_cast<QTextTable*>(table->parentFrame());
  if (!parent) return pageWidth;
  const QTextTableCell cell = parent->cellAt(table->firstPosition());
  const auto constraints = parent->format().columnWidthConstraints();
  if (cell.isValid() && cell.column() < constraints.size() && constraints[cell.column()].type() == QTextLength::PercentageLength)
    return availableWidth(parent, pageWidth) * constraints[cell.column()].rawValue() / 100.0;
  return availableWidth(parent, pageWidth) / std::max(1, parent->columns());
}

// Scales the size of every text of a table's cells by `factor`, never below `floor` points.
void scaleTableText(QTextDocument& doc, QTextTable* table, double factor, double floor) {
  struct Piece {
    int from, length;
    double pt;
  };
  std::vector<Piece> pieces;
  forEachCellFragment(table, [&](const QTextFragment& f) {
    pieces.push_back({f.position(), f.length(), pointSizeOf(f.charFormat(), doc)});
  });
  for (const Piece& p : pieces) {
    QTextCursor cur(&doc);
    cur.setPosition(p.from);
    cur.setPosition(p.from + p.length, QTextCursor::KeepAnchor);
    QTextCharFormat f;
    f.setFontPointSize(std::max(floor, p.pt * factor));
    cur.mergeCharFormat(f);
  }
}

double smallestTextSize(const QTextDocument& doc, QTextTable* table) {
  double smallest = 1e9;
  forEachCellFragment(table, [&](const QTextFragment& f) { smallest = std::min(smallest, pointSizeOf(f.charFormat(), doc)); });
  return smallest;
}

// Text wraps between words only, so a table whose words do not fit side by side would grow wider
// than the page: its text is made smaller (every size in proportion) until it fits, down to
// kMinTablePointSize; a table that fits but only with most of its cells wrapped (little slack) gets
// a size smaller too, down to kSnugTablePointSize, which saves more height than it costs. Then the
// columns are shared out by their content.
void fitTablesToWidth(QTextDocument& doc, double width) {
  relayout(doc);
  for (int pass = 0; pass < 8; ++pass) {
    bool changed = false;
    QTextCursor edit(&doc);
    edit.beginEditBlock();  // one relayout for all the changes
    forEachTable(doc.rootFrame(), [&](QTextTable* table) {
      if (tableHoldsChart(table) || !table->childFrames().isEmpty()) return;  // charts, or a layout of tables
      const double avail = availableWidth(table, width);
      const ColumnWidths m = measureColumns(doc, table, avail);
      const double frameW = doc.documentLayout()->frameBoundingRect(table).width();
      const double smallest = smallestTextSize(doc, table);
      if ((frameW > avail + 0.5 || m.sumLeast > m.room) && smallest > kMinTablePointSize + 1e-6) {
        // Text widths scale with the size; paddings and borders do not, hence a little more.
        const double over = std::max(frameW / avail, m.sumLeast / m.room);
        scaleTableText(doc, table, std::max(kMinTablePointSize / smallest, std::min(0.95, 0.97 / over)), kMinTablePointSize);
        changed = true;
        return;
      }
      if (m.slack() < 0.4 && smallest > kSnugTablePointSize + 1e-6) {
        scaleTableText(doc, table, std::max(kSnugTablePointSize / smallest, 0.92), kSnugTablePointSize);
        changed = true;
        return;
      }
      shareColumns(table, m);
    });
    edit.endEditBlock();
    relayout(doc);
    if (!changed && pass > 0) return;
  }
}

// What the root frame holds, in order: paragraphs and tables.
struct FlowItem {
  QTextBlock block;             // valid for a paragraph
  QTextTable* table = nullptr;  // or a table
  QTextFrame* frame = nullptr;  // or another frame
};

std::vector<FlowItem> flowItems(QTextDocument& doc) {
  std::vector<FlowItem> items;
  for (auto it = doc.rootFrame()->begin(); !it.atEnd(); ++it) {
    if (QTextFrame* f = it.currentFrame()) {
      items.push_back({{}, qobject_cast<QTextTable*>(f), f});
      continue;
    }
    const QTextBlock b = it.currentBlock();
    if (b.isValid() && b.length() > 1) items.push_back({b, nullptr, nullptr});  // empty paragraphs hold nothing
  }
  return items;
}

bool keepsWithNext(const FlowItem& item) {
  return item.block.isValid() && (item.block.blockFormat().headingLevel() > 0 || item.block.userState() == kKeepWithNextState);
}

bool holdsChart(const QTextBlock& b) {
  for (auto it = b.begin(); !it.atEnd(); ++it)
    if (it.fragment().charFormat().objectType() == kChartObjectType) return true;
  return false;
}

// Top and bottom (document coordinates) of an item's first line: a paragraph's first line, a
// table's first row under its header (what a heading must not be parted from).
std::pair<double, double> firstLine(QTextDocument& doc, const FlowItem& item) {
  auto* layout = doc.documentLayout();
  if (item.block.isValid()) {
    const QRectF r = layout->blockBoundingRect(item.block);
    const QTextLayout* tl = item.block.layout();
    if (!tl || tl->lineCount() == 0) return {r.top(), r.bottom()};
    const QTextLine line = tl->lineAt(0);
    return {r.top() + line.y(), r.top() + line.y() + line.height()};
  }
  if (item.table && !item.table->childFrames().isEmpty())  // a layout of tables: its first table's first row
    if (auto* inner = qobject_cast<QTextTable*>(item.table->childFrames().first()))
      return firstLine(doc, FlowItem{{}, inner, inner});
  if (item.table && item.table->rows() > 0) {
    const int row = std::min(item.table->format().headerRowCount(), item.table->rows() - 1);
    double top = 1e300, bottom = -1e300;
    for (int c = 0; c < item.table->columns(); ++c) {
      const QTextTableCell cell = item.table->cellAt(row, c);
      if (!cell.isValid()) continue;
      const QTextBlock b = cell.firstCursorPosition().block();
      const QRectF r = layout->blockBoundingRect(b);
      const QTextLayout* tl = b.layout();
      const double lineH = tl && tl->lineCount() > 0 ? tl->lineAt(0).height() : r.height();
      const double lineY = tl && tl->lineCount() > 0 ? tl->lineAt(0).y() : 0;
      top = std::min(top, r.top() + lineY);
      bottom = std::max(bottom, r.top() + lineY + lineH);
    }
    if (top < bottom) return {top, bottom};
  }
  const QRectF r = layout->frameBoundingRect(item.frame);
  return {r.top(), r.bottom()};
}

long pageOf(double y, double pageH) { return static_cast<long>(std::floor(y / pageH)); }

void breakBefore(QTextDocument& doc, const QTextBlock& b) {
  QTextCursor c(b);
  QTextBlockFormat f = b.blockFormat();
  f.setPageBreakPolicy(QTextFormat::PageBreak_AlwaysBefore);
  c.setBlockFormat(f);
  relayout(doc);
}

// Page breaks QTextDocument does not make by itself: a heading (or a table's caption) is never the
// last thing on its page, it moves to the next page with what follows it; a chart that would
// straddle a page break starts a new page (it moves lines of text, but not a tall inline object).
// Each move only pushes content down, so one pass from the top settles every page.
void paginate(QTextDocument& doc, double pageH) {
  std::size_t from = 0;
  for (int guard = 0; guard < 1000; ++guard) {
    const std::vector<FlowItem> items = flowItems(doc);
    bool moved = false;
    for (std::size_t i = from; i < items.size() && !moved; ++i) {
      const FlowItem& item = items[i];
      if (!item.block.isValid()) continue;
      const bool alreadyBreaks = item.block.blockFormat().pageBreakPolicy() & QTextFormat::PageBreak_AlwaysBefore;
      if (holdsChart(item.block)) {
        const QRectF r = doc.documentLayout()->blockBoundingRect(item.block);
        if (r.height() < pageH && pageOf(r.top(), pageH) != pageOf(r.bottom() - 1, pageH) && !alreadyBreaks) {
          breakBefore(doc, item.block);
          from = i;
          moved = true;
        }
        continue;
      }
      if (!keepsWithNext(item) || i + 1 >= items.size()) continue;
      const auto [top, bottom] = firstLine(doc, item);
      const auto [nextTop, nextBottom] = firstLine(doc, items[i + 1]);
      (void)bottom;
      (void)nextTop;
      if (pageOf(nextBottom - 1, pageH) <= pageOf(top, pageH)) continue;
      // Move the whole run of headings and captions before it (h2, h3, caption: one unit).
      std::size_t k = i;
      while (k > 0 && keepsWithNext(items[k - 1]) && pageOf(firstLine(doc, items[k - 1]).first, pageH) == pageOf(top, pageH)) --k;
      const QTextBlock head = items[k].block;
      const double headTop = firstLine(doc, items[k]).first;
      // Already the first thing on its page (what follows is taller than a page): nothing to gain.
      if (head.blockFormat().pageBreakPolicy() & QTextFormat::PageBreak_AlwaysBefore) continue;
      if (headTop - pageOf(headTop, pageH) * pageH < 1.0) continue;
      breakBefore(doc, head);
      from = k + 1;
      moved = true;
    }
    if (!moved) return;
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

double chartAspect(const core::Chart& chart, bool compact) {
  const Design d = designOf(compact);
  return d.width / (d.height + legendRows(chart, d.width) * 18.0 + 8);
}

void paintChart(QPainter& p, const QRectF& rect, const core::Chart& c, bool compact) {
  const Design d = designOf(compact);
  const double kW = d.width;
  const int rows = legendRows(c, kW);
  const double height = d.height + rows * 18.0 + 8;
  const double left = 64, top = 36, right = 16, bottom = 44 + rows * 18.0 + 8;
  const double plotW = kW - left - right, plotH = height - top - bottom;
  p.save();
  p.setRenderHint(QPainter::Antialiasing, true);
  p.translate(rect.topLeft());
  const double scale = std::min(rect.width() / kW, rect.height() / height);
  p.scale(scale, scale);
  p.setClipRect(QRectF(0, 0, kW, height), Qt::IntersectClip);
  p.fillRect(QRectF(0, 0, kW, height), Qt::white);
  QFont font(QStringLiteral("DejaVu Sans"));
  font.setStyleHint(QFont::SansSerif);
  font.setPixelSize(12);
  QFont titleFont = font;
  titleFont.setPixelSize(14);
  titleFont.setBold(true);
  QFont small = font;
  small.setPixelSize(10);
  const QColor textColor(0x44, 0x44, 0x44);

  p.setPen(QColor(0x22, 0x22, 0x22));
  // A long title is set smaller (down to the axis text's size) before it is cut.
  for (int px = 14; px > 11 && QFontMetricsF(titleFont).horizontalAdvance(q(c.title)) > kW - left - right; --px)
    titleFont.setPixelSize(px - 1);
  p.setFont(titleFont);
  p.drawText(QPointF(left, 20), elided(q(c.title), QFontMetricsF(titleFont), kW - left - right));
  p.setFont(font);
  const QFontMetricsF fm(font);

  const core::ChartRange range = core::chartRange(c);
  const core::AxisTicks yt = core::niceTicks(range.y0, range.y1, 5);
  auto yPix = [&](double v) { return top + plotH * (1.0 - (v - yt.lo) / (yt.hi - yt.lo)); };
  for (double v : yt.values) {
    const double y = yPix(v);
    p.setPen(QPen(QColor(0xe3, 0xe3, 0xe3), 1));
    p.drawLine(QPointF(left, y), QPointF(kW - right, y));
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
  p.drawLine(QPointF(left, axisY), QPointF(kW - right, axisY));
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
      const QColor color = markColor(c, si, std::string::npos);
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
      const QStringList category = twoLines(q(c.categories[k]), fm, slot - 4);
      for (int line = 0; line < category.size(); ++line) centered(cx, axisY + 16 + 14.0 * line, category[line]);
      if (c.kind == core::Chart::Kind::StackedBars) {
        const double bw = std::min(80.0, slot * 0.6);
        double acc = 0;
        for (std::size_t si = 0; si < c.series.size(); ++si) {
          const auto& s = c.series[si];
          if (k >= s.y.size() || !s.y[k] || *s.y[k] <= 0) continue;
          const double yTop = yPix(acc + *s.y[k]), yBot = yPix(acc);
          p.fillRect(QRectF(cx - bw / 2, yTop, bw, std::max(0.0, yBot - yTop)), markColor(c, si, k));
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
          p.fillRect(QRectF(x, std::min(yv, y0), bw * 0.9, std::abs(y0 - yv)), markColor(c, si, k));
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
  const auto legend = legendLayout(c, left, right, kW);
  for (std::size_t si = 0; si < c.series.size(); ++si) {
    const double lx = legend[si].first;
    const double ly = d.height + 12 + legend[si].second * 18.0;
    p.fillRect(QRectF(lx, ly - 10, 18, 10), markColor(c, si, std::string::npos));
    p.setPen(QColor(0x33, 0x33, 0x33));
    p.drawText(QPointF(lx + 24, ly), elided(q(c.series[si].name), fm, 7.0 * 40));
  }
  p.restore();
}

std::unique_ptr<QTextDocument> buildReportDocument(const core::Report& report, QPaintDevice* layoutDevice, bool chartPairs) {
  auto doc = std::make_unique<QTextDocument>();
  doc->setUndoRedoEnabled(false);  // the layout passes change formats: nothing to undo
  if (layoutDevice) doc->documentLayout()->setPaintDevice(layoutDevice);
  QFont base(QStringLiteral("DejaVu Sans"));
  base.setStyleHint(QFont::SansSerif);
  base.setPointSizeF(8);
  doc->setDefaultFont(base);
  // Words are never broken: QTextDocument's default (at word boundaries, else anywhere) breaks a
  // word, or a number like 3,950,848, that does not fit its table column.
  QTextOption option = doc->defaultTextOption();
  option.setWrapMode(QTextOption::WordWrap);
  doc->setDefaultTextOption(option);
  // Placeholders carry a random nonce: no string from a trace can forge one.
  const QString nonce = QString::number(QRandomGenerator::global()->generate64(), 16);
  auto marker = [&](std::size_t i) { return QStringLiteral("SSCHART%1X%2X").arg(nonce).arg(i); };
  core::HtmlOptions opt;
  opt.qtRichText = true;
  opt.chartPairs = chartPairs;
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
    fmt.setProperty(kChartHalfProperty, found.currentTable() != nullptr);  // one of a pair, in its cell
    found.insertText(QString(QChar::ObjectReplacementCharacter), fmt);
  }
  return doc;
}

void registerChartPainter(QTextDocument* document) {
  if (!document) return;
  if (auto* handler = document->findChild<ChartObjects*>(QStringLiteral("shardscopeChartObjects")))
    document->documentLayout()->registerHandler(kChartObjectType, handler);
}

std::unique_ptr<QTextDocument> layoutReportDocument(const core::Report& report, QPaintDevice* device, const QSizeF& page) {
  auto doc = buildReportDocument(report, device, true);
  doc->setDocumentMargin(0);
  doc->setPageSize(page);
  fitTablesToWidth(*doc, page.width());
  paginate(*doc, page.height());
  relayout(*doc);
  return doc;
}

bool isChartObject(const QTextCharFormat& format) { return format.objectType() == kChartObjectType; }

PdfResult writeReportPdf(const core::Report& report, const QString& path, ReportPageSize pageSize) {
  core::refuseToReplaceDatabase(path.toStdString(), "saving the PDF there");
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly))
    throw core::Error(path.toStdString() + ": cannot write: " + file.errorString().toStdString());
  PdfResult result;
  {
    QPdfWriter pdf(&file);
    const ReportPage page = setUpReportPdf(pdf, pageSize);
    pdf.setTitle(q(report.title));
    pdf.setCreator(QStringLiteral("Shardscope ") + q(report.toolVersion));
    auto doc = layoutReportDocument(report, &pdf, page.content);
    const double pageW = page.content.width(), pageH = page.content.height(), footer = page.footer;
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

ReportPage setUpReportPdf(QPdfWriter& pdf, ReportPageSize pageSize) {
  pdf.setResolution(300);
  pdf.setPageSize(QPageSize(pageSize == ReportPageSize::A4 ? QPageSize::A4 : QPageSize::Letter));
  pdf.setPageMargins(QMarginsF(13, 12, 13, 12), QPageLayout::Millimeter);
  ReportPage page;
  page.footer = pdf.resolution() * 0.3;  // 0.3 inch for the page number line
  page.content = QSizeF(pdf.width(), pdf.height() - page.footer);
  return page;
}

}  // namespace shardscope::ui

#include "pdf_writer.moc"
