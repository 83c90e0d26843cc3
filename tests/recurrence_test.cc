// The hand-written backward through time (RecurrenceThroughTime) against autograd through
// the plain step loop (RecurrenceLoop), in float64: the outputs, the final state, and the
// gradients of every input, the initial state included, with padding-like steps (g = 1,
// k = 0) among them.
#include <catch2/catch.hpp>

#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

struct Inputs {
  torch::Tensor q, k, v, g, state;
};

Inputs RandomInputs(int64_t batch, int64_t steps, int64_t heads, int64_t width) {
  torch::manual_seed(11);
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  Inputs in;
  in.q = torch::randn({batch, steps, heads, width}, options);
  in.k = torch::randn({batch, steps, heads, width}, options);
  in.v = torch::randn({batch, steps, heads, width}, options);
  in.g = torch::sigmoid(torch::randn({batch, steps, heads, width}, options));
  // The last two steps of sequence 0 are padding: the state passes through unchanged.
  in.k.select(0, 0).slice(0, steps - 2).zero_();
  in.g.select(0, 0).slice(0, steps - 2).fill_(1.0);
  in.state = torch::randn({batch, heads, width, width}, options);
  return in;
}

// Runs `recurrence` on fresh leaves of `in` and returns {o, final state, dq, dk, dv, dg,
// d initial state} for a loss that weighs every output and the final state.
std::vector<torch::Tensor> RunWithGradients(
    const Inputs& in,
    const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&,
                                      const torch::Tensor&, const torch::Tensor&, torch::Tensor&)>&
        recurrence) {
  std::vector<torch::Tensor> leaves;
  for (const auto& t : {in.q, in.k, in.v, in.g, in.state}) {
    leaves.push_back(t.detach().clone().requires_grad_(true));
  }
  torch::Tensor state = leaves[4];
  const torch::Tensor o = recurrence(leaves[0], leaves[1], leaves[2], leaves[3], state);
  torch::manual_seed(12);
  // randn(sizes), not randn_like: the weights must not depend on the outputs' strides.
  const auto o_weight = torch::randn(o.sizes(), o.options());
  const auto state_weight = torch::randn(state.sizes(), state.options());
  ((o * o_weight).sum() + (state * state_weight).sum()).backward();
  std::vector<torch::Tensor> results{o.detach(), state.detach()};
  for (const auto& leaf : leaves) results.push_back(leaf.grad());
  return results;
}

TEST_CASE("the hand-written backward through time equals autograd through the step loop",
          "[recurrence]") {
  const Inputs in = RandomInputs(/*batch=*/3, /*steps=*/9, /*heads=*/2, /*width=*/4);
  const auto expected = RunWithGradients(in, RecurrenceLoop);
  const auto actual = RunWithGradients(in, RecurrenceThroughTime);
  const char* names[] = {"o", "final state", "dq", "dk", "dv", "dg", "d initial state"};
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO(names[i]);
    REQUIRE(actual[i].defined());
    CHECK(actual[i].sizes() == expected[i].sizes());
    CHECK(torch::allclose(actual[i], expected[i], /*rtol=*/1e-12, /*atol=*/1e-12));
  }
}

TEST_CASE("without gradients the recurrence saves nothing and gives the loop's values",
          "[recurrence]") {
  const Inputs in = RandomInputs(2, 5, 2, 4);
  torch::NoGradGuard no_grad;
  torch::Tensor loop_state = in.state.clone(), through_state = in.state.clone();
  const auto loop = RecurrenceLoop(in.q, in.k, in.v, in.g, loop_state);
  const auto through = RecurrenceThroughTime(in.q, in.k, in.v, in.g, through_state);
  CHECK(torch::equal(loop, through));
  CHECK(torch::equal(loop_state, through_state));
}

}  // namespace
}  // namespace seqbench::simple_rnn
