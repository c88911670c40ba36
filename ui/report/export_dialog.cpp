#include "ui/report/export_dialog.h"

#include <QScreen>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QTextBrowser>
#include <QTextDocument>
#include <QVBoxLayout>

#include <exception>

#include "core/storage/open_guard.h"
#include "core/report/csv_writer.h"
#include "core/report/html_writer.h"
#include "core/report/markdown_writer.h"
#include "ui/common/background.h"
#include "ui/session/run_session.h"
#include "ui/report/pdf_writer.h"

namespace shardscope::ui {
namespace {

const char* extensionOf(ExportReportDialog::Format f) {
  switch (f) {
    case ExportReportDialog::Format::Html:
      return "html";
    case ExportReportDialog::Format::Pdf:
      return "pdf";
    case ExportReportDialog::Format::Markdown:
      return "md";
    case ExportReportDialog::Format::Csv:
      return "csv";
  }
  return "html";
}

void saveText(const QString& path, const std::string& bytes) {
  core::refuseToReplaceDatabase(path.toStdString(), "saving the report there");
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly) ||
      f.write(bytes.data(), static_cast<qint64>(bytes.size())) != static_cast<qint64>(bytes.size()) || !f.commit())
    throw core::Error(path.toStdString() + ": cannot write: " + f.errorString().toStdString());
}

}  // namespace

ExportReportDialog::ExportReportDialog(const QString& dbPath, const QList<core::RunId>& runs, QWidget* parent,
                                       RunSession* session)
    : QDialog(parent), dbPath_(dbPath), runs_(runs), session_(session) {
  setWindowTitle(tr("Export Report"));
  setObjectName(QStringLiteral("exportReportDialog"));
  // At most the screen's available size.
  QSize size(980, 760);
  if (const QScreen* screen = this->screen()) size = size.boundedTo(screen->availableGeometry().size() - QSize(40, 60));
  resize(size);
  auto* form = new QFormLayout;
  format_ = new QComboBox(this);
  format_->setObjectName(QStringLiteral("reportFormat"));
  format_->addItem(tr("HTML (one self-contained file)"), static_cast<int>(Format::Html));
  format_->addItem(tr("PDF"), static_cast<int>(Format::Pdf));
  format_->addItem(tr("Markdown (wikis, pull requests)"), static_cast<int>(Format::Markdown));
  format_->addItem(tr("CSV (comparison + collectives)"), static_cast<int>(Format::Csv));
  pageSize_ = new QComboBox(this);
  pageSize_->setObjectName(QStringLiteral("reportPageSize"));
  pageSize_->addItem(QStringLiteral("A4"), QStringLiteral("a4"));
  pageSize_->addItem(QStringLiteral("Letter"), QStringLiteral("letter"));
  title_ = new QLineEdit(this);
  title_->setObjectName(QStringLiteral("reportTitle"));
  title_->setPlaceholderText(tr("default: from the runs"));
  path_ = new QLineEdit(this);
  path_->setObjectName(QStringLiteral("reportPath"));
  auto* browse = new QPushButton(tr("Browse…"), this);
  auto* pathRow = new QHBoxLayout;
  pathRow->addWidget(path_, 1);
  pathRow->addWidget(browse);
  QString runsText;
  for (int i = 0; i < runs_.size(); ++i) runsText += (i ? QStringLiteral(", ") : QString()) + QString::number(runs_[i].value());
  auto* runsLabel = new QLabel(
      runs_.isEmpty() ? tr("no run selected") : runsText + (runs_.size() > 1 ? tr("  (the first is the baseline)") : QString()),
      this);
  form->addRow(tr("Runs:"), runsLabel);
  form->addRow(tr("Format:"), format_);
  form->addRow(tr("Page size:"), pageSize_);
  form->addRow(tr("Title:"), title_);
  form->addRow(tr("Save to:"), pathRow);

  preview_ = new QTextBrowser(this);
  preview_->setObjectName(QStringLiteral("reportPreview"));
  preview_->setOpenLinks(false);
  preview_->setOpenExternalLinks(false);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("reportStatus"));
  status_->setWordWrap(true);
  status_->setTextFormat(Qt::PlainText);

  auto* buttons = new QDialogButtonBox(this);
  exportButton_ = buttons->addButton(tr("Export"), QDialogButtonBox::AcceptRole);
  exportButton_->setObjectName(QStringLiteral("reportExport"));
  buttons->addButton(QDialogButtonBox::Cancel);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(exportButton_, &QPushButton::clicked, this, [this] {
    if (exportNow()) accept();
  });
  connect(browse, &QPushButton::clicked, this, &ExportReportDialog::browse);
  connect(format_, &QComboBox::currentIndexChanged, this, &ExportReportDialog::formatChanged);
  connect(title_, &QLineEdit::editingFinished, this, &ExportReportDialog::updatePreview);
  connect(path_, &QLineEdit::textChanged, this, &ExportReportDialog::updateState);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(new QLabel(tr("Preview (the PDF's layout; the HTML file is styled for browsers and phones):"), this));
  layout->addWidget(preview_, 1);
  layout->addWidget(status_);
  layout->addWidget(buttons);

  const QString dir = dbPath_.isEmpty() ? QDir::homePath() : QFileInfo(dbPath_).absolutePath();
  path_->setText(QDir(dir).filePath(QStringLiteral("shardscope-report.html")));
  formatChanged();
  build();
}

ExportReportDialog::~ExportReportDialog() {
  if (task_) {
    task_->cancel();  // core checks the token between steps
    task_->wait(2000);
  }
}

