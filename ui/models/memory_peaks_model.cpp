#include "ui/models/memory_peaks_model.h"

#include "core/analysis/run_figures.h"

#include "ui/charts/chart_style.h"

namespace shardscope::ui {

MemoryPeaksModel::MemoryPeaksModel(QObject* parent) : QAbstractTableModel(parent) {}

void MemoryPeaksModel::setPeaks(std::vector<core::MemoryPeak> peaks, core::TimeNs origin) {
  beginResetModel();
  peaks_ = std::move(peaks);
  origin_ = origin;
  endResetModel();
}

void MemoryPeaksModel::clear() { setPeaks({}, 0); }

QString MemoryPeaksModel::deviceName(int deviceType, int deviceId) {
  return QString::fromStdString(core::deviceName(deviceType, deviceId));  // one spelling, core's
}

int MemoryPeaksModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(peaks_.size()); }

int MemoryPeaksModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant MemoryPeaksModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& p = peaks_[static_cast<std::size_t>(index.row())];
  const double allocatedMs = static_cast<double>(p.allocatedAtNs - origin_) / 1e6;
  const double reservedMs = static_cast<double>(p.reservedAtNs - origin_) / 1e6;
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Rank:
        return p.rank;
      case Device:
        return deviceName(p.deviceType, p.deviceId);
      case PeakAllocated:
        return charts::formatBytes(static_cast<double>(p.peakAllocatedBytes), 2) +
               (p.allocatedFromCounter ? QStringLiteral(" *") : QString());
      case AllocatedAt:
        return charts::formatNumber(allocatedMs, 3);
      case Step:
        return p.step ? QVariant(static_cast<qlonglong>(*p.step)) : QVariant(QStringLiteral("—"));
      case Phase:
        return QString::fromStdString(p.annotation);
      case Operation:
        return QString::fromStdString(p.operation);
      case PeakReserved:
        return charts::formatBytes(static_cast<double>(p.peakReservedBytes), 2) +
               (p.reservedFromCounter ? QStringLiteral(" *") : QString());
      case ReservedAt:
        return charts::formatNumber(reservedMs, 3);
      default:
        return {};
    }
  }
  if (role == Qt::ToolTipRole &&
      ((index.column() == PeakAllocated && p.allocatedFromCounter) || (index.column() == PeakReserved && p.reservedFromCounter)))
    return tr(
        "* The caching allocator's own peak counter (torch.cuda.max_memory_allocated / reserved): the peak fell "
        "between two memory samples, so its moment, step and operation are those of the highest sample.");
  if (role == RawValueRole) {
    switch (index.column()) {
      case Rank:
        return p.rank;
      case Device:
        return p.deviceType * 1000 + p.deviceId;
      case PeakAllocated:
        return static_cast<qlonglong>(p.peakAllocatedBytes);
      case AllocatedAt:
        return static_cast<qlonglong>(p.allocatedAtNs - origin_);
      case Step:
        return p.step ? QVariant(static_cast<qlonglong>(*p.step)) : QVariant();
      case Phase:
        return QString::fromStdString(p.annotation);
      case Operation:
        return QString::fromStdString(p.operation);
      case PeakReserved:
        return static_cast<qlonglong>(p.peakReservedBytes);
      case ReservedAt:
        return static_cast<qlonglong>(p.reservedAtNs - origin_);
      default:
        return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    switch (index.column()) {
      case PeakAllocated:
        return QStringLiteral("%1 bytes").arg(charts::formatNumber(static_cast<double>(p.peakAllocatedBytes)));
      case PeakReserved:
        return QStringLiteral("%1 bytes").arg(charts::formatNumber(static_cast<double>(p.peakReservedBytes)));
      case AllocatedAt:
        return QStringLiteral("%1 ns since the run start")
            .arg(charts::formatNumber(static_cast<double>(p.allocatedAtNs - origin_)));
      case ReservedAt:
        return QStringLiteral("%1 ns since the run start")
            .arg(charts::formatNumber(static_cast<double>(p.reservedAtNs - origin_)));
      case Phase:
        return tr("innermost user annotation at the allocated peak");
      case Operation:
        return tr("innermost CPU operation at the allocated peak");
      default:
        return {};
    }
  }
  if (role == Qt::TextAlignmentRole) {
    switch (index.column()) {
      case Rank:
      case PeakAllocated:
      case AllocatedAt:
      case Step:
      case PeakReserved:
      case ReservedAt:
        return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
      default:
        return QVariant::fromValue(Qt::Alignment(Qt::AlignLeft | Qt::AlignVCenter));
    }
  }
  return {};
}

QVariant MemoryPeaksModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= ColumnCount) return {};
  switch (section) {
    case Rank:
      return tr("Rank");
    case Device:
      return tr("Device");
    case PeakAllocated:
      return tr("Peak allocated");
    case AllocatedAt:
      return tr("At (ms)");
    case Step:
      return tr("Step");
    case Phase:
      return tr("Phase");
    case Operation:
      return tr("Operation");
    case PeakReserved:
      return tr("Peak reserved");
    case ReservedAt:
      return tr("Reserved at (ms)");
    default:
      return {};
  }
}

}  // namespace shardscope::ui
