#pragma once
// The launch dialog: what `shardscope-cli compare` should run. Model preset and depth, the
// strategies to compare, world size, steps, batch and sequence length, precision, device and backend
// up front; every other knob of core::runConfigKeys() in tabs by its group (editors generated from
// the key table, so every knob is reachable); or a DeepSpeed JSON that fills the fields
// (core::fromDeepSpeedJson, its warnings shown).
//
// Validation runs on every edit, exactly as the CLI will: each field is applied with
// core::applyFlag, then core::checkRunConfig() per selected strategy (shard_group_size cleared for
// the others, as `compare` does). An error names its key; the dialog marks that field (red border and
// the message under it, the tab flagged) and keeps Launch disabled until every field is valid.
//
//   LaunchDialog dlg(this);
//   if (dlg.exec() == QDialog::Accepted) controller->start(dbPath, dlg.config(), dlg.strategies());
#include <QDialog>
#include <QMap>
#include <QString>
#include <QStringList>

#include <functional>
#include <vector>

#include "core/config/run_config.h"

class QCheckBox;
class QFrame;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTabWidget;

namespace shardscope::ui {

class LaunchDialog : public QDialog {
  Q_OBJECT

 public:
  explicit LaunchDialog(QWidget* parent = nullptr);
  ~LaunchDialog() override;

  // The same comparison as `shardscope-cli compare` flags (without "compare" and --db), for people:
  // --strategies, --model, --world-size, --steps and every knob that differs from its default. The
  // app itself launches with config() and strategies() (RunController passes the JSON).
  QStringList arguments() const;
  // The command line shown in the dialog (for the log).
  QString commandLine() const;
  // Only for the preview line: the database the comparison will be written to.
  void setDatabasePath(const QString& path);

  // Selected strategies, in core's order ("ddp", "zero3", ...).
  QStringList strategies() const;
  void setStrategies(const QStringList& names);

  // A knob's value as its flag takes it ("4", "true", "auto", "pre"), by JSON key ("world_size").
  QString value(const QString& key) const;
  void setValue(const QString& key, const QString& value);
  QStringList keys() const;  // every key with an editor (all of runConfigKeys() but "strategy")
  QWidget* editorFor(const QString& key) const;

  // Fills every field from a RunConfig (and selects its strategy).
  void setConfig(const core::RunConfig& cfg);
  // The configuration the fields describe (strategy: the first selected). Fields that do not parse
  // keep their defaults.
  core::RunConfig config() const;

  // The run names' prefix (compare --name; empty: the strategy names alone) and how many times each
  // configuration runs (compare --repeats; the verdict then uses the run-to-run spread and a t-test).
  QString runName() const;
  void setRunName(const QString& name);
  int repeats() const;
  void setRepeats(int n);

  // What was launched last (QSettings "launch/..."): the fields, strategies, name and repeats.
  // The main window restores them when it opens the dialog and saves them when a launch is accepted.
  void saveSettings() const;
  bool restoreSettings();  // false when nothing was saved (or it no longer reads)

  // Loads a DeepSpeed JSON over the current fields. False (and the error shown) when refused.
  bool loadDeepSpeedJson(const QString& path);
  QStringList deepSpeedWarnings() const { return dsWarnings_; }
  QString deepSpeedError() const { return dsError_; }

  // Validation state. errorFor("strategies") is the strategy box's.
  bool isValid() const { return errors_.isEmpty(); }
  QString errorFor(const QString& key) const { return errors_.value(key); }
  QStringList invalidKeys() const { return errors_.keys(); }
  bool isMarked(const QString& key) const;  // the field shows its error (red border, message)
  QPushButton* launchButton() const { return launch_; }
  QTabWidget* knobTabs() const { return tabs_; }

  // Runs the validation now (it also runs on every edit).
  void revalidate();

 private:
  struct Field {
    core::RunConfigKeyInfo info;
    QWidget* editor = nullptr;
    QFrame* frame = nullptr;
    QLabel* error = nullptr;
    int tab = -1;  // -1: the main section
    std::function<QString()> get;
    std::function<void(const QString&)> set;
  };
  Field* field(const QString& key);
  const Field* field(const QString& key) const;
  QWidget* makeField(Field& f);  // the editor in its frame with its error label
  void buildUi();
  void chooseDeepSpeedFile();
  void resetDefaults();
  void showErrors();
  void updatePreview();

  std::vector<Field> fields_;
  QMap<QString, QCheckBox*> strategyBoxes_;
  QFrame* strategyFrame_ = nullptr;
  QLabel* strategyError_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  QStringList tabGroups_;
  QLabel* presetHint_ = nullptr;
  QLabel* dsFile_ = nullptr;
  QLabel* dsMessages_ = nullptr;
  QLabel* summary_ = nullptr;
  QLineEdit* preview_ = nullptr;
  QLineEdit* runName_ = nullptr;
  QSpinBox* repeats_ = nullptr;
  QPushButton* launch_ = nullptr;
  QString dbPath_;
  QMap<QString, QString> errors_;  // key -> message
  QStringList dsWarnings_;
  QString dsError_;
  bool filling_ = false;  // setConfig in progress: validate once at the end
};

}  // namespace shardscope::ui
