#pragma once
// Overview: what a run is. For the selected runs: name, source, strategy, status and failure reason,
// world size, devices, configuration JSON, per-rank table (rank, host, device, events, tracks), the
// files an imported run came from (import_log: file, format, events, skipped, warnings) and
// key metrics (step time, tokens/s, initialisation, peak memory) side by side. Loaded off the GUI
// thread in two steps: the summary (instant, from the store's statistics), then the metrics (one
// pass over each run's events).
#include <QList>
#include <QPointer>
#include <QString>

#include <optional>
#include <string>
#include <vector>

#include "core/model/types.h"
#include "core/storage/import_log.h"
#include "core/util/progress.h"
#include "ui/pages/page.h"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QStackedWidget;
class QTableWidget;
class QTabWidget;

namespace shardscope::core {
class TraceStore;
}

namespace shardscope::ui {

class BackgroundTask;

struct RankOverview {
  int rank = 0;
  std::string host;
  std::string device;
  std::int64_t events = 0;  // counter samples excluded
  int tracks = 0;
};

struct RunOverview {
  core::Run run;
  std::vector<RankOverview> ranks;
  std::int64_t events = 0;
  std::int64_t counterSamples = 0;
  std::int64_t steps = 0;
  std::int64_t collectives = 0;
  std::optional<core::TimeNs> startNs;
  std::optional<core::TimeNs> endNs;
  int processGroups = 0;
  std::vector<core::ImportLogEntry> imported;  // the files an imported run came from (import_log)
};

struct RunKeyMetrics {
  core::RunId id;
  std::optional<double> stepTimeMs;
  std::optional<double> tokensPerS;
  std::optional<double> initS;
  std::optional<double> peakAllocatedGiB;
  std::optional<double> peakReservedGiB;
  std::optional<double> exposedCommPct;
  std::optional<double> overlapPct;
};

// The loading steps, plain core work (used by the page's background tasks and by tests).
std::vector<RunOverview> loadRunOverviews(core::TraceStore& store, const QList<core::RunId>& runs);
std::vector<RunKeyMetrics> loadKeyMetrics(core::TraceStore& store, const QList<core::RunId>& runs,
                                          const core::CancelToken* cancel = nullptr, const core::ProgressFn& progress = {},
                                          const core::AnalysisSource& source = {});
// JSON indented by two spaces, member order kept; the text itself when it does not parse.
QString prettyJson(const std::string& json);
// "8 × NVIDIA B200 (178.4 GiB)"; from the ranks' device strings when devices_json is empty.
QString describeDevices(const RunOverview& run);

class OverviewPage : public Page {
  Q_OBJECT

 public:
  explicit OverviewPage(QWidget* parent = nullptr);
  ~OverviewPage() override;

  QString pageId() const override { return QStringLiteral("overview"); }
  QString title() const override { return tr("Overview"); }
  void setContext(const QString& dbPath, const QList<core::RunId>& runs) override;
  bool busy() const override;
  QJsonObject describe() const override;

  // For tests and the screenshot mode.
  const std::vector<RunOverview>& overviews() const { return overviews_; }
  const std::vector<RunKeyMetrics>& keyMetrics() const { return metrics_; }
  QTableWidget* ranksTable() const { return ranksTable_; }
  QTableWidget* importTable() const { return importTable_; }  // "Imported from"; hidden when empty
  QTableWidget* metricsTable() const { return metricsTable_; }
  QPlainTextEdit* configView() const { return config_; }
  core::RunId shownRun() const;
  void showRun(core::RunId id);

 public Q_SLOTS:
  void cancel();  // stops the loading (the main window's Cancel button)
  void reload();

 private:
  void startLoading();
  void setBusy(bool busy);
  void showOverviews();
  void showDetails(int index);
  void showMetrics();
  void showMessage(const QString& text);

  QString dbPath_;
  QList<core::RunId> runs_;
  std::vector<RunOverview> overviews_;
  std::vector<RunKeyMetrics> metrics_;
  QPointer<BackgroundTask> summaryTask_;
  QPointer<BackgroundTask> metricsTask_;
  bool busy_ = false;
  int generation_ = 0;

  QStackedWidget* stack_ = nullptr;
  QLabel* message_ = nullptr;
  QLabel* heading_ = nullptr;
  QLabel* failure_ = nullptr;
  QComboBox* runCombo_ = nullptr;
  QLabel* runComboLabel_ = nullptr;
  QLabel* fields_ = nullptr;
  QTableWidget* metricsTable_ = nullptr;
  QLabel* metricsNote_ = nullptr;
  QTableWidget* ranksTable_ = nullptr;
  QLabel* importLabel_ = nullptr;
  QTableWidget* importTable_ = nullptr;
  QTabWidget* jsonTabs_ = nullptr;
  QPlainTextEdit* config_ = nullptr;
  QPlainTextEdit* devices_ = nullptr;
  QPlainTextEdit* metadata_ = nullptr;
};

}  // namespace shardscope::ui
