#include "ui/pages/describe.h"
#include "ui/pages/overview_page.h"

#include <QComboBox>
#include <QFont>
#include <QFontDatabase>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QSplitter>
#include <QStackedWidget>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include "core/analysis/comparison.h"
#include "core/storage/trace_store.h"
#include "core/util/error.h"
#include "core/util/json.h"
#include "ui/common/background.h"

namespace shardscope::ui {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }
QString qs(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }
QString count(std::int64_t n) { return QLocale(QLocale::English).toString(static_cast<qlonglong>(n)); }

QString duration(core::TimeNs ns) {
  const double s = static_cast<double>(ns) / 1e9;
  if (s >= 120) return QStringLiteral("%1 min").arg(s / 60, 0, 'f', 1);
  if (s >= 1) return QStringLiteral("%1 s").arg(s, 0, 'f', 2);
  return QStringLiteral("%1 ms").arg(s * 1e3, 0, 'f', 1);
}

QString gib(double bytes) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (bytes >= kGiB) return QStringLiteral("%1 GiB").arg(bytes / kGiB, 0, 'f', 1);
  return QStringLiteral("%1 MiB").arg(bytes / (1024.0 * 1024.0), 0, 'f', 0);
}

bool isScalar(const core::JsonValue& v) { return !v.isArray() && !v.isObject(); }

void pretty(const core::JsonValue& v, std::string& out, int indent) {
  const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
  const std::string close(static_cast<std::size_t>(indent), ' ');
  if (v.isObject()) {
    if (v.members().empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    bool first = true;
    for (const auto& [key, value] : v.members()) {
      if (!first) out += ",\n";
      first = false;
      out += pad;
      core::JsonValue::string(key).dumpTo(out);
      out += ": ";
      pretty(value, out, indent + 2);
    }
    out += "\n" + close + "}";
  } else if (v.isArray()) {
    if (v.items().empty()) {
      out += "[]";
      return;
    }
    bool flat = v.items().size() <= 16;
    for (const auto& i : v.items()) flat = flat && isScalar(i);
    if (flat) {
      out += "[";
      for (std::size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += ", ";
        v.items()[i].dumpTo(out);
      }
      out += "]";
      return;
    }
    out += "[\n";
    for (std::size_t i = 0; i < v.items().size(); ++i) {
      if (i) out += ",\n";
      out += pad;
      pretty(v.items()[i], out, indent + 2);
    }
    out += "\n" + close + "]";
  } else {
    v.dumpTo(out);
  }
}

QString metricText(const std::optional<double>& v, int decimals, const QString& unit = {}) {
  if (!v) return QStringLiteral("n/a");
  QString s = QLocale(QLocale::English).toString(*v, 'f', decimals);
  return unit.isEmpty() ? s : s + QLatin1Char(' ') + unit;
}

QTableWidgetItem* item(const QString& text, Qt::Alignment align = Qt::AlignLeft | Qt::AlignVCenter) {
  auto* it = new QTableWidgetItem(text);
  it->setTextAlignment(align);
  it->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
  return it;
}

QPlainTextEdit* jsonView(QWidget* parent) {
  auto* v = new QPlainTextEdit(parent);
  v->setReadOnly(true);
  v->setLineWrapMode(QPlainTextEdit::NoWrap);
  v->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  return v;
}

}  // namespace

QString prettyJson(const std::string& json) {
  if (json.empty()) return {};
  try {
    const auto v = core::parseJson(json, "json");
    std::string out;
    pretty(v, out, 0);
    return qs(out);
  } catch (const std::exception&) {
    return qs(json);
  }
}

