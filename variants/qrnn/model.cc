#include "variants/qrnn/model.h"

#include <cmath>

#include "variants/core/registry.h"

namespace seqbench::qrnn {

void ValidateConfig(const ModelConfig& config) { ValidateResidualModel(config, kFamily); }

ParameterSet InitWeights(const ModelConfig& config, uint64_t seed) {
  ValidateConfig(config);
  const int64_t d = config.width;
  return InitResidualModel(config, seed, [&](int64_t layer, WeightInit& init, ParameterSet& w) {
    w.insert(LayerParameterName(layer, "w_conv"),
             init.Normal({2 * d, 3 * d}, 1.0 / std::sqrt(2.0 * static_cast<double>(d))));
    const auto zeros = torch::zeros({d}, torch::kFloat64);
    w.insert(LayerParameterName(layer, "b_conv"),
             torch::cat({zeros, init.LogitUniform(d, 0.9, 0.999), zeros}));
  });
}

StepCost StepCostOf(const ModelConfig& config, const StepWork& work) {
  const double d = static_cast<double>(config.width);
  return ResidualModelCost(config, work, /*layer_flops=*/12 * d * d,
                           /*layer_parameters=*/6 * d * d + 3 * d);
}

ForwardOutput ForwardWith(const ParameterSet& parameters, const ModelConfig& config,
                          const Batch& batch, const LayerFn& layer_fn) {
  return ResidualModelForward(parameters, config, batch,
                              [&](const LayerParameters& param, const torch::Tensor& u) {
                                return layer_fn(u, LayerWeights{param("w_conv"), param("b_conv")});
                              });
}

Capabilities BaseCapabilities(const std::string& category) {
  return LanguageModelCapabilities(kFamily, category);
}

SEQBENCH_REGISTER_FAMILY(kFamily, InitWeights, ValidateConfig, StepCostOf,
                         "quasi-recurrent (QRNN) language model (variants/qrnn/README.md)");

}  // namespace seqbench::qrnn
