// `min_gru_fused`: the sequential recurrence as one autograd node per layer
// (LinearRecurrence): a single pass over raw memory forward and one back, saving a and s,
// where the reference builds a handful of nodes a step, each saving its inputs.
#include "variants/core/linear_recurrence.h"
#include "variants/core/registry.h"
#include "variants/min_gru/model.h"

namespace seqbench::min_gru {
namespace {

torch::Tensor FusedRecurrence(const torch::Tensor& k_z, const torch::Tensor& k_h) {
  const torch::Tensor z = torch::sigmoid(k_z);
  return LinearRecurrence(1 - z, z * PositiveActivation(k_h),
                          torch::zeros({k_z.size(0), k_z.size(2)}, k_z.options()));
}

class MinGruFused final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("hand-written kernel"); }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardWith(parameters(), config(), batch, FusedRecurrence);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("min_gru_fused", MinGruFused,
                          "min_gru's recurrence in one C++ pass with a hand-written backward");

}  // namespace seqbench::min_gru
