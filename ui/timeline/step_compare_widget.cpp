#include "ui/timeline/step_compare_widget.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>
#include <set>

#include "ui/charts/chart_style.h"

namespace shardscope::ui {

namespace tl = core::timeline;

namespace {

const QColor kOther(0x9d, 0x9d, 0xa1);
const QColor kCompute(0x4c, 0x78, 0xa8);
const QColor kComm(0xf5, 0x85, 0x18);
const QColor kExposed(0xd6, 0x27, 0x28);

// The counted step numbers a run has, ascending.
std::vector<std::int64_t> countedNumbers(const StepCompareRun& r) {
  std::set<std::int64_t> n;
  if (r.analysis)
    for (const auto& s : r.analysis->steps)
      if (r.counted.counts(s.step)) n.insert(s.step);
  return {n.begin(), n.end()};
}

}  // namespace

StepCompareWidget::StepCompareWidget(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("stepCompare"));
  setMouseTracking(true);
  setAutoFillBackground(true);
  setMinimumHeight(120);
}

void StepCompareWidget::setRuns(std::vector<StepCompareRun> runs) {
  runs_ = std::move(runs);
  ordinal_ = std::clamp(ordinal_, 0, std::max(0, ordinalCount() - 1));
  rebuildRows();
}

void StepCompareWidget::setMode(Mode mode) {
  if (mode == mode_) return;
  mode_ = mode;
  rebuildRows();
}

void StepCompareWidget::setStepOrdinal(int k) {
  k = std::clamp(k, 0, std::max(0, ordinalCount() - 1));
  if (k == ordinal_ && !rows_.empty()) return;
  ordinal_ = k;
  rebuildRows();
}

int StepCompareWidget::ordinalCount() const {
  if (runs_.empty()) return 0;
  std::size_t n = SIZE_MAX;
  for (const auto& r : runs_) n = std::min(n, countedNumbers(r).size());
  return static_cast<int>(n);
}

QString StepCompareWidget::rowLabel(const Row& row) const {
  const QString run = row.run < runs_.size() ? runs_[row.run].label : QString();
  return row.step >= 0 ? tr("%1 · rank %2 · step %3").arg(run).arg(row.rank).arg(row.step)
                       : tr("%1 · rank %2").arg(run).arg(row.rank);
}

void StepCompareWidget::rebuildRows() {
  rows_.clear();
  span_ = 0;
  for (std::size_t ri = 0; ri < runs_.size(); ++ri) {
    const auto& run = runs_[ri];
    if (!run.analysis) continue;
    const auto numbers = countedNumbers(run);
    if (numbers.empty()) continue;
    std::map<int, Row> byRank;
    for (const auto& s : run.analysis->steps) {
      const bool take = mode_ == Mode::OneStep ? (static_cast<std::size_t>(ordinal_) < numbers.size() &&
                                                  s.step == numbers[static_cast<std::size_t>(ordinal_)])
                                               : run.counted.counts(s.step);
      if (!take) continue;
      auto it = byRank.find(s.rank);
      if (it == byRank.end()) {
        Row r;
        r.run = ri;
        r.rank = s.rank;
        r.step = mode_ == Mode::OneStep ? s.step : -1;
        r.startNs = s.startNs;
        r.endNs = s.endNs;
        it = byRank.emplace(s.rank, r).first;
      }
      Row& r = it->second;
      r.startNs = std::min(r.startNs, s.startNs);
      r.endNs = std::max(r.endNs, s.endNs);
      r.computeNs += s.computeNs;
      r.commNs += s.commNs;
      r.exposedNs += s.exposedCommNs;
      r.idleNs += s.idleNs;
    }
    for (auto& [rank, r] : byRank) {
      span_ = std::max(span_, r.endNs - r.startNs);
      rows_.push_back(r);
    }
  }
  rasterWidth_ = -1;  // redo the pixels
  setMinimumHeight(top() + static_cast<int>(std::max<std::size_t>(rows_.size(), 1)) * rowHeight() + 30);
  updateGeometry();
  update();
  Q_EMIT rowsChanged();
}

