#include "ui/timeline/timeline_widget.h"

#include <QApplication>
#include <QContextMenuEvent>
#include <QDateTime>
#include <QElapsedTimer>
#include <QFontMetrics>
#include <QKeyEvent>
#include <QMenu>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QPointer>
#include <QThreadPool>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <map>
#include <cmath>

#include "core/util/units.h"
#include "ui/charts/chart_style.h"

namespace shardscope::ui {

namespace tl = core::timeline;
using core::Category;
using core::CollectiveOp;
using core::TimeNs;

namespace {

const QColor kBackground = timeline_palette::background();
const QColor kLabelBackground = timeline_palette::labelBackground();
const QColor kHeaderBackground = timeline_palette::headerBackground();
const QColor kExposed = timeline_palette::exposed();
const QColor kSelection = timeline_palette::selection();
const QColor kRange = timeline_palette::range();
const QColor kGrid = timeline_palette::grid();
const QColor kStepLine = timeline_palette::stepLine();

QString formatDuration(double ns) { return QString::fromStdString(core::formatDurationNs(ns)); }

// Tick label of an axis whose ticks are `step` ns apart: no more decimals than the step needs.
QString formatTick(double ns, double step) {
  auto fmt = [&](double unit, const char* suffix) {
    int decimals = 0;
    for (double s = step / unit; s < 1 - 1e-9 && decimals < 6; s *= 10) ++decimals;
    return QString::number(ns / unit, 'f', decimals) + QString::fromUtf8(suffix);
  };
  const double a = std::max(std::abs(ns), step);
  if (a < 1e3) return fmt(1, " ns");
  if (a < 1e6) return fmt(1e3, " µs");
  if (a < 1e9) return fmt(1e6, " ms");
  return fmt(1e9, " s");
}

double niceStep(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-9))));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

QString laneTitle(const tl::Lane& l) { return QString::fromStdString(l.name); }

}  // namespace

TimelineWidget::TimelineWidget(QWidget* parent) : QWidget(parent), alive_(std::make_shared<std::atomic<bool>>(true)) {
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(true);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setMinimumSize(400, 160);
}

TimelineWidget::~TimelineWidget() { alive_->store(false); }

void TimelineWidget::setIndex(std::shared_ptr<const tl::TimelineIndex> index) {
  index_ = std::move(index);
  list_.reset();
  selected_.reset();
  range_.reset();
  matches_.clear();
  matchText_.clear();
  searchPending_.reset();
  ++searchGeneration_;
  modes_.clear();
  compact_.clear();
  flow_.reset();
  autoLayout_ = true;
  collapsedHeight_ = kRankHeaderHeight;
  hidden_.clear();
  folded_.clear();
  groupOpen_.clear();
  laneOrder_.clear();
  history_.clear();
  historyPos_ = 0;
  scroll_ = 0;
  if (index_)
    for (const auto& r : index_->ranks())
      for (std::uint32_t l : r.lanes) laneOrder_.push_back(l);
  // Sparse GPU streams fold: on a device with at least 4 streams, a stream with fewer than 2 % of
  // its busiest stream's events (and fewer than 256) is a per-operation stream, not a lane to read.
  if (index_)
    for (const auto& r : index_->ranks()) {
      std::map<int, std::vector<std::uint32_t>> byDevice;
      for (std::uint32_t l : r.lanes) {
        const tl::Lane& lane = index_->lane(l);
        if (lane.kind == tl::LaneKind::GpuStream) byDevice[lane.device.value_or(0)].push_back(l);
      }
      for (const auto& [dev, lanes] : byDevice) {
        if (lanes.size() < 4) continue;
        std::size_t busiest = 0;
        for (std::uint32_t l : lanes) busiest = std::max(busiest, index_->lane(l).start.size());
        for (std::uint32_t l : lanes) {
          const std::size_t n = index_->lane(l).start.size();
          if (n < 256 && n * 50 < busiest) folded_.insert(l);
        }
      }
    }
  // The compact layout's lanes: the device lane computing the most, the lane communicating the most.
  if (index_) {
    modes_.assign(index_->ranks().size(), RankMode::Expanded);
    for (const auto& r : index_->ranks()) {
      std::optional<std::uint32_t> compute, comm;
      for (std::uint32_t l : r.lanes) {
        const tl::Lane& lane = index_->lane(l);
        if (lane.isCounter() || !lane.loaded) continue;
        if (lane.deviceLane && lane.computeNs > 0 && (!compute || lane.computeNs > index_->lane(*compute).computeNs)) compute = l;
      }
      for (std::uint32_t l : r.lanes) {
        const tl::Lane& lane = index_->lane(l);
        if (lane.isCounter() || !lane.loaded || lane.commNs <= 0 || (compute && l == *compute)) continue;
        // A lane made for communication (a process group's, a comm thread) before a stream that only carries it.
        const bool commLane = lane.kind == tl::LaneKind::CommGroup || lane.kind == tl::LaneKind::Comm;
        if (!comm) {
          comm = l;
          continue;
        }
        const tl::Lane& best = index_->lane(*comm);
        const bool bestCommLane = best.kind == tl::LaneKind::CommGroup || best.kind == tl::LaneKind::Comm;
        if (std::make_pair(commLane, lane.commNs) > std::make_pair(bestCommLane, best.commNs)) comm = l;
      }
      // No lane of its own for the communication: the compute lane runs it too (one lane shows both).
      std::vector<std::uint32_t> lanes;
      for (std::uint32_t l : r.lanes)
        if ((compute && l == *compute) || (comm && l == *comm)) lanes.push_back(l);
      if (lanes.empty())  // no device work recorded: the rank's first lane with events
        for (std::uint32_t l : r.lanes)
          if (!index_->lane(l).isCounter() && index_->lane(l).eventCount() > 0) {
            lanes.push_back(l);
            break;
          }
      compact_.push_back(std::move(lanes));
    }
  }
  applyAutoLayout();
  fitSteps();
}

void TimelineWidget::applyAutoLayout() {
  if (!index_) return;
  const std::size_t ranks = index_->ranks().size();
  const int avail = std::max(1, height() - kAxisHeight);
  std::fill(modes_.begin(), modes_.end(), RankMode::Expanded);
  collapsedHeight_ = kRankHeaderHeight;
  relayout();
  if (ranks < static_cast<std::size_t>(kAutoCompactRanks) || contentHeight() <= avail) return;
  std::fill(modes_.begin(), modes_.end(), RankMode::Compact);
  // Compact with up to 3 depth rows per lane, else 2, else 1 (the outermost events), before
  // falling back to summary strips only.
  for (int depth = kCompactDepth; depth >= 1; --depth) {
    compactDepth_ = depth;
    relayout();
    if (contentHeight() <= avail) return;
  }
  compactDepth_ = kCompactDepth;
  std::fill(modes_.begin(), modes_.end(), RankMode::Collapsed);
  collapsedHeight_ = std::clamp(avail / static_cast<int>(ranks), kMinSummaryHeight, kRankHeaderHeight);
  relayout();
}

void TimelineWidget::userLayout() { autoLayout_ = false; }

TimelineWidget::RankMode TimelineWidget::rankMode(int rankIndex) const {
  if (rankIndex < 0 || static_cast<std::size_t>(rankIndex) >= modes_.size()) return RankMode::Expanded;
  return modes_[static_cast<std::size_t>(rankIndex)];
}

std::vector<std::uint32_t> TimelineWidget::compactLanes(int rankIndex) const {
  if (rankIndex < 0 || static_cast<std::size_t>(rankIndex) >= compact_.size()) return {};
  return compact_[static_cast<std::size_t>(rankIndex)];
}

const TimelineWidget::Row* TimelineWidget::headerRow(int rankIndex) const {
  for (const Row& r : rows_)
    if (r.kind == Row::Kind::RankHeader && r.rankIndex == rankIndex) return &r;
  return nullptr;
}

std::optional<int> TimelineWidget::rankY(int rankIndex) const {
  const Row* r = headerRow(rankIndex);
  if (!r) return std::nullopt;
  const int y = kAxisHeight + r->y - scroll_;
  if (y + r->height <= kAxisHeight || y >= height()) return std::nullopt;
  return y;
}

