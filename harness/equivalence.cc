#include "harness/equivalence.h"

#include <algorithm>

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

void Accumulate(TensorDifference& worst, const TensorDifference& next) {
  worst.max_abs = std::max(worst.max_abs, next.max_abs);
  worst.max_rel = std::max(worst.max_rel, next.max_rel);
  worst.within = worst.within && next.within;
}

EquivalenceResult CheckEquivalence(Variant& candidate, Variant& reference, Mode mode,
                                   const Batch& batch, const Tolerance& tolerance,
                                   int64_t generate_tokens) {
  EquivalenceResult result;
  if (mode == Mode::kGenerate) {
    const auto expected = reference.Generate(batch.tokens, generate_tokens).to(torch::kCPU);
    const auto actual = candidate.Generate(batch.tokens, generate_tokens).to(torch::kCPU);
    TORCH_CHECK(actual.sizes() == expected.sizes(), "generated shapes differ: ", actual.sizes(),
                " against ", expected.sizes());
    result.mismatched_tokens = (actual != expected).sum().item<int64_t>();
    return result;
  }
  const bool train = mode == Mode::kTrain;
  const ForwardOutput expected = train ? reference.TrainStep(batch) : reference.InferStep(batch);
  const ForwardOutput actual = train ? candidate.TrainStep(batch) : candidate.InferStep(batch);
  result.logits = Compare(actual.logits, expected.logits, tolerance, batch.PaddingMask());
  result.loss = Compare(actual.loss, expected.loss, tolerance);
  if (!train) return result;
  for (const auto& item : reference.parameters()) {
    const torch::Tensor& expected_grad = item.value().grad();
    const torch::Tensor& actual_grad = candidate.parameters()[item.key()].grad();
    TORCH_CHECK(expected_grad.defined(), "the reference has no gradient for ", item.key());
    TORCH_CHECK(actual_grad.defined(), "no gradient for parameter ", item.key());
    const TensorDifference difference = Compare(actual_grad, expected_grad, tolerance);
    if (difference.max_rel >= result.gradients.max_rel) result.worst_gradient = item.key();
    Accumulate(result.gradients, difference);
  }
  return result;
}

}  // namespace seqbench
