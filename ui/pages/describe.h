#pragma once
// What a page shows, as JSON (Page::describe(); the screenshot mode writes it beside the picture as
// OUT.json): runs, headline figures with their units, table rows, chart series with their lengths.
// Tests hold every page against `shardscope-cli analyze --json` / `compare-runs --json` through it.
#include <QJsonArray>
#include <QJsonObject>
#include <QJsonValue>
#include <QString>

#include <optional>
#include <string>

#include "core/analysis/comparison.h"

namespace shardscope::ui::describe {

inline QJsonValue number(const std::optional<double>& v) { return v ? QJsonValue(*v) : QJsonValue(QJsonValue::Null); }
inline QJsonValue number(const std::optional<std::int64_t>& v) {
  return v ? QJsonValue(static_cast<double>(*v)) : QJsonValue(QJsonValue::Null);
}
inline QString qs(const std::string& s) { return QString::fromStdString(s); }

// {"key": ..., "value": ..., "unit": ...}
inline QJsonObject figure(const QString& key, const QJsonValue& value, const QString& unit) {
  return QJsonObject{{QStringLiteral("key"), key}, {QStringLiteral("value"), value}, {QStringLiteral("unit"), unit}};
}

// The unit of a comparison row, from its key's suffix (the convention of core's rows).
inline QString rowUnit(const std::string& key) {
  auto ends = [&](const char* s) {
    const std::string x(s);
    return key.size() >= x.size() && key.compare(key.size() - x.size(), x.size(), x) == 0;
  };
  if (key == core::metric_keys::kTokensPerSecond) return QStringLiteral("tokens/s");
  if (ends("_ms")) return QStringLiteral("ms");
  if (ends("_pct")) return QStringLiteral("%");
  if (ends("_s")) return QStringLiteral("s");
  if (key.find("_gib") != std::string::npos) return QStringLiteral("GiB");
  return {};
}

inline QJsonObject runRef(core::RunId id, const QString& label) {
  return QJsonObject{{QStringLiteral("id"), static_cast<double>(id.value())}, {QStringLiteral("label"), label}};
}

}  // namespace shardscope::ui::describe