int TimelineWidget::rankHeaderHeight(int rankIndex) const {
  const Row* r = headerRow(rankIndex);
  return r ? r->height : 0;
}

void TimelineWidget::relayout() {
  rows_.clear();
  if (!index_) return;
  int y = 0;
  for (std::size_t ri = 0; ri < index_->ranks().size(); ++ri) {
    Row h;
    h.kind = Row::Kind::RankHeader;
    h.rankIndex = static_cast<int>(ri);
    h.y = y;
    const RankMode mode = rankMode(static_cast<int>(ri));
    h.height = mode == RankMode::Collapsed ? collapsedHeight_ : kRankHeaderHeight;
    rows_.push_back(h);
    y += h.height;
    if (mode == RankMode::Collapsed) continue;
    std::map<int, std::vector<std::uint32_t>> foldedHere;  // device -> its folded lanes, in order
    auto laneRow = [&](std::uint32_t l, int maxDepth = kMaxDepth) {
      const tl::Lane& lane = index_->lane(l);
      Row r;
      r.rankIndex = static_cast<int>(ri);
      r.lane = l;
      r.y = y;
      if (lane.isCounter()) {
        r.depthRows = 1;
        r.height = kCounterHeight;
      } else {
        r.depthRows = std::clamp<std::uint32_t>(lane.depthCount(), 1, static_cast<std::uint32_t>(maxDepth));
        r.height = static_cast<int>(r.depthRows) * kRowHeight + 2;
      }
      rows_.push_back(r);
      y += r.height;
    };
    if (mode == RankMode::Compact) {  // the compute and communication lanes, in display order
      const auto& keep = compact_[ri];
      for (std::uint32_t l : laneOrder_)
        if (!hidden_.count(l) && std::find(keep.begin(), keep.end(), l) != keep.end()) laneRow(l, compactDepth_);
      continue;
    }
    for (std::uint32_t l : laneOrder_) {
      const tl::Lane& lane = index_->lane(l);
      if (lane.rankIndex != static_cast<int>(ri) || hidden_.count(l)) continue;
      if (folded_.count(l)) {
        foldedHere[lane.device.value_or(0)].push_back(l);
        continue;
      }
      laneRow(l);
    }
    for (const auto& [dev, lanes] : foldedHere) {
      Row g;
      g.kind = Row::Kind::StreamGroup;
      g.rankIndex = static_cast<int>(ri);
      g.device = dev;
      g.groupLanes = static_cast<std::uint32_t>(lanes.size());
      g.y = y;
      g.height = kRankHeaderHeight;
      rows_.push_back(g);
      y += g.height;
      if (groupOpen_.count({static_cast<int>(ri), dev}))
        for (std::uint32_t l : lanes) laneRow(l);
    }
  }
  scroll_ = std::clamp(scroll_, 0, std::max(0, contentHeight() - (height() - kAxisHeight)));
}

int TimelineWidget::contentHeight() const { return rows_.empty() ? 0 : rows_.back().y + rows_.back().height; }

double TimelineWidget::xOf(TimeNs t) const {
  const double w = std::max(1, width() - kLabelWidth);
  return kLabelWidth + static_cast<double>(t - t0_) * w / static_cast<double>(std::max<TimeNs>(1, t1_ - t0_));
}

TimeNs TimelineWidget::timeAt(double x) const {
  const double w = std::max(1, width() - kLabelWidth);
  return t0_ + static_cast<TimeNs>(std::llround((x - kLabelWidth) * static_cast<double>(t1_ - t0_) / w));
}

std::optional<int> TimelineWidget::laneY(std::uint32_t lane, std::uint32_t depth) const {
  for (const Row& r : rows_)
    if (r.kind == Row::Kind::Lane && r.lane == lane) {
      if (depth >= r.depthRows) return std::nullopt;
      const int y = kAxisHeight + r.y - scroll_ + static_cast<int>(depth) * kRowHeight + 1;
      if (y + kRowHeight < kAxisHeight || y > height()) return std::nullopt;
      return y;
    }
  return std::nullopt;
}

const TimelineWidget::Row* TimelineWidget::rowAt(int y) const {
  const int cy = y - kAxisHeight + scroll_;
  if (y < kAxisHeight) return nullptr;
  auto it = std::upper_bound(rows_.begin(), rows_.end(), cy, [](int v, const Row& r) { return v < r.y; });
  if (it == rows_.begin()) return nullptr;
  --it;
  return cy < it->y + it->height ? &*it : nullptr;
}

tl::Viewport TimelineWidget::viewport() const {
  tl::Viewport v;
  v.t0 = t0_;
  v.t1 = std::max(t1_, t0_ + 1);
  v.widthPx = std::max(1, width() - kLabelWidth);
  v.threads = 2;
  const QFontMetrics fm(font());
  v.charWidthPx = static_cast<float>(std::max(4, fm.averageCharWidth()));
  const int visibleTop = 0, visibleBottom = height();
  for (const Row& r : rows_) {
    if (r.kind == Row::Kind::RankHeader && rankHasSummary(r.rankIndex)) {
      const int top = kAxisHeight + r.y - scroll_;
      if (top + r.height >= kAxisHeight && top <= visibleBottom) v.summaryRanks.push_back(r.rankIndex);
      continue;
    }
    if (r.kind != Row::Kind::Lane) continue;
    const int top = kAxisHeight + r.y - scroll_;
    if (top + r.height < visibleTop + kAxisHeight || top > visibleBottom) continue;
    tl::ViewLane vl;
    vl.lane = r.lane;
    vl.y = static_cast<float>(top + 1);
    const bool counter = index_->lane(r.lane).isCounter();
    vl.rowHeight = counter ? static_cast<float>(r.height - 4) : static_cast<float>(kRowHeight);
    vl.maxDepth = r.depthRows;
    v.lanes.push_back(vl);
  }
  return v;
}

bool TimelineWidget::drawListCurrent() const {
  if (!list_) return false;
  const tl::Viewport v = viewport();
  return listView_.t0 == t0_ && listView_.t1 == std::max(t1_, t0_ + 1) &&
         listView_.widthPx == std::max(1, width() - kLabelWidth) && listScroll_ == scroll_ &&
         listView_.lanes.size() == v.lanes.size() && listView_.summaryRanks == v.summaryRanks;
}

void TimelineWidget::requestDrawList() {
  if (!index_) return;
  ++generation_;
  if (building_) {
    pending_ = true;  // only the latest view matters: built when the current build ends
    return;
  }
  building_ = true;
  pending_ = false;
  const tl::Viewport view = viewport();
  const std::uint64_t generation = generation_;
  const int scroll = scroll_;
  std::vector<int> heights;
  for (int r : view.summaryRanks) heights.push_back(std::max(2, rankHeaderHeight(r) - 2));
  auto index = index_;
  QPointer<TimelineWidget> self(this);
  auto alive = alive_;
  QThreadPool::globalInstance()->start([self, alive, index, view, generation, scroll, heights]() {
    if (!alive->load()) return;
    QElapsedTimer t;
    t.start();
    auto list = std::make_shared<tl::DrawList>(tl::buildDrawList(*index, view));
    auto images = std::make_shared<std::vector<QImage>>(makeSummaryImages(*list, heights));
    const double ms = static_cast<double>(t.nsecsElapsed()) / 1e6;
    QMetaObject::invokeMethod(
        qApp,
        [self, index, list, images, heights, view, generation, scroll, ms]() {
          if (!self) return;
          if (self->index_ != index) {  // built for the previous run: drop it, build for this one
            self->building_ = false;
            if (self->index_) self->requestDrawList();
            return;
          }
          self->listScroll_ = scroll;
          self->deliver(list, view, generation, ms);
          self->summaryImages_ = std::move(*images);
          self->summaryImagesSerial_ = self->listSerial_;
          self->summaryImageHeights_ = heights;
        },
        Qt::QueuedConnection);
  });
}

