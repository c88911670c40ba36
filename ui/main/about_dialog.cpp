#include "ui/main/about_dialog.h"

#include <QApplication>
#include <QClipboard>
#include <QDialogButtonBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>
#include <QtGlobal>

#include "core/storage/sqlite_version.h"
#include "shardscope/build_info.h"
#include "ui/charts/qcp.h"
#include "ui/main/app_icons.h"

namespace shardscope::ui {

QStringList versionLines() {
  QStringList lines;
  lines << QStringLiteral("Shardscope %1").arg(QStringLiteral(SHARDSCOPE_VERSION));
  lines << QStringLiteral("Qt %1 (built with %2)").arg(QString::fromLatin1(qVersion()), QStringLiteral(QT_VERSION_STR));
  lines << QStringLiteral("SQLite %1").arg(QString::fromStdString(core::sqliteLibraryVersion()));
  lines << QStringLiteral("QCustomPlot %1").arg(QStringLiteral(QCUSTOMPLOT_VERSION_STR));
  const QString torch = QStringLiteral(SHARDSCOPE_BUILD_TORCH_VERSION);
  if (torch.isEmpty())
    lines << QStringLiteral("LibTorch: not in this build (no shardscope-worker; runs can be imported, not launched)");
  else
    lines << QStringLiteral("LibTorch %1 (%2, in shardscope-worker)")
                 .arg(torch, SHARDSCOPE_BUILD_TORCH_CUDA ? QStringLiteral("CUDA") : QStringLiteral("CPU"));
  const QString cuda = QStringLiteral(SHARDSCOPE_BUILD_CUDA_VERSION);
  const QString cupti = QStringLiteral(SHARDSCOPE_BUILD_CUPTI_API);
  if (cuda.isEmpty())
    lines << QStringLiteral("CUDA/CUPTI: not in this build");
  else
    lines << QStringLiteral("CUDA %1, CUPTI%2").arg(cuda, cupti.isEmpty() ? QString() : QStringLiteral(" API ") + cupti);
  return lines;
}

AboutDialog::AboutDialog(QWidget* parent) : QDialog(parent) {
  setObjectName(QStringLiteral("aboutDialog"));
  setWindowTitle(tr("About Shardscope"));
  auto* icon = new QLabel(this);
  icon->setPixmap(appIcon().pixmap(96, 96));
  icon->setAlignment(Qt::AlignTop);
  auto* intro =
      new QLabel(tr("<h3>Shardscope %1</h3><p>Profiler and strategy explorer for sharded training (DDP, FSDP, ZeRO).</p>"
                    "<p>Runs are stored in one SQLite file; traces from torch.profiler (Kineto) are imported, and "
                    "<code>shardscope-cli run/compare</code> trains and captures runs of its own.</p>"
                    "<p>Licensed under the GNU General Public License, version 3 or later. Page and toolbar icons: GNOME Adwaita "
                    "(LGPL-3).</p>")
                     .arg(QStringLiteral(SHARDSCOPE_VERSION)),
                 this);
  intro->setWordWrap(true);
  versions_ = new QLabel(versionLines().join(QLatin1Char('\n')), this);
  versions_->setObjectName(QStringLiteral("aboutVersions"));
  versions_->setTextFormat(Qt::PlainText);
  versions_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  auto* copy = buttons->addButton(tr("Copy Versions"), QDialogButtonBox::ActionRole);
  copy->setObjectName(QStringLiteral("copyVersions"));
  connect(copy, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(versionsText()); });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

  auto* text = new QVBoxLayout;
  text->addWidget(intro);
  text->addWidget(versions_);
  auto* top = new QHBoxLayout;
  top->addWidget(icon);
  top->addLayout(text, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(buttons);
  resize(520, sizeHint().height());
}

QString AboutDialog::versionsText() const { return versions_->text(); }

}  // namespace shardscope::ui
