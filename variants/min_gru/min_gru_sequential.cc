// `min_gru_sequential`: the family's literal reference. The recurrence as written, one step
// at a time in tensor ops under autograd (the steps' slices from one unbind, so no step's
// backward touches anything of size T).
#include <vector>

#include "variants/core/linear_recurrence.h"
#include "variants/core/registry.h"
#include "variants/min_gru/model.h"

namespace seqbench::min_gru {
namespace {

torch::Tensor SequentialRecurrence(const torch::Tensor& k_z, const torch::Tensor& k_h) {
  const auto gates = torch::sigmoid(k_z).unbind(1);
  const auto candidates = PositiveActivation(k_h).unbind(1);
  std::vector<torch::Tensor> states;
  states.reserve(gates.size());
  torch::Tensor state = torch::zeros_like(gates[0]);
  for (size_t t = 0; t < gates.size(); ++t) {
    state = (1 - gates[t]) * state + gates[t] * candidates[t];
    states.push_back(state);
  }
  return torch::stack(states, 1);
}

class MinGruSequential final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("reference"); }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardWith(parameters(), config(), batch, SequentialRecurrence);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("min_gru_sequential", MinGruSequential,
                          "min_gru's reference: the recurrence one step at a time");

}  // namespace seqbench::min_gru