int StepCompareWidget::labelWidth() const {
  int w = 120;
  const QFontMetrics fm(font());
  for (const auto& r : rows_) w = std::max(w, fm.horizontalAdvance(rowLabel(r)) + 16);
  return std::min(w, width() / 3);
}

void StepCompareWidget::rasterize() {
  const int plotW = std::max(1, width() - labelWidth() - 120);
  if (rasterWidth_ == plotW) return;
  rasterWidth_ = plotW;
  pixels_.assign(rows_.size(), std::vector<std::uint8_t>(static_cast<std::size_t>(plotW), 0));
  exposed_.assign(rows_.size(), std::vector<std::uint8_t>(static_cast<std::size_t>(plotW), 0));
  if (span_ <= 0) return;
  const double nsPerPx = static_cast<double>(span_) / plotW;
  auto px = [&](core::TimeNs rel) { return static_cast<int>(std::floor(static_cast<double>(rel) / nsPerPx)); };
  for (std::size_t k = 0; k < rows_.size(); ++k) {
    const Row& row = rows_[k];
    const auto& run = runs_[row.run];
    if (!run.index) continue;
    const tl::RankInfo* info = nullptr;
    for (const auto& ri : run.index->ranks())
      if (ri.rank == row.rank) info = &ri;
    if (!info) continue;
    auto& out = pixels_[k];
    auto paint = [&](core::TimeNs s, core::TimeNs e, std::uint8_t level, std::vector<std::uint8_t>& into) {
      s = std::max(s, row.startNs);
      e = std::min(e, row.endNs);
      if (e <= s) return;
      const int a = std::clamp(px(s - row.startNs), 0, plotW - 1);
      const int b = std::clamp(std::max(a + 1, px(e - row.startNs) + 1), a + 1, plotW);
      for (int x = a; x < b; ++x) into[static_cast<std::size_t>(x)] = std::max(into[static_cast<std::size_t>(x)], level);
    };
    for (std::uint32_t li : info->lanes) {
      const tl::Lane& lane = run.index->lane(li);
      if (!lane.deviceLane || lane.isCounter()) continue;
      for (std::uint32_t d = 0; d < lane.depthCount(); ++d) {
        const tl::IndexRange r = run.index->window(li, d, row.startNs, row.endNs);
        for (std::uint32_t i = r.begin; i < r.end; ++i) {
          const std::uint8_t bits = lane.bits[i];
          const std::uint8_t level = (bits & tl::EventBits::Comm)      ? 3
                                     : (bits & tl::EventBits::Compute) ? 2
                                     : (bits & tl::EventBits::Work)    ? 1
                                                                       : 0;
          if (level) paint(lane.start[i], lane.end[i], level, out);
        }
      }
    }
    for (const auto& sp : info->exposed) paint(sp.s, sp.e, 1, exposed_[k]);
  }
}

void StepCompareWidget::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  rasterWidth_ = -1;
}

void StepCompareWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  if (rows_.empty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter, runs_.empty() ? tr("Loading…") : tr("None of the runs has counted steps to align."));
    return;
  }
  rasterize();
  const int lw = labelWidth();
  const int plotW = rasterWidth_;
  const int x0 = lw;
  // Axis: ms from the start of each row's window.
  p.setPen(palette().color(QPalette::Text));
  const double spanMs = static_cast<double>(span_) / 1e6;
  const double step = [&] {
    const double raw = spanMs / 6.0;
    const double mag = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-9))));
    for (double m : {1.0, 2.0, 5.0, 10.0})
      if (raw <= m * mag) return m * mag;
    return 10.0 * mag;
  }();
  const QFontMetrics fm(font());
  for (double t = 0; t <= spanMs + 1e-9 && step > 0; t += step) {
    const int x = x0 + static_cast<int>(t / spanMs * plotW);
    p.setPen(QColor(0xdd, 0xdd, 0xdd));
    p.drawLine(x, top() - 4, x, top() + static_cast<int>(rows_.size()) * rowHeight());
    p.setPen(palette().color(QPalette::Text));
    const QString label = QStringLiteral("%1 ms").arg(t, 0, 'g', 4);
    p.drawText(x - fm.horizontalAdvance(label) / 2, top() - 8, label);
  }
  for (std::size_t k = 0; k < rows_.size(); ++k) {
    const Row& row = rows_[k];
    const int y = top() + static_cast<int>(k) * rowHeight();
    if (k > 0 && rows_[k - 1].run != row.run) {
      p.setPen(QColor(0x99, 0x99, 0x99));
      p.drawLine(0, y, width(), y);
    }
    p.setPen(charts::seriesColor(static_cast<int>(row.run)));
    p.drawText(QRect(4, y, lw - 8, rowHeight()), Qt::AlignVCenter | Qt::AlignLeft,
               fm.elidedText(rowLabel(row), Qt::ElideMiddle, lw - 8));
    // The row's window length, then its events pixel by pixel.
    const int wEnd = x0 + static_cast<int>(static_cast<double>(row.endNs - row.startNs) / static_cast<double>(span_) * plotW);
    p.fillRect(QRect(x0, y + 3, std::max(1, wEnd - x0), rowHeight() - 6), QColor(0xf2, 0xf2, 0xf2));
    const auto& px = pixels_[k];
    for (int x = 0; x < plotW;) {
      const std::uint8_t level = px[static_cast<std::size_t>(x)];
      int e = x + 1;
      while (e < plotW && px[static_cast<std::size_t>(e)] == level) ++e;
      if (level) p.fillRect(QRect(x0 + x, y + 3, e - x, rowHeight() - 9), level == 3 ? kComm : level == 2 ? kCompute : kOther);
      x = e;
    }
    const auto& ex = exposed_[k];
    for (int x = 0; x < plotW;) {
      if (!ex[static_cast<std::size_t>(x)]) {
        ++x;
        continue;
      }
      int e = x + 1;
      while (e < plotW && ex[static_cast<std::size_t>(e)]) ++e;
      p.fillRect(QRect(x0 + x, y + rowHeight() - 6, e - x, 3), kExposed);
      x = e;
    }
    p.setPen(palette().color(QPalette::Text));
    p.drawText(QRect(x0 + plotW + 6, y, 114, rowHeight()), Qt::AlignVCenter | Qt::AlignLeft,
               charts::formatMs(static_cast<double>(row.endNs - row.startNs) / 1e6));
  }
  // Legend.
  int lx = x0;
  const int ly = top() + static_cast<int>(rows_.size()) * rowHeight() + 8;
  for (const auto& [color, text] :
       {std::pair{kCompute, tr("compute")}, std::pair{kComm, tr("communication")}, std::pair{kOther, tr("other device work")},
        std::pair{kExposed, tr("exposed communication")}}) {
    p.fillRect(QRect(lx, ly + 3, 12, 10), color);
    p.setPen(palette().color(QPalette::Text));
    p.drawText(lx + 16, ly + 12, text);
    lx += 16 + fm.horizontalAdvance(text) + 18;
  }
}

bool StepCompareWidget::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* he = static_cast<QHelpEvent*>(e);
    const int k = (he->pos().y() - top()) / rowHeight();
    if (he->pos().y() >= top() && k >= 0 && k < static_cast<int>(rows_.size())) {
      const Row& r = rows_[static_cast<std::size_t>(k)];
      const double len = static_cast<double>(r.endNs - r.startNs);
      auto pct = [&](core::TimeNs v) {
        return len > 0 ? QString::number(100.0 * static_cast<double>(v) / len, 'f', 1) : QStringLiteral("–");
      };
      QToolTip::showText(
          he->globalPos(),
          tr("%1\n%2: compute %3 (%4 %), communication %5, exposed %6 (%7 %), idle %8")
              .arg(rowLabel(r), charts::formatMs(len / 1e6), charts::formatMs(static_cast<double>(r.computeNs) / 1e6),
                   pct(r.computeNs), charts::formatMs(static_cast<double>(r.commNs) / 1e6),
                   charts::formatMs(static_cast<double>(r.exposedNs) / 1e6), pct(r.exposedNs),
                   charts::formatMs(static_cast<double>(r.idleNs) / 1e6)),
          this);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(e);
}

}  // namespace shardscope::ui
