#pragma once
// The run browser's model: every run of the open database, grouped by source, strategy or status (or
// not grouped), columns name, strategy, status, world size, events, created, tags. Refreshing it with
// a new list of runs (setRuns) inserts, removes and updates rows in place, so views keep their
// selection, expansion and current item while a run is being written. Name and tags are editable;
// edits and deletions go to the TraceStore given with setStore (the GUI thread's read-write store).
#include <QAbstractItemModel>
#include <QList>
#include <QString>

#include <cstdint>
#include <vector>

#include "core/model/types.h"
#include "core/storage/trace_store.h"

namespace shardscope::core {
class TraceStore;
}

namespace shardscope::ui {

// One run as the browser shows it: the row of `runs` plus a few counts.
struct RunRow {
  core::Run run;
  std::int64_t events = 0;  // stored events (counter samples excluded)
  int ranks = 0;
  bool operator==(const RunRow& o) const;
};

// Reads every run with its counts: two queries, no event is read (cheap enough for a 2 s poll).
std::vector<RunRow> loadRunRows(core::TraceStore& store);

// A cheap fingerprint of the runs table (core::TraceStore::runsFingerprint): when it changes, or
// while a run is pending/running, the browser reloads.
using RunsFingerprint = core::RunsFingerprint;
RunsFingerprint runsFingerprint(core::TraceStore& store);

class RunListModel : public QAbstractItemModel {
  Q_OBJECT

 public:
  enum class Grouping { None, Source, Strategy, Status };
  enum Column { NameColumn, StrategyColumn, StatusColumn, WorldSizeColumn, EventsColumn, CreatedColumn, TagsColumn, ColumnCount };
  enum Role {
    RunIdRole = Qt::UserRole + 1,  // qlonglong run id; 0 on group rows
    IsGroupRole,                   // bool
    GroupKeyRole,                  // QString: the group's key (group rows and their runs)
    SortRole,                      // raw value (numbers as numbers)
  };

  explicit RunListModel(QObject* parent = nullptr);
  ~RunListModel() override;

  // QAbstractItemModel
  QModelIndex index(int row, int column, const QModelIndex& parent = QModelIndex()) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  Grouping grouping() const { return grouping_; }
  void setGrouping(Grouping g);             // a model reset (views restore selection by run id)
  static QString groupingName(Grouping g);  // "none", "source", "strategy", "status" (QSettings)
  static Grouping groupingFromName(const QString& name);

  // Replaces the runs, updating rows in place (insert/remove/dataChanged: persistent indexes of runs
  // that stay in their group survive).
  void setRuns(std::vector<RunRow> rows);
  void clear();

  // Where edits go (not owned; null = read-only: nothing is editable).
  void setStore(core::TraceStore* store);
  bool isEditable() const { return store_ != nullptr; }

  // Edits through the store; false (and errorOccurred) on failure. The model follows at once.
  bool renameRun(core::RunId id, const QString& name);
  bool setRunTags(core::RunId id, const QString& tags);  // normalised: "a, b ,,c" -> "a,b,c"
  bool deleteRuns(const QList<core::RunId>& ids);

  QModelIndex indexOfRun(core::RunId id, int column = NameColumn) const;
  QModelIndex indexOfGroup(const QString& key) const;  // invalid when not grouped or absent
  core::RunId runId(const QModelIndex& index) const;   // 0 for group rows / invalid
  bool isGroup(const QModelIndex& index) const;
  const RunRow* runRow(core::RunId id) const;
  int runCount() const;
  QList<core::RunId> runIds() const;  // in display order
  QString lastError() const { return lastError_; }

  static QString normalizeTags(const QString& tags);

 Q_SIGNALS:
  void errorOccurred(const QString& message);
  void runRenamed(core::RunId id, const QString& name);

 private:
  struct Group {
    quintptr uid = 0;
    QString key;
    std::vector<RunRow> runs;  // sorted by id
  };
  QString groupKeyOf(const core::Run& run) const;
  QString groupLabel(const Group& g) const;
  int groupOrder(const QString& key) const;
  bool groupLess(const QString& a, const QString& b) const;
  int groupPos(quintptr uid) const;
  QModelIndex groupIndex(int pos, int column = 0) const;
  QModelIndex runParent(int groupPosition) const;  // the parent index of a group's run rows
  const RunRow* rowAt(const QModelIndex& index) const;
  RunRow* rowAt(const QModelIndex& index);
  void regroup(std::vector<RunRow> rows);
  void updateRun(const RunRow& row);  // replace one run's data in place (same group or moved)
  bool fail(const QString& message);

  Grouping grouping_ = Grouping::Source;
  std::vector<Group> groups_;  // Grouping::None: exactly one group whose runs are top-level rows
  quintptr nextUid_ = 1;
  core::TraceStore* store_ = nullptr;
  QString lastError_;
};

}  // namespace shardscope::ui