void TimelineWidget::deliver(std::shared_ptr<tl::DrawList> list, tl::Viewport view, std::uint64_t /*generation*/, double ms) {
  building_ = false;
  list_ = std::move(list);
  ++listSerial_;
  listView_ = std::move(view);
  lastBuildMs_ = ms;
  update();
  Q_EMIT drawListReady();
  if (pending_) requestDrawList();
}

void TimelineWidget::renderNow() {
  if (!index_) return;
  QElapsedTimer t;
  t.start();
  listView_ = viewport();
  listScroll_ = scroll_;
  list_ = std::make_shared<tl::DrawList>(tl::buildDrawList(*index_, listView_));
  ++listSerial_;
  summaryImageHeights_ = summaryHeights(list_->summaries);
  summaryImages_ = makeSummaryImages(*list_, summaryImageHeights_);
  summaryImagesSerial_ = listSerial_;
  lastBuildMs_ = static_cast<double>(t.nsecsElapsed()) / 1e6;
  ++generation_;
  repaint();
}

void TimelineWidget::emitView() {
  Q_EMIT viewChanged(t0_, t1_);
  requestDrawList();
  update();
}

void TimelineWidget::setViewRange(TimeNs t0, TimeNs t1, bool pushHistory) {
  if (t1 <= t0) t1 = t0 + 1;
  t0_ = t0;
  t1_ = t1;
  if (pushHistory) {
    if (historyPos_ + 1 < history_.size()) history_.resize(historyPos_ + 1);
    if (history_.empty() || history_.back() != std::make_pair(t0, t1)) history_.emplace_back(t0, t1);
    historyPos_ = history_.size() - 1;
  }
  emitView();
}

void TimelineWidget::fitSteps() {
  if (!index_) return;
  const auto steps = index_->stepsExtent();
  if (!steps) return fitAll();
  const TimeNs span = std::max<TimeNs>(1, steps->second - steps->first);
  const TimeNs pad = span / 50;
  setViewRange(steps->first - pad, steps->second + pad);
}

void TimelineWidget::fitAll() {
  if (!index_) return;
  const TimeNs span = std::max<TimeNs>(1, index_->maxEnd() - index_->minStart());
  const TimeNs pad = span / 100;
  setViewRange(index_->minStart() - pad, index_->maxEnd() + pad);
}

bool TimelineWidget::zoomBack() {
  if (historyPos_ == 0 || history_.empty()) return false;
  --historyPos_;
  setViewRange(history_[historyPos_].first, history_[historyPos_].second, false);
  return true;
}

bool TimelineWidget::zoomForward() {
  if (historyPos_ + 1 >= history_.size()) return false;
  ++historyPos_;
  setViewRange(history_[historyPos_].first, history_[historyPos_].second, false);
  return true;
}

void TimelineWidget::zoomAt(double factor, double x) {
  const TimeNs anchor = timeAt(x);
  const double span = static_cast<double>(t1_ - t0_);
  const double newSpan = std::clamp(span * factor, 1000.0, 1e15);  // 1 µs .. 11 days
  const double frac = (x - kLabelWidth) / std::max(1, width() - kLabelWidth);
  const TimeNs n0 = anchor - static_cast<TimeNs>(std::llround(newSpan * frac));
  const TimeNs n1 = n0 + static_cast<TimeNs>(std::llround(newSpan));
  // Continuous zooming (zoom steps less than 600 ms apart) is one history entry; a pause starts the next.
  const qint64 now = QDateTime::currentMSecsSinceEpoch();
  const bool push = now - lastZoomMs_ > 600 || history_.empty();
  lastZoomMs_ = now;
  if (!push) history_[historyPos_] = {n0, n1};
  setViewRange(n0, n1, push);
}

void TimelineWidget::scrollBy(int dy) {
  const int visible = height() - kAxisHeight;
  scroll_ = std::clamp(scroll_ + dy, 0, std::max(0, contentHeight() - visible));
  requestDrawList();
  update();
}

void TimelineWidget::panBy(double fraction) {
  const TimeNs d = static_cast<TimeNs>(std::llround(fraction * static_cast<double>(t1_ - t0_)));
  setViewRange(t0_ + d, t1_ + d, false);
  if (!history_.empty()) history_[historyPos_] = {t0_, t1_};
}

