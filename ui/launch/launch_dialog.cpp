#include "ui/launch/launch_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QFrame>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QSettings>
#include <QScreen>
#include <QSpinBox>
#include <QStyle>
#include <QTabBar>
#include <QTabWidget>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

#include "core/config/config_problem.h"
#include "core/estimator/memory_estimator.h"
#include "core/model/model_presets.h"
#include "core/util/error.h"
#include "core/util/json.h"

namespace shardscope::ui {

namespace {

// "Llama 3 8B: 32 layers · hidden 4096 · 8.03 B parameters", from the one preset table.
QString presetHint(const QString& name) {
  const core::ModelPreset* p = core::findModelPreset(name.toStdString());
  const auto shape = core::estimator::modelShapePreset(name.toStdString());
  if (!p || !shape) return {};
  const double n = static_cast<double>(core::estimator::parameterCount(*shape));
  const QString count = n < 1e6   ? QStringLiteral("%1 K").arg(n / 1e3, 0, 'f', 0)
                        : n < 1e9 ? QStringLiteral("%1 M").arg(n / 1e6, 0, 'f', 2)
                                  : QStringLiteral("%1 B").arg(n / 1e9, 0, 'f', 2);
  QString text = QStringLiteral("%1 layers \u00b7 hidden %2 \u00b7 %3 parameters").arg(p->layers).arg(p->hidden).arg(count);
  if (!p->cpuSized)
    text = QString::fromUtf8(p->note.data(), static_cast<qsizetype>(p->note.size())) + QStringLiteral(": ") + text;
  return text;
}

QString qs(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

// Keys shown in the main section (the rest go to the tabs by group).
const QStringList kMainModel = {"model", "layers", "steps", "micro_batch", "seq_len", "precision"};
const QStringList kMainParallel = {"world_size", "device", "backend"};

// Readable labels; other keys get one made from the key.
QString labelFor(const QString& key) {
  static const QMap<QString, QString> labels = {
      {"model", "Model preset"},
      {"layers", "Size (layers)"},
      {"steps", "Steps"},
      {"micro_batch", "Micro batch"},
      {"seq_len", "Sequence length"},
      {"precision", "Precision"},
      {"world_size", "World size (ranks)"},
      {"device", "Device"},
      {"backend", "Backend"},
      {"seed", "Seed"},
      {"grad_accum", "Gradient accumulation"},
      {"data_file", "Data file"},
      {"activation_checkpointing", "Activation checkpointing"},
      {"nnodes", "Nodes"},
      {"node_rank", "Node rank"},
      {"nproc_per_node", "Ranks per node"},
      {"optimizer", "Optimizer"},
      {"lr", "Learning rate"},
      {"weight_decay", "Weight decay"},
      {"beta1", "Adam β1"},
      {"beta2", "Adam β2"},
      {"eps", "Adam ε"},
      {"momentum", "SGD momentum"},
      {"grad_clip", "Gradient clipping"},
      {"reduce_dtype", "Reduce dtype"},
      {"bucket_cap_mb", "Bucket cap (MiB)"},
      {"first_bucket_mb", "First bucket (MiB)"},
      {"gradient_as_bucket_view", "Gradient as bucket view"},
      {"reduce_bucket_size", "Reduce bucket (elements)"},
      {"allgather_bucket_size", "All-gather bucket (elements)"},
      {"overlap_comm", "Overlap communication"},
      {"contiguous_gradients", "Contiguous gradients"},
      {"prefetch_bucket_size", "Prefetch bucket (elements)"},
      {"param_persistence_threshold", "Persistence threshold (elements)"},
      {"max_live_parameters", "Max live parameters"},
      {"max_reuse_distance", "Max reuse distance"},
      {"offload_optimizer", "Offload optimizer"},
      {"offload_param", "Offload parameters"},
      {"backward_prefetch", "Backward prefetch"},
      {"forward_prefetch", "Forward prefetch"},
      {"limit_all_gathers", "Limit all-gathers"},
      {"shard_group_size", "Shard group size"},
      {"save_checkpoint", "Save checkpoint"},
      {"consolidate_checkpoint", "Consolidate checkpoint"},
      {"checkpoint_dir", "Checkpoint directory"},
      {"capture", "Capture trace"},
      {"hang_timeout_s", "Hang timeout (s)"},
      {"flush_interval_s", "Flush interval (s)"},
  };
  if (auto it = labels.find(key); it != labels.end()) return *it;
  QString s = key;
  s.replace(QLatin1Char('_'), QLatin1Char(' '));
  if (!s.isEmpty()) s[0] = s[0].toUpper();
  return s;
}

QString strategyHelp(const QString& s) {
  static const QMap<QString, QString> help = {
      {"ddp", "DistributedDataParallel: every rank holds the whole model; gradient buckets all-reduced during backward"},
      {"zero1", "ZeRO-1: optimizer state sharded; gradients all-reduced, updated partitions all-gathered"},
      {"zero2", "ZeRO-2: optimizer state and gradients sharded (reduce in IPG buckets during backward)"},
      {"zero3", "ZeRO-3: parameters, gradients and optimizer state sharded; modules gathered on use, with prefetch"},
      {"fsdp", "FSDP FULL_SHARD: one flat parameter per unit, gathered for forward and again for backward"},
      {"fsdp_grad_op", "FSDP SHARD_GRAD_OP: parameters stay gathered from forward to the end of backward"},
      {"hsdp", "HSDP: FSDP inside shard groups, gradients all-reduced across the replicas"},
  };
  return help.value(s);
}

// Tab order: the strategy knobs first.
const QStringList kGroupOrder = {"DDP",          "ZeRO",      "FSDP/HSDP", "Checkpointing & capture",
                                 "Model & data", "Optimizer", "Precision", "Parallelism"};

QString jsonText(const core::JsonValue& v) {
  if (v.isBool()) return v.asBool() ? QStringLiteral("true") : QStringLiteral("false");
  if (v.isNull()) return QStringLiteral("auto");
  return QString::fromStdString(v.asString());
}

bool truthy(const QString& v) {
  const QString s = v.trimmed().toLower();
  return s.isEmpty() || s == "true" || s == "1" || s == "on" || s == "yes";
}

QString shellQuote(const QString& a) {
  static const QRegularExpression plain(QStringLiteral("^[A-Za-z0-9_./,=:+@%-]+$"));
  if (plain.match(a).hasMatch()) return a;
  QString q = a;
  q.replace(QLatin1Char('\''), QStringLiteral("'\\''"));
  return QLatin1Char('\'') + q + QLatin1Char('\'');
}

void setInvalidLook(QFrame* box, bool invalid) {
  box->setProperty("invalid", invalid);
  box->setStyleSheet(invalid ? QStringLiteral("QFrame#fieldBox { border: 1px solid #d32f2f; border-radius: 3px; "
                                              "background: #fdecea; }")
                             : QStringLiteral("QFrame#fieldBox { border: 1px solid transparent; border-radius: 3px; }"));
}

}  // namespace

LaunchDialog::LaunchDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Launch a strategy comparison"));
  buildUi();
  core::RunConfig defaults;
  defaults.model = "small";  // the main job's model (shardscope-cli compare's default)
  setConfig(defaults);
  setStrategies({"ddp", "fsdp", "zero3"});
}

LaunchDialog::~LaunchDialog() = default;

LaunchDialog::Field* LaunchDialog::field(const QString& key) {
  for (auto& f : fields_)
    if (qs(f.info.key) == key) return &f;
  return nullptr;
}

const LaunchDialog::Field* LaunchDialog::field(const QString& key) const {
  for (const auto& f : fields_)
    if (qs(f.info.key) == key) return &f;
  return nullptr;
}

QWidget* LaunchDialog::makeField(Field& f) {
  const QString key = qs(f.info.key);
  const std::string& type = f.info.type;
  const QString tip = QStringLiteral("%1\n%2 <%3>, default: %4")
                          .arg(qs(f.info.help), qs(f.info.flag), qs(f.info.type),
                               f.info.defaultText.empty() ? tr("none") : qs(f.info.defaultText));
  auto changed = [this] {
    if (!filling_) revalidate();
  };
  if (type == "bool") {
    auto* cb = new QCheckBox;
    f.editor = cb;
    f.get = [cb] { return cb->isChecked() ? QStringLiteral("true") : QStringLiteral("false"); };
    f.set = [cb](const QString& v) { cb->setChecked(truthy(v)); };
    connect(cb, &QCheckBox::toggled, this, changed);
  } else if (type == "bool|auto") {
    auto* c = new QComboBox;
    c->addItem(tr("auto (DeepSpeed's default)"), QStringLiteral("auto"));
    c->addItem(tr("on"), QStringLiteral("true"));
    c->addItem(tr("off"), QStringLiteral("false"));
    f.editor = c;
    f.get = [c] { return c->currentData().toString(); };
    f.set = [c](const QString& v) {
      const QString s = v.trimmed().toLower();
      c->setCurrentIndex(s == "auto" || s.isEmpty() ? 0 : (truthy(s) ? 1 : 2));
    };
    connect(c, &QComboBox::currentIndexChanged, this, changed);
  } else if (type.find('|') != std::string::npos) {
    auto* c = new QComboBox;
    if (f.info.defaultText.empty()) c->addItem(tr("(default)"), QString());
    for (const QString& choice : qs(type).split(QLatin1Char('|'))) c->addItem(choice, choice);
    if (key == "reduce_dtype") c->setItemText(0, tr("same as parameters"));
    f.editor = c;
    f.get = [c] { return c->currentData().toString(); };
    f.set = [c](const QString& v) {
      int i = c->findData(v.trimmed());
      if (i < 0) {  // a value the table does not list: keep it visible (validation reports it)
        c->addItem(v.trimmed(), v.trimmed());
        i = c->count() - 1;
      }
      c->setCurrentIndex(i);
    };
    connect(c, &QComboBox::currentIndexChanged, this, changed);
  } else if (type == "int" && key != "seed") {
    auto* sb = new QSpinBox;
    sb->setRange(0, 99'999'999);
    sb->setAlignment(Qt::AlignRight);
    if (key == "layers") sb->setSpecialValueText(tr("preset depth"));
    if (key == "nproc_per_node") sb->setSpecialValueText(tr("auto (world / nodes)"));
    if (key == "shard_group_size") sb->setSpecialValueText(tr("auto"));
    f.editor = sb;
    f.get = [sb] { return QString::number(sb->value()); };
    f.set = [sb](const QString& v) { sb->setValue(v.trimmed().toInt()); };
    connect(sb, &QSpinBox::valueChanged, this, changed);
  } else {
    auto* le = new QLineEdit;
    if (type == "size" || type == "number" || type == "int") le->setAlignment(Qt::AlignRight);
    if (type == "size") le->setPlaceholderText(tr("elements, e.g. 5e8"));
    f.editor = le;
    f.get = [le] { return le->text().trimmed(); };
    f.set = [le](const QString& v) { le->setText(v); };
    connect(le, &QLineEdit::textChanged, this, changed);
  }
  f.editor->setToolTip(tip);
  f.editor->setObjectName(key);

  auto* container = new QWidget;
  auto* v = new QVBoxLayout(container);
  v->setContentsMargins(0, 0, 0, 0);
  v->setSpacing(1);
  f.frame = new QFrame;
  f.frame->setObjectName(QStringLiteral("fieldBox"));
  auto* h = new QHBoxLayout(f.frame);
  h->setContentsMargins(1, 1, 1, 1);
  h->setSpacing(4);
  h->addWidget(f.editor, 1);
  if (type == "path") {
    auto* browse = new QToolButton;
    browse->setText(QStringLiteral("…"));
    browse->setToolTip(tr("Choose…"));
    auto* le = static_cast<QLineEdit*>(f.editor);
    const bool dir = key.endsWith("_dir");
    connect(browse, &QToolButton::clicked, this, [this, le, dir] {
      const QString p = dir ? QFileDialog::getExistingDirectory(this, tr("Choose a directory"), le->text())
                            : QFileDialog::getOpenFileName(this, tr("Choose a file"), le->text());
      if (!p.isEmpty()) le->setText(p);
    });
    h->addWidget(browse);
  }
  setInvalidLook(f.frame, false);
  v->addWidget(f.frame);
  f.error = new QLabel;
  f.error->setObjectName(key + QStringLiteral("_error"));
  f.error->setWordWrap(true);
  f.error->setStyleSheet(QStringLiteral("color: #c62828;"));
  f.error->setVisible(false);
  v->addWidget(f.error);
  return container;
}

void LaunchDialog::buildUi() {
  const auto infos = core::runConfigKeys();
  fields_.reserve(infos.size());
  for (const auto& info : infos) {
    if (info.key == "strategy") continue;  // the strategy checkboxes
    Field f;
    f.info = info;
    fields_.push_back(std::move(f));
  }

  // Everything but the buttons scrolls: the dialog fits a 1366 x 768 screen.
  auto* dialogLayout = new QVBoxLayout(this);
  auto* contentScroll = new QScrollArea;
  contentScroll->setFrameShape(QFrame::NoFrame);
  contentScroll->setWidgetResizable(true);
  auto* content = new QWidget;
  contentScroll->setWidget(content);
  dialogLayout->addWidget(contentScroll, 1);
  auto* outer = new QVBoxLayout(content);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->setSpacing(8);

  auto* top = new QHBoxLayout;
  top->setSpacing(10);
  outer->addLayout(top);

  auto formFor = [this](QGroupBox* box, const QStringList& keys) {
    auto* form = new QFormLayout(box);
    form->setLabelAlignment(Qt::AlignRight | Qt::AlignVCenter);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    for (const QString& key : keys) {
      Field* f = field(key);
      if (!f) continue;
      QWidget* w = makeField(*f);
      auto* label = new QLabel(labelFor(key) + QLatin1Char(':'));
      label->setToolTip(f->editor->toolTip());
      label->setBuddy(f->editor);
      form->addRow(label, w);
    }
    return form;
  };

  auto* modelBox = new QGroupBox(tr("Model and run"));
  QFormLayout* modelForm = formFor(modelBox, kMainModel);
  presetHint_ = new QLabel;
  presetHint_->setWordWrap(true);
  presetHint_->setStyleSheet(QStringLiteral("color: #6a737d;"));
  modelForm->insertRow(1, QString(), presetHint_);
  runName_ = new QLineEdit;
  runName_->setObjectName(QStringLiteral("run_name"));
  runName_->setPlaceholderText(tr("optional: prefixes each run's name (the strategy follows)"));
  runName_->setToolTip(tr("compare --name: the runs are called \"<name> ddp\", \"<name> fsdp\", ..."));
  connect(runName_, &QLineEdit::textChanged, this, [this] { updatePreview(); });
  modelForm->insertRow(0, tr("Run name:"), runName_);
  repeats_ = new QSpinBox;
  repeats_->setObjectName(QStringLiteral("repeats"));
  repeats_->setRange(1, 10);
  repeats_->setSuffix(tr(" run(s) each"));
  repeats_->setToolTip(
      tr("compare --repeats: run each configuration this many times (interleaved); the verdict then calls a "
         "winner only when Welch's t-test over the repeats is significant, and reports the run-to-run spread"));
  connect(repeats_, &QSpinBox::valueChanged, this, [this] { updatePreview(); });
  modelForm->addRow(tr("Repeats:"), repeats_);
  top->addWidget(modelBox, 1);

  auto* right = new QVBoxLayout;
  auto* stratBox = new QGroupBox(tr("Strategies to compare"));
  {
    auto* v = new QVBoxLayout(stratBox);
    strategyFrame_ = new QFrame;
    strategyFrame_->setObjectName(QStringLiteral("fieldBox"));
    auto* grid = new QGridLayout(strategyFrame_);
    grid->setContentsMargins(3, 3, 3, 3);
    int i = 0;
    const auto& all = core::runtimeStrategies();
    const int rows = static_cast<int>((all.size() + 1) / 2);
    for (core::Strategy s : all) {
      const QString name = qs(core::toString(s));
      auto* cb = new QCheckBox(name);
      cb->setObjectName(QStringLiteral("strategy_") + name);
      cb->setToolTip(strategyHelp(name));
      connect(cb, &QCheckBox::toggled, this, [this] {
        if (!filling_) revalidate();
      });
      strategyBoxes_.insert(name, cb);
      grid->addWidget(cb, i % rows, i / rows);
      ++i;
    }
    setInvalidLook(strategyFrame_, false);
    v->addWidget(strategyFrame_);
    strategyError_ = new QLabel;
    strategyError_->setStyleSheet(QStringLiteral("color: #c62828;"));
    strategyError_->setWordWrap(true);
    strategyError_->setVisible(false);
    v->addWidget(strategyError_);
  }
  right->addWidget(stratBox);
  auto* parBox = new QGroupBox(tr("Parallelism"));
  formFor(parBox, kMainParallel);
  right->addWidget(parBox);
  top->addLayout(right, 1);

  // Every other knob, by group.
  auto* knobsLabel = new QLabel(tr("Strategy knobs and other settings"));
  QFont bold = knobsLabel->font();
  bold.setBold(true);
  knobsLabel->setFont(bold);
  outer->addWidget(knobsLabel);
  tabs_ = new QTabWidget;
  tabs_->setDocumentMode(false);
  QStringList groups;
  for (const auto& f : fields_)
    if (!kMainModel.contains(qs(f.info.key)) && !kMainParallel.contains(qs(f.info.key)) && !groups.contains(qs(f.info.group)))
      groups << qs(f.info.group);
  std::stable_sort(groups.begin(), groups.end(), [](const QString& a, const QString& b) {
    auto rank = [](const QString& g) {
      const auto i = kGroupOrder.indexOf(g);
      return i < 0 ? 1000 : static_cast<int>(i);
    };
    return rank(a) < rank(b);
  });
  for (const QString& group : groups) {
    auto* page = new QWidget;
    auto* grid = new QGridLayout(page);
    grid->setHorizontalSpacing(12);
    grid->setVerticalSpacing(6);
    grid->setColumnStretch(1, 0);
    grid->setColumnStretch(2, 1);
    grid->setColumnMinimumWidth(1, 210);
    int row = 0;
    const int tabIndex = static_cast<int>(tabGroups_.size());
    for (auto& f : fields_) {
      const QString key = qs(f.info.key);
      if (qs(f.info.group) != group || kMainModel.contains(key) || kMainParallel.contains(key)) continue;
      f.tab = tabIndex;
      QWidget* w = makeField(f);
      auto* label = new QLabel(labelFor(key) + QLatin1Char(':'));
      label->setToolTip(f.editor->toolTip());
      label->setBuddy(f.editor);
      auto* help = new QLabel(qs(f.info.help));
      help->setWordWrap(true);
      help->setStyleSheet(QStringLiteral("color: #6a737d;"));
      help->setToolTip(f.editor->toolTip());
      grid->addWidget(label, row, 0, Qt::AlignRight | Qt::AlignTop);
      grid->addWidget(w, row, 1, Qt::AlignTop);
      grid->addWidget(help, row, 2, Qt::AlignTop);
      label->setContentsMargins(0, 4, 0, 0);
      help->setContentsMargins(0, 4, 0, 0);
      ++row;
    }
    grid->setRowStretch(row, 1);
    auto* scroll = new QScrollArea;
    scroll->setWidget(page);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    QString title = group;
    title.replace(QLatin1Char('&'), QStringLiteral("&&"));
    tabs_->addTab(scroll, title);
    tabGroups_ << group;
  }
  tabs_->setMinimumHeight(230);
  outer->addWidget(tabs_, 1);

  // DeepSpeed JSON.
  auto* ds = new QHBoxLayout;
  auto* dsButton = new QPushButton(tr("Load DeepSpeed JSON…"));
  dsButton->setToolTip(tr("Fill the fields from a DeepSpeed config (zero_optimization, batch sizes, bf16, optimizer…)"));
  connect(dsButton, &QPushButton::clicked, this, &LaunchDialog::chooseDeepSpeedFile);
  ds->addWidget(dsButton);
  dsFile_ = new QLabel;
  dsFile_->setStyleSheet(QStringLiteral("color: palette(mid);"));
  ds->addWidget(dsFile_, 1);
  auto* reset = new QPushButton(tr("Reset to defaults"));
  connect(reset, &QPushButton::clicked, this, &LaunchDialog::resetDefaults);
  ds->addWidget(reset);
  outer->addLayout(ds);
  dsMessages_ = new QLabel;
  dsMessages_->setWordWrap(true);
  dsMessages_->setTextFormat(Qt::RichText);
  dsMessages_->setVisible(false);
  outer->addWidget(dsMessages_);

  summary_ = new QLabel;
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::RichText);
  outer->addWidget(summary_);

