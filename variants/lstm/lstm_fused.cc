// `lstm_fused`: Appleyard's and haste's structure. Per layer, the input projection of all
// T steps is one GEMM with both biases folded in; each step is one [H,4H] recurrent GEMM
// (addmm onto the precomputed input part) and the pointwise gate math in few kernels.
#include "variants/core/registry.h"
#include "variants/lstm/model.h"

namespace seqbench::lstm {
namespace {

class LstmFused final : public LstmVariant {
 public:
  Capabilities capabilities() const override { return LstmCapabilities("GEMM fusion"); }

  LstmOutputs Run(const torch::Tensor& inputs, const torch::Tensor& mask) override {
    const Weights w = weights();
    torch::Tensor x = inputs;  // [B,T,H]: this layer's input sequence
    std::vector<torch::Tensor> h_n, c_n;
    for (const LayerWeights& lw : w.layers) {
      const auto projected =
          torch::matmul(x, lw.weight_ih.t()) + (lw.bias_ih + lw.bias_hh);  // [B,T,4H]
      const auto recurrent = lw.weight_hh.t();
      torch::Tensor h = torch::zeros({x.size(0), x.size(2)}, x.options());
      torch::Tensor c = h;
      // Unbound once: a per-step select's backward would scatter into a [B,T,4H] zero
      // buffer at every step (O(T^2)); unbind's is one stack.
      const std::vector<torch::Tensor> projected_steps = projected.unbind(1);
      const std::vector<torch::Tensor> mask_steps =
          mask.defined() ? mask.unbind(1) : std::vector<torch::Tensor>();
      std::vector<torch::Tensor> outputs;
      for (int64_t t = 0; t < x.size(1); ++t) {
        const auto gates = torch::addmm(projected_steps[t], h, recurrent);
        auto [h_next, c_next] = FusedCellUpdate(gates, c);
        const auto keep = mask.defined() ? mask_steps[t].unsqueeze(1) : torch::Tensor();
        c = KeepWhere(keep, c_next, c);
        h = KeepWhere(keep, h_next, h);
        outputs.push_back(h);
      }
      x = torch::stack(outputs, 1);
      h_n.push_back(h);
      c_n.push_back(c);
    }
    return {x, torch::stack(h_n, 0), torch::stack(c_n, 0)};
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("lstm_fused", LstmFused,
                          "input projection hoisted over T; one recurrent GEMM per step");

}  // namespace seqbench::lstm
