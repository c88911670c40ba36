#pragma once
// Several runs on one relative time axis (the Timeline page with two or more runs selected): one row
// per run and rank, each showing the same counted step of its run (the k-th), or each run's counted
// steps whole, from 0 ms = the start of that window on that rank. The window and the figures beside
// each row (step time, compute, exposed communication) are the step breakdown's (core::StepBreakdown:
// the definitions every surface shares); the bars are the rank's device-lane events from the run's
// timeline index: computation blue, communication orange, other device work grey, and under them a red
// strip where communication is exposed.
//
// Drawing reads each visible row's events once per size or window change into a per-pixel colour
// array (the strongest kind covering each pixel wins), so a frame paints at most a rectangle per pixel
// run however many events the step holds.
#include <QString>
#include <QWidget>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/analysis/run_analysis.h"
#include "core/analysis/run_figures.h"
#include "core/timeline/timeline_index.h"

namespace shardscope::ui {

struct StepCompareRun {
  core::RunId id;
  QString label;  // "ddp #7"
  std::shared_ptr<const core::timeline::TimelineIndex> index;
  std::shared_ptr<const core::RunAnalysis> analysis;
  core::CountedSteps counted;
};

class StepCompareWidget : public QWidget {
  Q_OBJECT

 public:
  enum class Mode { OneStep, WholeRuns };
  struct Row {
    std::size_t run = 0;  // into runs()
    int rank = 0;
    std::int64_t step = -1;                                             // -1 in WholeRuns mode
    core::TimeNs startNs = 0, endNs = 0;                                // the window on this rank (its own clock)
    core::TimeNs computeNs = 0, commNs = 0, exposedNs = 0, idleNs = 0;  // StepBreakdown (sums in WholeRuns)
  };

  explicit StepCompareWidget(QWidget* parent = nullptr);

  void setRuns(std::vector<StepCompareRun> runs);
  const std::vector<StepCompareRun>& runs() const { return runs_; }
  void setMode(Mode mode);
  Mode mode() const { return mode_; }
  // The k-th counted step of every run (0-based), clamped to what every run has.
  void setStepOrdinal(int k);
  int stepOrdinal() const { return ordinal_; }
  int ordinalCount() const;  // counted steps every run has (the smallest count)

  const std::vector<Row>& rows() const { return rows_; }
  core::TimeNs axisSpanNs() const { return span_; }  // the longest window: the shared axis' length
  QString rowLabel(const Row& row) const;

  QSize sizeHint() const override { return {900, 400}; }

 Q_SIGNALS:
  void rowsChanged();

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  bool event(QEvent* event) override;  // tooltips

 private:
  void rebuildRows();
  void rasterize();
  int labelWidth() const;
  int rowHeight() const { return 22; }
  int top() const { return 26; }

  std::vector<StepCompareRun> runs_;
  Mode mode_ = Mode::OneStep;
  int ordinal_ = 0;
  std::vector<Row> rows_;
  core::TimeNs span_ = 0;
  // Per row and pixel of the plot area: 0 nothing, 1 other work, 2 compute, 3 communication; and
  // whether communication is exposed there.
  std::vector<std::vector<std::uint8_t>> pixels_, exposed_;
  int rasterWidth_ = -1;
};

}  // namespace shardscope::ui
