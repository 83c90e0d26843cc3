// `min_lstm_fused`: the sequential recurrence as one autograd node per layer
// (LinearRecurrence): a single pass over raw memory forward and one back, saving a and s,
// where the reference builds a handful of nodes a step, each saving its inputs.
#include "variants/core/linear_recurrence.h"
#include "variants/core/registry.h"
#include "variants/min_lstm/model.h"

namespace seqbench::min_lstm {
namespace {

torch::Tensor FusedRecurrence(const GateInputs& gates) {
  const torch::Tensor forget = torch::sigmoid(gates.forget), input = torch::sigmoid(gates.input);
  const torch::Tensor total = forget + input;
  const auto& k = gates.candidate;
  return LinearRecurrence(forget / total, input / total * PositiveActivation(k),
                          torch::zeros({k.size(0), k.size(2)}, k.options()));
}

class MinLstmFused final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("hand-written kernel"); }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardWith(parameters(), config(), batch, FusedRecurrence);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("min_lstm_fused", MinLstmFused,
                          "min_lstm's recurrence in one C++ pass with a hand-written backward");

}  // namespace seqbench::min_lstm