void ExportReportDialog::setFormat(Format f) { format_->setCurrentIndex(format_->findData(static_cast<int>(f))); }

ExportReportDialog::Format ExportReportDialog::format() const { return static_cast<Format>(format_->currentData().toInt()); }

QString ExportReportDialog::outputPath() const { return path_->text(); }
void ExportReportDialog::setOutputPath(const QString& path) { path_->setText(path); }
void ExportReportDialog::setTitle(const QString& title) {
  title_->setText(title);
  updatePreview();
}
void ExportReportDialog::setPageSize(const QString& name) { pageSize_->setCurrentIndex(pageSize_->findData(name.toLower())); }
QString ExportReportDialog::statusText() const { return status_->text(); }

void ExportReportDialog::formatChanged() {
  pageSize_->setEnabled(format() == Format::Pdf);
  // Keep the chosen name, change the extension.
  QFileInfo fi(path_->text());
  if (!path_->text().isEmpty())
    path_->setText(
        QDir(fi.absolutePath()).filePath(fi.completeBaseName() + QLatin1Char('.') + QLatin1String(extensionOf(format()))));
  updateState();
}

void ExportReportDialog::browse() {
  const QString ext = QLatin1String(extensionOf(format()));
  const QString chosen =
      QFileDialog::getSaveFileName(this, tr("Export Report"), path_->text(), tr("%1 files (*.%2)").arg(ext.toUpper(), ext));
  if (!chosen.isEmpty()) path_->setText(chosen);
}

void ExportReportDialog::build() {
  if (runs_.isEmpty()) {
    status_->setText(tr("Select one run (a report) or several (a comparison) in the run browser first."));
    updateState();
    return;
  }
  status_->setText(tr("Analysing %n run(s)…", nullptr, static_cast<int>(runs_.size())));
  const std::vector<core::RunId> ids(runs_.begin(), runs_.end());
  auto done = [this](core::Report r) {
    report_ = std::move(r);
    defaultTitle_ = report_->title;
    status_->setText(tr("Report ready (analysed in %1 s).").arg(report_->buildSeconds, 0, 'f', 2));
    updatePreview();
    updateState();
    Q_EMIT reportBuilt();
  };
  auto failed = [this](const QString& error) {
    status_->setText(tr("Cannot build the report: %1").arg(error));
    updateState();
    Q_EMIT buildFailed(error);
  };
  if (session_ && session_->dbPath() == dbPath_) {
    task_ = session_->run<core::Report>(
        this, QStringLiteral("report"), tr("Building the report"),
        [ids](core::TraceStore& store, RunCache& cache, core::CancelToken& cancel, const core::ProgressFn& progress) {
          core::ReportOptions options;
          options.analysisSource = RunSession::analysisSource(cache, store, &cancel);
          return core::buildReport(store, ids, options, &cancel, progress);
        },
        done, failed);
  } else {
    task_ = BackgroundTask::start<core::Report>(
        this, dbPath_,
        [ids](core::TraceStore& store, core::CancelToken& cancel, const core::ProgressFn& progress) {
          return core::buildReport(store, ids, {}, &cancel, progress);
        },
        done, failed);
  }
  connect(task_, &BackgroundTask::progress, this, [this](int pct, const QString& stage) {
    status_->setText(pct >= 0 ? tr("%1… %2 %").arg(stage).arg(pct) : stage + QStringLiteral("…"));
  });
  updateState();
}

void ExportReportDialog::updatePreview() {
  if (!report_) return;
  const std::string title = title_->text().trimmed().toStdString();
  report_->title = title.empty() ? defaultTitle_ : title;
  auto doc = buildReportDocument(*report_);
  QTextDocument* d = doc.release();
  d->setParent(preview_);  // the browser deletes its previous document, a child of it, itself
  preview_->setDocument(d);
  registerChartPainter(d);
}

void ExportReportDialog::updateState() { exportButton_->setEnabled(report_.has_value() && !path_->text().trimmed().isEmpty()); }

bool ExportReportDialog::exportNow() {
  if (!report_) {
    status_->setText(tr("The report is not ready yet."));
    return false;
  }
  const QString path = path_->text().trimmed();
  if (path.isEmpty()) {
    status_->setText(tr("Choose a file to save to."));
    return false;
  }
  const std::string title = title_->text().trimmed().toStdString();
  report_->title = title.empty() ? defaultTitle_ : title;
  try {
    switch (format()) {
      case Format::Html:
        saveText(path, core::writeHtml(*report_));
        break;
      case Format::Markdown:
        saveText(path, core::writeMarkdown(*report_));
        break;
      case Format::Csv:
        saveText(path, core::comparisonCsv(*report_));
        saveText(QString::fromStdString(core::collectivesCsvPath(path.toStdString())), core::collectivesCsv(*report_));
        saveText(QString::fromStdString(core::strategiesCsvPath(path.toStdString())), core::strategiesCsv(*report_));
        break;
      case Format::Pdf:
        writeReportPdf(
            *report_, path,
            pageSize_->currentData().toString() == QStringLiteral("letter") ? ReportPageSize::Letter : ReportPageSize::A4);
        break;
    }
  } catch (const std::exception& e) {
    status_->setText(tr("Export failed: %1").arg(QString::fromUtf8(e.what())));
    return false;
  }
  status_->setText(tr("Wrote %1").arg(path));
  Q_EMIT exported(path);
  return true;
}

}  // namespace shardscope::ui
