#include "variants/lstm/model.h"

#include <cmath>
#include <string>

#include "variants/core/registry.h"
#include "variants/core/torch_compat.h"
#include "variants/lstm/fused_layer.h"

namespace seqbench::lstm {
void ValidateConfig(const ModelConfig& config) {
  TORCH_CHECK(config.vocab_size > 0 && config.width > 0 && config.num_layers > 0,
              "lstm needs positive vocab_size, width and layers");
}

ParameterSet InitWeights(const ModelConfig& config, uint64_t seed) {
  ValidateConfig(config);
  auto generator = compat::MakeCpuGenerator(seed);
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const int64_t h = config.width;
  const double bound = 1.0 / std::sqrt(static_cast<double>(h));
  const auto uniform = [&](std::vector<int64_t> shape) {
    return (torch::rand(shape, generator, options) * 2 - 1) * bound;
  };
  ParameterSet weights;
  weights.insert("embedding", torch::randn({config.vocab_size, h}, generator, options));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    weights.insert(LayerParameterName(layer, "weight_ih"), uniform({4 * h, h}));
    weights.insert(LayerParameterName(layer, "weight_hh"), uniform({4 * h, h}));
    weights.insert(LayerParameterName(layer, "bias_ih"), uniform({4 * h}));
    weights.insert(LayerParameterName(layer, "bias_hh"), uniform({4 * h}));
  }
  weights.insert("norm_out", 1.0 + torch::randn({h}, generator, options) * 0.1);
  weights.insert("w_out", torch::randn({h, config.vocab_size}, generator, options) * bound);
  return weights;
}

Weights Weights::View(const ParameterSet& parameters, int64_t num_layers) {
  Weights weights;
  weights.embedding = parameters["embedding"];
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    weights.layers.push_back(LayerWeights{parameters[LayerParameterName(layer, "weight_ih")],
                                          parameters[LayerParameterName(layer, "weight_hh")],
                                          parameters[LayerParameterName(layer, "bias_ih")],
                                          parameters[LayerParameterName(layer, "bias_hh")]});
  }
  weights.norm_out = parameters["norm_out"];
  weights.w_out = parameters["w_out"];
  return weights;
}

std::vector<torch::Tensor> Weights::FlatLstmWeights() const {
  std::vector<torch::Tensor> flat;
  for (const LayerWeights& layer : layers) {
    flat.insert(flat.end(), {layer.weight_ih, layer.weight_hh, layer.bias_ih, layer.bias_hh});
  }
  return flat;
}

std::pair<torch::Tensor, torch::Tensor> CellUpdate(const torch::Tensor& gates,
                                                   const torch::Tensor& c) {
  const auto chunks = gates.chunk(4, 1);
  const auto c_next =
      torch::sigmoid(chunks[1]) * c + torch::sigmoid(chunks[0]) * torch::tanh(chunks[2]);
  const auto h_next = torch::sigmoid(chunks[3]) * torch::tanh(c_next);
  return {h_next, c_next};
}

std::pair<torch::Tensor, torch::Tensor> FusedCellUpdate(const torch::Tensor& gates,
                                                        const torch::Tensor& c) {
  const int64_t h = c.size(1);
  const auto activated = gates.sigmoid().chunk(4, 1);
  const auto candidate = gates.narrow(1, 2 * h, h).tanh();
  const auto c_next = torch::addcmul(activated[1] * c, activated[0], candidate);
  return {activated[3] * c_next.tanh(), c_next};
}

torch::Tensor KeepWhere(const torch::Tensor& keep, const torch::Tensor& updated,
                        const torch::Tensor& old) {
  return keep.defined() ? torch::where(keep, updated, old) : updated;
}

LayerOutputs FusedLayer(const torch::Tensor& x, const LayerWeights& layer,
                        const torch::Tensor& mask) {
  if (x.device().is_cpu()) return HandWrittenLayer(x, layer, mask);
  const auto projected =
      torch::matmul(x, layer.weight_ih.t()) + (layer.bias_ih + layer.bias_hh);  // [B,T,4H]
  const auto recurrent = layer.weight_hh.t();
  return RunSteps(projected, mask, [&](const torch::Tensor& projected_t, const torch::Tensor& h) {
    return torch::addmm(projected_t, h, recurrent);
  });
}

LayerOutputs RunSteps(const torch::Tensor& projected, const torch::Tensor& mask,
                      const GatesOfStep& gates_of_step) {
  const int64_t hidden = projected.size(2) / 4;
  torch::Tensor h = torch::zeros({projected.size(0), hidden}, projected.options());
  torch::Tensor c = h;
  // Unbound once: a per-step select's backward would scatter into a [B,T,4H] zero buffer at
  // every step (O(T^2)); unbind's is one stack.
  const std::vector<torch::Tensor> projected_steps = projected.unbind(1);
  const std::vector<torch::Tensor> mask_steps =
      mask.defined() ? mask.unbind(1) : std::vector<torch::Tensor>();
  std::vector<torch::Tensor> outputs;
  for (size_t t = 0; t < projected_steps.size(); ++t) {
    auto [h_next, c_next] = FusedCellUpdate(gates_of_step(projected_steps[t], h), c);
    const auto keep = mask.defined() ? mask_steps[t].unsqueeze(1) : torch::Tensor();
    c = KeepWhere(keep, c_next, c);
    h = KeepWhere(keep, h_next, h);
    outputs.push_back(h);
  }
  return {torch::stack(outputs, 1), h, c};
}

Capabilities LstmVariant::LstmCapabilities(const std::string& category) {
  return LanguageModelCapabilities(kFamily, category);
}

Capabilities LstmVariant::capabilities() const { return LstmCapabilities("reference"); }

LstmOutputs LstmVariant::RunBatch(const Batch& batch) {
  const bool has_padding = batch.lengths.min().item<int64_t>() < batch.max_length();
  const auto inputs = torch::embedding(weights().embedding, batch.tokens);  // [B,T,H]
  return Run(inputs, has_padding ? batch.PaddingMask() : torch::Tensor());
}

ForwardOutput LstmVariant::Forward(const Batch& batch) {
  const Weights w = weights();
  const LstmOutputs out = RunBatch(batch);
  auto logits = LanguageModelHead(out.outputs, w.norm_out, w.w_out);
  auto loss = NextTokenLoss(logits, batch);
  return {logits, loss};
}

StepCost StepCostOf(const ModelConfig& config, const StepWork& work) {
  const double d = static_cast<double>(config.width);
  // Per position and layer: x·W_ihᵀ and h·W_hhᵀ, each [D,4D].
  const double layer = 16 * d * d;
  const double v = static_cast<double>(config.vocab_size);
  const double parameters =
      2 * v * d + static_cast<double>(config.num_layers) * (8 * d * d + 8 * d) + d;
  return LanguageModelCost(config, work, {layer, 0, layer, 0}, parameters);
}

SEQBENCH_REGISTER_FAMILY(kFamily, InitWeights, ValidateConfig, StepCostOf,
                         "multi-layer LSTM language model (variants/lstm/README.md)");

}  // namespace seqbench::lstm
