#include "ui/models/comparison_model.h"

#include "core/util/csv.h"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <QLocale>

#include <cmath>

#include "ui/charts/chart_style.h"

namespace shardscope::ui {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Deltas smaller than this (in percent) are shown as unchanged.
constexpr double kSameDeltaPct = 0.05;

bool endsWith(const std::string& s, const char* suffix) {
  const std::string_view sv(suffix);
  return s.size() >= sv.size() && s.compare(s.size() - sv.size(), sv.size(), sv) == 0;
}

// core's one escaper (quoting and the CSV-injection guard).
QString csvField(const QString& s) { return QString::fromStdString(core::csvText(s.toStdString())); }

QString exact(double v) { return QString::number(v, 'g', 17); }

}  // namespace

ComparisonModel::ComparisonModel(QObject* parent) : QAbstractTableModel(parent) {}

void ComparisonModel::setComparison(core::Comparison comparison) {
  beginResetModel();
  comparison_ = std::move(comparison);
  shown_.clear();
  for (std::size_t i = 0; i < comparison_.rows.size(); ++i) {
    const auto& r = comparison_.rows[i];
    bool any = false;
    for (const auto& v : r.values) any = any || v.has_value();
    if (any) shown_.push_back(i);
  }
  endResetModel();
}

void ComparisonModel::clear() {
  beginResetModel();
  comparison_ = {};
  shown_.clear();
  endResetModel();
}

void ComparisonModel::setBaseline(std::size_t baselineIndex) {
  if (baselineIndex >= comparison_.runs.size() || baselineIndex == comparison_.baseline) return;
  core::rebase(comparison_, baselineIndex);  // compareRuns' own deltas, percentage points and noise
  if (rowCount() > 0) Q_EMIT dataChanged(index(0, 1), index(rowCount() - 1, columnCount() - 1));
  if (columnCount() > 1) Q_EMIT headerDataChanged(Qt::Horizontal, 1, columnCount() - 1);
}

const core::ComparisonRow& ComparisonModel::rowAt(int row) const {
  return comparison_.rows.at(shown_.at(static_cast<std::size_t>(row)));
}

int ComparisonModel::rowOfKey(const QString& key) const {
  const std::string k = key.toStdString();
  for (std::size_t i = 0; i < shown_.size(); ++i)
    if (comparison_.rows[shown_[i]].key == k) return static_cast<int>(i);
  return -1;
}

int ComparisonModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(shown_.size()); }

int ComparisonModel::columnCount(const QModelIndex& parent) const {
  if (parent.isValid() || comparison_.runs.empty()) return 0;
  return 1 + static_cast<int>(comparison_.runs.size());
}

QString ComparisonModel::formatValue(const std::string& key, double v) {
  using namespace charts;
  if (key == core::metric_keys::kTokensPerSecond) return QStringLiteral("%1 tok/s").arg(formatNumber(v, v < 100 ? 1 : 0));
  if (endsWith(key, "_ms")) return formatMs(v);
  if (endsWith(key, "_pct")) return formatPercent(v, 1);
  if (endsWith(key, "_gib") || key.find("_gib_") != std::string::npos) return formatBytes(v * kGiB, 1);
  if (endsWith(key, "_s")) return formatSeconds(v);
  return formatNumber(v, std::abs(v) >= 100 ? 0 : 2);
}

QString ComparisonModel::formatDelta(double d) {
  if (std::abs(d) < kSameDeltaPct) return QStringLiteral("(±0.0%)");
  // Ten times the baseline or more: a factor reads better than "+139,890.7%".
  if (d >= 900.0) {
    const double factor = 1.0 + d / 100.0;
    return QStringLiteral("(×%1)").arg(charts::formatNumber(factor, factor >= 100.0 ? 0 : 1));
  }
  return QStringLiteral("(%1%2%)").arg(d > 0 ? QStringLiteral("+") : QString(), charts::formatNumber(d, 1));
}

QString ComparisonModel::formatDeltaPp(double pp) {
  if (std::abs(pp) < 0.05) return QStringLiteral("(±0.0 pp)");
  return QStringLiteral("(%1%2 pp)").arg(pp > 0 ? QStringLiteral("+") : QString(), charts::formatNumber(pp, 1));
}

QString ComparisonModel::displayLabel(const core::ComparisonRow& row) {
  // "step time (ms, mean over ranks and steps)" -> "step time (mean over ranks and steps)";
  // "throughput (tokens/s)" -> "throughput"; units that the cells show are dropped.
  static const QStringList kUnits = {QStringLiteral("ms"), QStringLiteral("s"), QStringLiteral("GiB"),
                                     QStringLiteral("tokens/s")};
  const QString label = QString::fromStdString(row.label.empty() ? row.key : row.label);
  const qsizetype open = label.lastIndexOf(QLatin1Char('('));
  if (open < 0 || !label.endsWith(QLatin1Char(')'))) return label;
  QStringList parts = label.mid(open + 1, label.size() - open - 2).split(QStringLiteral(", "));
  parts.removeIf([](const QString& p) { return kUnits.contains(p.trimmed()); });
  const QString head = label.left(open).trimmed();
  return parts.isEmpty() ? head : QStringLiteral("%1 (%2)").arg(head, parts.join(QStringLiteral(", ")));
}

ComparisonModel::DeltaState ComparisonModel::deltaState(const core::ComparisonRow& row, std::size_t run) const {
  if (run == comparison_.baseline || run >= row.deltaPct.size() || !row.deltaPct[run]) return DeltaState::None;
  const double d = *row.deltaPct[run];
  if (std::abs(d) < kSameDeltaPct) return DeltaState::Same;
  // Within the runs' step-to-step spread: not coloured as a change (DDP vs DDP is noise, not +70 %).
  if (run < row.withinNoise.size() && row.withinNoise[run]) return DeltaState::Same;
  return (d < 0) == row.lowerIsBetter ? DeltaState::Better : DeltaState::Worse;
}

