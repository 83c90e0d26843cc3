// The frame the elementwise-recurrence families (qrnn, min_gru, min_lstm) share: the
// SimpleRNN's embedding, pre-norm residual layers, RMSNorm and head around a per-family time
// mixer,
//   h = Embedding(x);  per layer l:  h = h + Mix_l(RMSNorm(h; layers.{l}.norm))
//   logits = RMSNorm(h; norm_out)·W_out;  loss = mean next-token cross-entropy
// so that the families differ only in Mix and its weights, and their variants only in how
// Mix's recurrence is evaluated. Right-padding needs no mask: a position's output depends on
// it and earlier positions only, and padding comes after every real token of its sequence.
//
// Thread-safety: free functions over tensors are safe from any thread; a WeightInit is used
// by one thread.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "variants/core/language_model.h"
#include "variants/core/torch_compat.h"
#include "variants/core/variant.h"

namespace seqbench {

// The float64 draws of a family's initializer, from one private generator, so that one seed
// gives the same weights whatever variant, dtype or device is built and whatever ran before.
class WeightInit {
 public:
  explicit WeightInit(uint64_t seed) : generator_(compat::MakeCpuGenerator(seed)) {}

  torch::Tensor Normal(const std::vector<int64_t>& shape, double std);
  // 1 + N(0, 0.1²): gains near 1, not exactly 1, so that the checks exercise their gradients.
  torch::Tensor Gain(int64_t width);
  // logit(U(low, high)): a gate bias whose sigmoid starts between low and high at zero input.
  torch::Tensor LogitUniform(int64_t width, double low, double high);

 private:
  at::Generator generator_;
};

// Throws unless the sizes the frame reads (vocab_size, width, layers) are positive; `family`
// names the model in the message. Each family's FamilyEntry::validate.
void ValidateResidualModel(const ModelConfig& config, const char* family);

// embedding [V,D] N(0,1); per layer l: layers.{l}.norm [D] (a Gain), then whatever
// `add_layer(l, init, weights)` inserts; norm_out [D] (a Gain); w_out [D,V] N(0, 1/D).
ParameterSet InitResidualModel(
    const ModelConfig& config, uint64_t seed,
    const std::function<void(int64_t layer, WeightInit& init, ParameterSet& weights)>& add_layer);

// One layer's parameters by their names within the layer: param("w_z") is
// layers.{layer}.w_z of the model's ParameterSet (the tensor itself, no copy).
class LayerParameters {
 public:
  LayerParameters(const ParameterSet& parameters, int64_t layer)
      : parameters_(parameters), layer_(layer) {}
  torch::Tensor operator()(const char* name) const {
    return parameters_[LayerParameterName(layer_, name)];
  }

 private:
  const ParameterSet& parameters_;
  int64_t layer_;
};

// One layer's time mixing, reading its weights through `param`. u: [B,T,D], the layer's
// normalised input -> [B,T,D], its contribution to the residual stream.
using LayerMixer =
    std::function<torch::Tensor(const LayerParameters& param, const torch::Tensor& u)>;

// The whole model with `mix` as every layer's time mixing.
ForwardOutput ResidualModelForward(const ParameterSet& parameters, const ModelConfig& config,
                                   const Batch& batch, const LayerMixer& mix);

// LanguageModelCost() for a family whose layers do `layer_flops` per position, all in
// matrix products, and hold `layer_parameters` values besides their norm.
StepCost ResidualModelCost(const ModelConfig& config, const StepWork& work, double layer_flops,
                           double layer_parameters);

}  // namespace seqbench
