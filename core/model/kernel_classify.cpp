#include "core/model/kernel_classify.h"

#include <cctype>

namespace shardscope::core {
namespace {

bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Python's '.' does not match '\n'; the patterns below that use '.*' only look at the first line.
std::string_view firstLine(std::string_view s) {
  const auto nl = s.find('\n');
  return nl == std::string_view::npos ? s : s.substr(0, nl);
}

bool contains(std::string_view s, std::string_view p) { return firstLine(s).find(p) != std::string_view::npos; }

}  // namespace

Category htaKernelCategory(std::string_view name) {
  // 1. COMMUNICATION: (^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)
  if (startsWith(name, "nccl") || startsWith(name, "hip") || startsWith(name, "hccl") || contains(name, "ncclKernel"))
    return Category::Communication;
  // 2. MEMORY: (^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)
  if (startsWith(name, "Memcpy") || startsWith(name, "Memset") || startsWith(name, "dma")) return Category::Memory;
  // 3. COMPUTATION unless one of the non-compute patterns matches.
  const bool nonCompute = startsWith(name, "nccl") || contains(name, "Memcpy") || contains(name, "Memset") ||
                          contains(name, "dma") || contains(name, "Sync") || startsWith(name, "Stream Wait Event") ||
                          (startsWith(name, "cuda") && firstLine(name).find("LaunchKernel", 4) != std::string_view::npos) ||
                          startsWith(name, "runFunction") || startsWith(name, "hip") || startsWith(name, "job_exe") ||
                          startsWith(name, "packet") || startsWith(name, "pe_exe") || startsWith(name, "cpum_exe_subgraph") ||
                          startsWith(name, "hccl") || startsWith(name, "collective_subgraph_execution");
  return nonCompute ? Category::Other : Category::Computation;
}

bool isNcclKernelName(std::string_view name) {
  if (name.size() < 4) return false;
  for (std::size_t i = 0; i < 4; ++i)
    if (std::tolower(static_cast<unsigned char>(name[i])) != "nccl"[i]) return false;
  return true;
}

std::optional<std::int64_t> profilerStepNumber(std::string_view name) {
  if (!startsWith(name, "ProfilerStep")) return std::nullopt;
  std::size_t i = 12;
  while (i < name.size() && std::isspace(static_cast<unsigned char>(name[i]))) ++i;
  if (i >= name.size() || name[i] != '#') return std::nullopt;
  ++i;
  while (i < name.size() && std::isspace(static_cast<unsigned char>(name[i]))) ++i;
  std::int64_t v = 0;
  std::size_t j = i;
  for (; j < name.size() && std::isdigit(static_cast<unsigned char>(name[j])) && j - i < 18; ++j) v = v * 10 + (name[j] - '0');
  if (j == i) return std::nullopt;
  if (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) return std::nullopt;  // beyond int64
  return v;
}

CollectiveOp collectiveFromKernelName(std::string_view name) {
  if (!isNcclKernelName(name)) return CollectiveOp::None;
  std::string_view rest = name.substr(4);
  for (std::string_view p : {"Kernel_", "DevKernel_", "kernel_", "devkernel_"}) {
    if (startsWith(rest, p)) {
      rest.remove_prefix(p.size());
      break;
    }
  }
  // Up to the first '(' (argument list); collectiveOpFromString matches by prefix.
  const auto paren = rest.find('(');
  if (paren != std::string_view::npos) rest = rest.substr(0, paren);
  const CollectiveOp op = collectiveOpFromString(rest);
  return op == CollectiveOp::None ? CollectiveOp::Other : op;
}

}  // namespace shardscope::core
