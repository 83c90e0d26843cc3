#include "variants/core/residual_model.h"

#include <cmath>

namespace seqbench {

torch::Tensor WeightInit::Normal(const std::vector<int64_t>& shape, double std) {
  return torch::randn(shape, generator_, torch::TensorOptions().dtype(torch::kFloat64)) * std;
}

torch::Tensor WeightInit::Gain(int64_t width) { return 1.0 + Normal({width}, 0.1); }

torch::Tensor WeightInit::LogitUniform(int64_t width, double low, double high) {
  const auto p = torch::rand({width}, generator_, torch::TensorOptions().dtype(torch::kFloat64)) *
                     (high - low) +
                 low;
  return torch::log(p / (1.0 - p));
}

void ValidateResidualModel(const ModelConfig& config, const char* family) {
  TORCH_CHECK(config.vocab_size > 0 && config.width > 0 && config.num_layers > 0, family,
              " needs positive vocab_size, width and layers");
}

ParameterSet InitResidualModel(
    const ModelConfig& config, uint64_t seed,
    const std::function<void(int64_t layer, WeightInit& init, ParameterSet& weights)>& add_layer) {
  WeightInit init(seed);
  const int64_t d = config.width;
  ParameterSet weights;
  weights.insert("embedding", init.Normal({config.vocab_size, d}, 1.0));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    weights.insert(LayerParameterName(layer, "norm"), init.Gain(d));
    add_layer(layer, init, weights);
  }
  weights.insert("norm_out", init.Gain(d));
  weights.insert("w_out",
                 init.Normal({d, config.vocab_size}, 1.0 / std::sqrt(static_cast<double>(d))));
  return weights;
}

ForwardOutput ResidualModelForward(const ParameterSet& parameters, const ModelConfig& config,
                                   const Batch& batch, const LayerMixer& mix) {
  torch::Tensor h = torch::embedding(parameters["embedding"], batch.tokens);  // [B,T,D]
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    const LayerParameters param(parameters, layer);
    h = h + mix(param, RmsNorm(h, param("norm")));
  }
  auto logits = LanguageModelHead(h, parameters["norm_out"], parameters["w_out"]);
  auto loss = NextTokenLoss(logits, batch);
  return {logits, loss};
}

StepCost ResidualModelCost(const ModelConfig& config, const StepWork& work, double layer_flops,
                           double layer_parameters) {
  const double d = static_cast<double>(config.width);
  const double parameters = 2 * static_cast<double>(config.vocab_size) * d + d +
                            static_cast<double>(config.num_layers) * (d + layer_parameters);
  // The layers' FLOPs are their projections: products, recomputed as they ran.
  return LanguageModelCost(config, work, {layer_flops, 0, layer_flops, 0}, parameters);
}

}  // namespace seqbench
