#include "variants/simple_rnn/checkpoint_schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>

#include "variants/core/batched_matmul.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {

std::string CheckpointScheduleName(CheckpointSchedule schedule) {
  switch (schedule) {
    case CheckpointSchedule::kUniform:
      return "uniform";
    case CheckpointSchedule::kLogarithmic:
      return "logarithmic";
    case CheckpointSchedule::kBinomial:
      return "binomial";
  }
  return "unknown";
}

int64_t OptimalAdvances(int64_t length, int64_t free_slots) {
  if (length <= 1) return 0;
  if (free_slots <= 0) return length * (length - 1) / 2;
  // Griewank counts the start state among the snapshots: c of them. The repetition number
  // r is the least with C(c+r, c) >= l; then the count is r·l − C(c+r, r−1).
  const int64_t snapshots = free_slots + 1;
  int64_t repetitions = 0, reach = 1;  // reach = C(c+r, c)
  while (reach < length) {
    ++repetitions;
    reach = reach * (snapshots + repetitions) / repetitions;
  }
  // C(c+r, r−1) = C(c+r, c+1) = C(c+r, c)·r/(c+1).
  return repetitions * length - reach * repetitions / (snapshots + 1);
}

std::optional<int64_t> UniformSegmentLength(int64_t length, int64_t max_states) {
  std::optional<int64_t> best;
  int64_t best_recomputed = 0;
  for (int64_t segment = 1; segment <= length; ++segment) {
    const int64_t segments = (length + segment - 1) / segment;
    if (segments + segment > max_states) continue;
    const int64_t recomputed = (segments - 1) * segment;
    if (!best || recomputed < best_recomputed) {
      best = segment;
      best_recomputed = recomputed;
    }
  }
  return best;
}

namespace {

using Kind = ReversalAction::Kind;

// Writes the actions that reverse [a,b) of `steps` steps. On entry the current state and
// the top snapshot are both the state at a; `free_slots` more snapshots may be pushed.
class Planner {
 public:
  Planner(CheckpointSchedule schedule, int64_t steps, int64_t segment)
      : schedule_(schedule), steps_(steps), segment_(segment) {}

  void Reverse(int64_t a, int64_t b, int64_t free_slots) {
    const int64_t length = b - a;
    if (length == 1) {
      Emit(Kind::kReverse);
      return;
    }
    if (free_slots == 0) {  // no snapshot left: from a to every step, last first
      for (int64_t t = b - 1; t >= a; --t) {
        if (t != b - 1) Emit(Kind::kRestore);
        if (t > a) Emit(Kind::kAdvance, t - a);
        Emit(Kind::kReverse);
      }
      return;
    }
    // A range that ends at T lies on the forward sweep: its first advances are the
    // forward pass's.
    const int64_t split = Split(length, free_slots, /*sweep=*/b == steps_);
    Emit(Kind::kAdvance, split);
    Emit(Kind::kPush);
    Reverse(a + split, b, free_slots - 1);
    Emit(Kind::kPop);
    Emit(Kind::kRestore);
    Reverse(a, a + split, free_slots);
  }

  std::vector<ReversalAction> actions;

 private:
  void Emit(Kind kind, int64_t steps = 0) { actions.push_back({kind, steps}); }

  // How many steps past a the next snapshot goes, 1 <= split < length.
  int64_t Split(int64_t length, int64_t free_slots, bool sweep) const {
    if (free_slots >= length - 1) return 1;  // every state fits: store them all
    switch (schedule_) {
      case CheckpointSchedule::kUniform:
        return sweep && length > segment_ ? segment_ : 1;
      case CheckpointSchedule::kLogarithmic:
        return length / 2;
      case CheckpointSchedule::kBinomial:
        break;
    }
    int64_t best = 1, best_count = -1;
    for (int64_t split = 1; split < length; ++split) {
      const int64_t count = split + OptimalAdvances(length - split, free_slots - 1) +
                            OptimalAdvances(split, free_slots);
      if (best_count < 0 || count < best_count) {
        best = split;
        best_count = count;
      }
    }
    return best;
  }

  CheckpointSchedule schedule_;
  int64_t steps_;
  int64_t segment_;
};

}  // namespace

