// The hand-written backward through time (RecurrenceThroughTime) against autograd through
// the plain step loop (RecurrenceLoop), in float64: the outputs, the final state, and the
// gradients of every input, the initial state included, with padding-like steps (g = 1,
// k = 0) among them.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "harness/environment.h"
#include "variants/simple_rnn/model.h"
#include "variants/simple_rnn/recurrence_kernels.h"

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

// One step's tensors for the step kernels, in float64 (the reference's type): a state, the
// next state's buffer, the step's inputs and its backward's inputs, the step before's dO
// among them. g in (0, 1).
struct StepTensors {
  torch::Tensor state, next, q, k, v, g, o, d_state, d_o, previous_d_o, d_q, previous_d_q, d_k, d_v,
      d_g;

  static StepTensors Random(int64_t width) {
    torch::manual_seed(width);
    const auto options = torch::TensorOptions().dtype(torch::kFloat64);
    StepTensors s;
    s.state = torch::randn({width, width}, options);
    s.d_state = torch::randn({width, width}, options);
    s.next = torch::zeros({width, width}, options);
    for (torch::Tensor* row : {&s.q, &s.k, &s.v, &s.d_o, &s.previous_d_o}) {
      *row = torch::randn({width}, options);
    }
    s.g = torch::sigmoid(torch::randn({width}, options));
    for (torch::Tensor* row : {&s.o, &s.d_q, &s.previous_d_q, &s.d_k, &s.d_v, &s.d_g}) {
      *row = torch::full({width}, -7.0, options);  // written by the kernels: not read
    }
    return s;
  }

  StepTensors To(torch::ScalarType dtype) const {
    StepTensors s;
    torch::Tensor StepTensors::*const fields[] = {&StepTensors::state, &StepTensors::next,
                                                  &StepTensors::q,     &StepTensors::k,
                                                  &StepTensors::v,     &StepTensors::g,
                                                  &StepTensors::o,     &StepTensors::d_state,
                                                  &StepTensors::d_o,   &StepTensors::previous_d_o,
                                                  &StepTensors::d_q,   &StepTensors::previous_d_q,
                                                  &StepTensors::d_k,   &StepTensors::d_v,
                                                  &StepTensors::d_g};
    for (auto field : fields) {
      s.*field = (this->*field).to(dtype).clone();  // a copy even in the same type
    }
    return s;
  }

  // Forward in place, the recompute from the forward's input into `next`, the query's
  // gradient from the updated state (S_t), then backward from the original one (S_{t-1}).
  template <typename scalar_t>
  void Run(const StepKernels<scalar_t>& kernels) {
    const int64_t width = q.size(0);
    const torch::Tensor previous = state.clone();
    kernels.recompute(next.data_ptr<scalar_t>(), previous.data_ptr<scalar_t>(),
                      k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
                      width);
    kernels.forward(state.data_ptr<scalar_t>(), q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                    v.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), o.data_ptr<scalar_t>(), width);
    kernels.query_gradient(state.data_ptr<scalar_t>(), d_o.data_ptr<scalar_t>(),
                           d_q.data_ptr<scalar_t>(), width);
    kernels.backward(d_state.data_ptr<scalar_t>(), previous.data_ptr<scalar_t>(),
                     q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                     g.data_ptr<scalar_t>(), d_o.data_ptr<scalar_t>(),
                     previous_d_o.data_ptr<scalar_t>(), d_k.data_ptr<scalar_t>(),
                     d_v.data_ptr<scalar_t>(), d_g.data_ptr<scalar_t>(),
                     previous_d_q.data_ptr<scalar_t>(), width);
  }
};

// The step's backward as the formulas say it, independently of the kernels' contract:
// with S_t = diag(g)·S_{t-1} + k·vᵀ and o = S_tᵀ·q, from dS (the gradient of S_t from
// later steps) and dO: dS_t = dS + q·dOᵀ, dq = S_t·dO, dk = dS_t·v, dv = dS_tᵀ·k,
// dg = rowsum(dS_t ⊙ S_{t-1}), and dS_{t-1} = diag(g)·dS_t.
TEST_CASE("the step kernels' backward is the recurrence's gradient", "[recurrence][kernels]") {
  const StepTensors inputs = StepTensors::Random(64);
  for (const KernelSet set : {KernelSet::kLoops, KernelSet::kVector8, KernelSet::kVector16}) {
    if (set == KernelSet::kVector16 && WidestKernelSetOfThisCpu() != KernelSet::kVector16) continue;
    DYNAMIC_SECTION(KernelSetName(set)) {
      StepTensors s = inputs.To(torch::kFloat32);
      const StepKernels<float> kernels = set == KernelSet::kLoops
                                             ? KernelsFor(float{}, 48, set)  // 48: the loops
                                             : KernelsFor(float{}, 64, set);
      REQUIRE(kernels.set == set);
      s.Run(kernels);
      const auto x = inputs;  // float64
      const torch::Tensor s_t = x.g.unsqueeze(1) * x.state + torch::outer(x.k, x.v);
      const torch::Tensor d_s = x.d_state + torch::outer(x.q, x.d_o);
      const std::pair<const char*, std::pair<torch::Tensor, torch::Tensor>> checks[] = {
          {"d_q", {s.d_q, torch::mv(s_t, x.d_o)}},
          {"previous_d_q", {s.previous_d_q, torch::mv(x.state, x.previous_d_o)}},
          {"d_k", {s.d_k, torch::mv(d_s, x.v)}},
          {"d_v", {s.d_v, torch::mv(d_s.t(), x.k)}},
          {"d_g", {s.d_g, (d_s * x.state).sum(1)}},
          {"d_state", {s.d_state, x.g.unsqueeze(1) * d_s}}};
      for (const auto& [name, pair] : checks) {
        INFO(name);
        const torch::Tensor got = pair.first.to(torch::kFloat64);
        const double scale = pair.second.abs().max().item<double>() + 1.0;
        CHECK((got - pair.second).abs().max().item<double>() <= 1e-5 * scale);
      }
    }
  }
}

