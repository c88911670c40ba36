#include "core/model/job.h"

namespace shardscope::core {

JsonValue JobPart::toJson() const {
  JsonValue j = JsonValue::object();
  j.set("id", JsonValue::string(id));
  j.set("scheduler_id", JsonValue::string(schedulerId));
  j.set("launcher", JsonValue::string(launcher));
  j.set("nnodes", JsonValue::number(static_cast<std::int64_t>(nnodes)));
  j.set("node_rank", JsonValue::number(static_cast<std::int64_t>(nodeRank)));
  j.set("first_rank", JsonValue::number(static_cast<std::int64_t>(firstRank)));
  j.set("ranks_on_node", JsonValue::number(static_cast<std::int64_t>(ranksOnNode)));
  j.set("host", JsonValue::string(host));
  j.set("master", JsonValue::string(master));
  return j;
}

std::optional<JobPart> JobPart::fromRunMetadata(std::string_view metadataJson) {
  if (metadataJson.empty()) return std::nullopt;
  try {
    const JsonValue meta = parseJson(metadataJson, "run metadata");
    const JsonValue* j = meta.find("job");
    if (!j || !j->isObject()) return std::nullopt;
    JobPart p;
    auto str = [&](const char* k, std::string& out) {
      if (const JsonValue* v = j->find(k); v && v->isString()) out = v->asString();
    };
    auto num = [&](const char* k, int& out) {
      if (const JsonValue* v = j->find(k); v && v->asInt()) out = static_cast<int>(*v->asInt());
    };
    str("id", p.id);
    str("scheduler_id", p.schedulerId);
    str("launcher", p.launcher);
    str("host", p.host);
    str("master", p.master);
    num("nnodes", p.nnodes);
    num("node_rank", p.nodeRank);
    num("first_rank", p.firstRank);
    num("ranks_on_node", p.ranksOnNode);
    if (p.id.empty() || p.nnodes < 1 || p.nodeRank < 0 || p.nodeRank >= p.nnodes || p.ranksOnNode < 1) return std::nullopt;
    return p;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace shardscope::core