ReversalPlan PlanReversal(CheckpointSchedule schedule, int64_t length, int64_t max_states) {
  if (length < 1) throw std::invalid_argument("a reversal plan needs at least one step");
  if (max_states < 2) {
    throw std::invalid_argument(
        "a reversal plan needs max_states >= 2 (the start state and the current one), got " +
        std::to_string(max_states));
  }
  int64_t segment = length;
  if (schedule == CheckpointSchedule::kUniform) {
    const auto fitting = UniformSegmentLength(length, max_states);
    if (!fitting) {
      throw std::invalid_argument("no uniform segment length fits " + std::to_string(length) +
                                  " steps in " + std::to_string(max_states) +
                                  " states (ceil(T/K) + K must be at most the budget)");
    }
    segment = *fitting;
  }
  ReversalPlan plan;
  plan.schedule = schedule;
  plan.length = length;
  plan.max_states = max_states;
  Planner planner(schedule, length, segment);
  planner.actions.push_back({Kind::kPush});
  // One state is the current one; one snapshot is the start's.
  planner.Reverse(0, length, max_states - 2);
  planner.actions.push_back({Kind::kPop});
  plan.actions = std::move(planner.actions);

  int64_t depth = 0;
  bool swept = false;
  for (size_t i = 0; i < plan.actions.size(); ++i) {
    const ReversalAction& action = plan.actions[i];
    if (action.kind == Kind::kReverse && !swept) {
      plan.sweep_end = i;
      swept = true;
    }
    if (action.kind == Kind::kAdvance && swept) plan.recomputed_steps += action.steps;
    if (action.kind == Kind::kPush) ++depth;
    if (action.kind == Kind::kPop) --depth;
    plan.peak_states = std::max(plan.peak_states, depth + 1);
  }
  return plan;
}

