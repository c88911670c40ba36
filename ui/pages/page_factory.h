#pragma once
// The main window's pages, in order: Overview, Compare, Timeline, Memory, Communication, Kernels, Estimator.
#include <QString>

#include <vector>

class QWidget;

namespace shardscope::ui {

class Page;

// Ids in display order ("overview", "compare", "timeline", "memory", "communication", "kernels", "estimator").
const std::vector<QString>& pageIds();
std::vector<Page*> createPages(QWidget* parent);
// Asks a page to stop loading (pages with a cancel()/cancelLoad()); false when it has no way to.
bool cancelPageLoading(Page* page);
// Asks a page to load its context again; false when it has no reload().
bool reloadPage(Page* page);

}  // namespace shardscope::ui
