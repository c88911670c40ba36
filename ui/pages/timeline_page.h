#pragma once
// Timeline page: one run's timeline (TimelineWidget: every rank's lanes, memory curves underneath on
// the same time axis), a toolbar (run, fit, back/forward, zoom to selection, search with next and
// previous, python lanes), and a details panel: the selected event (name, duration, bytes and
// bandwidth, step, its args read from the store, and the same collective on the other ranks; for a
// kernel a flow arrow from its CPU launch) or the selected range's statistics per rank
// (core::timeline::rangeStatistics); a legend of the run's colours under the toolbar. The index is built
// off the GUI thread with progress and cancel; a 5M-event run loads while the window stays live.
#include <QList>
#include <QPointer>
#include <QString>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/storage/trace_store.h"
#include "core/timeline/range_stats.h"
#include "core/timeline/timeline_index.h"
#include "ui/pages/page.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QMenu;
class QScrollArea;
class QSpinBox;
class QStackedWidget;
class QTableWidget;
class QTextBrowser;
class QToolButton;

namespace shardscope::ui {

class BackgroundTask;
class TimelineWidget;
class StepCompareWidget;

// The same collective on the other ranks: the k-th instance of the selected event's operation on
// its process group's lane is matched with the k-th instance on each other rank's lane of that group
// (the rule the stragglers analysis uses). One entry per rank that has it.
struct CollectivePeer {
  int rank = 0;
  std::uint32_t lane = 0, index = 0;
  core::TimeNs startNs = 0, endNs = 0;
};
std::vector<CollectivePeer> sameCollectiveOnOtherRanks(const core::timeline::TimelineIndex& index, std::uint32_t lane,
                                                       std::uint32_t event);

// What the details panel reads from the store for a selected event: its args, and for a GPU record
// the CPU call that launched it (same correlation id, on one of the rank's CPU threads).
struct EventExtras {
  std::string args;
  std::int64_t correlation = 0;
  std::string launchName, launchTrack;
  core::TimeNs launchLeadNs = 0;  // kernel start - launch start
  core::TrackId launchTrackId;
  core::Id launchEventId = 0;  // the launch in the store (the widget's flow arrow)
  core::TimeNs launchStartNs = 0;
};
EventExtras loadEventExtras(core::TraceStore& store, core::RunId runId, core::Id eventId);

class TimelinePage : public Page {
  Q_OBJECT

 public:
  explicit TimelinePage(QWidget* parent = nullptr);
  ~TimelinePage() override;

  QString pageId() const override { return QStringLiteral("timeline"); }
  QString title() const override { return tr("Timeline"); }
  void setContext(const QString& dbPath, const QList<core::RunId>& runs) override;
  // Loading, or the first draw list of a loaded run is still being built.
  bool busy() const override;
  QJsonObject describe() const override;

  Q_INVOKABLE void reload();
  Q_INVOKABLE void cancelLoad();
  void showRun(int index);
  core::RunId currentRun() const { return current_; }
  // From the other pages (MainWindow::onJumpToEvent): loads the run if needed, then selects the event
  // and zooms to it (or to [startNs, endNs) when the event is not in the index).
  Q_INVOKABLE void showEvent(qint64 runId, qint64 eventId, qint64 startNs, qint64 endNs);

  // With several runs selected: one run's timeline, the same counted step of each run on a shared
  // relative axis, or every run's counted steps stacked (StepCompareWidget).
  enum class View { OneRun = 0, SameStep = 1, WholeRuns = 2 };
  void setView(View view);
  View view() const { return view_; }
  StepCompareWidget* compareWidget() const { return compare_; }
  QSpinBox* stepSpin() const { return stepSpin_; }

  TimelineWidget* timeline() const { return widget_; }
  QTextBrowser* details() const { return details_; }
  // The details and range statistics back to their hint (another run is shown).
  void clearDetails();
  QTableWidget* rangeTable() const { return rangeTable_; }
  QLineEdit* searchBox() const { return search_; }
  QMenu* lanesMenu() const { return lanesMenu_; }  // filled when it opens (aboutToShow)
  QLabel* legend() const { return legend_; }       // the colours of the run's categories and operations
  QString errorText() const { return error_; }
  std::shared_ptr<const core::timeline::TimelineIndex> index() const { return index_; }

 private:
  void start();
  void loadCompare();
  void followSessionRange();
  void updateViewControls();
  void setBusy(bool b);
  void showMessage(const QString& text);
  void onEventSelected(quint32 lane, quint32 index);
  void onRangeSelected(qint64 t0, qint64 t1);
  void applyPendingJump();
  void updateButtons();
  void updateLegend();

  QString dbPath_;
  QList<core::RunId> runs_;
  core::RunId current_;
  bool withPython_ = false;
  bool busyReported_ = false;
  QString error_;
  QPointer<BackgroundTask> task_;
  QPointer<BackgroundTask> argsTask_;
  unsigned generation_ = 0;
  std::shared_ptr<const core::timeline::TimelineIndex> index_;
  struct Jump {
    core::RunId run;
    core::Id event = 0;
    qint64 start = 0, end = 0;
  };
  std::optional<Jump> pendingJump_;

  View view_ = View::OneRun;
  bool rangeFollowed_ = false;
  QPointer<BackgroundTask> compareTask_;
  unsigned compareGeneration_ = 0;
  QList<core::RunId> compareRuns_;
  QComboBox* viewCombo_ = nullptr;
  QLabel* stepLabel_ = nullptr;
  QSpinBox* stepSpin_ = nullptr;
  QLabel* runLabel_ = nullptr;
  StepCompareWidget* compare_ = nullptr;
  QScrollArea* compareScroll_ = nullptr;
  QComboBox* runCombo_ = nullptr;
  QToolButton* fit_ = nullptr;
  QToolButton* fitAll_ = nullptr;
  QToolButton* back_ = nullptr;
  QToolButton* forward_ = nullptr;
  QToolButton* zoomSel_ = nullptr;
  QLineEdit* search_ = nullptr;
  QToolButton* prev_ = nullptr;
  QToolButton* next_ = nullptr;
  QToolButton* lanes_ = nullptr;
  QMenu* lanesMenu_ = nullptr;
  QCheckBox* python_ = nullptr;
  QLabel* info_ = nullptr;
  QLabel* legend_ = nullptr;
  QStackedWidget* stack_ = nullptr;
  QLabel* message_ = nullptr;
  TimelineWidget* widget_ = nullptr;
  QStackedWidget* detailStack_ = nullptr;
  QTextBrowser* details_ = nullptr;
  QTableWidget* rangeTable_ = nullptr;
};

}  // namespace shardscope::ui