std::shared_ptr<const ReversalPlan> CachedReversalPlan(CheckpointSchedule schedule, int64_t length,
                                                       int64_t max_states) {
  static std::mutex mutex;
  static std::map<std::tuple<CheckpointSchedule, int64_t, int64_t>,
                  std::shared_ptr<const ReversalPlan>>
      cache;
  const auto key = std::make_tuple(schedule, length, max_states);
  std::lock_guard<std::mutex> lock(mutex);
  auto& plan = cache[key];
  if (!plan)
    plan = std::make_shared<const ReversalPlan>(PlanReversal(schedule, length, max_states));
  return plan;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The inputs one step at a time (views, no copies): each [B,H,dh].
struct StepInputs {
  std::vector<torch::Tensor> q, k, v, g;

  StepInputs(const torch::Tensor& q_all, const torch::Tensor& k_all, const torch::Tensor& v_all,
             const torch::Tensor& g_all)
      : q(q_all.unbind(1)), k(k_all.unbind(1)), v(v_all.unbind(1)), g(g_all.unbind(1)) {}

  // S_{t+1} = diag(g_t)·S_t + k_t·v_tᵀ, into a new tensor: `state` may be a snapshot.
  torch::Tensor Step(const torch::Tensor& state, int64_t t) const {
    return torch::mul(state, g[t].unsqueeze(-1)).addcmul_(k[t].unsqueeze(-1), v[t].unsqueeze(-2));
  }
  // The same in place, on a state nothing else holds.
  void StepInPlace(torch::Tensor& state, int64_t t) const {
    state.mul_(g[t].unsqueeze(-1)).addcmul_(k[t].unsqueeze(-1), v[t].unsqueeze(-2));
  }
};

// q, k, v, g: [B,T,H,dh]; initial: [B,H,dh,dh] -> {o: [B,T,H,dh], final state}. Saves
// q, k, v, g for backward, and hands it the sweep's snapshots and the state before the
// last step through saved_data, which backward empties: saved variables would live until
// backward returns, so a popped snapshot would stay in memory beside the ones pushed
// after it, and the budget would not hold.
class ScheduledRecurrenceFunction : public torch::autograd::Function<ScheduledRecurrenceFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k,
                               torch::Tensor v, torch::Tensor g, torch::Tensor initial,
                               int64_t schedule, int64_t max_states) {
    const int64_t steps = q.size(1);
    const auto plan =
        CachedReversalPlan(static_cast<CheckpointSchedule>(schedule), steps, max_states);
    const StepInputs in(q, k, v, g);
    torch::Tensor o = torch::empty_like(q);
    const auto o_steps = o.unbind(1);
    const auto output = [&](const torch::Tensor& next_state, int64_t t) {
      o_steps[t].copy_(BatchedMatmul(in.q[t].unsqueeze(-2), next_state).squeeze(-2));
    };
    torch::Tensor current = initial;
    int64_t position = 0;
    std::vector<torch::Tensor> snapshots;
    for (size_t i = 0; i < plan->sweep_end; ++i) {
      const ReversalAction& action = plan->actions[i];
      if (action.kind == Kind::kPush) {
        snapshots.push_back(current);
      } else {  // the sweep holds only pushes and advances
        for (int64_t n = 0; n < action.steps; ++n, ++position) {
          current = in.Step(current, position);
          output(current, position);
        }
      }
    }
    TORCH_CHECK(position == steps - 1, "the plan's sweep ends at ", position, ", not ", steps - 1);
    torch::Tensor final_state = in.Step(current, position);
    output(final_state, position);
    ctx->save_for_backward({q, k, v, g});
    // The snapshots are not outputs, so keeping them here makes no reference cycle.
    snapshots.push_back(current);
    ctx->saved_data["states"] = c10::List<torch::Tensor>(snapshots);
    ctx->saved_data["schedule"] = schedule;
    ctx->saved_data["max_states"] = max_states;
    return {o, final_state};
  }

  // Reverses step t from S_t (the state before it), with dS the gradient of S_{t+1}:
  //   dS += q_t·dO_tᵀ;  dk_t = dS·v_t;  dv_t = dSᵀ·k_t;  dg_t = rowsum(dS ⊙ S_t);
  //   dq_t = S_{t+1}·dO_t = g_t ⊙ (S_t·dO_t) + k_t·(v_t·dO_t)  (so S_{t+1} is never needed);
  //   then dS = diag(g_t)·dS, the gradient of S_t.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &g = saved[3];
    // Taken out of the context, so that the stack below holds the only references.
    const auto found = ctx->saved_data.find("states");
    TORCH_CHECK(found != ctx->saved_data.end(),
                "ScheduledRecurrence's backward runs once: its snapshots are consumed (no "
                "retain_graph, no double backward)");
    std::vector<torch::Tensor> states = found->second.toTensorVector();
    ctx->saved_data.erase("states");
    torch::Tensor current = std::move(states.back());
    states.pop_back();
    const int64_t steps = q.size(1);
    const auto plan =
        CachedReversalPlan(static_cast<CheckpointSchedule>(ctx->saved_data["schedule"].toInt()),
                           steps, ctx->saved_data["max_states"].toInt());
    const StepInputs in(q, k, v, g);
    const auto dtype = q.scalar_type();
    torch::Tensor d_state = grad_outputs[1].defined()
                                ? grad_outputs[1].to(dtype, /*non_blocking=*/false, /*copy=*/true)
                                : torch::zeros_like(current);
    const torch::Tensor d_o =
        grad_outputs[0].defined() ? grad_outputs[0].to(dtype) : torch::zeros_like(q);
    const auto d_o_steps = d_o.unbind(1);
    torch::Tensor d_q = torch::empty_like(q), d_k = torch::empty_like(q),
                  d_v = torch::empty_like(q), d_g = torch::empty_like(q);
    const auto d_q_steps = d_q.unbind(1), d_k_steps = d_k.unbind(1), d_v_steps = d_v.unbind(1),
               d_g_steps = d_g.unbind(1);

    // The snapshots with their positions, replayed from the sweep's pushes.
    std::vector<std::pair<torch::Tensor, int64_t>> stack;
    int64_t position = 0;
    for (size_t i = 0; i < plan->sweep_end; ++i) {
      const ReversalAction& action = plan->actions[i];
      if (action.kind == Kind::kPush) stack.emplace_back(std::move(states[stack.size()]), position);
      position += action.steps;
    }
    states.clear();
    for (size_t i = plan->sweep_end; i < plan->actions.size(); ++i) {
      const ReversalAction& action = plan->actions[i];
      switch (action.kind) {
        case Kind::kReverse: {
          const int64_t t = position;
          const auto q_t = in.q[t], k_t = in.k[t], v_t = in.v[t], g_t = in.g[t],
                     d_o_t = d_o_steps[t];
          d_state.addcmul_(q_t.unsqueeze(-1), d_o_t.unsqueeze(-2));
          d_k_steps[t].copy_(BatchedMatmul(d_state, v_t.unsqueeze(-1)).squeeze(-1));
          d_v_steps[t].copy_(BatchedMatmul(k_t.unsqueeze(-2), d_state).squeeze(-2));
          d_g_steps[t].copy_((d_state * current).sum(-1));
          d_q_steps[t].copy_(g_t * BatchedMatmul(current, d_o_t.unsqueeze(-1)).squeeze(-1) +
                             k_t * (v_t * d_o_t).sum(-1, /*keepdim=*/true));
          d_state.mul_(g_t.unsqueeze(-1));
          current = torch::Tensor();
          break;
        }
        case Kind::kAdvance:
          current = in.Step(current, position++);  // out of place: it may be a snapshot
          for (int64_t n = 1; n < action.steps; ++n) in.StepInPlace(current, position++);
          break;
        case Kind::kPush:
          stack.emplace_back(current, position);
          break;
        case Kind::kPop:
          stack.pop_back();
          break;
        case Kind::kRestore:
          current = stack.back().first;
          position = stack.back().second;
          break;
      }
    }
    return {d_q, d_k, d_v, d_g, d_state, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor ScheduledRecurrence(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& g,
                                  torch::Tensor& state, CheckpointSchedule schedule,
                                  int64_t max_states) {
  const bool needs_graph = torch::GradMode::is_enabled() &&
                           (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                            g.requires_grad() || state.requires_grad());
  if (!needs_graph) return RecurrenceLoop(q, k, v, g, state);
  const auto dtype = PromotedType({q, k, v, g, state});
  auto outputs = ScheduledRecurrenceFunction::apply(q.to(dtype), k.to(dtype), v.to(dtype),
                                                    g.to(dtype), state.to(dtype),
                                                    static_cast<int64_t>(schedule), max_states);
  state = outputs[1];
  return outputs[0];
}

Capabilities ScheduledCheckpointing::capabilities() const {
  Capabilities caps = BaseCapabilities("memory (recompute)");
  caps.options["max_states"] =
      "states held at once: snapshots plus the current one, >= 2 (default ceil(log2 T) + 1)";
  // At the default budget each step runs about log2(T)/2 more times (bisection) or fewer
  // (binomial): more than linear work, so the O(T) allocation test does not apply.
  caps.complexity = "T log T";
  return caps;
}

void ScheduledCheckpointing::OnSetup() {
  const int64_t max_states = OptionOr("max_states", 2);
  TORCH_CHECK(max_states >= 2, "checkpointed_", CheckpointScheduleName(schedule_),
              ": max_states must be at least 2 (the start state and the current one), got ",
              max_states);
}

int64_t ScheduledCheckpointing::MaxStates(int64_t length) const {
  const int64_t fallback = static_cast<int64_t>(std::ceil(
                               std::log2(static_cast<double>(std::max<int64_t>(length, 2))))) +
                           1;
  return OptionOr("max_states", fallback);
}

StepWork ScheduledCheckpointing::Work(Mode mode, const Batch& batch, int64_t num_tokens) const {
  StepWork work = Variant::Work(mode, batch, num_tokens);
  if (mode == Mode::kTrain) {
    const int64_t length = batch.max_length();
    work.recomputed_positions =
        batch.batch_size() *
        CachedReversalPlan(schedule_, length, MaxStates(length))->recomputed_steps;
  }
  return work;
}

ForwardOutput ScheduledCheckpointing::Forward(const Batch& batch) {
  const CheckpointSchedule schedule = schedule_;
  const int64_t max_states = MaxStates(batch.max_length());
  const TimeMixer mixer = [schedule, max_states](const LayerInputs& in, const torch::Tensor& mask,
                                                 torch::Tensor& state) {
    return ScheduledRecurrence(in.q, in.k, in.v, Decay(in.decay_logits, mask), state, schedule,
                               max_states);
  };
  return ForwardBatched(Weights::View(parameters(), config().num_layers), batch, config().num_heads,
                        mixer);
}

}  // namespace seqbench::simple_rnn
