#pragma once
// A page of the main window (Overview/Compare, Timeline, Memory, Communication, Estimator). The main
// window tells every page which database is open and which runs are selected in the run browser; a
// page loads what it shows off the GUI thread (ui/common/background.h) and reports through signals.
#include <QList>
#include <QString>
#include <QWidget>

#include "core/model/types.h"

namespace shardscope::ui {

class Page : public QWidget {
  Q_OBJECT

 public:
  explicit Page(QWidget* parent = nullptr) : QWidget(parent) {}
  // Stable id used by --page and QSettings: "overview", "compare", "timeline", "memory", "communication".
  virtual QString pageId() const = 0;
  virtual QString title() const = 0;
  // The open database (empty: none) and the runs selected in the browser (first = baseline).
  virtual void setContext(const QString& dbPath, const QList<core::Id>& runs) = 0;
  // True while the page is loading (the screenshot mode waits for false).
  virtual bool busy() const = 0;

 Q_SIGNALS:
  void statusMessage(const QString& text);
  void errorMessage(const QString& text);               // shown in the window (log dock + status bar)
  void progress(int percent, const QString& stage);     // -1 percent: unknown; 100: done
  void busyChanged(bool busy);
  // Ask the main window to show an event in the timeline (Communication page rows).
  void jumpToEvent(core::Id runId, core::Id eventId, qint64 startNs, qint64 endNs);
};

}  // namespace shardscope::ui
