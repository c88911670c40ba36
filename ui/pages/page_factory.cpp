#include "ui/pages/page_factory.h"

#include <QMetaObject>

#include "ui/pages/communication_page.h"
#include "ui/pages/compare_page.h"
#include "ui/pages/estimator_page.h"
#include "ui/pages/kernels_page.h"
#include "ui/pages/memory_page.h"
#include "ui/pages/overview_page.h"
#include "ui/pages/page.h"
#include "ui/pages/timeline_page.h"

namespace shardscope::ui {

namespace {

// Calls a slot or Q_INVOKABLE method by name when the page has one.
bool invokeIfPresent(Page* page, const char* signature, const char* name) {
  if (page->metaObject()->indexOfMethod(signature) < 0) return false;
  return QMetaObject::invokeMethod(page, name, Qt::DirectConnection);
}

}  // namespace

const std::vector<QString>& pageIds() {
  static const std::vector<QString> ids = {
      QStringLiteral("overview"),      QStringLiteral("compare"), QStringLiteral("timeline"), QStringLiteral("memory"),
      QStringLiteral("communication"), QStringLiteral("kernels"), QStringLiteral("estimator")};
  return ids;
}

std::vector<Page*> createPages(QWidget* parent) {
  return {new OverviewPage(parent),      new ComparePage(parent), new TimelinePage(parent), new MemoryPage(parent),
          new CommunicationPage(parent), new KernelsPage(parent), new EstimatorPage(parent)};
}

bool cancelPageLoading(Page* page) {
  if (!page) return false;
  if (auto* o = qobject_cast<OverviewPage*>(page)) {
    o->cancel();
    return true;
  }
  if (auto* t = qobject_cast<TimelinePage*>(page)) {
    t->cancelLoad();
    return true;
  }
  if (auto* c = qobject_cast<ComparePage*>(page)) {
    c->cancelLoad();
    return true;
  }
  if (auto* m = qobject_cast<MemoryPage*>(page)) {
    m->cancelLoad();
    return true;
  }
  if (auto* k = qobject_cast<KernelsPage*>(page)) {
    k->cancelLoad();
    return true;
  }
  return invokeIfPresent(page, "cancel()", "cancel") || invokeIfPresent(page, "cancelLoad()", "cancelLoad");
}

bool reloadPage(Page* page) {
  if (!page) return false;
  if (auto* o = qobject_cast<OverviewPage*>(page)) {
    o->reload();
    return true;
  }
  if (auto* t = qobject_cast<TimelinePage*>(page)) {
    t->reload();
    return true;
  }
  if (auto* c = qobject_cast<ComparePage*>(page)) {
    c->reload();
    return true;
  }
  if (auto* m = qobject_cast<MemoryPage*>(page)) {
    m->reload();
    return true;
  }
  if (auto* k = qobject_cast<KernelsPage*>(page)) {
    k->reload();
    return true;
  }
  return invokeIfPresent(page, "reload()", "reload");
}

}  // namespace shardscope::ui
