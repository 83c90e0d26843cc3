// Layer-wise adaptive optimizers for large batches: LAMB (You et al., "Large Batch
// Optimization for Deep Learning: Training BERT in 76 minutes", arXiv:1904.00962) and
// LARS (You, Gitman, Ginsburg, "Large Batch Training of Convolutional Networks",
// arXiv:1708.03888). Both scale each parameter tensor's ("layer's") step by a trust
// ratio ‖w‖/‖update‖, so that the step moves every layer by a share of its own norm
// whatever the gradient's scale: the property that lets the batch (and the learning
// rate) grow without the layers with small weights and large gradients diverging.
//
// LAMB, per tensor w with gradient g, at its t-th step (1-based):
//   m = β1·m + (1−β1)·g,  v = β2·v + (1−β2)·g²
//   r = (m / (1−β1^t)) / (√(v / (1−β2^t)) + ε)            Adam's direction
//   u = r + λ·w                                          decoupled weight decay
//   w = w − lr · (‖w‖/‖u‖) · u                           (ratio 1 where either norm is 0)
// so ‖Δw‖ = lr·‖w‖ exactly. The paper's φ (a clip of ‖w‖) is the identity here, as in
// its experiments.
// LARS, per tensor, with momentum μ and trust coefficient η:
//   local = η·‖w‖ / (‖g‖ + λ·‖w‖)                        (1 where ‖w‖ or the sum is 0)
//   b = μ·b + lr · local · (g + λ·w),  w = w − b
// so the first step moves w by lr·η·‖w‖ when λ = 0.
// Both read lr, weight decay (λ) and, for LAMB, betas and eps from their groups'
// torch::optim::AdamWOptions, the options the trainer builds its two groups (decayed
// matrices, undecayed gains) with, so that the schedule sets lr through the same
// interface as for AdamW; LARS ignores betas and eps. amsgrad is refused.
// The update is tensor operations (any device); the norms stay on the device (no sync).
//
// Thread-safety: an optimizer belongs to one training loop.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace seqbench::training {

class Lamb : public torch::optim::Optimizer {
 public:
  Lamb(std::vector<torch::optim::OptimizerParamGroup> groups, torch::optim::AdamWOptions defaults);

  // Called once per optimizer step, after the gradients are complete (clipped, unscaled).
  // Parameters without a gradient are left alone. `closure` must be null.
  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  // Throws c10::Error when the archive's state does not fit these parameters.
  void load(torch::serialize::InputArchive& archive) override;

  // Bytes of the two moments, for every parameter that has taken a step (AdamW's).
  int64_t StateBytes() const;

 private:
  struct ParameterState {
    int64_t step = 0;
    torch::Tensor first, second;  // [shape of the parameter]
  };
  // One parameter's update: grad and parameter of one shape, parameter written in place.
  static void Update(const torch::optim::AdamWOptions& options, const torch::Tensor& grad,
                     torch::Tensor& parameter, ParameterState& state);
  std::vector<std::vector<ParameterState>> states_;  // [group][parameter]
};

struct LarsOptions {
  double momentum = 0.9;             // μ
  double trust_coefficient = 0.001;  // η, the paper's value
};

class Lars : public torch::optim::Optimizer {
 public:
  Lars(std::vector<torch::optim::OptimizerParamGroup> groups, torch::optim::AdamWOptions defaults,
       LarsOptions options = {});

  // As Lamb::step.
  torch::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

  // Bytes of the momentum buffers (half of AdamW's state).
  int64_t StateBytes() const;

 private:
  struct ParameterState {
    int64_t step = 0;
    torch::Tensor momentum;  // [shape of the parameter]
  };
  // One parameter's update: grad and parameter of one shape, parameter written in place.
  void Update(const torch::optim::AdamWOptions& options, const torch::Tensor& grad,
              torch::Tensor& parameter, ParameterState& state) const;
  LarsOptions options_;
  std::vector<std::vector<ParameterState>> states_;  // [group][parameter]
};

}  // namespace seqbench::training
