// The correctness check: does a variant compute the same function as its baseline, on
// the same weights and batch, within the variant's declared tolerance? Compares logits
// (non-padding positions only), the loss and, in train mode, every parameter gradient;
// in generate mode, the generated tokens one for one.
//
// Thread-safety: plain functions; the variants passed in must not be used concurrently.
#pragma once

#include <string>

#include "variants/core/variant.h"

namespace seqbench {

struct TensorDifference {
  double max_abs = 0;  // max |actual - expected|
  double max_rel = 0;  // max_abs / max |expected|: the error relative to the tensor's scale
  bool within = true;  // every element within atol + rtol * |expected|
};

struct EquivalenceResult {
  TensorDifference logits;
  TensorDifference loss;
  TensorDifference gradients;     // the worst parameter, by max_rel
  std::string worst_gradient;     // its name
  int64_t mismatched_tokens = 0;  // generate mode

  bool passed() const {
    return logits.within && loss.within && gradients.within && mismatched_tokens == 0;
  }
};

// mask: [same leading dims as the tensors] bool, or undefined to compare every element.
TensorDifference Compare(const torch::Tensor& actual, const torch::Tensor& expected,
                         const Tolerance& tolerance, const torch::Tensor& mask = {});

// Folds `next` into `worst`: the larger errors, and `within` only if both are.
void Accumulate(TensorDifference& worst, const TensorDifference& next);

// Runs one step of `mode` on both variants (set up from the same weights) and compares.
// `batch` is the workload; in generate mode its tokens are the prompt (no padding) and
// `generate_tokens` the number of new tokens. Calls TrainStep() in train mode, so both
// variants' weights move by one optimizer step.
EquivalenceResult CheckEquivalence(Variant& candidate, Variant& reference, Mode mode,
                                   const Batch& batch, const Tolerance& tolerance,
                                   int64_t generate_tokens = 0);

}  // namespace seqbench
