#include "ui/pages/page_factory.h"

#include <QMetaObject>

#include "ui/pages/estimator_page.h"
#include "ui/pages/overview_page.h"
#include "ui/pages/page.h"
#include "ui/pages/placeholder_page.h"
#include "ui/pages/timeline_page.h"

#if __has_include("ui/pages/compare_page.h")
#include "ui/pages/compare_page.h"
#define SHARDSCOPE_HAVE_COMPARE_PAGE 1
#endif
#if __has_include("ui/pages/memory_page.h")
#include "ui/pages/memory_page.h"
#define SHARDSCOPE_HAVE_MEMORY_PAGE 1
#endif
#if __has_include("ui/pages/communication_page.h")
#include "ui/pages/communication_page.h"
#define SHARDSCOPE_HAVE_COMMUNICATION_PAGE 1
#endif

namespace shardscope::ui {

namespace {

[[maybe_unused]] Page* placeholder(const QString& id, const QString& title, QWidget* parent) {
  return new PlaceholderPage(id, title, QObject::tr("The %1 page is not part of this build yet.").arg(title), parent);
}

// Calls a slot or Q_INVOKABLE method by name when the page has one.
bool invokeIfPresent(Page* page, const char* signature, const char* name) {
  if (page->metaObject()->indexOfMethod(signature) < 0) return false;
  return QMetaObject::invokeMethod(page, name, Qt::DirectConnection);
}

}  // namespace

const std::vector<QString>& pageIds() {
  static const std::vector<QString> ids = {QStringLiteral("overview"), QStringLiteral("compare"), QStringLiteral("timeline"),
                                           QStringLiteral("memory"), QStringLiteral("communication"),
                                           QStringLiteral("estimator")};
  return ids;
}

std::vector<Page*> createPages(QWidget* parent) {
  std::vector<Page*> pages;
  pages.push_back(new OverviewPage(parent));
#ifdef SHARDSCOPE_HAVE_COMPARE_PAGE
  pages.push_back(new ComparePage(parent));
#else
  pages.push_back(placeholder(QStringLiteral("compare"), QObject::tr("Compare"), parent));
#endif
  pages.push_back(new TimelinePage(parent));
#ifdef SHARDSCOPE_HAVE_MEMORY_PAGE
  pages.push_back(new MemoryPage(parent));
#else
  pages.push_back(placeholder(QStringLiteral("memory"), QObject::tr("Memory"), parent));
#endif
#ifdef SHARDSCOPE_HAVE_COMMUNICATION_PAGE
  pages.push_back(new CommunicationPage(parent));
#else
  pages.push_back(placeholder(QStringLiteral("communication"), QObject::tr("Communication"), parent));
#endif
  pages.push_back(new EstimatorPage(parent));
  return pages;
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
#ifdef SHARDSCOPE_HAVE_COMPARE_PAGE
  if (auto* c = qobject_cast<ComparePage*>(page)) {
    c->cancelLoad();
    return true;
  }
#endif
#ifdef SHARDSCOPE_HAVE_MEMORY_PAGE
  if (auto* m = qobject_cast<MemoryPage*>(page)) {
    m->cancelLoad();
    return true;
  }
#endif
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
#ifdef SHARDSCOPE_HAVE_COMPARE_PAGE
  if (auto* c = qobject_cast<ComparePage*>(page)) {
    c->reload();
    return true;
  }
#endif
#ifdef SHARDSCOPE_HAVE_MEMORY_PAGE
  if (auto* m = qobject_cast<MemoryPage*>(page)) {
    m->reload();
    return true;
  }
#endif
  return invokeIfPresent(page, "reload()", "reload");
}

}  // namespace shardscope::ui