QVariant ComparisonModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& row = rowAt(index.row());
  if (index.column() == 0) {
    switch (role) {
      case Qt::DisplayRole:
        return displayLabel(row);
      case Qt::ToolTipRole:
        return QStringLiteral("%1\nkey: %2\n%3 is better")
            .arg(QString::fromStdString(row.label), QString::fromStdString(row.key),
                 row.lowerIsBetter ? QStringLiteral("lower") : QStringLiteral("higher"));
      case RowKeyRole:
        return QString::fromStdString(row.key);
      case LowerIsBetterRole:
        return row.lowerIsBetter;
      default:
        return {};
    }
  }
  const std::size_t run = static_cast<std::size_t>(index.column() - 1);
  const auto& value = row.values[run];
  const bool best = row.best && *row.best == run;
  std::optional<double> delta;
  if (run != comparison_.baseline && run < row.deltaPct.size() && row.deltaPct[run].has_value())
    delta = row.deltaPct[run].value();
  const QString valueText = value ? formatValue(row.key, *value) : QStringLiteral("—");
  // Shares change in percentage points; other figures in percent of the baseline.
  const std::optional<double> pp = run != comparison_.baseline && run < row.deltaPp.size() ? row.deltaPp[run] : std::nullopt;
  const QString deltaText = pp ? formatDeltaPp(*pp) : delta ? formatDelta(*delta) : QString();
  switch (role) {
    case Qt::DisplayRole:
    case Qt::AccessibleTextRole:
      return deltaText.isEmpty() ? valueText : valueText + QLatin1Char(' ') + deltaText;
    case ValueTextRole:
      return valueText;
    case DeltaTextRole:
      return deltaText;
    case ExactValueRole:
      return value ? QVariant(*value) : QVariant();
    case DeltaPctRole:
      return delta ? QVariant(*delta) : QVariant();
    case IsBestRole:
      return best;
    case DeltaStateRole:
      return static_cast<int>(deltaState(row, run));
    case RowKeyRole:
      return QString::fromStdString(row.key);
    case LowerIsBetterRole:
      return row.lowerIsBetter;
    case Qt::TextAlignmentRole:
      return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
    case Qt::FontRole:
      if (best) {
        QFont f;
        f.setBold(true);
        return f;
      }
      return {};
    case Qt::BackgroundRole:
      if (best) return QBrush(QColor::fromRgb(0xe8f5e9));
      return {};
    case Qt::ForegroundRole:
      if (!value) return QBrush(charts::mutedTextColor());
      return {};
    case Qt::ToolTipRole: {
      if (!value) return QStringLiteral("%1: no value for this run").arg(QString::fromStdString(comparison_.names[run]));
      QString tip = QStringLiteral("%1\n%2 = %3")
                        .arg(QString::fromStdString(comparison_.names[run]), QString::fromStdString(row.key), exact(*value));
      if (delta)
        tip += QStringLiteral("\n%1% vs baseline (%2)")
                   .arg(exact(delta.value_or(0.0)), QString::fromStdString(comparison_.names[comparison_.baseline]));
      else if (run == comparison_.baseline)
        tip += QStringLiteral("\nbaseline");
      if (best) tip += QStringLiteral("\nbest of the compared runs");
      return tip;
    }
    default:
      return {};
  }
}

QVariant ComparisonModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation == Qt::Vertical) {
    if (role == Qt::DisplayRole && section >= 0 && section < rowCount()) return section + 1;
    return {};
  }
  if (section < 0 || section >= columnCount()) return {};
  if (section == 0) {
    if (role == Qt::DisplayRole) return tr("Figure");
    if (role == Qt::TextAlignmentRole) return QVariant::fromValue(Qt::Alignment(Qt::AlignLeft | Qt::AlignVCenter));
    return {};
  }
  const std::size_t run = static_cast<std::size_t>(section - 1);
  const QString name = QString::fromStdString(core::runLabel(comparison_.names[run], comparison_.runs[run]));
  switch (role) {
    case Qt::DisplayRole:
      return run == comparison_.baseline ? tr("%1 (baseline)").arg(name) : name;
    case Qt::ToolTipRole:
      return tr("run %1: %2").arg(comparison_.runs[run].value()).arg(name);
    case Qt::TextAlignmentRole:
      return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
    case Qt::FontRole:
      if (run == comparison_.baseline) {
        QFont f;
        f.setItalic(true);
        return f;
      }
      return {};
    default:
      return {};
  }
}

QString ComparisonModel::toCsv() const {
  if (comparison_.runs.empty()) return {};
  QStringList lines;
  QStringList header = {QStringLiteral("figure"), QStringLiteral("key")};
  for (const auto& n : comparison_.names) header << csvField(QString::fromStdString(n));
  for (std::size_t i = 0; i < comparison_.runs.size(); ++i)
    if (i != comparison_.baseline)
      header << csvField(QStringLiteral("%1 delta %").arg(QString::fromStdString(comparison_.names[i])));
  lines << header.join(QLatin1Char(','));
  for (std::size_t r : shown_) {
    const auto& row = comparison_.rows[r];
    QStringList f = {csvField(QString::fromStdString(row.label)), csvField(QString::fromStdString(row.key))};
    for (const auto& v : row.values) f << (v ? exact(*v) : QString());
    for (std::size_t i = 0; i < comparison_.runs.size(); ++i)
      if (i != comparison_.baseline) f << (row.deltaPct[i] ? exact(*row.deltaPct[i]) : QString());
    lines << f.join(QLatin1Char(','));
  }
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

}  // namespace shardscope::ui