  preview_ = new QLineEdit;
  preview_->setReadOnly(true);
  QFont mono(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::TypeWriter);
  preview_->setFont(mono);
  preview_->setToolTip(tr("The command the comparison runs"));
  outer->addWidget(preview_);

  auto* buttons = new QDialogButtonBox;
  launch_ = buttons->addButton(tr("Launch"), QDialogButtonBox::AcceptRole);
  launch_->setDefault(true);
  launch_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
  buttons->addButton(QDialogButtonBox::Cancel);
  connect(buttons, &QDialogButtonBox::accepted, this, [this] {
    revalidate();
    if (isValid()) accept();
  });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  dialogLayout->addWidget(buttons);
  // At most the screen's available size (the content scrolls).
  QSize size(940, 760);
  if (const QScreen* screen = this->screen()) size = size.boundedTo(screen->availableGeometry().size() - QSize(40, 60));
  resize(size);
}

QStringList LaunchDialog::keys() const {
  QStringList out;
  for (const auto& f : fields_) out << qs(f.info.key);
  return out;
}

QWidget* LaunchDialog::editorFor(const QString& key) const {
  if (key == QLatin1String("strategies")) return strategyFrame_;
  const Field* f = field(key);
  return f ? f->editor : nullptr;
}

QString LaunchDialog::value(const QString& key) const {
  const Field* f = field(key);
  return f ? f->get() : QString();
}

