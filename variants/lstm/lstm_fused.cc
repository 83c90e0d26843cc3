// `lstm_fused`: Appleyard's and haste's structure (FusedLayer). Per layer, the input
// projection of all T steps is one GEMM with both biases folded in; each step is one [H,4H]
// recurrent GEMM (addmm onto the precomputed input part) and the pointwise gate math in few
// kernels. On the CPU a layer is one autograd node with a hand-written backward through
// time (fused_layer.h): a step of backward is one pass over its gates and one product, and
// the weight gradients of all steps are single GEMMs at the end.
#include "variants/core/registry.h"
#include "variants/lstm/model.h"

namespace seqbench::lstm {
namespace {

class LstmFused final : public LstmVariant {
 public:
  Capabilities capabilities() const override { return LstmCapabilities("GEMM fusion"); }

  LstmOutputs Run(const torch::Tensor& inputs, const torch::Tensor& mask) override {
    torch::Tensor x = inputs;  // [B,T,H]: this layer's input sequence
    std::vector<torch::Tensor> h_n, c_n;
    const Weights w = weights();
    for (const LayerWeights& layer : w.layers) {
      LayerOutputs out = FusedLayer(x, layer, mask);
      x = out.outputs;
      h_n.push_back(out.h);
      c_n.push_back(out.c);
    }
    return {x, torch::stack(h_n, 0), torch::stack(c_n, 0)};
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("lstm_fused", LstmFused,
                          "input projection hoisted over T; one recurrent GEMM per step");

}  // namespace seqbench::lstm
