// The recurrent highway network language model (specification: variants/rhn/README.md;
// Zilly, Srivastava, Koutník, Schmidhuber 2017, "Recurrent Highway Networks",
// arXiv:1607.03474): the residual frame of variants/core/residual_model.h with, in every
// layer, an RHN of recurrence depth kDepth: each time step passes the state through kDepth
// highway micro-layers, the input entering the first only, with the coupled carry gate
// c = 1 − t of the paper's experiments. The variants differ only in how they evaluate
// the layer.
//
// Thread-safety: free functions over tensors; safe from any thread.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>

#include "variants/core/residual_model.h"
#include "variants/core/variant.h"

namespace seqbench::rhn {

inline constexpr char kFamily[] = "rhn";
// Highway micro-layers per time step (the paper's "recurrence depth"; its language models
// use up to 10).
inline constexpr int64_t kDepth = 3;

// Throws unless sizes are positive.
void ValidateConfig(const ModelConfig& config);

// The shared initialisation (InitResidualModel), with per layer: w_in [D,2D] N(0, 1/D),
// the input's projection to the first micro-layer's candidate h and transform gate t;
// r [kDepth,D,2D] N(0, 1/D), each micro-layer's recurrent projection to h and t; b
// [kDepth,2D], 0 for h and −2 for t (the paper's negative transform bias: a new network
// carries its state).
ParameterSet InitWeights(const ModelConfig& config, uint64_t seed);

// The family's step cost (FamilyEntry::step_cost): per position and layer the input's
// [D,2D] product and kDepth recurrent [D,2D] products, (4 + 4·kDepth)·D² FLOPs.
StepCost StepCostOf(const ModelConfig& config, const StepWork& work);

// One layer's weights: w_in [D,2D], r [kDepth,D,2D], b [kDepth,2D].
struct LayerWeights {
  torch::Tensor w_in, r, b;
};

// How a variant evaluates one layer from its normalised input u: [B,T,D]; s_{−1} = 0, and
// per step t, with s = s_{t−1} and for l = 0 .. kDepth−1:
//   [a_h a_t] = (l = 0 ? u_t·W_in : 0) + s·R_l + b_l
//   h = tanh(a_h),  τ = σ(a_t),  s = h⊙τ + s⊙(1 − τ)
// then s_t = s -> [s_0 … s_{T−1}]: [B,T,D].
using LayerFn = std::function<torch::Tensor(const torch::Tensor& u, const LayerWeights& weights)>;

// The whole model with `layer` in every layer, adding s_t to the residual stream.
ForwardOutput ForwardWith(const ParameterSet& parameters, const ModelConfig& config,
                          const Batch& batch, const LayerFn& layer);

// Every mode, CPU and CUDA, float32 and float64, O(T).
Capabilities BaseCapabilities(const std::string& category);

}  // namespace seqbench::rhn