void LaunchDialog::setValue(const QString& key, const QString& v) {
  if (Field* f = field(key)) f->set(v);
  revalidate();
}

QStringList LaunchDialog::strategies() const {
  QStringList out;
  for (core::Strategy s : core::runtimeStrategies()) {
    const QString name = qs(core::toString(s));
    if (strategyBoxes_.value(name) && strategyBoxes_.value(name)->isChecked()) out << name;
  }
  return out;
}

void LaunchDialog::setStrategies(const QStringList& names) {
  const bool was = filling_;
  filling_ = true;
  QStringList canonical;
  for (const QString& n : names)
    if (auto s = core::strategyFromString(n.toStdString())) canonical << qs(core::toString(*s));
  for (auto it = strategyBoxes_.begin(); it != strategyBoxes_.end(); ++it) it.value()->setChecked(canonical.contains(it.key()));
  filling_ = was;
  if (!filling_) revalidate();
}

void LaunchDialog::setConfig(const core::RunConfig& cfg) {
  const bool was = filling_;
  filling_ = true;
  const core::JsonValue j = core::toJson(cfg);
  for (const auto& [key, v] : j.members())
    if (Field* f = field(QString::fromStdString(key))) f->set(jsonText(v));
  filling_ = was;
  setStrategies({qs(core::toString(cfg.strategy))});
}

