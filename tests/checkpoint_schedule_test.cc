// Checkpoint schedules over time: each plan, executed on integers, reverses every step
// once, in order, within its budget of states; the binomial plan runs Revolve's known
// optimal count of steps and never more than the other schedules; and the recurrence that
// follows a plan gives the gradients of the one that stores every state.
#include "variants/simple_rnn/checkpoint_schedule.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "harness/memory.h"
#include "tests/test_support.h"

namespace seqbench {
namespace {

using simple_rnn::CheckpointSchedule;
using simple_rnn::ReversalAction;
using simple_rnn::ReversalPlan;
using Kind = ReversalAction::Kind;

constexpr CheckpointSchedule kSchedules[] = {
    CheckpointSchedule::kUniform, CheckpointSchedule::kLogarithmic, CheckpointSchedule::kBinomial};

// The least steps to reverse `length` steps with `free_slots` snapshots beyond the start's,
// by brute force over every first snapshot position: the reference the closed form and
// the plans are held to.
int64_t BruteForceAdvances(int64_t length, int64_t free_slots,
                           std::map<std::pair<int64_t, int64_t>, int64_t>& memo) {
  if (length <= 1) return 0;
  if (free_slots == 0) return length * (length - 1) / 2;
  const auto key = std::make_pair(length, free_slots);
  if (const auto found = memo.find(key); found != memo.end()) return found->second;
  int64_t best = -1;
  for (int64_t split = 1; split < length; ++split) {
    const int64_t count = split + BruteForceAdvances(length - split, free_slots - 1, memo) +
                          BruteForceAdvances(split, free_slots, memo);
    if (best < 0 || count < best) best = count;
  }
  return memo[key] = best;
}

struct Execution {
  std::vector<int64_t> reversed;  // positions, in the order reversed
  int64_t sweep_advances = 0, later_advances = 0, peak_states = 0;
  bool sweep_only_pushes_and_advances = true;
  bool stack_empty_at_end = false;
};

// Runs the plan on positions instead of states; FAILs on an action that a recurrence could
// not execute (reversing a step other than the current position, restoring from nothing).
Execution Execute(const ReversalPlan& plan) {
  Execution run;
  std::vector<int64_t> stack;
  int64_t position = 0;
  bool have_current = true;
  for (size_t i = 0; i < plan.actions.size(); ++i) {
    const ReversalAction& action = plan.actions[i];
    const bool in_sweep = i < plan.sweep_end;
    switch (action.kind) {
      case Kind::kAdvance:
        REQUIRE(have_current);
        REQUIRE(action.steps >= 1);
        position += action.steps;
        (in_sweep ? run.sweep_advances : run.later_advances) += action.steps;
        break;
      case Kind::kPush:
        REQUIRE(have_current);
        stack.push_back(position);
        break;
      case Kind::kPop:
        REQUIRE(!stack.empty());
        stack.pop_back();
        break;
      case Kind::kRestore:
        REQUIRE(!stack.empty());
        position = stack.back();
        have_current = true;
        break;
      case Kind::kReverse:
        REQUIRE(have_current);
        run.reversed.push_back(position);
        have_current = false;
        break;
    }
    if (in_sweep && action.kind != Kind::kAdvance && action.kind != Kind::kPush)
      run.sweep_only_pushes_and_advances = false;
    run.peak_states = std::max<int64_t>(run.peak_states, static_cast<int64_t>(stack.size()) + 1);
  }
  run.stack_empty_at_end = stack.empty();
  return run;
}

TEST_CASE("the closed form gives Revolve's optimal counts", "[checkpoint_schedule]") {
  // Brute force over every schedule, and the first values of its table written out.
  std::map<std::pair<int64_t, int64_t>, int64_t> memo;
  for (int64_t length = 1; length <= 60; ++length) {
    for (int64_t free_slots = 0; free_slots <= 7; ++free_slots) {
      INFO("length " << length << ", free slots " << free_slots);
      CHECK(simple_rnn::OptimalAdvances(length, free_slots) ==
            BruteForceAdvances(length, free_slots, memo));
    }
  }
  const std::vector<int64_t> one_free{0, 1, 2, 4, 6, 8, 11, 14, 17, 20, 24};
  const std::vector<int64_t> two_free{0, 1, 2, 3, 5, 7, 9, 11, 13, 15, 18};
  for (int64_t length = 1; length <= 11; ++length) {
    CHECK(simple_rnn::OptimalAdvances(length, 1) == one_free[length - 1]);
    CHECK(simple_rnn::OptimalAdvances(length, 2) == two_free[length - 1]);
  }
  // With a slot for every state, the sweep alone: T − 1 steps.
  CHECK(simple_rnn::OptimalAdvances(100, 99) == 99);
}

TEST_CASE("every plan reverses each step once, in order, within its budget",
          "[checkpoint_schedule]") {
  for (const CheckpointSchedule schedule : kSchedules) {
    for (int64_t length = 1; length <= 48; ++length) {
      for (const int64_t budget : {2, 3, 4, 5, 7, 10, 16, 64}) {
        if (schedule == CheckpointSchedule::kUniform &&
            !simple_rnn::UniformSegmentLength(length, budget)) {
          CHECK_THROWS_AS(simple_rnn::PlanReversal(schedule, length, budget),
                          std::invalid_argument);
          continue;
        }
        INFO(simple_rnn::CheckpointScheduleName(schedule) << " T=" << length << " M=" << budget);
        const ReversalPlan plan = simple_rnn::PlanReversal(schedule, length, budget);
        const Execution run = Execute(plan);
        std::vector<int64_t> expected(static_cast<size_t>(length));
        for (int64_t t = 0; t < length; ++t) expected[static_cast<size_t>(t)] = length - 1 - t;
        CHECK(run.reversed == expected);
        CHECK(run.sweep_only_pushes_and_advances);
        CHECK(run.sweep_advances == length - 1);  // the forward pass reaches the last step
        CHECK(run.later_advances == plan.recomputed_steps);
        CHECK(run.peak_states == plan.peak_states);
        CHECK(plan.peak_states <= budget);
        CHECK(run.stack_empty_at_end);
        const int64_t optimal = simple_rnn::OptimalAdvances(length, budget - 2);
        if (schedule == CheckpointSchedule::kBinomial) {
          CHECK(run.sweep_advances + run.later_advances == optimal);
        } else {
          CHECK(run.sweep_advances + run.later_advances >= optimal);
        }
      }
    }
  }
}

TEST_CASE("the binomial schedule recomputes least at every budget, strictly less somewhere",
          "[checkpoint_schedule]") {
  const int64_t length = 256;
  bool beats_bisection = false, beats_uniform = false;
  for (int64_t budget = 2; budget <= 2 * length; budget += budget < 40 ? 1 : 37) {
    INFO("M=" << budget);
    const int64_t binomial =
        simple_rnn::PlanReversal(CheckpointSchedule::kBinomial, length, budget).recomputed_steps;
    const int64_t bisection =
        simple_rnn::PlanReversal(CheckpointSchedule::kLogarithmic, length, budget).recomputed_steps;
    CHECK(binomial <= bisection);
    beats_bisection = beats_bisection || binomial < bisection;
    if (simple_rnn::UniformSegmentLength(length, budget)) {
      const int64_t uniform =
          simple_rnn::PlanReversal(CheckpointSchedule::kUniform, length, budget).recomputed_steps;
      CHECK(binomial <= uniform);
      beats_uniform = beats_uniform || binomial < uniform;
    }
  }
  CHECK(beats_bisection);
  CHECK(beats_uniform);
  // Enough states for all: nothing runs twice.
  CHECK(simple_rnn::PlanReversal(CheckpointSchedule::kBinomial, length, length + 1)
            .recomputed_steps == 0);
}

TEST_CASE("the uniform segment length fits the budget and recomputes least",
          "[checkpoint_schedule]") {
  for (const int64_t length : {1, 7, 64, 100, 256}) {
    for (int64_t budget = 2; budget <= length + 2; ++budget) {
      INFO("T=" << length << " M=" << budget);
      const auto segment = simple_rnn::UniformSegmentLength(length, budget);
      int64_t best = -1;  // over every K that fits, by brute force
      for (int64_t k = 1; k <= length; ++k) {
        const int64_t segments = (length + k - 1) / k;
        if (segments + k <= budget && (best < 0 || (segments - 1) * k < best))
          best = (segments - 1) * k;
      }
      REQUIRE(segment.has_value() == (best >= 0));
      if (!segment) continue;
      const int64_t segments = (length + *segment - 1) / *segment;
      CHECK(segments + *segment <= budget);
      CHECK((segments - 1) * *segment == best);
    }
  }
}

TEST_CASE("the scheduled recurrence gives the stored recurrence's gradients",
          "[checkpoint_schedule]") {
  torch::manual_seed(11);
  const int64_t batch = 2, length = 23, heads = 2, width = 3;
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const auto q = torch::randn({batch, length, heads, width}, options);
  const auto k = torch::randn({batch, length, heads, width}, options);
  const auto v = torch::randn({batch, length, heads, width}, options);
  const auto g = torch::rand({batch, length, heads, width}, options) * 0.5 + 0.5;
  const auto initial = torch::randn({batch, heads, width, width}, options);
  const auto d_o = torch::randn({batch, length, heads, width}, options);
  const auto d_final = torch::randn({batch, heads, width, width}, options);

  // The gradients of <o, d_o> + <final state, d_final> for every input.
  const auto gradients = [&](const std::function<torch::Tensor(const std::vector<torch::Tensor>&,
                                                               torch::Tensor&)>& recurrence) {
    std::vector<torch::Tensor> inputs{q.clone(), k.clone(), v.clone(), g.clone(), initial.clone()};
    for (auto& input : inputs) input.requires_grad_(true);
    torch::Tensor state = inputs[4];
    const torch::Tensor o = recurrence(inputs, state);
    ((o * d_o).sum() + (state * d_final).sum()).backward();
    std::vector<torch::Tensor> result{o.detach(), state.detach()};
    for (const auto& input : inputs) result.push_back(input.grad());
    return result;
  };
  const auto stored = gradients([](const std::vector<torch::Tensor>& in, torch::Tensor& state) {
    return simple_rnn::RecurrenceThroughTime(in[0], in[1], in[2], in[3], state);
  });
  const char* names[] = {"o", "final state", "dq", "dk", "dv", "dg", "d initial"};
  for (const CheckpointSchedule schedule : kSchedules) {
    // Uniform fits T = 23 from 10 states (K = 5); from 24 it stores everything.
    for (const int64_t budget : {2, 3, 5, 9, 10, 12, 24, 40}) {
      if (schedule == CheckpointSchedule::kUniform &&
          !simple_rnn::UniformSegmentLength(length, budget))
        continue;
      DYNAMIC_SECTION(simple_rnn::CheckpointScheduleName(schedule) << " M=" << budget) {
        const auto scheduled =
            gradients([&](const std::vector<torch::Tensor>& in, torch::Tensor& state) {
              return simple_rnn::ScheduledRecurrence(in[0], in[1], in[2], in[3], state, schedule,
                                                     budget);
            });
        for (size_t i = 0; i < stored.size(); ++i) {
          INFO(names[i]);
          REQUIRE(scheduled[i].defined());
          CHECK(torch::allclose(scheduled[i], stored[i], 1e-12, 1e-12));
        }
      }
    }
  }
}

TEST_CASE("the scheduled recurrence holds no more states than its plan says",
          "[checkpoint_schedule]") {
  CountingCpuAllocator& allocator = CountingCpuAllocator::Install();
  torch::manual_seed(3);
  const int64_t length = 128, width = 32;  // a state is [1,1,32,32]: 8 KiB in float64
  const int64_t state_bytes = width * width * 8;
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  std::vector<torch::Tensor> inputs{
      torch::randn({1, length, 1, width}, options), torch::randn({1, length, 1, width}, options),
      torch::randn({1, length, 1, width}, options), torch::rand({1, length, 1, width}, options)};
  for (auto& input : inputs) input.requires_grad_(true);
  const auto initial = torch::randn({1, 1, width, width}, options);
  const auto d_o = torch::randn({1, length, 1, width}, options);
  // Peak bytes above what was live before, over forward and backward.
  const auto peak_above_start = [&](CheckpointSchedule schedule, int64_t budget) {
    for (auto& input : inputs) input.mutable_grad() = torch::Tensor();
    const int64_t before = allocator.live_bytes();
    allocator.ResetPeak();
    {
      torch::Tensor state = initial;
      const auto o = simple_rnn::ScheduledRecurrence(inputs[0], inputs[1], inputs[2], inputs[3],
                                                     state, schedule, budget);
      (o * d_o).sum().backward();
    }
    return allocator.peak_bytes() - before;
  };
  for (const CheckpointSchedule schedule :
       {CheckpointSchedule::kLogarithmic, CheckpointSchedule::kBinomial}) {
    INFO(simple_rnn::CheckpointScheduleName(schedule));
    // What does not depend on the budget (inputs' gradients, temporaries) cancels in the
    // difference; the states held must grow with the plan's peak, not beyond it.
    const int64_t small = peak_above_start(schedule, 4), large = peak_above_start(schedule, 40);
    const int64_t small_peak = simple_rnn::PlanReversal(schedule, length, 4).peak_states;
    const int64_t large_peak = simple_rnn::PlanReversal(schedule, length, 40).peak_states;
    INFO("peak above start: " << small << " bytes at M=4 (plan " << small_peak << " states), "
                              << large << " at M=40 (plan " << large_peak << ")");
    CHECK(large - small <= (large_peak - small_peak + 1) * state_bytes);
    CHECK(large - small >= (large_peak - small_peak - 1) * state_bytes);
  }
}

TEST_CASE("the scheduled variants match batched and count their recomputation",
          "[checkpoint_schedule]") {
  const ModelConfig config = testing::SmallSimpleRnn();
  const ParameterSet weights = simple_rnn::InitWeights(config, 5);
  const int64_t length = 21;
  const Batch batch = MakeBatch({3, length, 4}, config.vocab_size, 8);
  auto batched = testing::MakeVariant("batched", config, weights, torch::kFloat64);
  for (const std::string key : {"checkpointed_logarithmic", "checkpointed_binomial"}) {
    for (const int64_t budget : {0, 2, 4, 30}) {
      DYNAMIC_SECTION(key << " max_states=" << budget << (budget == 0 ? " (default)" : "")) {
        VariantOptions options;
        if (budget > 0) options["max_states"] = budget;
        auto variant = testing::MakeVariant(key, config, weights, torch::kFloat64, options);
        const auto result =
            CheckEquivalence(*variant, *batched, Mode::kTrain, batch, Tolerance{1e-11, 1e-12});
        INFO("grad max_abs " << result.gradients.max_abs << " at " << result.worst_gradient);
        CHECK(result.logits.within);
        CHECK(result.loss.within);
        CHECK(result.gradients.within);
        const int64_t used = budget > 0 ? budget : 6;  // ceil(log2 21) + 1
        const auto schedule = key == "checkpointed_binomial" ? CheckpointSchedule::kBinomial
                                                             : CheckpointSchedule::kLogarithmic;
        const StepWork work = variant->Work(Mode::kTrain, batch, 0);
        CHECK(work.recomputed_positions ==
              3 * simple_rnn::PlanReversal(schedule, length, used).recomputed_steps);
        CHECK((budget == 30) == (work.recomputed_positions == 0));
      }
    }
  }
  // Refused when set up, as an option a suite gave.
  CHECK_THROWS_WITH(testing::MakeVariant("checkpointed_binomial", config, weights, torch::kFloat32,
                                         {{"max_states", 1}}),
                    Catch::Contains("at least 2"));
}

}  // namespace
}  // namespace seqbench
