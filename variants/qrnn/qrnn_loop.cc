// `qrnn_loop`: the family's literal reference. Time outer: each step convolves [u_t, u_{t−1}]
// with its own [B,2D]·[2D,3D] GEMM, then pools, in tensor ops under autograd (the steps'
// inputs from one unbind, so no step's backward touches anything of size T).
#include <vector>

#include "variants/core/registry.h"
#include "variants/qrnn/model.h"

namespace seqbench::qrnn {
namespace {

torch::Tensor LoopLayer(const torch::Tensor& u, const LayerWeights& weights) {
  const auto inputs = u.unbind(1);
  std::vector<torch::Tensor> outputs;
  outputs.reserve(inputs.size());
  torch::Tensor previous = torch::zeros_like(inputs[0]), cell = torch::zeros_like(inputs[0]);
  for (const torch::Tensor& input : inputs) {
    const auto gates =
        torch::addmm(weights.b_conv, torch::cat({input, previous}, 1), weights.w_conv).chunk(3, 1);
    const torch::Tensor forget = torch::sigmoid(gates[1]);
    cell = forget * cell + (1 - forget) * torch::tanh(gates[0]);
    outputs.push_back(torch::sigmoid(gates[2]) * cell);
    previous = input;
  }
  return torch::stack(outputs, 1);
}

class QrnnLoop final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("reference"); }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardWith(parameters(), config(), batch, LoopLayer);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("qrnn_loop", QrnnLoop,
                          "qrnn's reference: convolution and pooling one step at a time");

}  // namespace seqbench::qrnn