QString describeDevices(const RunOverview& r) {
  // Kineto deviceProperties (or the runtime's devices): count by name.
  std::vector<std::pair<QString, int>> byName;
  std::map<QString, double> memory;
  try {
    const auto v = core::parseJson(r.run.devicesJson.empty() ? std::string("[]") : r.run.devicesJson, "devices_json");
    if (v.isArray()) {
      for (const auto& d : v.items()) {
        if (!d.isObject()) continue;
        QString name = QStringLiteral("device");
        if (const auto* n = d.find("name"); n && n->isString()) name = qs(n->asString());
        if (const auto* m = d.find("totalGlobalMem"); m && m->isNumber()) memory[name] = m->asDouble();
        auto it = std::find_if(byName.begin(), byName.end(), [&](const auto& p) { return p.first == name; });
        if (it == byName.end())
          byName.emplace_back(name, 1);
        else
          ++it->second;
      }
    }
  } catch (const std::exception&) {
  }
  QStringList parts;
  for (const auto& [name, n] : byName) {
    QString s = QStringLiteral("%1 × %2").arg(n).arg(name);
    if (memory.count(name)) s += QStringLiteral(" (%1)").arg(gib(memory[name]));
    parts << s;
  }
  if (!parts.isEmpty()) return parts.join(QStringLiteral(", "));
  // No device properties (runtime runs on CPU): the ranks' devices.
  std::vector<std::pair<QString, int>> devs;
  for (const auto& rk : r.ranks) {
    const QString d = rk.device.empty() ? QStringLiteral("unknown") : qs(rk.device);
    auto it = std::find_if(devs.begin(), devs.end(), [&](const auto& p) { return p.first == d; });
    if (it == devs.end())
      devs.emplace_back(d, 1);
    else
      ++it->second;
  }
  for (const auto& [d, n] : devs) parts << QStringLiteral("%1 × %2").arg(n).arg(d);
  return parts.isEmpty() ? QStringLiteral("—") : parts.join(QStringLiteral(", "));
}

