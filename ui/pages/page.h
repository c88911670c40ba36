#pragma once
// A page of the main window (Overview/Compare, Timeline, Memory, Communication, Kernels, Estimator). The main
// window tells every page which database is open and which runs are selected in the run browser; a
// page asks the session (ui/session/run_session.h) for what it shows: the session runs the work off
// the GUI thread through its task runner and hands every page the same cached analyses. A page made
// on its own (tests) gets a session of its own.
#include <QComboBox>
#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>
#include <QWidget>

#include "core/model/config_knobs.h"

#include "core/model/types.h"
#include "ui/common/background.h"
#include "ui/session/run_session.h"

namespace shardscope::ui {

class Page : public QWidget {
  Q_OBJECT

 public:
  explicit Page(QWidget* parent = nullptr) : QWidget(parent) {}
  // The session the page reads through (the window's, shared by every page); before it is set, or
  // for a page made on its own, one of the page's own.
  void setSession(RunSession* session) { session_ = session; }
  RunSession* session() const {
    if (!session_) {
      own_ = new RunSession(const_cast<Page*>(this));
      session_ = own_;
    }
    return session_;
  }
  // Stable id used by --page and QSettings: "overview", "compare", "timeline", "memory", "communication".
  virtual QString pageId() const = 0;
  virtual QString title() const = 0;
  // The open database (empty: none) and the runs selected in the browser (first = baseline).
  virtual void setContext(const QString& dbPath, const QList<core::RunId>& runs) = 0;
  // True while the page is loading (the screenshot mode waits for false).
  virtual bool busy() const = 0;
  // What the page shows now (ui/pages/describe.h): the screenshot mode's OUT.json.
  virtual QJsonObject describe() const {
    return QJsonObject{{QStringLiteral("page"), pageId()}, {QStringLiteral("title"), title()}};
  }

 protected:
  // Called by setContext: a page with a session of its own opens the database in it (the window's
  // session already has it). Returns the session.
  RunSession* sessionFor(const QString& dbPath) {
    RunSession* s = session();
    if (s == own_ && s->dbPath() != dbPath) s->setDatabase(dbPath);
    return s;
  }
  // The page's slot in the session's task runner.
  QString taskSlot() const { return pageId(); }
  // "fsdp · runtime · world size 2 · completed": what a page says of the run it shows.
  static QString runInfoText(const core::Run& run) {
    auto sv = [](std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); };
    QStringList info;
    if (!run.strategy.empty()) info << QString::fromStdString(run.strategy);
    info << sv(core::toString(run.source));
    if (run.worldSize > 0) info << tr("world size %1").arg(run.worldSize);
    info << sv(core::toString(run.status));
    return info.join(QStringLiteral(" · "));
  }
  // Names run `id`'s entry of a run combo box "name #id" (core::runLabel), once its name is known.
  static void labelRun(QComboBox* combo, core::RunId id, const std::string& name) {
    const int i = combo->findData(QVariant::fromValue<qlonglong>(id.value()));
    if (i >= 0) combo->setItemText(i, QString::fromStdString(core::runLabel(name, id)));
  }
  // A page load's progress is the page's; `ended` runs once it is delivered, failed or cancelled.
  template <class F>
  void followLoad(BackgroundTask* task, F ended) {
    connect(task, &BackgroundTask::progress, this, &Page::progress);
    connect(task, &BackgroundTask::finished, this, ended);
    connect(task, &BackgroundTask::failed, this, ended);
    connect(task, &BackgroundTask::cancelled, this, ended);
  }

 Q_SIGNALS:
  void statusMessage(const QString& text);
  void errorMessage(const QString& text);            // shown in the window (log dock + status bar)
  void progress(int percent, const QString& stage);  // -1 percent: unknown; 100: done
  void busyChanged(bool busy);
  // Ask the main window to show an event in the timeline (Communication page rows).
  void jumpToEvent(core::RunId runId, core::Id eventId, qint64 startNs, qint64 endNs);
  // Ask the main window to launch a run's configuration with a change and compare the two (a
  // bottleneck's "try it").
  void tryChange(core::RunId runId, const core::KnobChange& change);

 private:
  mutable RunSession* session_ = nullptr;
  mutable RunSession* own_ = nullptr;
};

}  // namespace shardscope::ui
