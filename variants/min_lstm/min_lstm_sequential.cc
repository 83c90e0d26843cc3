// `min_lstm_sequential`: the family's literal reference. The gates normalised as written,
// f/(f + i) and i/(f + i), and the recurrence one step at a time in tensor ops under
// autograd (the steps' slices from one unbind).
#include <vector>

#include "variants/core/linear_recurrence.h"
#include "variants/core/registry.h"
#include "variants/min_lstm/model.h"

namespace seqbench::min_lstm {
namespace {

torch::Tensor SequentialRecurrence(const GateInputs& gates) {
  const torch::Tensor forget = torch::sigmoid(gates.forget), input = torch::sigmoid(gates.input);
  const torch::Tensor total = forget + input;
  const auto kept = (forget / total).unbind(1), added = (input / total).unbind(1);
  const auto candidates = PositiveActivation(gates.candidate).unbind(1);
  std::vector<torch::Tensor> states;
  states.reserve(kept.size());
  torch::Tensor state = torch::zeros_like(kept[0]);
  for (size_t t = 0; t < kept.size(); ++t) {
    state = kept[t] * state + added[t] * candidates[t];
    states.push_back(state);
  }
  return torch::stack(states, 1);
}

class MinLstmSequential final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("reference"); }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardWith(parameters(), config(), batch, SequentialRecurrence);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("min_lstm_sequential", MinLstmSequential,
                          "min_lstm's reference: the recurrence one step at a time");

}  // namespace seqbench::min_lstm
