#pragma once
// HTA's kernel classification (traces.md §5.2), reproduced exactly: Python re.match semantics
// (anchored at the start of the name), first match wins, case-sensitive.
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/model/types.h"

namespace shardscope::core {

Category htaKernelCategory(std::string_view name);

// Shardscope's notion of an NCCL kernel: the name starts with "nccl", case-insensitively
// (nsys' nccl_gpu_overlap_trace recipe and TraceLens).
bool isNcclKernelName(std::string_view name);

// Best-effort collective op from an NCCL kernel name ("ncclDevKernel_AllGather_RING_LL",
// "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(...)", "ncclBroadcastRingLLKernel_copy_i8").
CollectiveOp collectiveFromKernelName(std::string_view name);

// N of a "ProfilerStep#N" name (torch.profiler's step marker; HTA's regex ProfilerStep\s*#\s*(\d+)).
std::optional<std::int64_t> profilerStepNumber(std::string_view name);

}  // namespace shardscope::core
