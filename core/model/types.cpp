#include "core/model/types.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "core/util/json.h"

namespace shardscope::core {

bool isLinkProbeName(std::string_view name) { return name.find(kLinkProbeLabel) != std::string_view::npos; }
bool isLoadedProbeName(std::string_view name) { return name.find(kLoadedProbeLabel) != std::string_view::npos; }
namespace {

std::string lowerAlnum(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

}  // namespace

std::string_view toString(RunSource s) {
  switch (s) {
    case RunSource::Runtime:
      return "runtime";
    case RunSource::Kineto:
      return "kineto";
    case RunSource::Simulated:
      return "simulated";
  }
  return "kineto";
}

bool isMemorySnapshotRun(const Run& run) {
  if (run.source != RunSource::Kineto || run.metadataJson.find(kMemorySnapshotRunKey) == std::string::npos) return false;
  try {
    const JsonValue meta = parseJson(run.metadataJson, "run metadata");
    const JsonValue* v = meta.find(kMemorySnapshotRunKey);
    return v && v->isBool() && v->asBool();
  } catch (const std::exception&) {
    return false;  // unreadable metadata: an ordinary imported run
  }
}

std::string_view runKind(const Run& run) { return isMemorySnapshotRun(run) ? "memory snapshot" : toString(run.source); }

std::string_view toString(RunStatus s) {
  switch (s) {
    case RunStatus::Pending:
      return "pending";
    case RunStatus::Running:
      return "running";
    case RunStatus::Completed:
      return "completed";
    case RunStatus::Failed:
      return "failed";
    case RunStatus::Cancelled:
      return "cancelled";
  }
  return "pending";
}

std::string_view toString(TrackKind k) {
  switch (k) {
    case TrackKind::GpuStream:
      return "gpu_stream";
    case TrackKind::CpuThread:
      return "cpu_thread";
    case TrackKind::Comm:
      return "comm";
    case TrackKind::Counter:
      return "counter";
    case TrackKind::Python:
      return "python";
  }
  return "cpu_thread";
}

std::string_view toString(Category c) {
  switch (c) {
    case Category::Computation:
      return "computation";
    case Category::Communication:
      return "communication";
    case Category::Memory:
      return "memory";
    case Category::Other:
      return "other";
  }
  return "other";
}

std::string_view toString(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::None:
      return "";
    case CollectiveOp::AllReduce:
      return "all_reduce";
    case CollectiveOp::AllGather:
      return "all_gather";
    case CollectiveOp::ReduceScatter:
      return "reduce_scatter";
    case CollectiveOp::AllToAll:
      return "all_to_all";
    case CollectiveOp::Broadcast:
      return "broadcast";
    case CollectiveOp::Reduce:
      return "reduce";
    case CollectiveOp::Send:
      return "send";
    case CollectiveOp::Recv:
      return "recv";
    case CollectiveOp::SendRecv:
      return "send_recv";
    case CollectiveOp::Barrier:
      return "barrier";
    case CollectiveOp::Gather:
      return "gather";
    case CollectiveOp::Scatter:
      return "scatter";
    case CollectiveOp::Other:
      return "other";
  }
  return "other";
}

std::optional<RunSource> runSourceFromString(std::string_view s) {
  for (auto v : {RunSource::Runtime, RunSource::Kineto, RunSource::Simulated})
    if (toString(v) == s) return v;
  return std::nullopt;
}

std::optional<RunStatus> runStatusFromString(std::string_view s) {
  for (auto v : {RunStatus::Pending, RunStatus::Running, RunStatus::Completed, RunStatus::Failed, RunStatus::Cancelled})
    if (toString(v) == s) return v;
  return std::nullopt;
}

std::optional<TrackKind> trackKindFromString(std::string_view s) {
  for (auto v : {TrackKind::GpuStream, TrackKind::CpuThread, TrackKind::Comm, TrackKind::Counter, TrackKind::Python})
    if (toString(v) == s) return v;
  return std::nullopt;
}

CollectiveOp collectiveOpFromString(std::string_view s) {
  // Normalise c10d collective names ("_allgather_base", "allgather_into_tensor_coalesced",
  // "reduce_scatter_tensor_coalesced"), annotation titles ("all_gather"), NCCL kernel parts
  // ("AllGather", "ReduceScatter", "SendRecv") to one spelling.
  const std::string k = lowerAlnum(s);
  if (k.empty()) return CollectiveOp::None;
  static const std::array<std::pair<std::string_view, CollectiveOp>, 14> prefixes = {{
      {"allreduce", CollectiveOp::AllReduce},
      {"allgather", CollectiveOp::AllGather},
      {"reducescatter", CollectiveOp::ReduceScatter},
      {"alltoall", CollectiveOp::AllToAll},
      {"broadcast", CollectiveOp::Broadcast},
      {"sendrecv", CollectiveOp::SendRecv},
      {"barrier", CollectiveOp::Barrier},
      {"reduce", CollectiveOp::Reduce},
      {"send", CollectiveOp::Send},
      {"recv", CollectiveOp::Recv},
      {"gather", CollectiveOp::Gather},
      {"scatter", CollectiveOp::Scatter},
      {"bcast", CollectiveOp::Broadcast},
      {"alltoallv", CollectiveOp::AllToAll},
  }};
  for (const auto& [p, op] : prefixes)
    if (k.rfind(p, 0) == 0) return op;
  return CollectiveOp::Other;
}

int dtypeSize(std::string_view dtype) {
  const std::string k = lowerAlnum(dtype);
  static const std::array<std::pair<std::string_view, int>, 30> sizes = {{
      {"float", 4},  {"float32", 4}, {"f32", 4},     {"fp32", 4},   {"double", 8},       {"float64", 8},
      {"f64", 8},    {"half", 2},    {"float16", 2}, {"f16", 2},    {"fp16", 2},         {"bfloat16", 2},
      {"bf16", 2},   {"int", 4},     {"int32", 4},   {"int32t", 4}, {"long", 8},         {"int64", 8},
      {"int64t", 8}, {"int8", 1},    {"int8t", 1},   {"char", 1},   {"byte", 1},         {"uint8", 1},
      {"uint8t", 1}, {"bool", 1},    {"short", 2},   {"int16", 2},  {"float8e4m3fn", 1}, {"float8e5m2", 1},
  }};
  for (const auto& [n, sz] : sizes)
    if (k == n) return sz;
  return 0;
}

std::string runLabel(std::string_view name, RunId id) {
  std::string out(name.empty() ? std::string_view("run") : name);
  return out + " #" + std::to_string(id.value());
}

}  // namespace shardscope::core
