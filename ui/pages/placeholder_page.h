#pragma once
// A page that is not built yet (the Timeline until its issue lands, or a page whose code is not in
// this build): says so, shows the selected runs, and for the Timeline the event the user asked to
// see (Communication page rows jump there).
#include <QList>
#include <QString>

#include "ui/pages/page.h"

class QLabel;

namespace shardscope::ui {

class PlaceholderPage : public Page {
  Q_OBJECT

 public:
  PlaceholderPage(const QString& id, const QString& title, const QString& message, QWidget* parent = nullptr);

  QString pageId() const override { return id_; }
  QString title() const override { return title_; }
  void setContext(const QString& dbPath, const QList<core::Id>& runs) override;
  bool busy() const override { return false; }

  // The event a jumpToEvent asked for (shown in the page).
  void showRequestedEvent(core::Id runId, core::Id eventId, qint64 startNs, qint64 endNs);
  QString requestedEventText() const;
  QList<core::Id> runs() const { return runs_; }
  QString databasePath() const { return dbPath_; }

 private:
  void updateContextText();

  QString id_;
  QString title_;
  QString dbPath_;
  QList<core::Id> runs_;
  QLabel* context_ = nullptr;
  QLabel* event_ = nullptr;
};

}  // namespace shardscope::ui
