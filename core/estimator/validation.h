#pragma once
// Published measurements of sharded training held against the estimator (issue 47, `shardscope-cli
// validate`): rows in the strict schema of ../shared/published/README.md, each mapped to the
// estimator's own options (estimator_options.h: the same mapping as `estimate --scenario`, no formula
// of its own) or refused with the concepts the estimator lacks for it, never approximated in silence.
// A row's memory is compared only with the measure it publishes (the estimator gives allocated
// memory: a reserved, system or unstated figure is another measure and says so); its speed only where
// the device, the links and the step are all expressible.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/estimator/recommend.h"
#include "core/util/json.h"

namespace shardscope::core::estimator {

struct PublishedRow {
  std::string id;
  JsonValue json;  // the row as read (every schema key present)
};
// Reads a JSON array of rows. Throws Error naming the file, the row (index and id) and the field for
// a row that breaks the schema: a missing key, a wrong type, an unknown enum value.
std::vector<PublishedRow> readPublishedRows(const std::string& path);
// The same from text (label names it in errors).
std::vector<PublishedRow> parsePublishedRows(const std::string& text, const std::string& label);

struct RowPrediction {
  std::string id, source, model, gpu, strategy, finetune, measure, comparisonSet;
  int gpus = 0;
  // The estimate options the row maps to ("gpus" -> "8", a flag's value "true"): what
  // `shardscope-cli estimate` would be given.
  std::vector<std::pair<std::string, std::string>> options;
  // Concepts the estimator lacks for the row: nothing is predicted ("mixture of experts", "tensor
  // parallel", ...). memoryMissing / speedMissing: what keeps one figure from being compared while
  // the other is.
  std::vector<std::string> missing, memoryMissing, speedMissing;
  std::vector<std::string> assumptions;  // read as an equivalent the estimator has, said ("fsdp2 as fsdp")
  // The estimate's input and strategy the options give (set for a predicted row): what every
  // re-estimate of the row (another efficiency) starts from.
  std::optional<RecommendInput> input;
  Strategy strategyAssessed = Strategy::Ddp;
  std::optional<double> publishedPeakGib, publishedTokensPerSPerGpu;
  std::optional<double> predictedPeakGib;  // allocated: the estimator's measure
  std::optional<double> deviceGib;         // what the fit test compared it with
  std::optional<bool> fits;
  std::optional<double> predictedTokensPerSPerGpu;
  // Uncalibrated, the speed is an interval: the estimate at the band of efficiencies published runs
  // reach (calibration.h: efficiency_low, efficiency_high).
  std::optional<double> tokensIntervalLow, tokensIntervalHigh;
  bool intervalCovers() const {
    return publishedTokensPerSPerGpu && tokensIntervalLow && tokensIntervalHigh &&
           *publishedTokensPerSPerGpu >= *tokensIntervalLow && *publishedTokensPerSPerGpu <= *tokensIntervalHigh;
  }
  // (predicted - published) / published x 100, where the figure is comparable.
  std::optional<double> memoryErrorPct, speedErrorPct;
  // --calibrate leave-one-out: the efficiency at which the estimate meets another row's published
  // tokens/s (the nearest of the same source and GPU type), carried to this row through the same
  // estimate; its error against this row's published figure.
  std::optional<double> calibratedTokensPerSPerGpu, calibratedEfficiency, calibratedSpeedErrorPct;
  std::string calibratedFrom;  // the row id it was calibrated on ("" none)
  // The allocated estimate against a published figure of another measure (reserved, system,
  // unstated): not an error of the estimate, the gap a reserved-memory model has to close.
  std::optional<double> memoryOtherMeasurePct;
  bool expressible() const { return missing.empty(); }
};
RowPrediction predictRow(const PublishedRow& row);

// The row's tokens/s per GPU through the estimate at another efficiency (the fraction of the
// device's dense peak achieved); nullopt where the row is not predicted.
std::optional<double> tokensPerSPerGpuAt(const RowPrediction& row, double efficiency);
// The efficiency at which the row's estimate equals its published tokens/s (bisection over
// (0, 1]; 1 when even the peak is short of it); nullopt without both figures.
std::optional<double> efficiencyMatching(const RowPrediction& row);
// Leave-one-out calibration: each row with a speed prediction is calibrated on the nearest other
// row of the same source and GPU type that has both figures (nearest: the same model, then the same
// strategy, the same GPU count, the same fine-tuning mode; ties: the first in the file).
void calibrateLeaveOneOut(std::vector<RowPrediction>& rows);

// Mean absolute and mean signed error over the rows of a group that compare a figure.
struct ErrorSummary {
  std::string group;  // "all", "fsdp", "lora", "allocated", ...
  int rows = 0;
  double meanAbsPct = 0, meanSignedPct = 0, maxAbsPct = 0;
};
// Per figure: the rows that compare it, grouped: all, by strategy family (ddp, zero, fsdp), by
// fine-tuning mode and (memory) by the published measure.
std::vector<ErrorSummary> memoryErrorSummary(const std::vector<RowPrediction>& rows);
std::vector<ErrorSummary> speedErrorSummary(const std::vector<RowPrediction>& rows);
// The same for calibratedSpeedErrorPct.
std::vector<ErrorSummary> calibratedSpeedErrorSummary(const std::vector<RowPrediction>& rows);
// The same for memoryOtherMeasurePct (labelled as another measure wherever shown).
std::vector<ErrorSummary> memoryOtherMeasureSummary(const std::vector<RowPrediction>& rows);
// Every missing concept with the rows that need it, the most needed first.
std::vector<std::pair<std::string, std::vector<std::string>>> missingConcepts(const std::vector<RowPrediction>& rows);

// A documented comparison (rows of one `comparison_set`, one factor changed): does the estimate order
// them as the measurements do? Per figure, over the set's rows that have both a published and a
// predicted value (memory in any one measure: the order, not the level, is compared).
struct ComparisonSetCheck {
  std::string set;
  std::string figure;  // "tokens_per_s_per_gpu" (higher first) or "peak_memory_gib" (lower first)
  std::vector<std::string> publishedOrder, predictedOrder;  // row ids, best first
  std::vector<std::string> notCompared;                     // rows of the set without both values
  // The estimate gives two rows of the set the same figure (within 0.5 %): it cannot order them (FSDP1
  // and FSDP2 are one strategy to it), which is neither the published order nor another.
  bool predictedTie = false;
  bool sameOrder() const { return !predictedTie && publishedOrder == predictedOrder; }
};
// Sets with at least two comparable rows, by set name then figure.
std::vector<ComparisonSetCheck> comparisonSetChecks(const std::vector<RowPrediction>& rows);

// {id, source, expressible, missing, memory_missing, speed_missing, assumptions, options, published
//  {peak_memory_gib, measure, tokens_per_s_per_gpu}, predicted {peak_memory_gib (allocated), measure
//  "allocated", fits, device_gib, tokens_per_s_per_gpu, tokens_per_s_interval [low, high],
//  tokens_per_s_per_gpu_calibrated, calibrated_from, calibrated_efficiency}, error_pct {peak_memory, tokens_per_s,
//  peak_memory_other_measure}}.
JsonValue toJson(const RowPrediction& r);
// {set, figure, same_order, predicted_tie, published_order, predicted_order, not_compared}.
JsonValue toJson(const ComparisonSetCheck& c);

}  // namespace shardscope::core::estimator