std::vector<RunOverview> loadRunOverviews(core::TraceStore& store, const QList<core::RunId>& runs) {
  std::vector<RunOverview> out;
  for (core::RunId id : runs) {
    const auto s = store.summary(id);  // throws for a run that no longer exists
    RunOverview o;
    o.run = s.run;
    o.events = s.eventCount;
    o.counterSamples = s.counterSamples;
    o.steps = s.stepCount;
    o.collectives = s.collectiveCount;
    o.startNs = s.startNs;
    o.endNs = s.endNs;
    o.processGroups = static_cast<int>(store.processGroups(id).size());
    o.imported = core::importLog(store, id);
    for (const auto& rk : s.ranks) {
      RankOverview ro;
      ro.rank = rk.rank;
      ro.host = rk.host;
      ro.device = rk.device;
      for (const auto& t : s.tracks) {
        if (t.track.rankId != rk.id) continue;
        ++ro.tracks;
        if (t.track.kind != core::TrackKind::Counter) ro.events += t.eventCount;
      }
      o.ranks.push_back(std::move(ro));
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<RunKeyMetrics> loadKeyMetrics(core::TraceStore& store, const QList<core::RunId>& runs,
                                          const core::CancelToken* cancel, const core::ProgressFn& progress,
                                          const core::AnalysisSource& source) {
  if (progress) {
    core::Progress p;
    p.stage = "analysing " + std::to_string(runs.size()) + " run(s)";
    p.total = static_cast<std::uint64_t>(runs.size());
    p.unit = "runs";
    progress(p);
  }
  // The comparison's own figures, so the Overview and the Compare page agree.
  const std::vector<core::RunId> ids(runs.begin(), runs.end());
  const auto c = core::compareRuns(store, ids, 0, cancel, source);
  std::vector<RunKeyMetrics> out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    RunKeyMetrics m;
    m.id = ids[i];
    for (const auto& row : c.rows) {
      const auto& v = row.values.at(i);
      if (row.key == "step_time_ms")
        m.stepTimeMs = v;
      else if (row.key == core::metric_keys::kTokensPerSecond)
        m.tokensPerS = v;
      else if (row.key == core::metric_keys::kInitSeconds)
        m.initS = v;
      else if (row.key == "peak_allocated_gib")
        m.peakAllocatedGiB = v;
      else if (row.key == "peak_reserved_gib")
        m.peakReservedGiB = v;
      else if (row.key == "exposed_comm_pct")
        m.exposedCommPct = v;
      else if (row.key == "overlap_pct")
        m.overlapPct = v;
    }
    out.push_back(m);
  }
  if (progress) {
    core::Progress p;
    p.stage = "analysis done";
    p.done = p.total = static_cast<std::uint64_t>(runs.size());
    p.unit = "runs";
    progress(p);
  }
  return out;
}

// ------------------------------------------------------------------------------------------------

OverviewPage::OverviewPage(QWidget* parent) : Page(parent) {
  setObjectName(QStringLiteral("page_overview"));
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  stack_ = new QStackedWidget(this);
  outer->addWidget(stack_);

  message_ = new QLabel(this);
  message_->setAlignment(Qt::AlignCenter);
  message_->setWordWrap(true);
  stack_->addWidget(message_);

  auto* content = new QWidget(this);
  auto* layout = new QVBoxLayout(content);

  auto* top = new QHBoxLayout;
  heading_ = new QLabel(content);
  heading_->setTextFormat(Qt::RichText);
  heading_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  heading_->setWordWrap(true);  // a long run name wraps instead of widening the window
  top->addWidget(heading_, 1);
  runComboLabel_ = new QLabel(tr("Details of:"), content);
  top->addWidget(runComboLabel_);
  runCombo_ = new QComboBox(content);
  runCombo_->setObjectName(QStringLiteral("overviewRunCombo"));
  runCombo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);  // long run names: the popup shows them
  runCombo_->setMinimumContentsLength(24);
  top->addWidget(runCombo_);
  layout->addLayout(top);

  failure_ = new QLabel(content);
  failure_->setWordWrap(true);
  failure_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  failure_->setStyleSheet(
      QStringLiteral("QLabel { color: #b71c1c; background: #fdecea; border: 1px solid #f5c6c4; padding: 6px; }"));
  failure_->hide();
  layout->addWidget(failure_);

  auto* middle = new QHBoxLayout;
  auto* runBox = new QGroupBox(tr("Run"), content);
  auto* runLayout = new QVBoxLayout(runBox);
  fields_ = new QLabel(runBox);
  fields_->setTextFormat(Qt::RichText);
  fields_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  fields_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  fields_->setWordWrap(true);
  runLayout->addWidget(fields_);
  runLayout->addStretch(1);
  middle->addWidget(runBox, 2);

  auto* metricsBox = new QGroupBox(tr("Key metrics"), content);
  auto* metricsLayout = new QVBoxLayout(metricsBox);
  metricsTable_ = new QTableWidget(metricsBox);
  metricsTable_->setObjectName(QStringLiteral("overviewMetrics"));
  metricsTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  metricsTable_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  metricsTable_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  metricsTable_->setAlternatingRowColors(true);
  metricsTable_->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);
  metricsTable_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  metricsTable_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  metricsTable_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Maximum);
  metricsLayout->addWidget(metricsTable_);
  metricsNote_ = new QLabel(metricsBox);
  metricsNote_->setWordWrap(true);
  metricsNote_->setStyleSheet(QStringLiteral("color: palette(mid);"));
  metricsLayout->addWidget(metricsNote_);
  metricsLayout->addStretch(1);
  middle->addWidget(metricsBox, 3);
  layout->addLayout(middle, 0);

  auto* split = new QSplitter(Qt::Horizontal, content);
  auto* ranksBox = new QGroupBox(tr("Ranks"), split);
  auto* ranksLayout = new QVBoxLayout(ranksBox);
  ranksTable_ = new QTableWidget(0, 5, ranksBox);
  ranksTable_->setObjectName(QStringLiteral("overviewRanks"));
  ranksTable_->setHorizontalHeaderLabels({tr("Rank"), tr("Host"), tr("Device"), tr("Events"), tr("Tracks")});
  ranksTable_->verticalHeader()->hide();
  ranksTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  ranksTable_->setSelectionBehavior(QAbstractItemView::SelectRows);
  ranksTable_->horizontalHeader()->setStretchLastSection(false);
  ranksTable_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  ranksTable_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
  ranksTable_->setSortingEnabled(true);
  ranksLayout->addWidget(ranksTable_);
  importLabel_ = new QLabel(tr("<b>Imported from</b>"), ranksBox);
  ranksLayout->addWidget(importLabel_);
  importTable_ = new QTableWidget(0, 6, ranksBox);
  importTable_->setObjectName(QStringLiteral("overviewImported"));
  importTable_->setHorizontalHeaderLabels({tr("File"), tr("Format"), tr("Rank"), tr("Events"), tr("Skipped"), tr("Warnings")});
  importTable_->verticalHeader()->hide();
  importTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  importTable_->setSelectionBehavior(QAbstractItemView::SelectRows);
  importTable_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  importTable_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  ranksLayout->addWidget(importTable_);
  jsonTabs_ = new QTabWidget(split);
  config_ = jsonView(jsonTabs_);
  config_->setObjectName(QStringLiteral("overviewConfig"));
  devices_ = jsonView(jsonTabs_);
  metadata_ = jsonView(jsonTabs_);
  jsonTabs_->addTab(config_, tr("Configuration"));
  jsonTabs_->addTab(devices_, tr("Devices"));
  jsonTabs_->addTab(metadata_, tr("Metadata"));
  split->addWidget(ranksBox);
  split->addWidget(jsonTabs_);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  layout->addWidget(split, 1);
  stack_->addWidget(content);

  connect(runCombo_, &QComboBox::currentIndexChanged, this, [this](int i) { showDetails(i); });
  showMessage(tr("Open a database (File ▸ Open) to see its runs."));
}

