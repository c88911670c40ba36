#pragma once
// The application's icons, from the resources compiled into shardscope_ui (resources/shardscope.qrc):
// the application icon (drawn for Shardscope, every hicolor size) and the page and toolbar icons
// (GNOME Adwaita symbolic icons, LGPL-3: packaging/licenses/Adwaita-icons.md).
#include <QIcon>
#include <QString>

namespace shardscope::ui {

// Registers the resources (once; a static library's resources are not registered by themselves).
void initResources();
// The application icon, all sizes (the window icon).
QIcon appIcon();
// A toolbar or menu icon by its Adwaita name ("document-open", "view-refresh", ...); null if unknown.
QIcon actionIcon(const QString& name);
// The icon of a page ("overview", "compare", "timeline", ...); null for an unknown page.
QIcon pageIcon(const QString& pageId);

}  // namespace shardscope::ui
