#include "core/model/strategy.h"

namespace shardscope::core {

namespace {

struct StrategyName {
  Strategy s;
  std::string_view name;
};
// Canonical names first (toString returns the first match), then the aliases.
constexpr StrategyName kStrategyNames[] = {
    {Strategy::Ddp, "ddp"},
    {Strategy::Zero1, "zero1"},
    {Strategy::Zero2, "zero2"},
    {Strategy::Zero3, "zero3"},
    {Strategy::FsdpFull, "fsdp"},
    {Strategy::FsdpGradOp, "fsdp_grad_op"},
    {Strategy::Hsdp, "hsdp"},
    {Strategy::ZeroPPHpz, "zeropp_hpz"},
    {Strategy::FsdpFull, "fsdp_full"},
    {Strategy::FsdpFull, "full_shard"},
    {Strategy::FsdpGradOp, "shard_grad_op"},
    {Strategy::Hsdp, "hybrid_shard"},
    {Strategy::ZeroPPHpz, "hpz"},
    {Strategy::ZeroPPHpz, "zero++"},
    {Strategy::ZeroPPHpz, "zeropp"},
};

std::string normalised(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) {
    if (c == '-')
      c = '_';
    else if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

std::string_view toString(Strategy s) {
  for (const auto& n : kStrategyNames)
    if (n.s == s) return n.name;
  return "ddp";
}

std::string strategyName(Strategy s) { return std::string(toString(s)); }

std::optional<Strategy> strategyFromString(std::string_view name) {
  const std::string key = normalised(name);
  for (const auto& n : kStrategyNames)
    if (n.name == key) return n.s;
  return std::nullopt;
}

const std::vector<Strategy>& allStrategies() {
  static const std::vector<Strategy> all = {Strategy::Ddp,      Strategy::Zero1,      Strategy::Zero2, Strategy::Zero3,
                                            Strategy::FsdpFull, Strategy::FsdpGradOp, Strategy::Hsdp,  Strategy::ZeroPPHpz};
  return all;
}

const std::vector<Strategy>& runtimeStrategies() {
  static const std::vector<Strategy> all = {Strategy::Ddp,      Strategy::Zero1,      Strategy::Zero2, Strategy::Zero3,
                                            Strategy::FsdpFull, Strategy::FsdpGradOp, Strategy::Hsdp};
  return all;
}

bool isRuntimeStrategy(Strategy s) { return s != Strategy::ZeroPPHpz; }

bool shardsParameters(Strategy s) {
  return s == Strategy::Zero3 || s == Strategy::FsdpFull || s == Strategy::FsdpGradOp || s == Strategy::Hsdp ||
         s == Strategy::ZeroPPHpz;
}

}  // namespace shardscope::core
