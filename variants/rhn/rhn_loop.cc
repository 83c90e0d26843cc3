// `rhn_loop`: the family's literal reference. Time outer, then the kDepth micro-layers: the
// input's product inside the first micro-layer of every step, each micro-layer's own
// [B,D]·[D,2D] product, then the highway update as written, h⊙τ + s⊙(1 − τ), in tensor ops
// under autograd (the steps' inputs and the micro-layers' weights from one unbind each,
// so no step's backward touches anything of size T).
#include <vector>

#include "variants/core/registry.h"
#include "variants/rhn/model.h"

namespace seqbench::rhn {
namespace {

torch::Tensor LoopLayer(const torch::Tensor& u, const LayerWeights& weights) {
  const auto inputs = u.unbind(1);
  const auto recurrent = weights.r.unbind(0), biases = weights.b.unbind(0);
  std::vector<torch::Tensor> outputs;
  outputs.reserve(inputs.size());
  torch::Tensor state = torch::zeros_like(inputs[0]);
  for (const torch::Tensor& input : inputs) {
    for (int64_t l = 0; l < kDepth; ++l) {
      torch::Tensor activations = torch::addmm(biases[l], state, recurrent[l]);
      if (l == 0) activations = activations + torch::matmul(input, weights.w_in);
      const auto parts = activations.chunk(2, 1);
      const torch::Tensor candidate = torch::tanh(parts[0]), transform = torch::sigmoid(parts[1]);
      state = candidate * transform + state * (1 - transform);
    }
    outputs.push_back(state);
  }
  return torch::stack(outputs, 1);
}

class RhnLoop final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("reference"); }
  ForwardOutput Forward(const Batch& batch) override {
    return ForwardWith(parameters(), config(), batch, LoopLayer);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("rhn_loop", RhnLoop,
                          "rhn's reference: every step's micro-layers one product at a time");

}  // namespace seqbench::rhn
