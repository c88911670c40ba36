#include "ui/models/bottleneck_model.h"

#include <QStringList>

#include "ui/models/collectives_model.h"

namespace shardscope::ui {

namespace {

// A short label per rule that fired (the reasons are full sentences, shown in the details pane).
QString findingOf(const core::Bottleneck& b) {
  QStringList tags;
  for (const auto& r : b.reasons) {
    const QString s = QString::fromStdString(r);
    if (s.contains(QLatin1String("needs to be efficient"))) tags << QObject::tr("small message");
    else if (s.contains(QLatin1String("waited for a reduce-scatter"))) tags << QObject::tr("queued behind reduce-scatter");
    else if (s.contains(QLatin1String("launched just before"))) tags << QObject::tr("issued late");
    else if (s.contains(QLatin1String("rank skew")))
      tags << (b.lateRank ? QObject::tr("rank skew (rank %1 late)").arg(*b.lateRank) : QObject::tr("rank skew"));
    else if (s.contains(QLatin1String("not overlapped"))) tags << QObject::tr("not overlapped");
    else tags << s;
  }
  return tags.join(QStringLiteral(", "));
}

double exposedShare(const core::Bottleneck& b) {
  return b.durNs > 0 ? static_cast<double>(b.exposedNs) / static_cast<double>(b.durNs) : 0.0;
}

}  // namespace

BottleneckModel::BottleneckModel(QObject* parent) : QAbstractTableModel(parent) {}

void BottleneckModel::setRows(std::vector<BottleneckRow> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

int BottleneckModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int BottleneckModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant BottleneckModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= rowCount() || index.column() < 0 ||
      index.column() >= ColumnCount)
    return {};
  const core::Bottleneck& b = rows_[static_cast<std::size_t>(index.row())].b;
  const QString none = QStringLiteral("—");
  if (role == SortRole) {
    switch (index.column()) {
      case Rank: return b.rank;
      case Op: return units::opName(b.op);
      case Steps: return static_cast<qlonglong>(b.instances);
      case Total: return static_cast<qlonglong>(b.totalExposedNs);
      case Mean: return static_cast<qlonglong>(b.meanExposedNs);
      case Step: return b.step ? QVariant(static_cast<qlonglong>(*b.step)) : QVariant(-1LL);
      case Exposed: return static_cast<qlonglong>(b.exposedNs);
      case Duration: return static_cast<qlonglong>(b.durNs);
      case ExposedShare: return exposedShare(b);
      case Bytes: return b.bytes ? QVariant(static_cast<qlonglong>(*b.bytes)) : QVariant(-1LL);
      case Group: return QString::fromStdString(b.processGroup);
      case Unit: return QString::fromStdString(b.unit);
      case Finding: return findingOf(b);
    }
    return {};
  }
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Rank: return QString::number(b.rank);
      case Op: return units::opName(b.op);
      case Steps: return QString::number(b.instances);
      case Total: return units::ms(b.totalExposedNs);
      case Mean: return units::ms(b.meanExposedNs);
      case Step: return b.step ? QString::number(*b.step) : none;
      case Exposed: return units::ms(b.exposedNs);
      case Duration: return units::ms(b.durNs);
      case ExposedShare: return units::percent(exposedShare(b));
      case Bytes: return b.bytes ? units::bytes(*b.bytes) : none;
      case Group: return b.processGroup.empty() ? none : QString::fromStdString(b.processGroup);
      case Unit: return b.unit.empty() ? none : QString::fromStdString(b.unit);
      case Finding: return findingOf(b);
    }
    return {};
  }
  if (role == Qt::TextAlignmentRole) {
    switch (index.column()) {
      case Op:
      case Group:
      case Unit:
      case Finding: return QVariant(Qt::AlignLeft | Qt::AlignVCenter);
      default: return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    }
  }
  if (role == Qt::ToolTipRole) {
    if (index.column() == Finding && !b.reasons.empty()) {
      QStringList lines;
      for (const auto& r : b.reasons) lines << QString::fromStdString(r);
      return lines.join(QLatin1Char('\n'));
    }
    if (index.column() == Bytes && b.elements) return tr("%1 elements").arg(units::count(*b.elements));
    if (index.column() == Op && !b.kernel.empty()) return QString::fromStdString(b.kernel);
    return {};
  }
  return {};
}