void TimelineWidget::selectEvent(std::uint32_t lane, std::uint32_t index, bool centre) {
  if (!index_ || lane >= index_->lanes().size() || index >= index_->lane(lane).eventCount()) return;
  if (!selected_ || *selected_ != std::make_pair(lane, index)) flow_.reset();
  selected_ = {lane, index};
  const tl::Lane& l = index_->lane(lane);
  if (centre) {
    const TimeNs s = l.start[index], e = l.end[index];
    if (s < t0_ || e > t1_ || (e - s) < (t1_ - t0_) / 1000) {
      const TimeNs span = std::max<TimeNs>((e - s) * 5, 10'000);
      setViewRange(s + (e - s) / 2 - span / 2, s + (e - s) / 2 + span / 2);
    }
    // Scroll the lane into view.
    for (const Row& r : rows_)
      if (r.kind == Row::Kind::Lane && r.lane == lane) {
        const int visible = height() - kAxisHeight;
        if (r.y < scroll_ || r.y + r.height > scroll_ + visible)
          scroll_ = std::clamp(r.y - visible / 3, 0, std::max(0, contentHeight() - visible));
        requestDrawList();
      }
  }
  update();
  Q_EMIT eventSelected(lane, index);
}

void TimelineWidget::clearSelection() {
  const bool had = selected_ || range_;
  selected_.reset();
  flow_.reset();
  range_.reset();
  update();
  if (had) Q_EMIT selectionCleared();
}

void TimelineWidget::selectRange(TimeNs t0, TimeNs t1) {
  if (t1 < t0) std::swap(t0, t1);
  range_ = {t0, t1};
  update();
  Q_EMIT rangeSelected(t0, t1);
}

bool TimelineWidget::zoomToSelection() {
  if (range_ && range_->second > range_->first) {
    setViewRange(range_->first, range_->second);
    return true;
  }
  if (selected_ && index_) {
    const tl::Lane& l = index_->lane(selected_->first);
    const TimeNs s = l.start[selected_->second], e = l.end[selected_->second];
    const TimeNs pad = std::max<TimeNs>((e - s) / 10, 500);
    setViewRange(s - pad, e + pad);
    return true;
  }
  return false;
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> TimelineWidget::findEvent(core::Id eventId) const {
  if (!index_) return std::nullopt;
  std::optional<std::pair<std::uint32_t, std::uint32_t>> copy;
  for (std::uint32_t li = 0; li < index_->lanes().size(); ++li) {
    const tl::Lane& l = index_->lane(li);
    for (std::uint32_t i = 0; i < l.eventCount(); ++i)
      if (l.eventId[i] == eventId) {
        if (l.trackId) return std::make_pair(li, i);  // the event's own track first
        if (!copy) copy = std::make_pair(li, i);
      }
  }
  return copy;
}

namespace {

// Every event whose name contains `text` (case-insensitive), by start time: the names are matched
// once, then each lane's name indexes are looked up.
std::vector<std::pair<TimeNs, std::pair<std::uint32_t, std::uint32_t>>> searchIndex(const tl::TimelineIndex& index,
                                                                                    const QString& text) {
  std::vector<std::pair<TimeNs, std::pair<std::uint32_t, std::uint32_t>>> matches;
  if (text.isEmpty()) return matches;
  const std::string needle = text.toLower().toStdString();
  std::vector<char> nameMatches(index.names().size(), 0);
  bool any = false;
  for (std::size_t n = 0; n < index.names().size(); ++n) {
    std::string s = index.names()[n];
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    nameMatches[n] = s.find(needle) != std::string::npos;
    any = any || nameMatches[n];
  }
  if (!any) return matches;
  for (std::uint32_t li = 0; li < index.lanes().size(); ++li) {
    const tl::Lane& l = index.lane(li);
    if (l.isCounter() || !l.trackId) continue;  // derived copies would match twice
    for (std::uint32_t i = 0; i < l.eventCount(); ++i)
      if (l.nameIdx[i] < nameMatches.size() && nameMatches[l.nameIdx[i]]) matches.push_back({l.start[i], {li, i}});
  }
  std::sort(matches.begin(), matches.end());
  return matches;
}

}  // namespace

void TimelineWidget::updateMatches(const QString& text) {
  if (text == matchText_) return;
  matchText_ = text;
  matches_.clear();
  if (index_) matches_ = searchIndex(*index_, text);
}

bool TimelineWidget::findNext(const QString& query, bool forward) {
  const QString text = query.toLower();  // case-insensitive: "GEMM" then "gemm" is one search
  if (!index_ || text.isEmpty()) return false;
  if (text != matchText_ && index_->eventCount() > syncSearchLimit_) {
    // A large run: the matches are gathered on a pool thread; the step is taken when they arrive
    // (only the latest search counts).
    searchPending_ = SearchRequest{text, forward};
    const std::uint64_t gen = ++searchGeneration_;
    QPointer<TimelineWidget> self(this);
    auto index = index_;
    auto alive = alive_;
    QThreadPool::globalInstance()->start([self, alive, index, text, gen]() {
      if (!alive->load()) return;
      auto found =
          std::make_shared<std::vector<std::pair<TimeNs, std::pair<std::uint32_t, std::uint32_t>>>>(searchIndex(*index, text));
      QMetaObject::invokeMethod(
          qApp,
          [self, index, text, gen, found]() {
            if (!self || gen != self->searchGeneration_ || self->index_ != index || !self->searchPending_) return;
            const bool forwardStep = self->searchPending_->forward;
            self->searchPending_.reset();
            self->matchText_ = text;
            self->matches_ = std::move(*found);
            const bool ok = self->stepToMatch(forwardStep);
            Q_EMIT self->searchFinished(ok, self->matchCount());
          },
          Qt::QueuedConnection);
    });
    return true;
  }
  searchPending_.reset();
  ++searchGeneration_;
  updateMatches(text);
  const bool ok = stepToMatch(forward);
  Q_EMIT searchFinished(ok, matchCount());
  return ok;
}

bool TimelineWidget::stepToMatch(bool forward) {
  if (matches_.empty() || !index_) return false;
  std::pair<TimeNs, std::pair<std::uint32_t, std::uint32_t>> cur{t0_ + (t1_ - t0_) / 2, {0, 0}};
  if (selected_) cur = {index_->lane(selected_->first).start[selected_->second], *selected_};
  std::size_t pick;
  if (forward) {
    auto it = std::upper_bound(matches_.begin(), matches_.end(), cur);
    pick = it == matches_.end() ? 0 : static_cast<std::size_t>(it - matches_.begin());
  } else {
    auto it = std::lower_bound(matches_.begin(), matches_.end(), cur);
    pick = it == matches_.begin() ? matches_.size() - 1 : static_cast<std::size_t>(it - matches_.begin()) - 1;
  }
  selectEvent(matches_[pick].second.first, matches_[pick].second.second, true);
  return true;
}

void TimelineWidget::setRankMode(int rankIndex, RankMode mode) {
  if (rankIndex < 0 || static_cast<std::size_t>(rankIndex) >= modes_.size()) return;
  userLayout();
  modes_[static_cast<std::size_t>(rankIndex)] = mode;
  relayout();
  requestDrawList();
  update();
}

void TimelineWidget::setRankCollapsed(int rankIndex, bool collapsed) {
  setRankMode(rankIndex, collapsed ? RankMode::Collapsed : RankMode::Expanded);
}

void TimelineWidget::setAllRanksMode(RankMode mode) {
  userLayout();
  std::fill(modes_.begin(), modes_.end(), mode);
  relayout();
  requestDrawList();
  update();
}

void TimelineWidget::setStreamGroupOpen(int rankIndex, int device, bool open) {
  if (open)
    groupOpen_.insert({rankIndex, device});
  else
    groupOpen_.erase({rankIndex, device});
  relayout();
  requestDrawList();
  update();
}

void TimelineWidget::setLaneHidden(std::uint32_t lane, bool hidden) {
  userLayout();
  if (hidden)
    hidden_.insert(lane);
  else
    hidden_.erase(lane);
  relayout();
  requestDrawList();
  update();
}

void TimelineWidget::showAllLanes() {
  userLayout();
  hidden_.clear();
  std::fill(modes_.begin(), modes_.end(), RankMode::Expanded);
  relayout();
  requestDrawList();
  update();
}

void TimelineWidget::setLaneKindHidden(tl::LaneKind kind, bool hidden) {
  if (!index_) return;
  userLayout();
  for (std::uint32_t li = 0; li < index_->lanes().size(); ++li) {
    if (index_->lane(li).kind != kind) continue;
    if (hidden)
      hidden_.insert(li);
    else
      hidden_.erase(li);
  }
  relayout();
  requestDrawList();
  update();
}

bool TimelineWidget::laneKindHidden(tl::LaneKind kind) const {
  if (!index_) return false;
  bool any = false;
  for (std::uint32_t li = 0; li < index_->lanes().size(); ++li) {
    if (index_->lane(li).kind != kind) continue;
    if (!hidden_.count(li)) return false;
    any = true;
  }
  return any;
}

void TimelineWidget::setAllRanksCollapsed(bool collapsed) {
  setAllRanksMode(collapsed ? RankMode::Collapsed : RankMode::Expanded);
}

void TimelineWidget::moveLane(std::uint32_t lane, int delta) {
  auto it = std::find(laneOrder_.begin(), laneOrder_.end(), lane);
  if (it == laneOrder_.end() || !index_) return;
  const int rank = index_->lane(lane).rankIndex;
  auto pos = static_cast<std::ptrdiff_t>(it - laneOrder_.begin());
  while (delta != 0) {
    const std::ptrdiff_t next = pos + (delta > 0 ? 1 : -1);
    if (next < 0 || next >= static_cast<std::ptrdiff_t>(laneOrder_.size()) ||
        index_->lane(laneOrder_[static_cast<std::size_t>(next)]).rankIndex != rank)
      break;
    std::swap(laneOrder_[static_cast<std::size_t>(pos)], laneOrder_[static_cast<std::size_t>(next)]);
    pos = next;
    delta += delta > 0 ? -1 : 1;
  }
  relayout();
  requestDrawList();
  update();
}

QString TimelineWidget::describeEvent(std::uint32_t lane, std::uint32_t index) const {
  if (!index_) return {};
  const tl::Lane& l = index_->lane(lane);
  const TimeNs s = l.start[index], e = l.end[index];
  QString text = QStringLiteral("<b>%1</b><br>%2")
                     .arg(QString::fromStdString(std::string(index_->name(l.nameIdx[index]))).toHtmlEscaped(),
                          formatDuration(static_cast<double>(e - s)));
  const std::uint8_t key = l.key[index];
  const auto op = tl::keyOp(key);
  if (op != CollectiveOp::None) text += QStringLiteral(" · %1").arg(QString::fromUtf8(core::toString(op).data()));
  if (auto b = index_->bytes(lane, index)) {
    text += QStringLiteral("<br>%1").arg(charts::formatBytes(static_cast<double>(*b)));
    // A bandwidth only from a transfer's own time: a device-side collective (a kernel, or the
    // runtime's communication span), never a CPU call or annotation that only enqueues it.
    const bool transfer =
        l.deviceLane &&
        (l.kind == tl::LaneKind::GpuStream || l.kind == tl::LaneKind::Comm || l.kind == tl::LaneKind::CommGroup) &&
        !(l.bits[index] & tl::EventBits::Annotation);
    if (e > s && transfer)
      text += QStringLiteral(" · %1 GB/s").arg(static_cast<double>(*b) / static_cast<double>(e - s), 0, 'f', 2);
    else if (!transfer)
      text += tr(" (the call that enqueues it: no bandwidth from its time)");
  }
  const auto& rank = index_->ranks().at(static_cast<std::size_t>(l.rankIndex));
  for (const auto& st : rank.steps)
    if (s >= st.startNs && s < st.endNs) {
      text += QStringLiteral("<br>step %1").arg(st.step);
      break;
    }
  if (l.bits[index] & tl::EventBits::Exposed)
    text += QStringLiteral("<br><span style='color:#d62728'>exposed communication</span>");
  text += QStringLiteral("<br><span style='color:#777'>rank %1 · %2 · +%3</span>")
              .arg(rank.rank)
              .arg(laneTitle(l).toHtmlEscaped(), formatDuration(static_cast<double>(s - index_->minStart())));
  return text;
}

QString TimelineWidget::describeSummaryAt(const QPoint& pos) const {
  if (!list_ || !drawListCurrent() || pos.x() < kLabelWidth) return {};
  const Row* r = rowAt(pos.y());
  if (!r || r->kind != Row::Kind::RankHeader || !rankHasSummary(r->rankIndex)) return {};
  for (const auto& sm : list_->summaries) {
    if (sm.rankIndex != r->rankIndex) continue;
    const auto c = static_cast<std::size_t>(pos.x() - kLabelWidth);
    if (c >= sm.columns.size()) return {};
    const auto& col = sm.columns[c];
    const auto pct = [](int v) { return (v * 100 + 127) / 255; };
    const auto& rk = index_->ranks()[static_cast<std::size_t>(r->rankIndex)];
    return tr("<b>rank %1</b> at +%2 (this pixel: %3)<br>computation %4 % · <span style='color:#d62728'>exposed "
              "communication %5 %</span> · other work %6 % · idle %7 %<br><span style='color:#777'>click the label to "
              "expand the rank</span>")
        .arg(rk.rank)
        .arg(formatDuration(static_cast<double>(timeAt(pos.x()) - index_->minStart())), formatDuration(list_->nsPerPx))
        .arg(pct(col.compute))
        .arg(pct(col.exposed))
        .arg(pct(col.other))
        .arg(std::max(0, 100 - pct(col.compute) - pct(col.exposed) - pct(col.other)));
  }
  return {};
}

tl::Hit TimelineWidget::hitAt(const QPoint& p) const {
  if (!list_ || !drawListCurrent() || p.x() < kLabelWidth || p.y() < kAxisHeight) return {};
  return tl::hitTest(*list_, listView_, static_cast<float>(p.x() - kLabelWidth), static_cast<float>(p.y()));
}

// ---- painting -----------------------------------------------------------------------------------

void TimelineWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), kBackground);
  if (!index_) {
    p.setPen(charts::mutedTextColor());
    p.drawText(rect(), Qt::AlignCenter, tr("No run loaded"));
    return;
  }
  // Rank header bands across the content.
  for (const Row& r : rows_) {
    const int y = kAxisHeight + r.y - scroll_;
    if (y + r.height < kAxisHeight || y > height()) continue;
    if (r.kind == Row::Kind::RankHeader) {
      p.fillRect(QRect(kLabelWidth, y, width() - kLabelWidth, r.height), kHeaderBackground);
      if (rankHasSummary(r.rankIndex))
        p.fillRect(QRect(kLabelWidth, y + r.height - 1, width() - kLabelWidth, 1), QColor(0xc8, 0xcd, 0xd6));
    } else
      p.fillRect(QRect(kLabelWidth, y + r.height - 1, width() - kLabelWidth, 1), kGrid);
    if (r.kind == Row::Kind::StreamGroup)
      p.fillRect(QRect(kLabelWidth, y, width() - kLabelWidth, r.height - 1), kLabelBackground);
  }
  paintList(p);
  if (range_) {
    const double x0 = std::max<double>(kLabelWidth, xOf(range_->first)), x1 = std::min<double>(width(), xOf(range_->second));
    if (x1 > x0) p.fillRect(QRectF(x0, kAxisHeight, std::max(1.0, x1 - x0), height() - kAxisHeight), kRange);
  }
  paintLabels(p);
  paintAxis(p);
}