TEST_CASE("the vector step kernels take float32 head widths 32 to 256 in steps of 32",
          "[recurrence][kernels]") {
  for (const int64_t width : {32, 64, 96, 256}) {
    INFO("width " << width);
    CHECK(KernelsFor(float{}, width, KernelSet::kVector8).set == KernelSet::kVector8);
  }
  for (const int64_t width : {1, 8, 31, 33, 48, 288}) {
    INFO("width " << width);
    CHECK(KernelsFor(float{}, width, KernelSet::kVector8).set == KernelSet::kLoops);
  }
  CHECK(KernelsFor(double{}, 64).set == KernelSet::kLoops);
}

TEST_CASE("the 16-float kernels take multiples of 64 up to 256, the 8-float ones the rest",
          "[recurrence][kernels]") {
  // Asked for (whether or not this CPU could run them): nothing is called here.
  const std::pair<int64_t, KernelSet> expected[] = {
      {64, KernelSet::kVector16}, {128, KernelSet::kVector16}, {256, KernelSet::kVector16},
      {32, KernelSet::kVector8},  {96, KernelSet::kVector8},   {160, KernelSet::kVector8},
      {48, KernelSet::kLoops},    {320, KernelSet::kLoops}};
  for (const auto& [width, set] : expected) {
    INFO("width " << width);
    CHECK(KernelsFor(float{}, width, KernelSet::kVector16).set == set);
  }
  // The default is this CPU's widest set.
  CHECK(KernelsFor(float{}, 64).set == WidestKernelSetOfThisCpu());
}

TEST_CASE("every float32 step kernel equals the float64 loops, forward and backward",
          "[recurrence][kernels]") {
  // Each set this CPU runs. 32 and 256: the 8-float kernels' ends; 64 and 256 the 16-float
  // ones'; 96: three 8-float column blocks (and the 8-float kernels under the 16-float
  // set); 192: three 16-float blocks; 8 and 48: the float32 loops the vector kernels leave.
  std::vector<KernelSet> sets = {KernelSet::kVector8};
  if (WidestKernelSetOfThisCpu() == KernelSet::kVector16) {
    sets.push_back(KernelSet::kVector16);
  } else {
    WARN("this CPU has no AVX-512: the 16-float kernels are not tried here");
  }
  for (const KernelSet set : sets) {
    for (const int64_t width : {8, 32, 48, 64, 96, 192, 256}) {
      DYNAMIC_SECTION(KernelSetName(set) << ", width " << width) {
        const StepTensors inputs = StepTensors::Random(width);
        StepTensors expected = inputs.To(torch::kFloat64);
        expected.Run(KernelsFor(double{}, width));
        StepTensors actual = inputs.To(torch::kFloat32);
        actual.Run(KernelsFor(float{}, width, set));
        const std::pair<const char*, torch::Tensor StepTensors::*> outputs[] = {
            {"state", &StepTensors::state}, {"next", &StepTensors::next},
            {"o", &StepTensors::o},         {"d_state", &StepTensors::d_state},
            {"d_q", &StepTensors::d_q},     {"previous_d_q", &StepTensors::previous_d_q},
            {"d_k", &StepTensors::d_k},     {"d_v", &StepTensors::d_v},
            {"d_g", &StepTensors::d_g}};
        for (const auto& [name, field] : outputs) {
          INFO(name);
          const torch::Tensor got = (actual.*field).to(torch::kFloat64);
          const torch::Tensor want = expected.*field;
          // Sums of `width` float32 products: rounding grows with sqrt(width) at most.
          const double scale = want.abs().max().item<double>() + 1.0;
          CHECK((got - want).abs().max().item<double>() <= 1e-5 * scale);
        }
      }
    }
  }
}

TEST_CASE("a run records the widest step kernels this CPU runs", "[recurrence][kernels]") {
  std::string recorded;
  for (const auto& [key, value] : CodePathFacts()) {
    if (key == "simple_rnn_kernels") recorded = value;
  }
  CHECK(recorded == KernelSetName(WidestKernelSetOfThisCpu()));
  CHECK(recorded != KernelSetName(KernelSet::kLoops));  // x86-64 always has the 8-float ones
}

TEST_CASE("ATEN_CPU_CAPABILITY below avx512 caps the step kernels at 8 floats",
          "[recurrence][kernels]") {
  const char* saved = std::getenv("ATEN_CPU_CAPABILITY");
  const std::string saved_value = saved != nullptr ? saved : "";
  for (const char* capability : {"avx2", "default"}) {
    INFO(capability);
    setenv("ATEN_CPU_CAPABILITY", capability, 1);
    CHECK(WidestKernelSetOfThisCpu() == KernelSet::kVector8);
  }
  setenv("ATEN_CPU_CAPABILITY", "avx512", 1);
  const KernelSet at_avx512 = WidestKernelSetOfThisCpu();
  unsetenv("ATEN_CPU_CAPABILITY");
  CHECK(at_avx512 == WidestKernelSetOfThisCpu());  // the CPU's own answer
  if (saved != nullptr) setenv("ATEN_CPU_CAPABILITY", saved_value.c_str(), 1);
}

}  // namespace
}  // namespace seqbench::simple_rnn