core::RunConfig LaunchDialog::config() const {
  core::RunConfig cfg;
  for (const auto& f : fields_) {
    try {
      core::applyFlag(cfg, f.info.key, f.get().toStdString());
    } catch (const std::exception&) {
      // reported by revalidate(); the default stays
    }
  }
  const QStringList s = strategies();
  if (!s.isEmpty())
    if (auto st = core::strategyFromString(s.front().toStdString())) cfg.strategy = *st;
  return cfg;
}

void LaunchDialog::revalidate() {
  errors_.clear();
  core::RunConfig cfg;
  for (const auto& f : fields_) {
    try {
      core::applyFlag(cfg, f.info.key, f.get().toStdString());
    } catch (const std::exception& e) {
      QString msg = QString::fromUtf8(e.what());
      const QString prefix = qs(f.info.flag) + QStringLiteral(": ");
      if (msg.startsWith(prefix)) msg = msg.mid(prefix.size());
      errors_.insert(qs(f.info.key), msg);
    }
  }
  const QStringList selected = strategies();
  if (selected.isEmpty()) errors_.insert(QStringLiteral("strategies"), tr("Choose at least one strategy to run."));
  if (errors_.isEmpty()) {
    // key -> (strategy, message), as `shardscope-cli compare` will check each configuration (the
    // key is the one its error event names: core::checkRunConfig).
    QMap<QString, QList<QPair<QString, QString>>> byKey;
    for (const QString& name : selected) {
      core::RunConfig c = cfg;
      c.strategy = *core::strategyFromString(name.toStdString());
      if (c.strategy != core::Strategy::Hsdp) c.shardGroupSize = 0;
      if (const auto problem = core::checkRunConfig(c)) {
        const QString key = qs(problem->key);
        if (!key.isEmpty() && field(key))
          byKey[key].append({name, qs(problem->message)});
        else
          byKey[QStringLiteral("strategies")].append({name, qs(problem->text)});
      }
    }
    for (auto it = byKey.begin(); it != byKey.end(); ++it) {
      // One message when every strategy that failed on this key says the same and all of them failed.
      QStringList names, msgs;
      for (const auto& [n, m] : it.value()) {
        names << n;
        if (!msgs.contains(m)) msgs << m;
      }
      QString text;
      if (msgs.size() == 1 && names.size() == selected.size()) {
        text = msgs.front();
      } else {
        QStringList parts;
        for (const QString& m : msgs) {
          QStringList who;
          for (const auto& [n, mm] : it.value())
            if (mm == m) who << n;
          parts << who.join(QStringLiteral(", ")) + QStringLiteral(": ") + m;
        }
        text = parts.join(QLatin1Char('\n'));
      }
      errors_.insert(it.key(), text);
    }
  }
  showErrors();
  updatePreview();
}

