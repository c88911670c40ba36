#include "ui/models/bottleneck_model.h"

#include <QStringList>

#include "ui/models/collectives_model.h"

namespace shardscope::ui {

namespace {

QString targetText(const core::Bottleneck& b) {
  if (!b.target.empty()) return QString::fromStdString(b.target);
  return b.bytes ? QObject::tr("%1 messages").arg(units::bytes(*b.bytes)) : QObject::tr("(unnamed)");
}

QString causeName(core::ExposedCause c) {
  switch (c) {
    case core::ExposedCause::LateRank:
      return QObject::tr("waiting for a late rank");
    case core::ExposedCause::Queued:
      return QObject::tr("queued behind another collective");
    case core::ExposedCause::SlowTransfer:
      return QObject::tr("slow transfer");
    case core::ExposedCause::NothingToOverlap:
      return QObject::tr("nothing to overlap (issued late)");
  }
  return {};
}

}  // namespace

QString BottleneckModel::causeLabel(const core::Bottleneck& b) {
  QString s = causeName(b.cause);
  if (b.cause == core::ExposedCause::LateRank && b.lateRank) s += tr(" (rank %1)").arg(*b.lateRank);
  if (b.totalExposedNs > 0 && !b.causes.empty())
    s += QStringLiteral(", %1").arg(
        units::percent(static_cast<double>(b.causes.front().exposedNs) / static_cast<double>(b.totalExposedNs)));
  return s;
}

BottleneckModel::BottleneckModel(QObject* parent) : QAbstractTableModel(parent) {}

void BottleneckModel::setRows(std::vector<BottleneckRow> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

int BottleneckModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }

int BottleneckModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant BottleneckModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= rowCount() || index.column() < 0 || index.column() >= ColumnCount)
    return {};
  const core::Bottleneck& b = rows_[static_cast<std::size_t>(index.row())].b;
  const QString none = QStringLiteral("—");
  if (role == CollectivesModel::OpRole) return units::opName(b.op);
  if (role == CollectivesModel::GroupRole)
    return b.processGroup.empty() ? QStringLiteral("unknown") : QString::fromStdString(b.processGroup);
  if (role == CollectivesModel::TargetRole) return QString::fromStdString(b.target);
  if (role == SortRole) {
    switch (index.column()) {
      case Op:
        return units::opName(b.op);
      case Target:
        return targetText(b);
      case Group:
        return QString::fromStdString(b.processGroup);
      case Instances:
        return static_cast<qlonglong>(b.instances);
      case Ranks:
        return b.ranks;
      case Steps:
        return static_cast<qlonglong>(b.stepsSeen);
      case Total:
        return static_cast<qlonglong>(b.totalExposedNs);
      case Mean:
        return static_cast<qlonglong>(b.meanExposedNs);
      case Cause:
        return causeLabel(b);
      case Worst:
        return static_cast<qlonglong>(b.exposedNs);
      case Bytes:
        return b.bytes ? QVariant(static_cast<qlonglong>(*b.bytes)) : QVariant(-1LL);
    }
    return {};
  }
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Op:
        return units::opName(b.op);
      case Target:
        return targetText(b);
      case Group:
        return b.processGroup.empty() ? none : QString::fromStdString(b.processGroup);
      case Instances:
        return units::count(b.instances);
      case Ranks:
        return QString::number(b.ranks);
      case Steps:
        return QString::number(b.stepsSeen);
      case Total:
        return units::ms(b.totalExposedNs);
      case Mean:
        return units::ms(b.meanExposedNs);
      case Cause:
        return causeLabel(b);
      case Worst:
        // "41.183 of 41.183" read as a typo: say when the whole instance was exposed.
        {
          const QString where = tr("rank %1%2").arg(b.rank).arg(b.step ? tr(", step %1").arg(*b.step) : QString());
          return b.exposedNs >= b.durNs ? tr("%1 exposed, all of it (%2)").arg(units::ms(b.exposedNs), where)
                                        : tr("%1 exposed of %2 (%3)").arg(units::ms(b.exposedNs), units::ms(b.durNs), where);
        }
      case Bytes:
        return b.bytes ? units::bytes(*b.bytes) : none;
    }
    return {};
  }
  if (role == Qt::TextAlignmentRole) {
    switch (index.column()) {
      case Op:
      case Target:
      case Group:
      case Cause:
        return QVariant(Qt::AlignLeft | Qt::AlignVCenter);
      default:
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    }
  }
  if (role == Qt::ToolTipRole) {
    if (index.column() == Cause && !b.reasons.empty()) {
      QStringList lines;
      for (const auto& r : b.reasons) lines << QString::fromStdString(r);
      return lines.join(QLatin1Char('\n'));
    }
    if (index.column() == Target)
      return b.targetFrom == "name"         ? tr("Named by the collective itself")
             : b.targetFrom == "annotation" ? tr("The annotation open at its CPU launch (module or FSDP unit)")
                                            : tr("Nothing names it: grouped by operation, size and process group");
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
      case Op:
        return tr("Operation");
      case Target:
        return tr("Target");
      case Group:
        return tr("Group");
      case Instances:
        return tr("Instances");
      case Ranks:
        return tr("Ranks");
      case Steps:
        return tr("Steps");
      case Total:
        return tr("Exposed, total (ms)");
      case Mean:
        return tr("Mean (ms)");
      case Cause:
        return tr("Main cause");
      case Worst:
        return tr("Worst: exposed of duration (ms)");
      case Bytes:
        return tr("Size");
    }
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case Target:
        return tr("What one change acts on: the parameter, bucket or unit the run names, else the module annotated at launch");
      case Instances:
        return tr("Exposed instances in the group, over every step and rank");
      case Total:
        return tr("Exposed time summed over the group: what removing it would save per run");
      case Cause:
        return tr("The cause holding most of the exposed time (docs/METRICS.md); select the row for every cause and what to try");
      default:
        return {};
    }
  }
  if (role == Qt::TextAlignmentRole) {
    const bool left = section == Op || section == Target || section == Group || section == Cause;
    return QVariant((left ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter);
  }
  return {};
}

