#include "variants/min_lstm/model.h"

#include <cmath>

#include "variants/core/registry.h"

namespace seqbench::min_lstm {

void ValidateConfig(const ModelConfig& config) { ValidateResidualModel(config, kFamily); }

ParameterSet InitWeights(const ModelConfig& config, uint64_t seed) {
  ValidateConfig(config);
  const int64_t d = config.width;
  const double projection_std = 1.0 / std::sqrt(static_cast<double>(d));
  return InitResidualModel(config, seed, [&](int64_t layer, WeightInit& init, ParameterSet& w) {
    w.insert(LayerParameterName(layer, "w_f"), init.Normal({d, d}, projection_std));
    const torch::Tensor forget_bias = init.LogitUniform(d, 0.9, 0.999);
    w.insert(LayerParameterName(layer, "b_f"), forget_bias);
    w.insert(LayerParameterName(layer, "w_i"), init.Normal({d, d}, projection_std));
    w.insert(LayerParameterName(layer, "b_i"), -forget_bias);
    w.insert(LayerParameterName(layer, "w_h"), init.Normal({d, d}, projection_std));
    w.insert(LayerParameterName(layer, "w_o"), init.Normal({d, d}, projection_std));
  });
}

StepCost StepCostOf(const ModelConfig& config, const StepWork& work) {
  const double d = static_cast<double>(config.width);
  return ResidualModelCost(config, work, /*layer_flops=*/8 * d * d,
                           /*layer_parameters=*/4 * d * d + 2 * d);
}

ForwardOutput ForwardWith(const ParameterSet& parameters, const ModelConfig& config,
                          const Batch& batch, const RecurrenceFn& recurrence) {
  return ResidualModelForward(
      parameters, config, batch, [&](const LayerParameters& param, const torch::Tensor& u) {
        const GateInputs gates{torch::matmul(u, param("w_f")) + param("b_f"),
                               torch::matmul(u, param("w_i")) + param("b_i"),
                               torch::matmul(u, param("w_h"))};
        return torch::matmul(recurrence(gates), param("w_o"));
      });
}

Capabilities BaseCapabilities(const std::string& category) {
  return LanguageModelCapabilities(kFamily, category);
}

SEQBENCH_REGISTER_FAMILY(kFamily, InitWeights, ValidateConfig, StepCostOf,
                         "minLSTM language model (variants/min_lstm/README.md)");

}  // namespace seqbench::min_lstm