bool LaunchDialog::isMarked(const QString& key) const {
  if (key == QLatin1String("strategies")) return strategyFrame_->property("invalid").toBool();
  const Field* f = field(key);
  return f && f->frame->property("invalid").toBool() && !f->error->isHidden() && !f->error->text().isEmpty();
}

void LaunchDialog::showErrors() {
  QVector<bool> tabBad(tabs_->count(), false);
  for (auto& f : fields_) {
    const QString msg = errors_.value(qs(f.info.key));
    setInvalidLook(f.frame, !msg.isEmpty());
    f.error->setText(msg);
    f.error->setVisible(!msg.isEmpty());
    f.editor->setProperty("invalid", !msg.isEmpty());
    if (!msg.isEmpty() && f.tab >= 0) tabBad[f.tab] = true;
  }
  const QString sMsg = errors_.value(QStringLiteral("strategies"));
  setInvalidLook(strategyFrame_, !sMsg.isEmpty());
  strategyError_->setText(sMsg);
  strategyError_->setVisible(!sMsg.isEmpty());
  const QIcon warn = style()->standardIcon(QStyle::SP_MessageBoxWarning);
  for (int i = 0; i < tabs_->count(); ++i) {
    tabs_->setTabIcon(i, tabBad[i] ? warn : QIcon());
    tabs_->tabBar()->setTabTextColor(i, tabBad[i] ? QColor(0xc6, 0x28, 0x28) : palette().color(QPalette::WindowText));
  }
  {
    // What the preset is (core/model/model_presets.h), and the cut depth.
    QString hint = presetHint(value(QStringLiteral("model")));
    const int layers = value(QStringLiteral("layers")).toInt();
    if (layers > 0 && !hint.isEmpty()) hint += tr("; cut to %n layer(s)", nullptr, layers);
    presetHint_->setText(hint);
    presetHint_->setVisible(!hint.isEmpty());
  }
  launch_->setEnabled(errors_.isEmpty());
  if (errors_.isEmpty()) {
    const QStringList s = strategies();
    const core::RunConfig c = config();
    summary_->setText(
        tr("<span style='color:#1a7f37'>✔</span> Ready: %1 on <b>%2</b>%3, %4 rank(s), %5 step(s) each. "
           "Runs one after another; each appears in the run browser when it starts.")
            .arg(s.join(QStringLiteral(", ")), qs(c.model), c.layers > 0 ? tr(" (%1 layers)").arg(c.layers) : QString())
            .arg(c.worldSize)
            .arg(c.steps));
    return;
  }
  // Name the first problem and where it is (the tab), so a hidden field is found.
  QString where, first;
  for (const auto& f : fields_) {
    const QString key = qs(f.info.key);
    if (!errors_.contains(key)) continue;
    where = labelFor(key) + (f.tab >= 0 ? tr(" (%1 tab)").arg(tabGroups_.value(f.tab)) : QString());
    first = errors_.value(key);
    break;
  }
  if (first.isEmpty()) {
    where = tr("Strategies");
    first = sMsg;
  }
  summary_->setText(tr("<span style='color:#c62828'><b>%n problem(s)</b> to fix before launching.</span> %1: %2", nullptr,
                       static_cast<int>(errors_.size()))
                        .arg(where.toHtmlEscaped(), first.toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("; "))));
}

