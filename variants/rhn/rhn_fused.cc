// `rhn_fused`: the input's products of all T steps as one [B·T,D]·[D,2D] GEMM before the
// time loop (only the first micro-layer reads the input, so nothing sequential needs it),
// its bias folded into the first micro-layer's; each micro-layer then one addmm, and the
// highway update as one lerp, s + τ⊙(h − s), where the reference makes four passes.
#include <vector>

#include "variants/core/registry.h"
#include "variants/rhn/model.h"

namespace seqbench::rhn {
namespace {

torch::Tensor FusedLayer(const torch::Tensor& u, const LayerWeights& weights) {
  const auto recurrent = weights.r.unbind(0), biases = weights.b.unbind(0);
  // [B,T,2D]: every step's input product with the first micro-layer's bias, split once.
  const auto projected = (torch::matmul(u, weights.w_in) + biases[0]).unbind(1);
  std::vector<torch::Tensor> outputs;
  outputs.reserve(projected.size());
  torch::Tensor state = torch::zeros({u.size(0), u.size(2)}, u.options());
  for (const torch::Tensor& input : projected) {
    for (int64_t l = 0; l < kDepth; ++l) {
      const torch::Tensor activations = l == 0 ? torch::addmm(input, state, recurrent[0])
                                               : torch::addmm(biases[l], state, recurrent[l]);
      const auto parts = activations.chunk(2, 1);
      state = torch::lerp(state, torch::tanh(parts[0]), torch::sigmoid(parts[1]));
    }
    outputs.push_back(state);
  }
  return torch::stack(outputs, 1);
}

class RhnFused final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("GEMM fusion"); }
  ForwardOutput Forward(const Batch& batch) override {
    return ForwardWith(parameters(), config(), batch, FusedLayer);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("rhn_fused", RhnFused,
                          "rhn with the input's products as one GEMM over T and the highway "
                          "update as one lerp");

}  // namespace seqbench::rhn
