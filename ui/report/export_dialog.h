#pragma once
// File ▸ Export Report…: the report of the runs selected in the browser (the first is the baseline)
// as HTML, PDF, Markdown or CSV, with a preview. The report is built off the GUI thread
// (BackgroundTask, its own read-only connection); the preview is the same QTextDocument the PDF is
// printed from, charts painted as vector graphics. Writing is on the GUI thread (the file is small:
// milliseconds, a PDF well under a second).
#include <QDialog>
#include <QList>
#include <QPointer>
#include <QString>

#include <memory>
#include <optional>
#include <string>

#include "core/model/types.h"
#include "core/report/report.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QTextBrowser;

namespace shardscope::ui {

class BackgroundTask;
class RunSession;

class ExportReportDialog : public QDialog {
  Q_OBJECT

 public:
  // With the window's session, the report reads the analyses the pages made (each run is analysed
  // once); without one it analyses the runs itself.
  ExportReportDialog(const QString& dbPath, const QList<core::RunId>& runs, QWidget* parent = nullptr,
                     RunSession* session = nullptr);
  ~ExportReportDialog() override;

  enum class Format { Html, Pdf, Markdown, Csv };
  void setFormat(Format f);
  Format format() const;
  QString outputPath() const;
  void setOutputPath(const QString& path);
  void setTitle(const QString& title);
  void setPageSize(const QString& name);  // "a4" | "letter"

  bool reportReady() const { return report_.has_value(); }
  const core::Report* report() const { return report_ ? &*report_ : nullptr; }
  QTextBrowser* preview() const { return preview_; }
  QPushButton* exportButton() const { return exportButton_; }
  QString statusText() const;
  // Writes the chosen format to the output path; false with the reason in statusText() on failure.
  bool exportNow();

 Q_SIGNALS:
  void reportBuilt();
  void buildFailed(const QString& error);
  void exported(const QString& path);

 private:
  void build();
  void updatePreview();
  void updateState();
  void formatChanged();
  void browse();

  QString dbPath_;
  QList<core::RunId> runs_;
  std::optional<core::Report> report_;
  std::string defaultTitle_;
  QPointer<BackgroundTask> task_;
  QPointer<RunSession> session_;
  QComboBox* format_ = nullptr;
  QComboBox* pageSize_ = nullptr;
  QLineEdit* title_ = nullptr;
  QLineEdit* path_ = nullptr;
  QTextBrowser* preview_ = nullptr;
  QLabel* status_ = nullptr;
  QPushButton* exportButton_ = nullptr;
};

}  // namespace shardscope::ui