OverviewPage::~OverviewPage() { cancel(); }

bool OverviewPage::busy() const { return busy_; }

void OverviewPage::setBusy(bool b) {
  if (busy_ == b) return;
  busy_ = b;
  Q_EMIT busyChanged(b);
}

void OverviewPage::showMessage(const QString& text) {
  message_->setText(text);
  stack_->setCurrentWidget(message_);
}

void OverviewPage::setContext(const QString& dbPath, const QList<core::RunId>& runs) {
  sessionFor(dbPath);
  dbPath_ = dbPath;
  runs_ = runs;
  startLoading();
}

void OverviewPage::reload() { startLoading(); }

void OverviewPage::cancel() {
  ++generation_;
  if (summaryTask_ || metricsTask_) session()->tasks()->cancel(taskSlot());
  summaryTask_ = nullptr;
  metricsTask_ = nullptr;
  setBusy(false);
}

void OverviewPage::startLoading() {
  cancel();
  overviews_.clear();
  metrics_.clear();
  if (dbPath_.isEmpty()) {
    showMessage(tr("Open a database (File ▸ Open) to see its runs."));
    return;
  }
  if (runs_.isEmpty()) {
    showMessage(tr("Select a run in the run browser (Ctrl+click for several: the first is the baseline)."));
    return;
  }
  showMessage(tr("Loading…"));
  setBusy(true);
  const int gen = generation_;
  const QList<core::RunId> ids = runs_;
  Q_EMIT progress(-1, tr("Loading the overview"));
  summaryTask_ = session()->run<std::vector<RunOverview>>(
      this, taskSlot(), tr("Loading the overview"),
      [ids](core::TraceStore& s, RunCache&, core::CancelToken&, const core::ProgressFn&) { return loadRunOverviews(s, ids); },
      [this, gen, ids](std::vector<RunOverview> result) {
        if (gen != generation_) return;
        summaryTask_ = nullptr;
        overviews_ = std::move(result);
        showOverviews();
        // Step 2: the figures that need a pass over the events (the session's analyses).
        metricsTask_ = session()->run<std::vector<RunKeyMetrics>>(
            this, taskSlot(), tr("Analysing %n run(s)", nullptr, static_cast<int>(ids.size())),
            [ids](core::TraceStore& s, RunCache& cache, core::CancelToken& c, const core::ProgressFn& p) {
              return loadKeyMetrics(s, ids, &c, p, RunSession::analysisSource(cache, s, &c));
            },
            [this, gen](std::vector<RunKeyMetrics> m) {
              if (gen != generation_) return;
              metricsTask_ = nullptr;
              metrics_ = std::move(m);
              showMetrics();
              setBusy(false);
              Q_EMIT progress(100, tr("Overview loaded"));
              Q_EMIT statusMessage(tr("%n run(s) loaded", nullptr, static_cast<int>(overviews_.size())));
            },
            [this, gen](QString error) {
              if (gen != generation_) return;
              metricsTask_ = nullptr;
              metricsNote_->setText(tr("The metrics could not be computed: %1").arg(error));
              setBusy(false);
              Q_EMIT progress(100, QString());
              Q_EMIT errorMessage(tr("Overview: %1").arg(error));
            });
        if (metricsTask_)
          connect(metricsTask_, &BackgroundTask::progress, this, [this, gen](int pct, const QString& stage) {
            if (gen == generation_) Q_EMIT progress(pct, stage);
          });
      },
      [this, gen](QString error) {
        if (gen != generation_) return;
        summaryTask_ = nullptr;
        showMessage(tr("The overview could not be loaded:\n%1").arg(error));
        setBusy(false);
        Q_EMIT progress(100, QString());
        Q_EMIT errorMessage(tr("Overview: %1").arg(error));
      });
}

