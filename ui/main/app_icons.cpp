#include "ui/main/app_icons.h"

#include <QFile>

// Q_INIT_RESOURCE must be called outside any namespace.
static void registerShardscopeResources() { Q_INIT_RESOURCE(shardscope); }

namespace shardscope::ui {

void initResources() {
  static const bool done = [] {
    registerShardscopeResources();
    return true;
  }();
  (void)done;
}

QIcon appIcon() {
  initResources();
  QIcon icon;
  for (int size : {16, 22, 24, 32, 48, 64, 128, 256})
    icon.addFile(QStringLiteral(":/icons/hicolor/%1x%1/apps/shardscope.png").arg(size), QSize(size, size));
  return icon;
}

QIcon actionIcon(const QString& name) {
  initResources();
  // name.png (16 px) and name-32.png (32 px: high-DPI screens, large toolbar buttons).
  const QString path = QStringLiteral(":/icons/actions/%1.png").arg(name);
  if (!QFile::exists(path)) return {};
  QIcon icon;
  icon.addFile(path, QSize(16, 16));
  icon.addFile(QStringLiteral(":/icons/actions/%1-32.png").arg(name), QSize(32, 32));
  return icon;
}

QIcon pageIcon(const QString& pageId) {
  static const struct {
    const char* page;
    const char* icon;
  } kPages[] = {
      {"overview", "view-grid"},
      {"compare", "view-dual"},
      {"timeline", "media-playlist-consecutive"},
      {"memory", "drive-harddisk-solidstate"},
      {"communication", "network-transmit-receive"},
      {"kernels", "system-run"},
      {"estimator", "accessories-calculator"},
  };
  for (const auto& p : kPages)
    if (pageId == QLatin1String(p.page)) return actionIcon(QLatin1String(p.icon));
  return {};
}

}  // namespace shardscope::ui
