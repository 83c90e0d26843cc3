// The correctness check: does a variant compute the same function as its baseline, on
// the same weights and batch, within the variant's declared tolerance? Compares logits
// (non-padding positions only), the loss and, in train mode, every parameter gradient;
// in generate mode, the generated tokens one for one.
//
// Thread-safety: plain functions; the variants passed in must not be used concurrently.
#pragma once

#include <cmath>
#include <string>
#include <vector>

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
  // Whether every compared value was finite: a NaN or infinity makes an error non-finite.
  bool finite() const {
    for (const TensorDifference* d : {&logits, &loss, &gradients}) {
      if (!std::isfinite(d->max_abs)) return false;
    }
    return true;
  }
};

// mask: [same leading dims as the tensors] bool, or undefined to compare every element.
TensorDifference Compare(const torch::Tensor& actual, const torch::Tensor& expected,
                         const Tolerance& tolerance, const torch::Tensor& mask = {});

// Folds `next` into `worst`: the larger errors, and `within` only if both are.
void Accumulate(TensorDifference& worst, const TensorDifference& next);

// What one step of a mode produced, kept for comparison: logits and loss (train,
// forward), every parameter's gradient (train), the generated tokens (generate).
struct StepOutcome {
  ForwardOutput output;
  ParameterSet gradients;
  torch::Tensor tokens;  // [B,N]
};

// Runs one step of `mode` and captures its outcome. Calls TrainStep() in train mode, so
// the variant's weights move by one optimizer step. In generate mode `batch.tokens` is the
// prompt and `generate_tokens` the number of new tokens.
StepOutcome RunStep(Variant& variant, Mode mode, const Batch& batch, int64_t generate_tokens = 0);

// The rows of `batch` a check compares in train and forward mode: the first and the last,
// the longest and the shortest sequence (the first of ties), in batch order, at most four
// distinct rows; every row of a batch of four or fewer. A row's logits depend on that row
// alone, so these rows of a step on the whole batch can be compared with a reference that
// ran on them only; the longest and shortest make sure full length and padding are seen.
std::vector<int64_t> CheckRows(const Batch& batch);

// The batch of `rows` of `batch` (same padded length T).
Batch SelectRows(const Batch& batch, const std::vector<int64_t>& rows);

// The logits of `rows` of a step on the whole batch (actual_logits: [B,T,V]) against
// those of a step on SelectRows(batch, rows) (expected_logits: [R,T,V]), on the rows'
// non-padding positions.
TensorDifference CompareRows(const torch::Tensor& actual_logits,
                             const torch::Tensor& expected_logits, const Batch& batch,
                             const std::vector<int64_t>& rows, const Tolerance& tolerance);

// RunStep()'s logits, loss and gradients for the whole batch, computed `rows` sequences
// at a time, so that a reference holds the activations of `rows` sequences, not of the
// batch: logits concatenated, each chunk's loss weighted by its share of the batch's
// next-token targets (the loss is their mean), gradients summed over the chunks. For the
// reference of a check: train mode takes no optimizer step, and generate mode runs whole
// (its memory does not grow with the batch's activations).
StepOutcome RunStepInRowChunks(Variant& variant, Mode mode, const Batch& batch,
                               int64_t generate_tokens, int64_t rows);

// Compares two outcomes of the same mode on the same batch.
EquivalenceResult CompareOutcomes(const StepOutcome& actual, const StepOutcome& expected, Mode mode,
                                  const Batch& batch, const Tolerance& tolerance);

// RunStep() on both variants (set up from the same weights), then CompareOutcomes().
EquivalenceResult CheckEquivalence(Variant& candidate, Variant& reference, Mode mode,
                                   const Batch& batch, const Tolerance& tolerance,
                                   int64_t generate_tokens = 0);

}  // namespace seqbench