void TimelineWidget::paintList(QPainter& p) {
  if (!list_) return;
  const tl::DrawList& L = *list_;
  // The list may be older than the view: map its pixels to the current window (x) and scroll (y).
  const double npp = static_cast<double>(std::max<TimeNs>(1, t1_ - t0_)) / std::max(1, width() - kLabelWidth);
  const double scale = L.nsPerPx / npp;
  const double shift = static_cast<double>(L.t0 - t0_) / npp + kLabelWidth;
  const double dy = listScroll_ - scroll_;
  auto X = [&](float x) { return shift + static_cast<double>(x) * scale; };
  p.save();
  p.setClipRect(QRect(kLabelWidth, kAxisHeight, width() - kLabelWidth, height() - kAxisHeight));

  // Step boundaries: light lines across the lanes.
  for (const auto& s : L.steps) {
    if (s.clippedLeft) continue;
    p.fillRect(QRectF(X(s.x0), kAxisHeight, 1, height() - kAxisHeight), kStepLine);
  }
  // Counters: filled step curves, scaled to the lane's own maximum (stable while zooming).
  for (const auto& c : L.counters) {
    if (c.points.empty()) continue;
    const auto& vl = listView_.lanes[c.viewLane];
    const tl::Lane& lane = index_->lane(vl.lane);
    const double maxV = lane.maxValue > 0 ? lane.maxValue : 1.0;
    const double base = vl.y + dy + vl.rowHeight;
    QPolygonF poly;
    poly << QPointF(X(c.points.front().x), base);
    for (std::size_t i = 0; i < c.points.size(); ++i) {
      const double y = base - c.points[i].value / maxV * vl.rowHeight;
      const double xEnd = i + 1 < c.points.size() ? X(c.points[i + 1].x) : X(c.xEnd);
      poly << QPointF(X(c.points[i].x), y) << QPointF(xEnd, y);
    }
    poly << QPointF(X(c.xEnd), base);
    QColor fill = charts::seriesColor(lane.rankIndex);
    fill.setAlpha(90);
    p.setPen(Qt::NoPen);
    p.setBrush(fill);
    p.drawPolygon(poly);
  }
  // Events and folded blocks.
  const QFontMetrics fm(font());
  const int textY = (kRowHeight + fm.ascent() - fm.descent()) / 2;
  for (const tl::DrawRect& r : L.rects) {
    const auto& vl = listView_.lanes[r.viewLane];
    const double y = vl.y + dy + static_cast<double>(r.depth) * kRowHeight;
    const double x0 = X(r.x0), x1 = std::max(X(r.x1), x0 + 1.0);
    QColor c = timelineColor(r.key);
    if (r.bits & tl::EventBits::Annotation) c = c.lighter(135);
    if ((r.flags & tl::DrawFlags::Folded) && r.density < 255) {
      // A folded block in its dominant operation's colour, paler the less of its span its events cover.
      const int a = 77 + r.density * 178 / 255;  // 30 % .. 100 %
      c = QColor((c.red() * a + kBackground.red() * (255 - a)) / 255, (c.green() * a + kBackground.green() * (255 - a)) / 255,
                 (c.blue() * a + kBackground.blue() * (255 - a)) / 255);
    }
    const QRectF box(x0, y, x1 - x0, kRowHeight - 1);
    p.fillRect(box, c);
    if (r.bits & tl::EventBits::Exposed) p.fillRect(QRectF(x0, y, x1 - x0, 2), kExposed);
    if ((r.flags & (tl::DrawFlags::TextFull | tl::DrawFlags::TextElided)) && x1 - x0 > 12) {
      const tl::Lane& lane = index_->lane(vl.lane);
      const QString label = (r.flags & tl::DrawFlags::Folded)
                                ? tr("%1 events").arg(r.count)
                                : QString::fromStdString(std::string(index_->name(lane.nameIdx[r.first])));
      const int room = static_cast<int>(x1 - x0) - 6;
      const QString shown = fm.elidedText(label, Qt::ElideRight, room);
      if (!shown.isEmpty() && shown != QStringLiteral("…")) {
        p.setPen(c.lightnessF() < 0.55 ? Qt::white : Qt::black);
        p.drawText(QPointF(std::max<double>(x0, kLabelWidth) + 3, y + textY), shown);
      }
    }
  }
  paintSummaries(p, scale, shift);
  // Exposed communication per expanded rank: a red strip along the bottom of its header row (a
  // summary track shows it in its own way).
  for (const auto& e : L.exposed) {
    for (const Row& row : rows_)
      if (row.kind == Row::Kind::RankHeader && row.rankIndex == e.rankIndex && !rankHasSummary(row.rankIndex)) {
        const double y = kAxisHeight + row.y - scroll_ + row.height - 4;
        p.fillRect(QRectF(X(e.x0), y, std::max(1.0, X(e.x1) - X(e.x0)), 4), kExposed);
      }
  }
  // The selected event.
  if (selected_) {
    const tl::Lane& l = index_->lane(selected_->first);
    const std::uint32_t depth = l.depthOf(selected_->second);
    if (auto y = laneY(selected_->first, depth)) {
      const double x0 = xOf(l.start[selected_->second]), x1 = std::max(xOf(l.end[selected_->second]), x0 + 1);
      p.setPen(QPen(kSelection, 2));
      p.setBrush(Qt::NoBrush);
      p.drawRect(QRectF(x0, *y, x1 - x0, kRowHeight - 1));
    }
  }
  paintFlow(p);
  p.restore();
}

