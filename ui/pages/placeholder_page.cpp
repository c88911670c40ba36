#include "ui/pages/placeholder_page.h"

#include <QLabel>
#include <QStringList>
#include <QVBoxLayout>

namespace shardscope::ui {

PlaceholderPage::PlaceholderPage(const QString& id, const QString& title, const QString& message, QWidget* parent)
    : Page(parent), id_(id), title_(title) {
  setObjectName(QStringLiteral("page_") + id);
  auto* layout = new QVBoxLayout(this);
  layout->addStretch(1);
  auto* heading = new QLabel(QStringLiteral("<h2>%1</h2>").arg(title.toHtmlEscaped()), this);
  heading->setAlignment(Qt::AlignCenter);
  layout->addWidget(heading);
  auto* text = new QLabel(message, this);
  text->setAlignment(Qt::AlignCenter);
  text->setWordWrap(true);
  layout->addWidget(text);
  context_ = new QLabel(this);
  context_->setAlignment(Qt::AlignCenter);
  context_->setStyleSheet(QStringLiteral("color: palette(mid);"));
  layout->addWidget(context_);
  event_ = new QLabel(this);
  event_->setObjectName(QStringLiteral("requestedEvent"));
  event_->setAlignment(Qt::AlignCenter);
  event_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  event_->hide();
  layout->addWidget(event_);
  layout->addStretch(2);
  updateContextText();
}

void PlaceholderPage::setContext(const QString& dbPath, const QList<core::Id>& runs) {
  dbPath_ = dbPath;
  runs_ = runs;
  updateContextText();
}

void PlaceholderPage::updateContextText() {
  if (dbPath_.isEmpty()) {
    context_->setText(tr("No database open."));
    return;
  }
  QStringList ids;
  for (auto id : runs_) ids << QString::number(id);
  context_->setText(runs_.isEmpty() ? tr("No run selected.") : tr("Selected run(s): %1").arg(ids.join(QStringLiteral(", "))));
}

void PlaceholderPage::showRequestedEvent(core::Id runId, core::Id eventId, qint64 startNs, qint64 endNs) {
  const double durUs = static_cast<double>(endNs - startNs) / 1000.0;
  event_->setText(tr("Requested event: run %1, event %2 (chunk %3, index %4), start %5 ns, duration %6 µs")
                      .arg(runId)
                      .arg(eventId)
                      .arg(eventId >> 16)
                      .arg(eventId & 0xffff)
                      .arg(startNs)
                      .arg(durUs, 0, 'f', 1));
  event_->show();
  Q_EMIT statusMessage(tr("%1: event %2 of run %3 requested (the timeline arrives with its issue)").arg(title_).arg(eventId).arg(runId));
}

QString PlaceholderPage::requestedEventText() const { return event_->text(); }

}  // namespace shardscope::ui
