#pragma once
// A layout that places its items left to right and starts a new row when the next one does not fit:
// a toolbar row of a page that stays usable on a narrow window (1366 x 768 next to the run list)
// instead of forcing the window wider. Its minimum width is its widest item; its height follows the
// width (heightForWidth), so the page lays out below it as the rows wrap.
#include <QLayout>
#include <QList>

namespace shardscope::ui {

class FlowLayout : public QLayout {
 public:
  explicit FlowLayout(QWidget* parent = nullptr, int hSpacing = 6, int vSpacing = 4);
  ~FlowLayout() override;

  void addItem(QLayoutItem* item) override;
  int count() const override { return static_cast<int>(items_.size()); }
  QLayoutItem* itemAt(int index) const override;
  QLayoutItem* takeAt(int index) override;
  Qt::Orientations expandingDirections() const override { return {}; }
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  QSize minimumSize() const override;
  QSize sizeHint() const override;
  void setGeometry(const QRect& rect) override;

 private:
  // Places the items in `rect` (or only measures, when `apply` is false); the height used.
  int arrange(const QRect& rect, bool apply) const;

  QList<QLayoutItem*> items_;
  int hSpacing_, vSpacing_;
};

}  // namespace shardscope::ui