std::vector<int> TimelineWidget::summaryHeights(const std::vector<tl::RankSummary>& summaries) const {
  std::vector<int> heights;
  heights.reserve(summaries.size());
  for (const auto& sm : summaries) heights.push_back(std::max(2, rankHeaderHeight(sm.rankIndex) - 2));
  return heights;
}

// One image per summary track: per pixel column, from the bottom, computation, exposed communication
// and other work in proportion to their share of the column's time; idle above. Made with the draw
// list (on the pool thread) so that painting only blits them.
std::vector<QImage> TimelineWidget::makeSummaryImages(const tl::DrawList& list, const std::vector<int>& heights) {
  const QRgb colours[4] = {timeline_palette::summaryIdle().rgb(), timeline_palette::summaryOther().rgb(),
                           timeline_palette::exposed().rgb(), timeline_palette::summaryCompute().rgb()};
  std::vector<QImage> out;
  out.reserve(list.summaries.size());
  for (std::size_t k = 0; k < list.summaries.size() && k < heights.size(); ++k) {
    const auto& cols = list.summaries[k].columns;
    const int h = heights[k];
    const int w = std::max<int>(1, static_cast<int>(cols.size()));
    QImage img(w, h, QImage::Format_RGB32);
    img.fill(colours[0]);
    auto* bits = reinterpret_cast<QRgb*>(img.bits());
    const auto stride = static_cast<std::size_t>(img.bytesPerLine() / 4);
    for (std::size_t c = 0; c < cols.size(); ++c) {
      const int c1 = (cols[c].compute * h + 127) / 255;
      int c2 = std::min(h, c1 + (cols[c].exposed * h + 127) / 255);
      int c3 = std::min(h, c2 + (cols[c].other * h + 127) / 255);
      // A share too small for a pixel still shows (a sliver of exposed communication matters).
      if (cols[c].exposed && c2 == c1 && c2 < h) c3 = std::max(c3, c2 = c1 + 1);
      // Rows from the bottom: [0, c1) compute, [c1, c2) exposed, [c2, c3) other.
      QRgb* px = bits + static_cast<std::size_t>(h - 1) * stride + c;
      int y = 0;
      for (; y < c1; ++y, px -= stride) *px = colours[3];
      for (; y < c2; ++y, px -= stride) *px = colours[2];
      for (; y < c3; ++y, px -= stride) *px = colours[1];
    }
    out.push_back(std::move(img));
  }
  return out;
}

void TimelineWidget::paintSummaries(QPainter& p, double scale, double shift) {
  const tl::DrawList& L = *list_;
  if (L.summaries.empty()) return;
  const std::vector<int> heights = summaryHeights(L.summaries);
  if (summaryImagesSerial_ != listSerial_ || summaryImageHeights_ != heights) {  // not built with the list
    summaryImages_ = makeSummaryImages(L, heights);
    summaryImagesSerial_ = listSerial_;
    summaryImageHeights_ = heights;
  }
  for (std::size_t k = 0; k < L.summaries.size(); ++k) {
    const Row* row = headerRow(L.summaries[k].rankIndex);
    if (!row || !rankHasSummary(row->rankIndex)) continue;
    const double y = kAxisHeight + row->y - scroll_ + 1;
    const double w = static_cast<double>(L.summaries[k].columns.size());
    p.drawImage(QRectF(shift, y, w * scale, heights[k]), summaryImages_[k]);
  }
}

void TimelineWidget::paintFlow(QPainter& p) {
  const auto line = flowLine();
  if (!line) return;
  const QPointF a = line->p1(), b = line->p2();
  QPainterPath path(a);
  const double dx = std::max(20.0, std::abs(b.x() - a.x()) / 2);
  path.cubicTo(QPointF(a.x() + dx, a.y()), QPointF(b.x() - dx, b.y()), b);
  p.setRenderHint(QPainter::Antialiasing, true);
  p.setPen(QPen(QColor(0x22, 0x22, 0x22), 1.5));
  p.setBrush(Qt::NoBrush);
  p.drawPath(path);
  // The head at the kernel, pointing along the curve's last tangent (horizontal).
  QPolygonF head;
  head << b << QPointF(b.x() - 8, b.y() - 4) << QPointF(b.x() - 8, b.y() + 4);
  p.setBrush(QColor(0x22, 0x22, 0x22));
  p.drawPolygon(head);
  p.drawEllipse(a, 2.5, 2.5);
  p.setRenderHint(QPainter::Antialiasing, false);
}

void TimelineWidget::setFlow(const Flow& flow) {
  if (!index_ || flow.fromLane >= index_->lanes().size() || flow.toLane >= index_->lanes().size() ||
      flow.fromIndex >= index_->lane(flow.fromLane).eventCount() || flow.toIndex >= index_->lane(flow.toLane).eventCount())
    return;
  flow_ = flow;
  update();
}

void TimelineWidget::clearFlow() {
  flow_.reset();
  update();
}

