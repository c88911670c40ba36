#pragma once
// What a stored run's configuration (Run::configJson: the run-config JSON of core/config, one key
// per knob) says about the knobs the analyses word their advice by. Advice is derived from the
// run's own configuration and never suggests what is already set (issue 46): the bottleneck
// analysis reads these. An imported trace has no configuration: every field is then unknown and
// the advice names each strategy's knob.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model/run_knobs.h"
#include "core/model/types.h"

namespace shardscope::core {

// The keys, as core/config/run_config.cpp's knob table spells them (it reads these constants).
namespace knob_key {
constexpr std::string_view kStrategy = "strategy";
constexpr std::string_view kBucketCapMb = "bucket_cap_mb";
constexpr std::string_view kGradientAsBucketView = "gradient_as_bucket_view";
constexpr std::string_view kReduceBucketSize = "reduce_bucket_size";
constexpr std::string_view kOverlapComm = "overlap_comm";
constexpr std::string_view kPrefetchBucketSize = "prefetch_bucket_size";
constexpr std::string_view kBackwardPrefetch = "backward_prefetch";
constexpr std::string_view kForwardPrefetch = "forward_prefetch";
constexpr std::string_view kMicroBatch = "micro_batch";
constexpr std::string_view kSeqLen = "seq_len";
constexpr std::string_view kActivationCheckpointing = "activation_checkpointing";
constexpr std::string_view kOptimizer = "optimizer";
constexpr std::string_view kMaxLiveParameters = "max_live_parameters";
constexpr std::string_view kOffloadOptimizer = "offload_optimizer";
constexpr std::string_view kWorldSize = "world_size";
}  // namespace knob_key

struct ConfigKnobs {
  enum class Family { Unknown, Ddp, Zero, Fsdp };
  Family family = Family::Unknown;
  std::string strategy;             // "zero3", "fsdp", ... ("" when the run has no configuration)
  int zeroStage = 0;                // 1..3 for ZeRO
  std::optional<bool> overlapComm;  // resolved: "auto" is on for ZeRO-3, off otherwise
  std::optional<BackwardPrefetch> backwardPrefetch;
  std::optional<bool> forwardPrefetch, gradientAsBucketView;
  std::optional<double> bucketCapMb;
  std::optional<std::int64_t> reduceBucketSize, prefetchBucketSize;  // elements
  // What sizes the memory categories (memory_peaks.h explainPeak).
  std::optional<std::int64_t> microBatch, seqLen, maxLiveParameters, worldSize;
  std::optional<bool> activationCheckpointing;
  std::string optimizer, offloadOptimizer;  // "adamw", "none" ... ("" unknown)
  bool known() const { return family != Family::Unknown; }
};

// A change of a run's configuration that the runtime can test (issue 46, "try it"): run-config keys
// (knob_key) and their new values as the run-config flags spell them ("backward_prefetch" -> "pre",
// "reduce_bucket_size" -> "4000000"). core/config's withChange applies it.
struct KnobChange {
  std::vector<std::pair<std::string, std::string>> set;
  std::string text() const;  // "backward_prefetch=pre", "a=1, b=2"
  bool empty() const { return set.empty(); }
};

// Never throws: an unreadable or absent configuration is Unknown (run.strategy still names the
// family when it is set).
ConfigKnobs configKnobs(const Run& run);

}  // namespace shardscope::core
