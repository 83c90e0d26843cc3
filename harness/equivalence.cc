#include "harness/equivalence.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "variants/core/torch_compat.h"

namespace seqbench {

TensorDifference Compare(const torch::Tensor& actual, const torch::Tensor& expected,
                         const Tolerance& tolerance, const torch::Tensor& mask) {
  TORCH_CHECK(actual.sizes() == expected.sizes(), "cannot compare shapes ", actual.sizes(), " and ",
              expected.sizes());
  auto a = actual.detach().to(torch::kCPU, torch::kFloat64);
  auto e = expected.detach().to(torch::kCPU, torch::kFloat64);
  if (mask.defined()) {
    const auto selected = mask.to(torch::kCPU);
    a = a.index({selected});
    e = e.index({selected});
  }
  TensorDifference difference;
  if (a.numel() == 0) return difference;
  const auto error = (a - e).abs();
  const double scale = e.abs().max().item<double>();
  difference.max_abs = error.max().item<double>();
  difference.max_rel = scale > 0 ? difference.max_abs / scale : difference.max_abs;
  // NaN fails both comparisons, so a non-finite result is never "within".
  difference.within = (error <= tolerance.atol + tolerance.rtol * e.abs()).all().item<bool>() &&
                      torch::isfinite(a).all().item<bool>();
  return difference;
}

namespace {
// The larger of two errors, NaN if either is: std::max(a, NaN) returns a, which would
// report a NaN gradient as the previous parameter's small error.
double WorseError(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return std::max(a, b);
}
}  // namespace

void Accumulate(TensorDifference& worst, const TensorDifference& next) {
  worst.max_abs = WorseError(worst.max_abs, next.max_abs);
  worst.max_rel = WorseError(worst.max_rel, next.max_rel);
  worst.within = worst.within && next.within;
}

StepOutcome RunStep(Variant& variant, Mode mode, const Batch& batch, int64_t generate_tokens) {
  StepOutcome outcome;
  switch (mode) {
    case Mode::kTrain:
      outcome.output = variant.TrainStep(batch);
      for (const auto& item : variant.parameters()) {
        TORCH_CHECK(item.value().grad().defined(), "no gradient for parameter ", item.key());
        outcome.gradients.insert(item.key(), item.value().grad().detach().clone());
      }
      break;
    case Mode::kForward:
      outcome.output = variant.InferStep(batch);
      break;
    case Mode::kGenerate:
      outcome.tokens = variant.Generate(batch.tokens, generate_tokens);
      break;
  }
  return outcome;
}

std::vector<int64_t> CheckRows(const Batch& batch) {
  const int64_t size = batch.batch_size();
  std::vector<int64_t> rows;
  if (size <= 4) {
    for (int64_t row = 0; row < size; ++row) rows.push_back(row);
    return rows;
  }
  const torch::Tensor lengths = batch.lengths.to(torch::kCPU);
  rows = {0, size - 1, lengths.argmax().item<int64_t>(), lengths.argmin().item<int64_t>()};
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

Batch SelectRows(const Batch& batch, const std::vector<int64_t>& rows) {
  const torch::Tensor index = torch::tensor(rows, torch::kLong);
  return Batch{batch.tokens.index_select(0, index.to(batch.tokens.device())),
               batch.lengths.index_select(0, index.to(batch.lengths.device()))};
}

TensorDifference CompareRows(const torch::Tensor& actual_logits,
                             const torch::Tensor& expected_logits, const Batch& batch,
                             const std::vector<int64_t>& rows, const Tolerance& tolerance) {
  const torch::Tensor index = torch::tensor(rows, torch::kLong).to(actual_logits.device());
  return Compare(actual_logits.index_select(0, index), expected_logits, tolerance,
                 SelectRows(batch, rows).PaddingMask());
}

namespace {

// Rows [start, start + count) of `batch`, padded to the batch's length T.
Batch RowsOf(const Batch& batch, int64_t start, int64_t count) {
  return Batch{batch.tokens.narrow(0, start, count), batch.lengths.narrow(0, start, count)};
}

// The next-token targets of `batch`'s rows, as NextTokenLoss counts them: length - 1 each.
double TargetsOf(const Batch& batch) {
  return (batch.lengths - 1).clamp_min(0).sum().item<double>();
}

}  // namespace

StepOutcome RunStepInRowChunks(Variant& variant, Mode mode, const Batch& batch,
                               int64_t generate_tokens, int64_t rows) {
  TORCH_CHECK(rows >= 1, "rows per chunk must be at least 1, got ", rows);
  if (mode == Mode::kGenerate) return RunStep(variant, mode, batch, generate_tokens);
  const bool train = mode == Mode::kTrain;
  if (train) compat::ClearGradients(variant.parameters().values());
  const double targets = std::max(1.0, TargetsOf(batch));  // NextTokenLoss' clamp_min(1)
  std::vector<torch::Tensor> logits;
  torch::Tensor loss;
  for (int64_t start = 0; start < batch.batch_size(); start += rows) {
    const Batch chunk = RowsOf(batch, start, std::min(rows, batch.batch_size() - start));
    const double weight = TargetsOf(chunk) / targets;
    ForwardOutput output;
    if (train) {
      output = variant.Forward(chunk);
      (output.loss * weight).backward();  // gradients add up across the chunks
    } else {
      output = variant.InferStep(chunk);
    }
    logits.push_back(output.logits.detach());
    const torch::Tensor part = output.loss.detach() * weight;
    loss = loss.defined() ? loss + part : part;
  }
  StepOutcome outcome;
  outcome.output.logits = torch::cat(logits, 0);
  outcome.output.loss = loss;
  if (train) {
    for (const auto& item : variant.parameters()) {
      TORCH_CHECK(item.value().grad().defined(), "no gradient for parameter ", item.key());
      outcome.gradients.insert(item.key(), item.value().grad().detach().clone());
    }
  }
  return outcome;
}

EquivalenceResult CompareOutcomes(const StepOutcome& actual, const StepOutcome& expected, Mode mode,
                                  const Batch& batch, const Tolerance& tolerance) {
  EquivalenceResult result;
  if (mode == Mode::kGenerate) {
    TORCH_CHECK(actual.tokens.sizes() == expected.tokens.sizes(),
                "generated shapes differ: ", actual.tokens.sizes(), " against ",
                expected.tokens.sizes());
    result.mismatched_tokens =
        (actual.tokens.to(torch::kCPU) != expected.tokens.to(torch::kCPU)).sum().item<int64_t>();
    return result;
  }
  result.logits =
      Compare(actual.output.logits, expected.output.logits, tolerance, batch.PaddingMask());
  result.loss = Compare(actual.output.loss, expected.output.loss, tolerance);
  for (const auto& item : expected.gradients) {
    TORCH_CHECK(actual.gradients.contains(item.key()), "no gradient for parameter ", item.key());
    const TensorDifference difference =
        Compare(actual.gradients[item.key()], item.value(), tolerance);
    // The first non-finite gradient stays the worst one named.
    if (!std::isnan(result.gradients.max_rel) &&
        (std::isnan(difference.max_rel) || difference.max_rel >= result.gradients.max_rel)) {
      result.worst_gradient = item.key();
    }
    Accumulate(result.gradients, difference);
  }
  return result;
}

EquivalenceResult CheckEquivalence(Variant& candidate, Variant& reference, Mode mode,
                                   const Batch& batch, const Tolerance& tolerance,
                                   int64_t generate_tokens) {
  const StepOutcome expected = RunStep(reference, mode, batch, generate_tokens);
  const StepOutcome actual = RunStep(candidate, mode, batch, generate_tokens);
  return CompareOutcomes(actual, expected, mode, batch, tolerance);
}

}  // namespace seqbench
