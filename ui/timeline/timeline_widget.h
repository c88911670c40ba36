#pragma once
// The timeline: every rank of a run stacked — its GPU streams or CPU threads (nested spans, one row
// per depth), its communication lanes (one per process group), its memory curves — on one time
// axis, from the whole run down to a single kernel (docs/TIMELINE.md). A custom widget that paints
// core::timeline's draw list with plain fills; the draw list is built off the GUI thread (a thread
// pool task per request, only the latest request kept), and while it is built the last one is
// painted, shifted and scaled to the new window, so panning and zooming never wait for it.
//
// Navigation (Tracy / chrome://tracing): wheel or W/S zoom at the cursor, A/D or Shift+wheel pan,
// Alt+wheel, PageUp/PageDown or a wheel over the labels scroll the lanes, drag pans, Shift+drag selects a range, Z zooms to the
// selection (or double-click), F / Home fits the run, Alt+Left / Backspace and Alt+Right walk the
// zoom history. Click selects an event; hover shows its name, duration, bytes, bandwidth and step.
// A click on a rank header collapses or expands the rank; the lane labels' context menu hides a lane
// or moves it up or down.
#include <QColor>
#include <QPointer>
#include <QString>
#include <QWidget>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "core/timeline/draw_list.h"
#include "core/timeline/timeline_index.h"
#include "ui/timeline/timeline_palette.h"

namespace shardscope::ui {

class TimelineWidget : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineWidget(QWidget* parent = nullptr);
  ~TimelineWidget() override;

  void setIndex(std::shared_ptr<const core::timeline::TimelineIndex> index);
  const core::timeline::TimelineIndex* index() const { return index_.get(); }

  // The visible window [t0, t1) in the run's nanoseconds.
  void setViewRange(core::TimeNs t0, core::TimeNs t1, bool pushHistory = true);
  core::TimeNs viewStart() const { return t0_; }
  core::TimeNs viewEnd() const { return t1_; }
  void fitAll();    // the whole run, initialisation included (Home)
  void fitSteps();  // the training steps (F; what a new run opens on); the whole run without steps
  bool zoomBack();
  bool zoomForward();
  bool canZoomBack() const { return historyPos_ > 0; }
  bool canZoomForward() const { return historyPos_ + 1 < history_.size(); }
  // Zoom by `factor` (< 1: in) keeping the time at x (widget coordinates) where it is.
  void zoomAt(double factor, double x);
  void panBy(double fractionOfWidth);
  void scrollBy(int dy);  // the lanes, in pixels

  // Selection: one event (lane, lane index), or a range.
  void selectEvent(std::uint32_t lane, std::uint32_t index, bool centre = false);
  void clearSelection();
  std::optional<std::pair<std::uint32_t, std::uint32_t>> selectedEvent() const { return selected_; }
  void selectRange(core::TimeNs t0, core::TimeNs t1);
  std::optional<std::pair<core::TimeNs, core::TimeNs>> selectedRange() const { return range_; }
  bool zoomToSelection();
  // Finds the event with this store id (lane, index), or nullopt.
  std::optional<std::pair<std::uint32_t, std::uint32_t>> findEvent(core::Id eventId) const;

  // Search by name (case-insensitive substring): next/previous match after the selection (by start
  // time), selected and centred; searchFinished(found, matches) follows. On a run of more than
  // syncSearchLimit() events a new text is searched on a pool thread: findNext returns true at once,
  // searching() is true until searchFinished (only the latest search counts). Otherwise false when
  // nothing matches.
  bool findNext(const QString& text, bool forward = true);
  int matchCount() const { return static_cast<int>(matches_.size()); }
  bool searching() const { return searchPending_.has_value(); }
  std::size_t syncSearchLimit() const { return syncSearchLimit_; }
  void setSyncSearchLimit(std::size_t events) { syncSearchLimit_ = events; }

  // Lanes: collapse a rank (its lanes hidden under its header), hide a lane, move a lane.
  void setRankCollapsed(int rankIndex, bool collapsed);
  bool rankCollapsed(int rankIndex) const { return collapsed_.count(rankIndex) > 0; }
  void setLaneHidden(std::uint32_t lane, bool hidden);
  bool laneHidden(std::uint32_t lane) const { return hidden_.count(lane) > 0; }
  void moveLane(std::uint32_t lane, int delta);  // within its rank
  void showAllLanes();
  // Every lane of a kind at once (the page's Lanes menu): hidden or shown; whether all are hidden.
  void setLaneKindHidden(core::timeline::LaneKind kind, bool hidden);
  bool laneKindHidden(core::timeline::LaneKind kind) const;
  void setAllRanksCollapsed(bool collapsed);
  // GPU streams with few events (per-operation streams: Gloo over CUDA tensors makes ~40) fold into
  // one "other streams" row per rank and device, closed when a run opens; open shows them again.
  bool laneFolded(std::uint32_t lane) const { return folded_.count(lane) > 0; }
  std::size_t foldedLaneCount() const { return folded_.size(); }
  void setStreamGroupOpen(int rankIndex, int device, bool open);
  bool streamGroupOpen(int rankIndex, int device) const { return groupOpen_.count({rankIndex, device}) > 0; }