QStringList LaunchDialog::arguments() const {
  QStringList args;
  args << QStringLiteral("--strategies") << strategies().join(QLatin1Char(','));
  if (!runName().isEmpty()) args << QStringLiteral("--name") << runName();
  if (repeats() > 1) args << QStringLiteral("--repeats") << QString::number(repeats());
  const core::JsonValue cur = core::toJson(config());
  const core::JsonValue def = core::toJson(core::RunConfig{});
  for (const auto& [key, v] : cur.members()) {
    if (key == "strategy") continue;
    // compare clears the shard group for every strategy but hsdp.
    if (key == "shard_group_size" && !strategies().contains(QStringLiteral("hsdp"))) continue;
    const bool always = key == "model" || key == "world_size" || key == "steps";
    const core::JsonValue* d = def.find(key);
    if (!always && d && d->dump() == v.dump()) continue;
    QString flag = QStringLiteral("--") + QString::fromStdString(key);
    flag.replace(QLatin1Char('_'), QLatin1Char('-'));
    if (v.isBool()) {
      args << (v.asBool() ? flag : flag + QStringLiteral("=false"));
    } else if (v.isNull()) {
      args << flag + QStringLiteral("=auto");
    } else {
      const QString s = QString::fromStdString(v.asString());
      if (s.isEmpty())
        args << flag + QLatin1Char('=');
      else
        args << flag << s;
    }
  }
  return args;
}

