#pragma once
// The sharding strategies: one enum for the runtime, the estimator, the simulator and the app.
// Semantics: ../shared/docs/strategies.md §1.1-1.8 and docs/RUNTIME.md. ZeRO++ hpZ (ZeRO-3 with a
// secondary, node-local copy of the parameters) is modelled by the estimator and the simulator; the
// runtime does not train it (runtimeStrategies(), RunConfig's validate() refuses it).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::core {

enum class Strategy { Ddp, Zero1, Zero2, Zero3, FsdpFull, FsdpGradOp, Hsdp, ZeroPPHpz };

// "ddp", "zero1", "zero2", "zero3", "fsdp", "fsdp_grad_op", "hsdp", "zeropp_hpz": the one spelling
// stored in runs.strategy, printed, and written to JSON.
std::string_view toString(Strategy s);
std::string strategyName(Strategy s);  // the same, as a std::string
// Also the aliases "fsdp_full", "full_shard", "shard_grad_op", "hybrid_shard", "hpz", "zero++",
// "zeropp"; case, surrounding blanks and '-' vs '_' do not matter. nullopt for anything else.
std::optional<Strategy> strategyFromString(std::string_view name);
// Every strategy, in enum order (what the estimator and the simulator compare).
const std::vector<Strategy>& allStrategies();
// The strategies the runtime trains (all but ZeRO++ hpZ), in enum order.
const std::vector<Strategy>& runtimeStrategies();
bool isRuntimeStrategy(Strategy s);
// Parameters sharded across ranks (ZeRO-3, FSDP full/grad-op, HSDP, hpZ).
bool shardsParameters(Strategy s);

}  // namespace shardscope::core