core::RunId OverviewPage::shownRun() const {
  const int i = runCombo_->currentIndex();
  return i >= 0 && i < static_cast<int>(overviews_.size()) ? overviews_[static_cast<std::size_t>(i)].run.id : core::RunId{};
}

void OverviewPage::showRun(core::RunId id) {
  for (std::size_t i = 0; i < overviews_.size(); ++i)
    if (overviews_[i].run.id == id) runCombo_->setCurrentIndex(static_cast<int>(i));
}

void OverviewPage::showOverviews() {
  if (overviews_.empty()) {
    showMessage(tr("No run to show."));
    return;
  }
  {
    const QSignalBlocker block(runCombo_);
    runCombo_->clear();
    for (const auto& o : overviews_) runCombo_->addItem(QString::fromStdString(core::runLabel(o.run.name, o.run.id)));
    runCombo_->setCurrentIndex(0);
  }
  const bool several = overviews_.size() > 1;
  runCombo_->setVisible(several);
  runComboLabel_->setVisible(several);
  showDetails(0);
  metricsTable_->clear();
  metricsTable_->setRowCount(0);
  metricsTable_->setColumnCount(0);
  metricsNote_->setText(tr("Computing step time and memory peaks…"));
  stack_->setCurrentIndex(1);
}

void OverviewPage::showDetails(int index) {
  if (index < 0 || index >= static_cast<int>(overviews_.size())) return;
  const auto& o = overviews_[static_cast<std::size_t>(index)];
  const auto& r = o.run;
  const QString status = qs(core::toString(r.status));
  QString color = QStringLiteral("#2e7d32");
  if (r.status == core::RunStatus::Failed)
    color = QStringLiteral("#c62828");
  else if (r.status == core::RunStatus::Running)
    color = QStringLiteral("#1565c0");
  else if (r.status != core::RunStatus::Completed)
    color = QStringLiteral("#757575");
  heading_->setText(QStringLiteral("<span style='font-size:15pt; font-weight:600'>%1</span>"
                                   "&nbsp;&nbsp;<span style='color:%2; font-weight:600'>%3</span>"
                                   "&nbsp;&nbsp;<span style='color:gray'>run %4%5</span>")
                        .arg(qs(r.name).toHtmlEscaped(), color, status.toHtmlEscaped())
                        .arg(r.id.value())
                        .arg(index == 0 && overviews_.size() > 1 ? tr(" · baseline") : QString()));
  if (!r.failureReason.empty()) {
    failure_->setText(tr("%1: %2").arg(status, qs(r.failureReason)));
    failure_->show();
  } else {
    failure_->hide();
  }

  auto row = [](const QString& k, const QString& v) {
    return QStringLiteral("<tr><td style='color:gray; padding-right:12px'>%1</td><td>%2</td></tr>")
        .arg(k.toHtmlEscaped(), v.toHtmlEscaped());
  };
  QString html = QStringLiteral("<table cellspacing='2'>");
  html += row(tr("Source"), core::isMemorySnapshotRun(r)          ? tr("memory snapshot (imported)")
                            : r.source == core::RunSource::Kineto ? tr("kineto (imported trace)")
                                                                  : qs(core::toString(r.source)));
  html += row(tr("Strategy"), r.strategy.empty() ? tr("— (not recorded in the trace)") : qs(r.strategy));
  html += row(tr("World size"),
              QString::number(r.worldSize) +
                  (static_cast<int>(o.ranks.size()) != r.worldSize ? tr(" (%1 rank(s) stored)").arg(o.ranks.size()) : QString()));
  html += row(tr("Devices"), describeDevices(o));
  html += row(tr("Created"), qs(r.createdAt));
  html += row(tr("Events"), tr("%1 (%2 counter samples)").arg(count(o.events), count(o.counterSamples)));
  // Counts say what they count: per rank where ranks differ only in their copy of the same work.
  const int nRanks = std::max<int>(1, static_cast<int>(o.ranks.size()));
  html += row(tr("Steps"),
              nRanks > 1 && o.steps % nRanks == 0
                  ? tr("%1 per rank (%2 step windows over %3 ranks)").arg(count(o.steps / nRanks), count(o.steps)).arg(nRanks)
                  : tr("%1 step windows over %2 rank(s)").arg(count(o.steps)).arg(nRanks));
  html += row(tr("Collectives"), tr("%1 instances over %2 rank(s), ~%3 per rank%4")
                                     .arg(count(o.collectives))
                                     .arg(nRanks)
                                     .arg(count(o.collectives / nRanks))
                                     .arg(o.processGroups > 0 ? tr(", in %1 process group(s)").arg(o.processGroups) : QString()));
  if (o.startNs && o.endNs) html += row(tr("Span"), duration(*o.endNs - *o.startNs));
  html += row(tr("Tags"), r.tags.empty() ? QStringLiteral("—") : qs(r.tags));
  html += QStringLiteral("</table>");
  fields_->setText(html);

  ranksTable_->setSortingEnabled(false);
  ranksTable_->setRowCount(static_cast<int>(o.ranks.size()));
  const auto right = Qt::AlignRight | Qt::AlignVCenter;
  for (int i = 0; i < static_cast<int>(o.ranks.size()); ++i) {
    const auto& rk = o.ranks[static_cast<std::size_t>(i)];
    auto* rankItem = item(QString::number(rk.rank), right);
    rankItem->setData(Qt::DisplayRole, rk.rank);
    ranksTable_->setItem(i, 0, rankItem);
    ranksTable_->setItem(i, 1, item(rk.host.empty() ? QStringLiteral("—") : qs(rk.host)));
    ranksTable_->setItem(i, 2, item(rk.device.empty() ? QStringLiteral("—") : qs(rk.device)));
    auto* ev = item(count(rk.events), right);
    ranksTable_->setItem(i, 3, ev);
    auto* tracksItem = item(QString(), right);
    tracksItem->setData(Qt::DisplayRole, rk.tracks);
    ranksTable_->setItem(i, 4, tracksItem);
  }
  ranksTable_->setSortingEnabled(true);
  ranksTable_->sortByColumn(0, Qt::AscendingOrder);

  // Imported from: one row per file of the import (import_log), its warnings in the tooltip.
  importTable_->setRowCount(static_cast<int>(o.imported.size()));
  for (int i = 0; i < static_cast<int>(o.imported.size()); ++i) {
    const auto& f = o.imported[static_cast<std::size_t>(i)];
    auto* file = item(qs(std::filesystem::path(f.path).filename().string()));
    file->setToolTip(qs(f.path));
    importTable_->setItem(i, 0, file);
    importTable_->setItem(i, 1, item(qs(f.format)));
    importTable_->setItem(i, 2, item(f.rank ? QString::number(*f.rank) : QStringLiteral("—"), right));
    importTable_->setItem(i, 3, item(count(f.events), right));
    auto* skipped = item(count(f.skipped), right);
    QStringList reasons;
    for (const auto& [reason, n] : f.skippedByReason) reasons << QStringLiteral("%1: %2").arg(qs(reason)).arg(n);
    skipped->setToolTip(reasons.join(QLatin1Char('\n')));
    importTable_->setItem(i, 4, skipped);
    auto* warnings = item(QString::number(f.warnings.size()), right);
    QStringList lines;
    for (const auto& w : f.warnings) lines << qs(w);
    warnings->setToolTip(lines.join(QLatin1Char('\n')));
    importTable_->setItem(i, 5, warnings);
  }
  importLabel_->setVisible(!o.imported.empty());
  importTable_->setVisible(!o.imported.empty());

  const bool noConfig = r.configJson.empty() || r.configJson == "{}";
  config_->setPlainText(noConfig ? tr("(no configuration recorded: %1)")
                                       .arg(r.source == core::RunSource::Kineto
                                                ? tr("an imported trace has none; see Devices and Metadata")
                                                : tr("empty"))
                                 : prettyJson(r.configJson));
  jsonTabs_->setCurrentWidget(noConfig ? devices_ : config_);
  devices_->setPlainText(prettyJson(r.devicesJson));
  metadata_->setPlainText(prettyJson(r.metadataJson));
}

