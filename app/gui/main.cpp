#include <QApplication>
#include <QCommandLineParser>

#include "ui/main/main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("Shardscope"));
  QApplication::setOrganizationName(QStringLiteral("Shardscope"));
  QApplication::setApplicationVersion(QStringLiteral(SHARDSCOPE_VERSION));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Profiler and strategy explorer for sharded training"));
  parser.addHelpOption();
  parser.addVersionOption();
  QCommandLineOption open(QStringLiteral("open"), QStringLiteral("Open a Shardscope database."), QStringLiteral("FILE.db"));
  parser.addOption(open);
  parser.process(app);

  shardscope::ui::MainWindow window;
  if (parser.isSet(open)) window.openDatabase(parser.value(open));
  window.show();
  return QApplication::exec();
}
