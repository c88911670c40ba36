#include "ui/models/strategy_table_model.h"

#include <QBrush>
#include <QColor>

namespace shardscope::ui {

StrategyTableModel::StrategyTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void StrategyTableModel::setTable(core::StrategyTable table) {
  beginResetModel();
  table_ = std::move(table);
  endResetModel();
}

void StrategyTableModel::clear() { setTable({}); }

int StrategyTableModel::columnOf(core::StrategyColumn c) const {
  for (std::size_t i = 0; i < table_.columns.size(); ++i)
    if (table_.columns[i] == c) return static_cast<int>(i) + 1;
  return -1;
}

int StrategyTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(table_.rows.size());
}

int StrategyTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() || table_.rows.empty() ? 0 : static_cast<int>(table_.columns.size()) + 1;
}

QVariant StrategyTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
  const core::StrategyRow& row = table_.rows[static_cast<std::size_t>(index.row())];
  if (index.column() == 0) {
    switch (role) {
      case Qt::DisplayRole:
      case Qt::ToolTipRole:
        return QString::fromStdString(core::runLabel(row.name, row.run));
      case ColumnKeyRole:
        return QStringLiteral("run");
      case KnownRole:
        return true;
      default:
        return {};
    }
  }
  const core::StrategyColumn col = table_.columns[static_cast<std::size_t>(index.column() - 1)];
  const core::StrategyColumnInfo& info = core::strategyColumn(col);
  const core::StrategyCell& cell = row.at(col);
  switch (role) {
    case Qt::DisplayRole:
      return QString::fromStdString(core::strategyCellText(col, cell));
    case Qt::ToolTipRole: {
      const QString label = QString::fromStdString(std::string(info.label));
      const QString why = QString::fromStdString(cell.why);
      if (!cell.known()) return tr("%1: n/a — %2").arg(label, why);
      return why.isEmpty() ? label : tr("%1 (%2)").arg(label, why);
    }
    case Qt::TextAlignmentRole:
      return QVariant::fromValue(Qt::Alignment((info.text || !cell.known() ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter));
    case Qt::ForegroundRole:
      return cell.known() ? QVariant() : QVariant(QBrush(QColor(0x88, 0x88, 0x88)));
    case ExactValueRole:
      return cell.value ? QVariant(*cell.value) : QVariant();
    case KnownRole:
      return cell.known();
    case WhyRole:
      return QString::fromStdString(cell.why);
    case ColumnKeyRole:
      return QString::fromStdString(std::string(info.key));
    default:
      return {};
  }
}

QVariant StrategyTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
  if (section == 0) return role == Qt::DisplayRole || role == Qt::ToolTipRole ? QVariant(tr("run")) : QVariant();
  const core::StrategyColumnInfo& info = core::strategyColumn(table_.columns[static_cast<std::size_t>(section - 1)]);
  if (role == Qt::DisplayRole)
    return QString::fromStdString(core::strategyColumnHeader(table_, table_.columns[static_cast<std::size_t>(section - 1)]));
  if (role == Qt::ToolTipRole) return QString::fromStdString(std::string(info.label));
  return {};
}

}  // namespace shardscope::ui
