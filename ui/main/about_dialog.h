#pragma once
// Help > About Shardscope: the application icon, what it is, and the versions of everything it is
// built with (Shardscope, Qt at compile and run time, SQLite loaded, QCustomPlot, and, when the
// runtime is built, LibTorch and CUDA/CUPTI from CMake's definitions: the GUI never links them).
// "Copy Versions" puts them on the clipboard for bug reports.
#include <QDialog>
#include <QStringList>

class QLabel;

namespace shardscope::ui {

// One line per component, e.g. "Qt 6.4.2 (built with 6.4.2)".
QStringList versionLines();

class AboutDialog : public QDialog {
  Q_OBJECT

 public:
  explicit AboutDialog(QWidget* parent = nullptr);
  QString versionsText() const;  // versionLines(), one per line (what Copy Versions copies)
  QLabel* versionsLabel() const { return versions_; }

 private:
  QLabel* versions_ = nullptr;
};

}  // namespace shardscope::ui
