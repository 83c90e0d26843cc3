// `lstm_loop`: the literal reference. Time outer, layers inner; every cell computes its
// four gates with separate input and recurrent projections (eight small GEMMs a cell).
#include "variants/core/registry.h"
#include "variants/lstm/model.h"

namespace seqbench::lstm {
namespace {

class LstmLoop final : public LstmVariant {
 public:
  Capabilities capabilities() const override { return LstmCapabilities("reference"); }

  LstmOutputs Run(const torch::Tensor& inputs, const torch::Tensor& mask) override {
    const Weights w = weights();
    const int64_t layers = static_cast<int64_t>(w.layers.size());
    const int64_t hidden = inputs.size(2);
    std::vector<torch::Tensor> h(layers, torch::zeros({inputs.size(0), hidden}, inputs.options()));
    std::vector<torch::Tensor> c = h;
    // Each layer's weights cut into its four gates once, and the inputs and mask unbound
    // once: slicing inside the time loop would make every step's backward scatter into
    // zero buffers the size of the whole tensor.
    struct GateWeights {
      std::vector<torch::Tensor> weight_ih, bias_ih, weight_hh, bias_hh;  // i, f, g, o
    };
    std::vector<GateWeights> gates(layers);
    for (int64_t l = 0; l < layers; ++l) {
      const LayerWeights& lw = w.layers[l];
      gates[l] = {lw.weight_ih.split(hidden, 0), lw.bias_ih.split(hidden, 0),
                  lw.weight_hh.split(hidden, 0), lw.bias_hh.split(hidden, 0)};
    }
    const std::vector<torch::Tensor> input_steps = inputs.unbind(1);
    const std::vector<torch::Tensor> mask_steps =
        mask.defined() ? mask.unbind(1) : std::vector<torch::Tensor>();
    std::vector<torch::Tensor> outputs;
    for (int64_t t = 0; t < inputs.size(1); ++t) {
      torch::Tensor x = input_steps[t];
      const auto keep = mask.defined() ? mask_steps[t].unsqueeze(1) : torch::Tensor();
      for (int64_t l = 0; l < layers; ++l) {
        const GateWeights& lw = gates[l];
        const auto gate = [&](int64_t k) {  // k-th gate in PyTorch's order i, f, g, o
          return torch::matmul(x, lw.weight_ih[k].t()) + lw.bias_ih[k] +
                 torch::matmul(h[l], lw.weight_hh[k].t()) + lw.bias_hh[k];
        };
        const auto i = torch::sigmoid(gate(0));
        const auto f = torch::sigmoid(gate(1));
        const auto g = torch::tanh(gate(2));
        const auto o = torch::sigmoid(gate(3));
        const auto c_next = f * c[l] + i * g;
        const auto h_next = o * torch::tanh(c_next);
        c[l] = KeepWhere(keep, c_next, c[l]);
        h[l] = KeepWhere(keep, h_next, h[l]);
        x = h[l];
      }
      outputs.push_back(x);
    }
    return {torch::stack(outputs, 1), torch::stack(h, 0), torch::stack(c, 0)};
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("lstm_loop", LstmLoop,
                          "literal reference: per step and layer, separate gate projections");

}  // namespace seqbench::lstm
