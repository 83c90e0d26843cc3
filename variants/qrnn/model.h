// The quasi-recurrent language model (specification: variants/qrnn/README.md; Bradbury et
// al. 2016, "Quasi-Recurrent Neural Networks", arXiv:1611.01576): the residual frame of
// variants/core/residual_model.h with, in every layer, a width-2 causal convolution over
// time that gives the candidate z and the forget and output gates f, o, then fo-pooling,
// the only sequential part. The variants differ only in how they evaluate the layer.
//
// Thread-safety: free functions over tensors; safe from any thread.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>

#include "variants/core/residual_model.h"
#include "variants/core/variant.h"

namespace seqbench::qrnn {

inline constexpr char kFamily[] = "qrnn";

// Throws unless sizes are positive.
void ValidateConfig(const ModelConfig& config);

// The shared initialisation (InitResidualModel), with per layer: w_conv [2D,3D] N(0, 1/(2D)),
// rows 0..D−1 applied to u_t and rows D..2D−1 to u_{t−1}, columns z, f, o; b_conv [3D], 0
// for z and o and logit(U(0.9, 0.999)) for f, so that the pooling's memory starts between
// 0.9 and 0.999 a step at zero input.
ParameterSet InitWeights(const ModelConfig& config, uint64_t seed);

// The family's step cost (FamilyEntry::step_cost): per position and layer the convolution,
// a [2D,3D] GEMM, 12·D² FLOPs; the pooling's O(D) is left out.
StepCost StepCostOf(const ModelConfig& config, const StepWork& work);

// One layer's weights: w_conv [2D,3D] and b_conv [3D].
struct LayerWeights {
  torch::Tensor w_conv, b_conv;
};

// How a variant evaluates one layer from its normalised input u: [B,T,D] (u_{−1} = 0):
//   [z f o]_t = [u_t, u_{t−1}]·W_conv + b_conv;  z = tanh, f = σ, o = σ
//   c_t = f_t⊙c_{t−1} + (1 − f_t)⊙z_t,  c_{−1} = 0;   -> o⊙c: [B,T,D]
using LayerFn = std::function<torch::Tensor(const torch::Tensor& u, const LayerWeights& weights)>;

// The whole model with `layer` in every layer, adding o⊙c to the residual stream.
ForwardOutput ForwardWith(const ParameterSet& parameters, const ModelConfig& config,
                          const Batch& batch, const LayerFn& layer);

// Every mode, CPU and CUDA, float32 and float64, O(T).
Capabilities BaseCapabilities(const std::string& category);

}  // namespace seqbench::qrnn