QString LaunchDialog::runName() const { return runName_->text().trimmed(); }
void LaunchDialog::setRunName(const QString& name) { runName_->setText(name); }
int LaunchDialog::repeats() const { return repeats_->value(); }
void LaunchDialog::setRepeats(int n) { repeats_->setValue(n); }

void LaunchDialog::saveSettings() const {
  QSettings s;
  s.setValue(QStringLiteral("launch/config"), QString::fromStdString(core::toJson(config()).dump()));
  s.setValue(QStringLiteral("launch/strategies"), strategies());
  s.setValue(QStringLiteral("launch/name"), runName());
  s.setValue(QStringLiteral("launch/repeats"), repeats());
}

bool LaunchDialog::restoreSettings() {
  QSettings s;
  if (!s.contains(QStringLiteral("launch/config"))) return false;
  try {
    core::RunConfig cfg;
    std::vector<std::string> warnings;  // a key of an older version is ignored
    core::applyRunConfigJson(cfg, core::parseJson(s.value(QStringLiteral("launch/config")).toString().toStdString(), "settings"),
                             "settings", &warnings);
    setConfig(cfg);
  } catch (const std::exception&) {
    return false;  // unreadable: the defaults stay
  }
  const QStringList strategies = s.value(QStringLiteral("launch/strategies")).toStringList();
  if (!strategies.isEmpty()) setStrategies(strategies);
  setRunName(s.value(QStringLiteral("launch/name")).toString());
  setRepeats(s.value(QStringLiteral("launch/repeats"), 1).toInt());
  return true;
}

