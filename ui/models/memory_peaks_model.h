#pragma once
// The memory peaks of one run (core::computeMemoryPeaks): a row per rank and device with the peak
// allocated and reserved bytes, their time since the run start, the step and what was running.
#include <QAbstractTableModel>

#include <vector>

#include "core/analysis/memory_peaks.h"

namespace shardscope::ui {

class MemoryPeaksModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Rank, Device, PeakAllocated, AllocatedAt, Step, Phase, Operation, PeakReserved, ReservedAt, ColumnCount };
  enum Role { RawValueRole = Qt::UserRole + 1 };  // bytes, ns since the origin, step number

  explicit MemoryPeaksModel(QObject* parent = nullptr);

  // origin: the run start (times are shown in ms from it).
  void setPeaks(std::vector<core::MemoryPeak> peaks, core::TimeNs origin);
  void clear();
  const std::vector<core::MemoryPeak>& peaks() const { return peaks_; }
  const core::MemoryPeak& peakAt(int row) const { return peaks_.at(static_cast<std::size_t>(row)); }

  static QString deviceName(int deviceType, int deviceId);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<core::MemoryPeak> peaks_;
  core::TimeNs origin_ = 0;
};

}  // namespace shardscope::ui