void OverviewPage::showMetrics() {
  struct Row {
    QString label;
    std::function<QString(const RunKeyMetrics&)> text;
  };
  const std::vector<Row> rows = {
      {tr("Step time"), [](const RunKeyMetrics& m) { return metricText(m.stepTimeMs, 1, QStringLiteral("ms")); }},
      {tr("Throughput"), [](const RunKeyMetrics& m) { return metricText(m.tokensPerS, 0, QStringLiteral("tokens/s")); }},
      {tr("Initialisation"), [](const RunKeyMetrics& m) { return metricText(m.initS, 2, QStringLiteral("s")); }},
      {tr("Peak memory allocated"),
       [](const RunKeyMetrics& m) {
         return m.peakAllocatedGiB ? gib(*m.peakAllocatedGiB * 1024.0 * 1024.0 * 1024.0) : QStringLiteral("n/a");
       }},
      {tr("Peak memory reserved"),
       [](const RunKeyMetrics& m) {
         return m.peakReservedGiB ? gib(*m.peakReservedGiB * 1024.0 * 1024.0 * 1024.0) : QStringLiteral("n/a");
       }},
      {tr("Exposed communication"),
       [](const RunKeyMetrics& m) { return metricText(m.exposedCommPct, 1, QStringLiteral("% of step")); }},
      {tr("Communication overlapped"), [](const RunKeyMetrics& m) { return metricText(m.overlapPct, 1, QStringLiteral("%")); }},
  };
  metricsTable_->clear();
  metricsTable_->setRowCount(static_cast<int>(rows.size()));
  metricsTable_->setColumnCount(static_cast<int>(metrics_.size()));
  QStringList headers;
  for (std::size_t c = 0; c < metrics_.size(); ++c) {
    QString name = QString::number(metrics_[c].id.value());
    for (const auto& o : overviews_)
      if (o.run.id == metrics_[c].id) name = qs(core::runLabel(o.run.name, o.run.id));
    headers << name;
  }
  metricsTable_->setHorizontalHeaderLabels(headers);
  QStringList labels;
  for (const auto& r : rows) labels << r.label;
  metricsTable_->setVerticalHeaderLabels(labels);
  for (int i = 0; i < static_cast<int>(rows.size()); ++i)
    for (int c = 0; c < static_cast<int>(metrics_.size()); ++c)
      metricsTable_->setItem(
          i, c,
          item(rows[static_cast<std::size_t>(i)].text(metrics_[static_cast<std::size_t>(c)]), Qt::AlignRight | Qt::AlignVCenter));
  metricsNote_->setText(
      tr("Step time: mean over ranks and counted steps (runs we trained leave their warm-up step "
         "out; GPU traces follow the GPU work of each step); shares and overlap: docs/METRICS.md. "
         "Throughput: tokens per step of the run's config over that step time (n/a for imported "
         "traces); initialisation is measured by the runtime."));
}