QString LaunchDialog::commandLine() const {
  QStringList parts = {QStringLiteral("shardscope-cli"), QStringLiteral("compare")};
  if (!dbPath_.isEmpty()) parts << QStringLiteral("--db") << dbPath_;
  parts << arguments();
  QStringList quoted;
  for (const QString& p : parts) quoted << shellQuote(p);
  return quoted.join(QLatin1Char(' '));
}

void LaunchDialog::setDatabasePath(const QString& path) {
  dbPath_ = path;
  updatePreview();
}

void LaunchDialog::updatePreview() {
  if (preview_) preview_->setText(commandLine());
  if (preview_) preview_->setCursorPosition(0);
}

bool LaunchDialog::loadDeepSpeedJson(const QString& path) {
  dsWarnings_.clear();
  dsError_.clear();
  dsFile_->setText(QFileInfo(path).fileName());
  dsFile_->setToolTip(QDir::toNativeSeparators(path));
  try {
    const core::JsonValue json = core::parseJsonFile(path.toStdString());
    std::vector<std::string> warnings;
    const core::RunConfig cfg = core::fromDeepSpeedJson(json, path.toStdString(), config(), &warnings);
    for (const auto& w : warnings) dsWarnings_ << QString::fromStdString(w);
    setConfig(cfg);
  } catch (const std::exception& e) {
    dsError_ = QString::fromUtf8(e.what());
  }
  if (!dsError_.isEmpty()) {
    dsMessages_->setText(
        QStringLiteral("<span style='color:#c62828'><b>%1</b> %2</span>").arg(tr("Not loaded:"), dsError_.toHtmlEscaped()));
    dsMessages_->setStyleSheet(
        QStringLiteral("QLabel { background: #fdecea; border: 1px solid #f5c2c0; border-radius: 3px; padding: 4px; }"));
    dsMessages_->setVisible(true);
    return false;
  }
  if (dsWarnings_.isEmpty()) {
    dsMessages_->setText(
        tr("Loaded: the fields now hold the file's configuration (strategy %1).").arg(strategies().join(QStringLiteral(", "))));
    dsMessages_->setStyleSheet(
        QStringLiteral("QLabel { background: #eef6ee; border: 1px solid #c3e0c5; border-radius: 3px; padding: 4px; }"));
  } else {
    QString html = tr("<b>Loaded with %n warning(s):</b>", nullptr, static_cast<int>(dsWarnings_.size()));
    html += QStringLiteral("<ul style='margin:0; -qt-list-indent:1'>");
    for (const QString& w : dsWarnings_) html += QStringLiteral("<li>%1</li>").arg(w.toHtmlEscaped());
    html += QStringLiteral("</ul>");
    dsMessages_->setText(html);
    dsMessages_->setStyleSheet(
        QStringLiteral("QLabel { background: #fff8e1; border: 1px solid #f0d98c; border-radius: 3px; padding: 4px; }"));
  }
  dsMessages_->setVisible(true);
  return true;
}

void LaunchDialog::chooseDeepSpeedFile() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Load a DeepSpeed config"), QString(),
                                                    tr("DeepSpeed config (*.json);;All files (*)"));
  if (!path.isEmpty()) loadDeepSpeedJson(path);
}

void LaunchDialog::resetDefaults() {
  core::RunConfig defaults;
  defaults.model = "small";
  setConfig(defaults);
  setStrategies({"ddp", "fsdp", "zero3"});
  runName_->clear();
  repeats_->setValue(1);
  dsWarnings_.clear();
  dsError_.clear();
  dsFile_->clear();
  dsMessages_->setVisible(false);
}

}  // namespace shardscope::ui