QString BottleneckModel::detailsHtml(const BottleneckRow& row) {
  const core::Bottleneck& b = row.b;
  auto esc = [](const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); };
  QString h;
  h += QStringLiteral("<p style='margin-top:0'><b>%1 %2</b>").arg(units::opName(b.op), targetText(b).toHtmlEscaped());
  if (!b.processGroup.empty()) h += tr(", group %1").arg(esc(b.processGroup));
  h += QStringLiteral("</p>");
  h += QStringLiteral("<table cellspacing='0' cellpadding='1'>");
  auto line = [&h](const QString& k, const QString& v) {
    h += QStringLiteral("<tr><td style='color:#666;padding-right:10px'>%1</td><td>%2</td></tr>").arg(k, v);
  };
  line(tr("Exposed"), tr("%1 over %2 instances on %3 rank(s) in %4 step(s); mean %5")
                          .arg(units::msWithUnit(b.totalExposedNs), units::count(b.instances))
                          .arg(b.ranks)
                          .arg(b.stepsSeen)
                          .arg(units::msWithUnit(b.meanExposedNs)));
  {
    const QString where = tr("rank %1%2").arg(b.rank).arg(b.step ? tr(", step %1").arg(*b.step) : QString());
    line(tr("Worst"),
         b.exposedNs >= b.durNs
             ? tr("%1 exposed, the whole instance; %2").arg(units::msWithUnit(b.exposedNs), where)
             : tr("%1 exposed of its %2; %3").arg(units::msWithUnit(b.exposedNs), units::msWithUnit(b.durNs), where));
  }
  if (b.bytes) {
    QString size = units::bytes(*b.bytes);
    if (b.elements) size += tr(" (%1 elements)").arg(units::count(*b.elements));
    line(tr("Message"), size);
  }
  if (b.busBwGBps)
    line(
        tr("Bus bandwidth"),
        tr("%1 GB/s%2")
            .arg(units::gbps(*b.busBwGBps),
                 b.linkBwGBps ? tr(" (this run's link: %1 GB/s on large messages)").arg(units::gbps(*b.linkBwGBps)) : QString()));
  if (!b.kernel.empty()) line(tr("Kernel"), esc(b.kernel));
  if (b.lateRank) line(tr("Waited for"), tr("rank %1, %2 in total").arg(*b.lateRank).arg(units::msWithUnit(b.waitForLateRankNs)));
  h += QStringLiteral("</table>");
  h += QStringLiteral("<p style='margin-bottom:2px'><b>Why it is exposed</b></p><ul style='margin-top:0'>");
  for (const auto& r : b.reasons) h += QStringLiteral("<li>%1</li>").arg(esc(r));
  h += QStringLiteral("</ul>");
  if (!b.suggestions.empty()) {
    h += QStringLiteral("<p style='margin-bottom:2px'><b>What to try</b></p><ul style='margin-top:0'>");
    for (const auto& s : b.suggestions) h += QStringLiteral("<li>%1</li>").arg(esc(s));
    h += QStringLiteral("</ul>");
  }
  return h;
}

}  // namespace shardscope::ui
