// Reversal schedules for gradient checkpointing over time, and the recurrence that
// follows one. Backward needs the state before every step, in reverse order; a schedule
// says which states the forward sweep keeps (snapshots) and which steps backward runs
// again from a snapshot to reach the others, within a budget of states held at once.
// Three schedules, one recursion (reverse [a,b): advance j steps from a, snapshot, reverse
// [a+j,b) with one slot fewer, then [a,a+j) from a again), differing in how j is chosen:
//   uniform      segments of K on the forward sweep, every state inside a segment stored;
//   logarithmic  bisection (j = half) until a range fits its slots, then every state;
//   binomial     Griewank's Revolve: the j that minimises the steps run in all, which for
//                s snapshots and l steps is r·l − C(s+r, r−1), r the least with
//                C(s+r, s) >= l (Griewank & Walther, ACM TOMS 26(1), 2000).
// A plan is a flat list of actions, so that tests can execute it on integers and the
// recurrence on tensors, and both see the same steps.
//
// Thread-safety: PlanReversal() and CachedReversalPlan() are safe from any thread (the
// cache is locked); the recurrence is as thread-safe as the tensors it is given.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "variants/core/variant.h"

namespace seqbench::simple_rnn {

enum class CheckpointSchedule { kUniform, kLogarithmic, kBinomial };
std::string CheckpointScheduleName(CheckpointSchedule schedule);

// One instruction over a "current" state, at a position 0..T−1 (the state before that
// step), and a stack of snapshots.
struct ReversalAction {
  enum class Kind {
    kAdvance,  // run `steps` steps forward from the current state
    kPush,     // snapshot the current state
    kPop,      // drop the top snapshot
    kRestore,  // the current state becomes (a copy of) the top snapshot
    kReverse,  // backward of the step at the current position; consumes the current state
  };
  Kind kind;
  int64_t steps = 0;  // kAdvance only
};

struct ReversalPlan {
  CheckpointSchedule schedule = CheckpointSchedule::kBinomial;
  int64_t length = 0;      // T, the steps reversed
  int64_t max_states = 0;  // the budget: snapshots plus the current state
  std::vector<ReversalAction> actions;
  // actions[0, sweep_end) are the forward sweep: its advances reach position T−1 and its
  // pushes are the snapshots the forward pass keeps; the first kReverse follows.
  size_t sweep_end = 0;
  int64_t recomputed_steps = 0;  // steps advanced after the sweep: run again in backward
  int64_t peak_states = 0;       // the most snapshots held at once, plus the current state
};

// The least steps run (the forward sweep's T−1 included) to reverse `length` steps with
// `free_slots` snapshots besides the one of the start state, under any schedule: Revolve's
// count, by Griewank's closed form (free_slots = 0: l·(l−1)/2).
int64_t OptimalAdvances(int64_t length, int64_t free_slots);

// The segment length K of the uniform schedule under a budget of `max_states`: among the
// K whose segment starts plus one segment's states fit (ceil(T/K) + K <= max_states), the
// one that runs the fewest steps again ((ceil(T/K) − 1)·K, every segment but the last).
// std::nullopt when none fits (a budget below about 2·sqrt(T)).
std::optional<int64_t> UniformSegmentLength(int64_t length, int64_t max_states);

// The plan of `schedule` for `length` steps holding at most `max_states` states. Throws
// std::invalid_argument for length < 1, max_states < 2, or a uniform budget that no K fits.
ReversalPlan PlanReversal(CheckpointSchedule schedule, int64_t length, int64_t max_states);

// PlanReversal(), computed once per argument triple in the process.
std::shared_ptr<const ReversalPlan> CachedReversalPlan(CheckpointSchedule schedule, int64_t length,
                                                       int64_t max_states);

// The recurrence of model.h (S = diag(g)·S + k·vᵀ, o = Sᵀ·q) with backward following the
// schedule's plan: forward keeps only the plan's snapshots (and the state before the last
// step); backward re-runs steps from them and reverses one step at a time by hand, so
// activation memory is the budget's states rather than T of them. Same arguments and
// results as RecurrenceLoop(): q, k, v, g: [B,T,H,dh]; state: [B,H,dh,dh], carried in and
// out (replaced, not written in place). Under no-grad it is RecurrenceLoop().
torch::Tensor ScheduledRecurrence(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& g,
                                  torch::Tensor& state, CheckpointSchedule schedule,
                                  int64_t max_states);

// What `checkpointed_logarithmic` and `checkpointed_binomial` share: `batched` with each
// layer's recurrence under ScheduledRecurrence(), the budget from the option `max_states`
// (default ceil(log2 T) + 1, what bisection needs to run no step more than log2 T times).
class ScheduledCheckpointing : public Variant {
 public:
  explicit ScheduledCheckpointing(CheckpointSchedule schedule) : schedule_(schedule) {}

  Capabilities capabilities() const override;
  // Train mode: B times the plan's recomputed steps.
  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override;
  ForwardOutput Forward(const Batch& batch) override;

 protected:
  void OnSetup() override;  // refuses max_states < 2

 private:
  int64_t MaxStates(int64_t length) const;

  CheckpointSchedule schedule_;
};

}  // namespace seqbench::simple_rnn
