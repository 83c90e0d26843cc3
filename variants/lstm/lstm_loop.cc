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
    std::vector<torch::Tensor> outputs;
    for (int64_t t = 0; t < inputs.size(1); ++t) {
      torch::Tensor x = inputs.select(1, t);
      const auto keep = mask.defined() ? mask.select(1, t).unsqueeze(1) : torch::Tensor();
      for (int64_t l = 0; l < layers; ++l) {
        const LayerWeights& lw = w.layers[l];
        const auto gate = [&](int64_t k) {  // k-th gate in PyTorch's order i, f, g, o
          return torch::matmul(x, lw.weight_ih.narrow(0, k * hidden, hidden).t()) +
                 lw.bias_ih.narrow(0, k * hidden, hidden) +
                 torch::matmul(h[l], lw.weight_hh.narrow(0, k * hidden, hidden).t()) +
                 lw.bias_hh.narrow(0, k * hidden, hidden);
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
