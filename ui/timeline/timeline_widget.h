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
//
// Many ranks (docs/TIMELINE.md, "Ranks"): a rank is expanded (every lane), compact (its summary track
// plus its compute lane and its communication lane; CPU threads and the rest folded) or collapsed
// (its summary track only: busy / exposed communication / idle per pixel). A run of 4 ranks or more
// whose lanes do not fit the height opens compact, or collapsed when even that does not fit, until
// the user changes a rank or a lane (then the layout is the user's).
#include <QColor>
#include <QImage>
#include <QLineF>
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
  enum class RankMode { Expanded, Compact, Collapsed };
  void setRankMode(int rankIndex, RankMode mode);
  RankMode rankMode(int rankIndex) const;
  void setAllRanksMode(RankMode mode);
  void setRankCollapsed(int rankIndex, bool collapsed);  // Collapsed, or Expanded
  bool rankCollapsed(int rankIndex) const { return rankMode(rankIndex) == RankMode::Collapsed; }
  // The compact layout's lanes of a rank: its compute lane (the device lane with the most computation)
  // and its communication lane (the lane with the most communication: a process group's lane, our
  // runtime's comm lane or the stream running the collectives), in display order; one lane when one
  // holds both, none for a rank without device work.
  std::vector<std::uint32_t> compactLanes(int rankIndex) const;
  // Whether the layout is still the automatic one (no rank or lane changed by the user since the run
  // opened); it is chosen again when the widget is resized.
  bool autoLayout() const { return autoLayout_; }
  // Top and height of a rank's header (its summary track when compact or collapsed), nullopt when
  // scrolled away; whether a summary track is drawn there.
  std::optional<int> rankY(int rankIndex) const;
  int rankHeaderHeight(int rankIndex) const;
  bool rankHasSummary(int rankIndex) const { return rankMode(rankIndex) != RankMode::Expanded; }
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
  QString describeSummaryAt(const QPoint& pos) const;                    // hover text over a summary track (empty elsewhere)

  // The flow arrow from a CPU launch to the GPU kernel it launched (the page sets it for the
  // selected kernel once the store found its launch); cleared when the selection changes.
  struct Flow {
    std::uint32_t fromLane = 0, fromIndex = 0;  // the launch
    std::uint32_t toLane = 0, toIndex = 0;      // the kernel
  };
  void setFlow(const Flow& flow);
  void clearFlow();
  std::optional<Flow> flow() const { return flow_; }
  // Where the arrow is drawn (widget coordinates; from the launch, or from its rank's header when its
  // lane is not shown, to the kernel's start); nullopt when the kernel's row is not shown.
  std::optional<QLineF> flowLine() const;
  // An event of a track by its store id and start time (depth by depth, two binary searches each).
  std::optional<std::pair<std::uint32_t, std::uint32_t>> findEventOnTrack(core::TrackId trackId, core::Id eventId,
                                                                          core::TimeNs startNs) const;

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
  static constexpr int kCompactDepth = 3;      // depth rows of a lane in the compact layout (at most)
  static constexpr int kMinSummaryHeight = 6;  // collapsed ranks shrink to this to fit the height
  static constexpr int kAutoCompactRanks = 4;  // runs with fewer ranks always open expanded

  struct Row {  // one laid-out row of the lane area
    enum class Kind { RankHeader, StreamGroup, Lane } kind = Kind::Lane;
    int rankIndex = 0;
    int device = 0;                // StreamGroup: its device
    std::uint32_t groupLanes = 0;  // StreamGroup: the lanes folded into it
    std::uint32_t lane = 0;
    int y = 0;  // content y (before scrolling)
    int height = 0;
    std::uint32_t depthRows = 0;
  };

  void relayout();
  void applyAutoLayout();  // the automatic rank modes for the current height
  void userLayout();       // the user changed the layout: no more automatic choice
  const Row* headerRow(int rankIndex) const;
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
  void paintSummaries(QPainter& p, double scale, double shift);
  std::vector<int> summaryHeights(const std::vector<core::timeline::RankSummary>& summaries) const;
  static std::vector<QImage> makeSummaryImages(const core::timeline::DrawList& list, const std::vector<int>& heights);
  void paintFlow(QPainter& p);
  void updateMatches(const QString& text);
  bool stepToMatch(bool forward);
  void emitView();

  std::shared_ptr<const core::timeline::TimelineIndex> index_;
  core::TimeNs t0_ = 0, t1_ = 1;
  int scroll_ = 0;
  std::vector<Row> rows_;
  std::vector<std::uint32_t> laneOrder_;             // display order of every lane (per rank contiguous)
  std::vector<RankMode> modes_;                      // per rank
  std::vector<std::vector<std::uint32_t>> compact_;  // per rank: compactLanes()
  bool autoLayout_ = true;
  int collapsedHeight_ = kRankHeaderHeight;  // height of a collapsed rank's row
  int compactDepth_ = kCompactDepth;         // fewer when the compact layout must shrink to fit
  std::optional<Flow> flow_;
  // The summary tracks of the painted list as images (built once per list and height).
  std::vector<QImage> summaryImages_;
  std::uint64_t listSerial_ = 0, summaryImagesSerial_ = ~std::uint64_t{0};  // list_ changes bump listSerial_
  std::vector<int> summaryImageHeights_;
  std::set<std::uint32_t> hidden_;
  std::set<std::uint32_t> folded_;           // sparse GPU streams (chosen when a run opens)
  std::set<std::pair<int, int>> groupOpen_;  // (rank index, device) stream groups shown open

  // The last draw list and the viewport it was built for (painted transformed when the view moved).
  std::shared_ptr<core::timeline::DrawList> list_;
  core::timeline::Viewport listView_;
  int listScroll_ = 0;
  std::uint64_t generation_ = 0;  // of the latest request
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
