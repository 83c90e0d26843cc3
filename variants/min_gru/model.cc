#include "variants/min_gru/model.h"

#include <cmath>

#include "variants/core/registry.h"

namespace seqbench::min_gru {

void ValidateConfig(const ModelConfig& config) { ValidateResidualModel(config, kFamily); }

ParameterSet InitWeights(const ModelConfig& config, uint64_t seed) {
  ValidateConfig(config);
  const int64_t d = config.width;
  const double projection_std = 1.0 / std::sqrt(static_cast<double>(d));
  return InitResidualModel(config, seed, [&](int64_t layer, WeightInit& init, ParameterSet& w) {
    w.insert(LayerParameterName(layer, "w_z"), init.Normal({d, d}, projection_std));
    w.insert(LayerParameterName(layer, "b_z"), init.LogitUniform(d, 0.001, 0.1));
    w.insert(LayerParameterName(layer, "w_h"), init.Normal({d, d}, projection_std));
    w.insert(LayerParameterName(layer, "w_o"), init.Normal({d, d}, projection_std));
  });
}

StepCost StepCostOf(const ModelConfig& config, const StepWork& work) {
  const double d = static_cast<double>(config.width);
  return ResidualModelCost(config, work, /*layer_flops=*/6 * d * d,
                           /*layer_parameters=*/3 * d * d + d);
}

ForwardOutput ForwardWith(const ParameterSet& parameters, const ModelConfig& config,
                          const Batch& batch, const RecurrenceFn& recurrence) {
  return ResidualModelForward(
      parameters, config, batch, [&](const LayerParameters& param, const torch::Tensor& u) {
        const torch::Tensor k_z = torch::matmul(u, param("w_z")) + param("b_z");
        const torch::Tensor s = recurrence(k_z, torch::matmul(u, param("w_h")));
        return torch::matmul(s, param("w_o"));
      });
}

Capabilities BaseCapabilities(const std::string& category) {
  return LanguageModelCapabilities(kFamily, category);
}

SEQBENCH_REGISTER_FAMILY(kFamily, InitWeights, ValidateConfig, StepCostOf,
                         "minGRU language model (variants/min_gru/README.md)");

}  // namespace seqbench::min_gru
