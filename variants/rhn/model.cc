#include "variants/rhn/model.h"

#include <cmath>

#include "variants/core/registry.h"

namespace seqbench::rhn {

void ValidateConfig(const ModelConfig& config) { ValidateResidualModel(config, kFamily); }

ParameterSet InitWeights(const ModelConfig& config, uint64_t seed) {
  ValidateConfig(config);
  const int64_t d = config.width;
  const double std = 1.0 / std::sqrt(static_cast<double>(d));
  return InitResidualModel(config, seed, [&](int64_t layer, WeightInit& init, ParameterSet& w) {
    w.insert(LayerParameterName(layer, "w_in"), init.Normal({d, 2 * d}, std));
    w.insert(LayerParameterName(layer, "r"), init.Normal({kDepth, d, 2 * d}, std));
    const auto bias = torch::cat({torch::zeros({kDepth, d}, torch::kFloat64),
                                  torch::full({kDepth, d}, -2.0, torch::kFloat64)},
                                 1);
    w.insert(LayerParameterName(layer, "b"), bias);
  });
}

StepCost StepCostOf(const ModelConfig& config, const StepWork& work) {
  const double d = static_cast<double>(config.width);
  const double depth = static_cast<double>(kDepth);
  return ResidualModelCost(config, work, /*layer_flops=*/(4 + 4 * depth) * d * d,
                           /*layer_parameters=*/(2 + 2 * depth) * d * d + 2 * depth * d);
}

ForwardOutput ForwardWith(const ParameterSet& parameters, const ModelConfig& config,
                          const Batch& batch, const LayerFn& layer_fn) {
  return ResidualModelForward(
      parameters, config, batch, [&](const LayerParameters& param, const torch::Tensor& u) {
        return layer_fn(u, LayerWeights{param("w_in"), param("r"), param("b")});
      });
}

Capabilities BaseCapabilities(const std::string& category) {
  return LanguageModelCapabilities(kFamily, category);
}

SEQBENCH_REGISTER_FAMILY(kFamily, InitWeights, ValidateConfig, StepCostOf,
                         "recurrent highway network language model (variants/rhn/README.md)");

}  // namespace seqbench::rhn
