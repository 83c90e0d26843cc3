// The minLSTM language model (specification: variants/min_lstm/README.md; Feng et al. 2024,
// arXiv:2410.01201): the residual frame of variants/core/residual_model.h with, in every
// layer, an LSTM whose forget and input gates read the input only and are normalised to sum
// to one, so that the recurrence is linear in the state and can run as a scan. The variants
// differ only in how they evaluate that recurrence.
//
// Thread-safety: free functions over tensors; safe from any thread.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>

#include "variants/core/residual_model.h"
#include "variants/core/variant.h"

namespace seqbench::min_lstm {

inline constexpr char kFamily[] = "min_lstm";

// Throws unless sizes are positive.
void ValidateConfig(const ModelConfig& config);

// The shared initialisation (InitResidualModel), with per layer: w_f, w_i, w_h, w_o [D,D]
// N(0, 1/D); b_f [D] logit(U(0.9, 0.999)) and b_i = −b_f, so that the normalised forget
// gate f' = σ(b_f)/(σ(b_f) + σ(−b_f)) = σ(b_f) starts between 0.9 and 0.999 at zero input.
ParameterSet InitWeights(const ModelConfig& config, uint64_t seed);

// The family's step cost (FamilyEntry::step_cost): per position and layer the four [D,D]
// projections, 8·D² FLOPs; the recurrence's O(D) is left out.
StepCost StepCostOf(const ModelConfig& config, const StepWork& work);

// The gates' pre-activations of one layer, each [B,T,D].
struct GateInputs {
  torch::Tensor forget, input, candidate;  // k_f, k_i, k_h
};

// How a variant evaluates one layer's recurrence:
//   f = σ(k_f), i = σ(k_i), f' = f/(f + i), i' = i/(f + i)
//   s_t = f'_t⊙s_{t−1} + i'_t⊙g(k_h,t),  s_{−1} = 0
// with g = PositiveActivation (variants/core/linear_recurrence.h). -> s: [B,T,D]
using RecurrenceFn = std::function<torch::Tensor(const GateInputs& gates)>;

// The whole model with `recurrence` in every layer: k_f = u·W_f + b_f, k_i = u·W_i + b_i,
// k_h = u·W_h, and the layer adds s·W_o to the residual stream.
ForwardOutput ForwardWith(const ParameterSet& parameters, const ModelConfig& config,
                          const Batch& batch, const RecurrenceFn& recurrence);

// Every mode, CPU and CUDA, float32 and float64, O(T).
Capabilities BaseCapabilities(const std::string& category);

}  // namespace seqbench::min_lstm
