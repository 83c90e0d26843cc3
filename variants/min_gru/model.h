// The minGRU language model (specification: variants/min_gru/README.md; Feng et al. 2024,
// "Were RNNs All We Needed?", arXiv:2410.01201): the residual frame of
// variants/core/residual_model.h with, in every layer, a GRU whose gate and candidate read
// the input only, so that the recurrence is linear in the state and can run as a scan.
// The variants differ only in how they evaluate that recurrence.
//
// Thread-safety: free functions over tensors; safe from any thread.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>

#include "variants/core/residual_model.h"
#include "variants/core/variant.h"

namespace seqbench::min_gru {

inline constexpr char kFamily[] = "min_gru";

// Throws unless sizes are positive.
void ValidateConfig(const ModelConfig& config);

// The shared initialisation (InitResidualModel), with per layer: w_z, w_h, w_o [D,D]
// N(0, 1/D); b_z [D] logit(U(0.001, 0.1)), so that 1 − z, the state's decay, starts between
// 0.9 and 0.999 at zero input.
ParameterSet InitWeights(const ModelConfig& config, uint64_t seed);

// The family's step cost (FamilyEntry::step_cost): per position and layer the three [D,D]
// projections, 6·D² FLOPs; the recurrence's O(D) is left out.
StepCost StepCostOf(const ModelConfig& config, const StepWork& work);

// How a variant evaluates one layer's recurrence from its pre-activations:
//   z = σ(k_z),  s_t = (1 − z_t)⊙s_{t−1} + z_t⊙g(k_h,t),  s_{−1} = 0
// with g = PositiveActivation (variants/core/linear_recurrence.h).
// k_z, k_h: [B,T,D] -> s: [B,T,D]
using RecurrenceFn =
    std::function<torch::Tensor(const torch::Tensor& k_z, const torch::Tensor& k_h)>;

// The whole model with `recurrence` in every layer: k_z = u·W_z + b_z, k_h = u·W_h, and
// the layer adds s·W_o to the residual stream.
ForwardOutput ForwardWith(const ParameterSet& parameters, const ModelConfig& config,
                          const Batch& batch, const RecurrenceFn& recurrence);

// Every mode, CPU and CUDA, float32 and float64, O(T).
Capabilities BaseCapabilities(const std::string& category);

}  // namespace seqbench::min_gru
