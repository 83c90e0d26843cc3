// `qrnn_fused`: the QRNN paper's split. The convolution of all T steps at once, one
// [B·T,2D]·[2D,3D] GEMM on [u, u shifted one step], and the gates' activations over the
// whole [B,T,3D]; only fo-pooling stays sequential, as one autograd node per layer
// (LinearRecurrence with a = f, b = (1 − f)·z): a single pass over raw memory forward and one
// back.
#include "variants/core/linear_recurrence.h"
#include "variants/core/registry.h"
#include "variants/qrnn/model.h"

namespace seqbench::qrnn {
namespace {

torch::Tensor FusedLayer(const torch::Tensor& u, const LayerWeights& weights) {
  const int64_t steps = u.size(1);
  // u_{t−1} at step t: one shift of the whole sequence, zero at t = 0.
  const torch::Tensor previous =
      torch::cat({torch::zeros_like(u.slice(1, 0, 1)), u.slice(1, 0, steps - 1)}, 1);
  const auto gates =
      (torch::matmul(torch::cat({u, previous}, 2), weights.w_conv) + weights.b_conv).chunk(3, 2);
  const torch::Tensor forget = torch::sigmoid(gates[1]);
  const torch::Tensor cell = LinearRecurrence(forget, (1 - forget) * torch::tanh(gates[0]),
                                              torch::zeros({u.size(0), u.size(2)}, u.options()));
  return torch::sigmoid(gates[2]) * cell;
}

class QrnnFused final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("GEMM fusion"); }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardWith(parameters(), config(), batch, FusedLayer);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("qrnn_fused", QrnnFused,
                          "qrnn with the convolution as one GEMM over T and fo-pooling in one "
                          "C++ pass with a hand-written backward");

}  // namespace seqbench::qrnn