  // Geometry (widget coordinates): the time axis and the lanes as laid out now.
  int labelWidth() const { return kLabelWidth; }
  int axisHeight() const { return kAxisHeight; }
  double xOf(core::TimeNs t) const;
  core::TimeNs timeAt(double x) const;
  // Top of depth row `depth` of a lane (nullopt when hidden or scrolled away), and the row height.
  std::optional<int> laneY(std::uint32_t lane, std::uint32_t depth = 0) const;
  int rowHeight() const { return kRowHeight; }

  // Builds the draw list for the current view on this thread and repaints (tests, screenshots).
  void renderNow();
  // The draw list painted last and whether it matches the current view.
  const core::timeline::DrawList* drawList() const { return list_.get(); }
  bool drawListCurrent() const;
  double lastBuildMs() const { return lastBuildMs_; }

  QString describeEvent(std::uint32_t lane, std::uint32_t index) const;  // the hover text

 Q_SIGNALS:
  void viewChanged(qint64 t0, qint64 t1);
  void eventSelected(quint32 lane, quint32 index);
  void selectionCleared();
  void rangeSelected(qint64 t0, qint64 t1);
  void drawListReady();
  void searchFinished(bool found, int matches);

 protected:
  void paintEvent(QPaintEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  void contextMenuEvent(QContextMenuEvent* e) override;
  void leaveEvent(QEvent* e) override;

 private:
  static constexpr int kLabelWidth = 180;
  static constexpr int kAxisHeight = 34;  // step numbers on top, time ticks below
  static constexpr int kRowHeight = 16;
  static constexpr int kRankHeaderHeight = 18;
  static constexpr int kCounterHeight = 36;
  static constexpr int kMaxDepth = 12;

  struct Row {  // one laid-out row of the lane area
    enum class Kind { RankHeader, StreamGroup, Lane } kind = Kind::Lane;
    int rankIndex = 0;
    int device = 0;                // StreamGroup: its device
    std::uint32_t groupLanes = 0;  // StreamGroup: the lanes folded into it
    std::uint32_t lane = 0;
    int y = 0;       // content y (before scrolling)
    int height = 0;
    std::uint32_t depthRows = 0;
  };

  void relayout();
  core::timeline::Viewport viewport() const;  // for the current view, scroll and layout
  void requestDrawList();
  void deliver(std::shared_ptr<core::timeline::DrawList> list, core::timeline::Viewport view, std::uint64_t generation,
               double ms);
  int contentHeight() const;
  const Row* rowAt(int y) const;
  core::timeline::Hit hitAt(const QPoint& p) const;
  void paintAxis(QPainter& p);
  void paintLabels(QPainter& p);
  void paintList(QPainter& p);
  void updateMatches(const QString& text);
  bool stepToMatch(bool forward);
  void emitView();

  std::shared_ptr<const core::timeline::TimelineIndex> index_;
  core::TimeNs t0_ = 0, t1_ = 1;
  int scroll_ = 0;
  std::vector<Row> rows_;
  std::vector<std::uint32_t> laneOrder_;  // display order of every lane (per rank contiguous)
  std::set<int> collapsed_;
  std::set<std::uint32_t> hidden_;
  std::set<std::uint32_t> folded_;             // sparse GPU streams (chosen when a run opens)
  std::set<std::pair<int, int>> groupOpen_;    // (rank index, device) stream groups shown open

  // The last draw list and the viewport it was built for (painted transformed when the view moved).
  std::shared_ptr<core::timeline::DrawList> list_;
  core::timeline::Viewport listView_;
  int listScroll_ = 0;
  std::uint64_t generation_ = 0;   // of the latest request
  bool building_ = false, pending_ = false;
  double lastBuildMs_ = 0;
  std::shared_ptr<std::atomic<bool>> alive_;

  std::vector<std::pair<core::TimeNs, core::TimeNs>> history_;
  std::size_t historyPos_ = 0;
  qint64 lastZoomMs_ = 0;  // of the last zoomAt (continuous zooming is one history entry)

  std::optional<std::pair<std::uint32_t, std::uint32_t>> selected_;
  std::optional<std::pair<core::TimeNs, core::TimeNs>> range_;
  QString matchText_;
  std::vector<std::pair<core::TimeNs, std::pair<std::uint32_t, std::uint32_t>>> matches_;  // by start
  struct SearchRequest {
    QString text;
    bool forward = true;
  };
  std::optional<SearchRequest> searchPending_;  // a search running on a pool thread
  std::uint64_t searchGeneration_ = 0;
  std::size_t syncSearchLimit_ = 250'000;  // a first search of 1M events costs up to ~60 ms

  enum class Drag { None, Pan, Range } drag_ = Drag::None;
  QPoint pressPos_, lastPos_;
  core::TimeNs dragAnchor_ = 0;
  bool moved_ = false;
  QPoint hoverPos_{-1, -1};
};

}  // namespace shardscope::ui
