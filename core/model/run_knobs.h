#pragma once
// The set-valued knobs of a training run (core::RunConfig, core/config/run_config.h): one enum
// each and ONE name table each. The names are the spellings of the run-config JSON and of the
// worker's flags ("--precision bf16"); toString / knobFromString and the key table of
// run_config.cpp (its help text, its "must be fp32 or bf16" messages) all read these tables.
// They live in core/model, below config, because the estimator and the simulator use the same
// enums (Precision, BackwardPrefetch) for their own inputs.
#include <optional>
#include <span>
#include <string_view>

namespace shardscope::core {

enum class Precision { Fp32, Bf16, Fp16 };            // dtype of parameters and activations in compute
enum class ReduceDtype { SameAsParams, Fp32, Bf16 };  // dtype gradients are reduced in
enum class AttentionKernel { Auto, Sdpa, Eager };
enum class ComputeDevice { Auto, Cpu, Cuda };
enum class CommBackend { Auto, Gloo, Nccl };
enum class OptimizerKind { AdamW, Sgd };
enum class Offload { None, Cpu };  // offload_optimizer, offload_param
enum class BackwardPrefetch { Pre, Post, None };
enum class GpuTrace { Launches, Full, Kernels, Off };

template <class E>
struct KnobName {
  E value;
  std::string_view name;
};

// KnobNames<E>::table: every value of E with its one spelling, in the order help text and error
// messages list them.
template <class E>
struct KnobNames;
template <>
struct KnobNames<Precision> {
  static constexpr KnobName<Precision> table[] = {
      {Precision::Fp32, "fp32"}, {Precision::Bf16, "bf16"}, {Precision::Fp16, "fp16"}};
};
template <>
struct KnobNames<ReduceDtype> {
  // "" (an absent value) = the parameters' dtype, as FSDP's MixedPrecision.
  static constexpr KnobName<ReduceDtype> table[] = {
      {ReduceDtype::SameAsParams, ""}, {ReduceDtype::Fp32, "fp32"}, {ReduceDtype::Bf16, "bf16"}};
};
template <>
struct KnobNames<AttentionKernel> {
  static constexpr KnobName<AttentionKernel> table[] = {
      {AttentionKernel::Auto, "auto"}, {AttentionKernel::Sdpa, "sdpa"}, {AttentionKernel::Eager, "eager"}};
};
template <>
struct KnobNames<ComputeDevice> {
  static constexpr KnobName<ComputeDevice> table[] = {
      {ComputeDevice::Auto, "auto"}, {ComputeDevice::Cpu, "cpu"}, {ComputeDevice::Cuda, "cuda"}};
};
template <>
struct KnobNames<CommBackend> {
  static constexpr KnobName<CommBackend> table[] = {
      {CommBackend::Auto, "auto"}, {CommBackend::Gloo, "gloo"}, {CommBackend::Nccl, "nccl"}};
};
template <>
struct KnobNames<OptimizerKind> {
  static constexpr KnobName<OptimizerKind> table[] = {{OptimizerKind::AdamW, "adamw"}, {OptimizerKind::Sgd, "sgd"}};
};
template <>
struct KnobNames<Offload> {
  static constexpr KnobName<Offload> table[] = {{Offload::None, "none"}, {Offload::Cpu, "cpu"}};
};
template <>
struct KnobNames<BackwardPrefetch> {
  static constexpr KnobName<BackwardPrefetch> table[] = {
      {BackwardPrefetch::Pre, "pre"}, {BackwardPrefetch::Post, "post"}, {BackwardPrefetch::None, "none"}};
};
template <>
struct KnobNames<GpuTrace> {
  static constexpr KnobName<GpuTrace> table[] = {
      {GpuTrace::Launches, "launches"}, {GpuTrace::Full, "full"}, {GpuTrace::Kernels, "kernels"}, {GpuTrace::Off, "off"}};
};

template <class E>
concept KnobEnum = requires {
  KnobNames<E>::table;
};

template <KnobEnum E>
constexpr std::span<const KnobName<E>> knobNames() {
  return KnobNames<E>::table;
}

// The value's spelling ("bf16"); "" for a value outside the table (ReduceDtype::SameAsParams is "" too).
template <KnobEnum E>
constexpr std::string_view toString(E v) {
  for (const auto& n : KnobNames<E>::table)
    if (n.value == v) return n.name;
  return {};
}

// The value spelled exactly `name` (no trimming, no case folding); nullopt for anything else.
template <KnobEnum E>
constexpr std::optional<E> knobFromString(std::string_view name) {
  for (const auto& n : KnobNames<E>::table)
    if (n.name == name) return n.value;
  return std::nullopt;
}

}  // namespace shardscope::core