QJsonObject OverviewPage::describe() const {
  using namespace describe;
  QJsonObject out = Page::describe();
  QJsonArray runs;
  for (const auto& o : overviews_) {
    QJsonObject r = runRef(o.run.id, describe::qs(core::runLabel(o.run.name, o.run.id)));
    r[QStringLiteral("events")] = static_cast<double>(o.events);
    r[QStringLiteral("ranks")] = static_cast<int>(o.ranks.size());
    if (!o.imported.empty()) {
      QJsonArray files;
      for (const auto& f : o.imported) {
        QJsonObject fj;
        fj[QStringLiteral("path")] = describe::qs(f.path);
        fj[QStringLiteral("format")] = describe::qs(f.format);
        if (f.rank) fj[QStringLiteral("rank")] = *f.rank;
        fj[QStringLiteral("events")] = static_cast<double>(f.events);
        fj[QStringLiteral("skipped")] = static_cast<double>(f.skipped);
        QJsonArray warnings;
        for (const auto& w : f.warnings) warnings.append(describe::qs(w));
        fj[QStringLiteral("warnings")] = warnings;
        files.append(fj);
      }
      r[QStringLiteral("imported_from")] = files;
    }
    for (const auto& m : metrics_) {
      if (m.id != o.run.id) continue;
      r[QStringLiteral("figures")] = QJsonArray{
          figure(QStringLiteral("step_time_ms"), number(m.stepTimeMs), QStringLiteral("ms")),
          figure(QString::fromLatin1(core::metric_keys::kTokensPerSecond), number(m.tokensPerS), QStringLiteral("tokens/s")),
          figure(QStringLiteral("exposed_comm_pct"), number(m.exposedCommPct), QStringLiteral("%")),
          figure(QStringLiteral("overlap_pct"), number(m.overlapPct), QStringLiteral("%")),
          figure(QStringLiteral("peak_allocated_gib"), number(m.peakAllocatedGiB), QStringLiteral("GiB")),
          figure(QStringLiteral("peak_reserved_gib"), number(m.peakReservedGiB), QStringLiteral("GiB")),
          figure(QString::fromLatin1(core::metric_keys::kInitSeconds), number(m.initS), QStringLiteral("s"))};
    }
    runs.append(r);
  }
  out[QStringLiteral("runs")] = runs;
  QJsonArray rows;
  for (int r = 0; r < metricsTable_->rowCount(); ++r) {
    QJsonArray cells;
    for (int c = 0; c < metricsTable_->columnCount(); ++c) {
      const auto* it = metricsTable_->item(r, c);
      cells.append(it ? it->text() : QString());
    }
    rows.append(cells);
  }
  out[QStringLiteral("table_rows")] = rows;
  return out;
}

}  // namespace shardscope::ui