std::optional<QLineF> TimelineWidget::flowLine() const {
  if (!flow_ || !index_) return std::nullopt;
  const tl::Lane& k = index_->lane(flow_->toLane);
  const tl::Lane& c = index_->lane(flow_->fromLane);
  const auto ky = laneY(flow_->toLane, k.depthOf(flow_->toIndex));
  if (!ky) return std::nullopt;
  const QPointF to(xOf(k.start[flow_->toIndex]), *ky + kRowHeight / 2.0);
  QPointF from;
  if (const auto cy = laneY(flow_->fromLane, c.depthOf(flow_->fromIndex))) {
    // From the launch call's end (it returns once the kernel is queued).
    from = QPointF(std::max(xOf(c.start[flow_->fromIndex]) + 1, xOf(c.end[flow_->fromIndex])), *cy + kRowHeight / 2.0);
  } else if (const auto hy = rankY(c.rankIndex)) {
    from = QPointF(xOf(c.start[flow_->fromIndex]), *hy + rankHeaderHeight(c.rankIndex) / 2.0);
  } else {
    return std::nullopt;
  }
  return QLineF(from, to);
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> TimelineWidget::findEventOnTrack(core::TrackId trackId, core::Id eventId,
                                                                                        TimeNs startNs) const {
  if (!index_ || !trackId) return std::nullopt;
  for (std::uint32_t li = 0; li < index_->lanes().size(); ++li) {
    const tl::Lane& l = index_->lane(li);
    if (l.trackId != trackId || l.isCounter()) continue;
    for (std::uint32_t d = 0; d < l.depthCount(); ++d) {
      const tl::IndexRange w = index_->window(li, d, startNs, startNs + 1);
      for (std::uint32_t i = w.begin; i < w.end; ++i)
        if (l.eventId[i] == eventId) return std::make_pair(li, i);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

void TimelineWidget::paintLabels(QPainter& p) {
  p.fillRect(QRect(0, kAxisHeight, kLabelWidth, height() - kAxisHeight), kLabelBackground);
  p.save();
  p.setClipRect(QRect(0, kAxisHeight, kLabelWidth, height() - kAxisHeight));
  const QFontMetrics fm(font());
  for (const Row& r : rows_) {
    const int y = kAxisHeight + r.y - scroll_;
    if (y + r.height < kAxisHeight || y > height()) continue;
    if (r.kind == Row::Kind::RankHeader) {
      const auto& rk = index_->ranks()[static_cast<std::size_t>(r.rankIndex)];
      p.fillRect(QRect(0, y, kLabelWidth, r.height), kHeaderBackground);
      p.setPen(Qt::black);
      QFont bold = font();
      bold.setBold(true);
      p.setFont(bold);
      const RankMode mode = rankMode(r.rankIndex);
      const QString arrow = mode == RankMode::Expanded ? QStringLiteral("▾ ") : QStringLiteral("▸ ");
      QString t = arrow + tr("rank %1").arg(rk.rank);
      if (mode == RankMode::Compact)
        t += QStringLiteral(" · ") + tr("%1 of %2 lanes").arg(compactLanes(r.rankIndex).size()).arg(rk.lanes.size());
      else if (!rk.device.empty())
        t += QStringLiteral("  ") + QString::fromStdString(rk.device);
      if (r.height < kRankHeaderHeight - 2) {  // collapsed rows shrunk to fit many ranks
        bold.setPixelSize(std::max(6, r.height - 1));
        p.setFont(bold);
      }
      const QFontMetrics hm(p.font());
      p.drawText(QRect(4, y, kLabelWidth - 8, r.height), Qt::AlignVCenter | Qt::AlignLeft,
                 hm.elidedText(t, Qt::ElideRight, kLabelWidth - 8));
      p.setFont(font());
    } else if (r.kind == Row::Kind::StreamGroup) {
      p.setPen(QColor(0x33, 0x33, 0x33));
      const QString arrow = groupOpen_.count({r.rankIndex, r.device}) ? QStringLiteral("▾ ") : QStringLiteral("▸ ");
      const QString t = arrow + tr("other streams (%1), GPU %2").arg(r.groupLanes).arg(r.device);
      p.drawText(QRect(8, y, kLabelWidth - 12, r.height), Qt::AlignVCenter | Qt::AlignLeft,
                 fm.elidedText(t, Qt::ElideRight, kLabelWidth - 12));
      p.fillRect(QRect(0, y + r.height - 1, kLabelWidth, 1), kGrid);
    } else {
      const tl::Lane& l = index_->lane(r.lane);
      p.setPen(QColor(0x33, 0x33, 0x33));
      QString t = laneTitle(l);
      if (!l.isCounter() && l.depthCount() > r.depthRows)
        t += QStringLiteral(" (%1 of %2 levels)").arg(r.depthRows).arg(l.depthCount());
      int room = kLabelWidth - 18;
      if (l.isCounter()) {
        // The curve's scale: its top is the lane's largest value, its baseline 0.
        QFont small = font();
        small.setPixelSize(std::max(8, fm.height() * 3 / 4));
        p.setFont(small);
        const QFontMetrics sm(small);
        const QString top = charts::formatBytes(l.maxValue), bottom = QStringLiteral("0");
        const int sw = sm.horizontalAdvance(top) + 6;
        p.setPen(QColor(0x66, 0x66, 0x66));
        p.drawText(QRect(kLabelWidth - sw - 2, y + 1, sw, sm.height()), Qt::AlignRight | Qt::AlignTop, top);
        p.drawText(QRect(kLabelWidth - sw - 2, y + r.height - sm.height() - 2, sw, sm.height()), Qt::AlignRight | Qt::AlignBottom,
                   bottom);
        p.fillRect(QRect(kLabelWidth - 4, y + 2, 3, 1), QColor(0x99, 0x99, 0x99));
        p.fillRect(QRect(kLabelWidth - 4, y + r.height - 4, 3, 1), QColor(0x99, 0x99, 0x99));
        p.setFont(font());
        p.setPen(QColor(0x33, 0x33, 0x33));
        room = std::max(30, kLabelWidth - 18 - sw);
      }
      p.drawText(QRect(14, y, room, std::min(r.height, kRowHeight + 2)), Qt::AlignVCenter | Qt::AlignLeft,
                 fm.elidedText(t, Qt::ElideRight, room));
      p.fillRect(QRect(0, y + r.height - 1, kLabelWidth, 1), kGrid);
    }
  }
  p.restore();
  p.fillRect(QRect(kLabelWidth - 1, kAxisHeight, 1, height() - kAxisHeight), QColor(0xcc, 0xcc, 0xcc));
}

void TimelineWidget::paintAxis(QPainter& p) {
  p.fillRect(QRect(0, 0, width(), kAxisHeight), kLabelBackground);
  p.setPen(QColor(0xbb, 0xbb, 0xbb));
  p.drawLine(0, kAxisHeight - 1, width(), kAxisHeight - 1);
  if (!index_) return;
  const QFontMetrics fm(font());
  const double w = std::max(1, width() - kLabelWidth);
  const double span = static_cast<double>(t1_ - t0_);
  const double step = niceStep(span / w * 90.0);  // a tick every >= 90 px
  const TimeNs origin = index_->minStart();
  const double first = std::ceil(static_cast<double>(t0_ - origin) / step) * step;
  p.save();
  p.setClipRect(QRect(kLabelWidth, 0, width() - kLabelWidth, kAxisHeight));
  for (double v = first; v <= static_cast<double>(t1_ - origin); v += step) {
    const double x = xOf(origin + static_cast<TimeNs>(std::llround(v)));
    p.setPen(QColor(0x99, 0x99, 0x99));
    p.drawLine(QPointF(x, kAxisHeight - 8), QPointF(x, kAxisHeight - 1));
    p.setPen(QColor(0x33, 0x33, 0x33));
    p.drawText(QPointF(x + 3, kAxisHeight - 5), formatTick(v, step));
  }
  // Step numbers (of the first rank that has steps) under the ticks.
  if (list_) {
    const double npp = span / w;
    const double scale = list_->nsPerPx / npp;
    const double shift = static_cast<double>(list_->t0 - t0_) / npp + kLabelWidth;
    int shownRank = -1;
    for (const auto& s : list_->steps) {
      if (shownRank < 0) shownRank = s.rankIndex;
      if (s.rankIndex != shownRank) continue;
      const double x0 = shift + s.x0 * scale, x1 = shift + s.x1 * scale;
      const QString label = tr("step %1").arg(s.step);
      p.setPen(QColor(0x55, 0x55, 0x99));
      if (fm.horizontalAdvance(label) + 6 < x1 - x0) p.drawText(QPointF(x0 + 3, fm.ascent()), label);
      p.fillRect(QRectF(x0, 0, 1, fm.height()), QColor(0x55, 0x55, 0x99));
    }
  }
  p.restore();
  p.setPen(QColor(0x55, 0x55, 0x55));
  p.drawText(QRect(4, 0, kLabelWidth - 8, kAxisHeight), Qt::AlignVCenter | Qt::AlignLeft,
             tr("%1 visible").arg(formatDuration(span)));
}

// ---- input --------------------------------------------------------------------------------------

void TimelineWidget::resizeEvent(QResizeEvent*) {
  if (autoLayout_)
    applyAutoLayout();
  else
    relayout();
  requestDrawList();
}

void TimelineWidget::wheelEvent(QWheelEvent* e) {
  // Wheel zooms at the cursor (Tracy, chrome://tracing), Shift+wheel pans, Alt+wheel (or a wheel over
  // the lane labels) scrolls the lanes.
  const QPoint d = e->angleDelta();
  const double steps = (d.y() != 0 ? d.y() : d.x()) / 120.0;
  if ((e->modifiers() & Qt::AltModifier) || e->position().x() < kLabelWidth) {
    scrollBy(-static_cast<int>(steps * 3 * kRowHeight));
  } else if (e->modifiers() & Qt::ShiftModifier) {
    panBy(-0.1 * steps);
  } else {
    zoomAt(std::pow(0.8, steps), e->position().x());
  }
  e->accept();
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
  setFocus();
  pressPos_ = lastPos_ = e->pos();
  moved_ = false;
  if (e->button() != Qt::LeftButton) return;
  if (e->pos().x() < kLabelWidth) {
    if (const Row* r = rowAt(e->pos().y()); r && r->kind == Row::Kind::RankHeader)  // expanded <-> collapsed; compact expands
      setRankMode(r->rankIndex, rankMode(r->rankIndex) == RankMode::Expanded ? RankMode::Collapsed : RankMode::Expanded);
    else if (r && r->kind == Row::Kind::StreamGroup)
      setStreamGroupOpen(r->rankIndex, r->device, !streamGroupOpen(r->rankIndex, r->device));
    drag_ = Drag::None;
    return;
  }
  if (e->modifiers() & Qt::ShiftModifier) {
    drag_ = Drag::Range;
    dragAnchor_ = timeAt(e->pos().x());
  } else {
    drag_ = Drag::Pan;
  }
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
  hoverPos_ = e->pos();
  if (drag_ != Drag::None && (e->pos() - pressPos_).manhattanLength() > 3) moved_ = true;
  if (drag_ == Drag::Pan && moved_) {
    const double npp = static_cast<double>(t1_ - t0_) / std::max(1, width() - kLabelWidth);
    const TimeNs dt = static_cast<TimeNs>(std::llround((e->pos().x() - lastPos_.x()) * npp));
    const int visible = height() - kAxisHeight;
    scroll_ = std::clamp(scroll_ - (e->pos().y() - lastPos_.y()), 0, std::max(0, contentHeight() - visible));
    setViewRange(t0_ - dt, t1_ - dt, false);
    if (!history_.empty()) history_[historyPos_] = {t0_, t1_};
  } else if (drag_ == Drag::Range && moved_) {
    const TimeNs t = timeAt(e->pos().x());
    range_ = {std::min(dragAnchor_, t), std::max(dragAnchor_, t)};
    update();
  } else if (drag_ == Drag::None) {
    const tl::Hit h = hitAt(e->pos());
    if (h.kind == tl::Hit::Kind::Event) {
      QToolTip::showText(e->globalPosition().toPoint(), describeEvent(h.lane, h.index), this);
    } else if (h.kind == tl::Hit::Kind::Folded) {
      const tl::Lane& l = index_->lane(h.lane);
      const TimeNs s = l.start[h.index], last = l.end[h.index + h.count - 1];
      const QString kind = timelineKeyLabel(h.rect.key);
      QToolTip::showText(e->globalPosition().toPoint(),
                         tr("<b>%1 events</b>, %2%3<br>%4, %5 % of it busy · click to zoom in")
                             .arg(h.count)
                             .arg((h.rect.flags & tl::DrawFlags::Mixed) ? tr("mostly ") : QString(), kind.toHtmlEscaped(),
                                  formatDuration(static_cast<double>(last - s)))
                             .arg(h.rect.density * 100 / 255),
                         this);
    } else if (h.kind == tl::Hit::Kind::Counter) {
      QToolTip::showText(e->globalPosition().toPoint(), charts::formatBytes(h.value), this);
    } else if (const QString text = describeSummaryAt(e->pos()); !text.isEmpty()) {
      QToolTip::showText(e->globalPosition().toPoint(), text, this);
    } else {
      QToolTip::hideText();
    }
  }
  lastPos_ = e->pos();
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* e) {
  const Drag d = drag_;
  drag_ = Drag::None;
  if (e->button() != Qt::LeftButton) return;
  if (d == Drag::Range && moved_ && range_) {
    Q_EMIT rangeSelected(range_->first, range_->second);
    return;
  }
  if (d == Drag::Pan && !moved_) {
    if (!drawListCurrent()) renderNow();
    const tl::Hit h = hitAt(e->pos());
    if (h.kind == tl::Hit::Kind::Event) {
      range_.reset();
      selectEvent(h.lane, h.index);
    } else if (h.kind == tl::Hit::Kind::Folded) {
      const tl::Lane& l = index_->lane(h.lane);
      const TimeNs s = l.start[h.index], last = l.end[h.index + h.count - 1];
      const TimeNs pad = std::max<TimeNs>((last - s) / 20, 100);
      setViewRange(s - pad, last + pad);
    } else {
      clearSelection();
    }
  }
}

void TimelineWidget::mouseDoubleClickEvent(QMouseEvent* e) {
  if (e->pos().x() < kLabelWidth) return;
  if (range_ && timeAt(e->pos().x()) >= range_->first && timeAt(e->pos().x()) <= range_->second) {
    zoomToSelection();
    return;
  }
  const tl::Hit h = hitAt(e->pos());
  if (h.kind == tl::Hit::Kind::Event) {
    selectEvent(h.lane, h.index);
    zoomToSelection();
  }
}

void TimelineWidget::keyPressEvent(QKeyEvent* e) {
  const double x =
      (hoverPos_.x() >= kLabelWidth && hoverPos_.x() < width()) ? hoverPos_.x() : kLabelWidth + (width() - kLabelWidth) / 2.0;
  const bool alt = e->modifiers() & Qt::AltModifier;
  switch (e->key()) {
    case Qt::Key_W:
      zoomAt(0.8, x);
      break;
    case Qt::Key_S:
      zoomAt(1.25, x);
      break;
    case Qt::Key_A:
      panBy(-0.2);
      break;
    case Qt::Key_D:
      panBy(0.2);
      break;
    case Qt::Key_F:
      fitSteps();
      break;
    case Qt::Key_Home:
      fitAll();
      break;
    case Qt::Key_Z:
      zoomToSelection();
      break;
    case Qt::Key_Backspace:
      zoomBack();
      break;
    case Qt::Key_Left:
      if (alt)
        zoomBack();
      else
        panBy(-0.1);
      break;
    case Qt::Key_Right:
      if (alt)
        zoomForward();
      else
        panBy(0.1);
      break;
    case Qt::Key_Escape:
      clearSelection();
      break;
    case Qt::Key_PageDown:
      scrollBy(height() - kAxisHeight - kRowHeight);
      break;
    case Qt::Key_PageUp:
      scrollBy(-(height() - kAxisHeight - kRowHeight));
      break;
    default:
      QWidget::keyPressEvent(e);
      return;
  }
  e->accept();
}

void TimelineWidget::contextMenuEvent(QContextMenuEvent* e) {
  if (!index_ || e->pos().x() >= kLabelWidth) return;
  const Row* r = rowAt(e->pos().y());
  QMenu menu(this);
  if (r && r->kind == Row::Kind::RankHeader) {
    const int rank = r->rankIndex;
    const RankMode mode = rankMode(rank);
    if (mode != RankMode::Expanded)
      menu.addAction(tr("Expand rank"), this, [this, rank] { setRankMode(rank, RankMode::Expanded); });
    if (mode != RankMode::Compact)
      menu.addAction(tr("Compact rank (compute and communication lanes)"), this,
                     [this, rank] { setRankMode(rank, RankMode::Compact); });
    if (mode != RankMode::Collapsed)
      menu.addAction(tr("Collapse rank (summary track)"), this, [this, rank] { setRankMode(rank, RankMode::Collapsed); });
  } else if (r && r->kind == Row::Kind::StreamGroup) {
    const int rank = r->rankIndex, dev = r->device;
    menu.addAction(streamGroupOpen(rank, dev) ? tr("Fold the other streams") : tr("Show the other streams"), this,
                   [this, rank, dev] { setStreamGroupOpen(rank, dev, !streamGroupOpen(rank, dev)); });
  } else if (r) {
    const std::uint32_t lane = r->lane;
    menu.addAction(tr("Hide lane"), this, [this, lane] { setLaneHidden(lane, true); });
    menu.addAction(tr("Move up"), this, [this, lane] { moveLane(lane, -1); });
    menu.addAction(tr("Move down"), this, [this, lane] { moveLane(lane, 1); });
  }
  menu.addAction(tr("Show all lanes"), this, [this] { showAllLanes(); });
  menu.exec(e->globalPos());
}

void TimelineWidget::leaveEvent(QEvent*) {
  hoverPos_ = QPoint(-1, -1);
  QToolTip::hideText();
}

}  // namespace shardscope::ui