QVariant BottleneckModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
  if (role == Qt::DisplayRole) {
    switch (section) {
      case Rank: return tr("Rank");
      case Op: return tr("Operation");
      case Steps: return tr("Steps");
      case Total: return tr("Exposed, total (ms)");
      case Mean: return tr("Mean (ms)");
      case Step: return tr("Worst step");
      case Exposed: return tr("Worst exposed (ms)");
      case Duration: return tr("Its duration (ms)");
      case ExposedShare: return tr("Exposed %");
      case Bytes: return tr("Size");
      case Group: return tr("Group");
      case Unit: return tr("Unit");
      case Finding: return tr("Why exposed");
    }
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case Steps: return tr("Steps in which this collective (same operation, group, size and place in the step) was exposed");
      case Total: return tr("Exposed time summed over those steps: what removing it would save per run");
      case Exposed: return tr("In its worst step: its duration minus the time computation ran on its rank meanwhile");
      case Unit: return tr("The annotation (layer or FSDP unit) open when it was launched");
      case Finding: return tr("The rules that fired (docs/METRICS.md); select the row for the full reasons and suggestions");
      default: return {};
    }
  }
  if (role == Qt::TextAlignmentRole) {
    const bool left = section == Op || section == Group || section == Unit || section == Finding;
    return QVariant((left ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter);
  }
  return {};
}

QString BottleneckModel::detailsHtml(const BottleneckRow& row) {
  const core::Bottleneck& b = row.b;
  auto esc = [](const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); };
  QString h;
  h += QStringLiteral("<p style='margin-top:0'><b>%1</b> on rank %2").arg(units::opName(b.op)).arg(b.rank);
  if (b.step) h += tr(", step %1").arg(*b.step);
  if (!b.processGroup.empty()) h += tr(", group %1").arg(esc(b.processGroup));
  h += QStringLiteral("</p>");
  h += QStringLiteral("<table cellspacing='0' cellpadding='1'>");
  auto line = [&h](const QString& k, const QString& v) {
    h += QStringLiteral("<tr><td style='color:#666;padding-right:10px'>%1</td><td>%2</td></tr>").arg(k, v);
  };
  line(tr("Exposed"), tr("%1 of %2 (%3)").arg(units::msWithUnit(b.exposedNs), units::msWithUnit(b.durNs),
                                                 units::percent(exposedShare(b))));
  if (b.bytes) {
    QString size = units::bytes(*b.bytes);
    if (b.elements) size += tr(" (%1 elements)").arg(units::count(*b.elements));
    line(tr("Message"), size);
  }
  if (!b.unit.empty()) line(tr("Unit"), esc(b.unit));
  if (!b.kernel.empty()) line(tr("Kernel"), esc(b.kernel));
  if (b.lateRank)
    line(tr("Waited for"), tr("rank %1, %2").arg(*b.lateRank).arg(units::msWithUnit(b.waitForLateRankNs)));
  h += QStringLiteral("</table>");
  h += QStringLiteral("<p style='margin-bottom:2px'><b>Why it is exposed</b></p><ul style='margin-top:0'>");
  for (const auto& r : b.reasons) h += QStringLiteral("<li>%1</li>").arg(esc(r));
  h += QStringLiteral("</ul>");
  if (!b.suggestions.empty()) {
    h += QStringLiteral("<p style='margin-bottom:2px'><b>What to try</b></p><ul style='margin-top:0'>");
    for (const auto& s : b.suggestions) h += QStringLiteral("<li>%1</li>").arg(esc(s));
    h += QStringLiteral("</ul>");
  } else {
    h += tr("<p>No rule explains it: the collective simply did not overlap with computation.</p>");
  }
  return h;
}

}  // namespace shardscope::ui
