// `checkpointed`: `batched` with gradient checkpointing over time, the uniform schedule.
// The time loop runs in segments of K steps inside a custom autograd function that saves
// only the state at the segment's start (and its inputs, which the projections keep alive
// anyway) and re-runs the segment in backward. The last segment runs as `batched` does,
// keeping its states, since backward would need them first and at once. Activation memory
// for the states drops from T to about T/K + K of [B,H,dh,dh], at the price of running the
// recurrence of all segments but the last forward twice. K comes from `checkpoint_every`,
// or from a budget of states (`max_states`) as the K that fits it and recomputes least.
#include <cmath>

#include "variants/core/registry.h"
#include "variants/simple_rnn/checkpoint_schedule.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One segment of the recurrence. state: [B,H,dh,dh]; q, k, v, g: [B,K,H,dh]
// -> {o: [B,K,H,dh], state at the segment's end}
class SegmentRecurrence : public torch::autograd::Function<SegmentRecurrence> {
 public:
  static variable_list forward(AutogradContext* ctx, torch::Tensor state, torch::Tensor q,
                               torch::Tensor k, torch::Tensor v, torch::Tensor g) {
    ctx->save_for_backward({state, q, k, v, g});
    torch::Tensor end_state = state;
    torch::Tensor o = RecurrenceLoop(q, k, v, g, end_state);
    return {o, end_state};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    variable_list inputs;
    for (const auto& saved : ctx->get_saved_variables()) {
      inputs.push_back(saved.detach().requires_grad_(true));
    }
    torch::AutoGradMode enable_grad(true);
    torch::Tensor end_state = inputs[0];
    // batched's recurrence, so that checkpointed is batched plus the recomputation.
    torch::Tensor o = RecurrenceThroughTime(inputs[1], inputs[2], inputs[3], inputs[4], end_state);
    variable_list outputs, grads;
    const variable_list recomputed{o, end_state};
    for (size_t i = 0; i < recomputed.size(); ++i) {
      if (grad_outputs[i].defined()) {  // the last segment's end state may feed nothing
        outputs.push_back(recomputed[i]);
        grads.push_back(grad_outputs[i]);
      }
    }
    return torch::autograd::grad(outputs, inputs, grads, /*retain_graph=*/false,
                                 /*create_graph=*/false, /*allow_unused=*/true);
  }
};

class Checkpointed final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("memory (recompute)");
    caps.options["checkpoint_every"] =
        "K, timesteps per checkpointed segment (default ceil(sqrt(T)))";
    caps.options["max_states"] =
        "instead of K: the budget of states held at once, segment starts plus one segment's "
        "states (ceil(T/K) + K <= max_states; at least about 2 sqrt(T))";
    return caps;
  }

  std::string SkipReason(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    if (!HasBudget()) return "";
    const int64_t budget = OptionOr("max_states", 0);
    if (UniformSegmentLength(batch.max_length(), budget)) return "";
    return "max_states = " + std::to_string(budget) +
           " is below what uniform segments need at T = " + std::to_string(batch.max_length()) +
           " (ceil(T/K) + K states for some K)";
  }

  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    StepWork work = Variant::Work(mode, batch, num_tokens);
    if (mode != Mode::kTrain) return work;
    const int64_t length = batch.max_length();
    const int64_t every = SegmentLength(length);
    const int64_t last_segment = length - (length - 1) / every * every;
    work.recomputed_positions = batch.batch_size() * (length - last_segment);
    return work;
  }

  ForwardOutput Forward(const Batch& batch) override {
    const int64_t every = SegmentLength(batch.max_length());
    const TimeMixer segments = [every](const LayerInputs& in, const torch::Tensor& mask,
                                       torch::Tensor& state) {
      const auto g = Decay(in.decay_logits, mask);
      // Split once (its backward is one cat): a narrow per segment would scatter into a
      // zero tensor the size of the whole input for every segment.
      const auto qs = in.q.split(every, 1), ks = in.k.split(every, 1), vs = in.v.split(every, 1),
                 gs = g.split(every, 1);
      std::vector<torch::Tensor> outputs;
      const size_t last = qs.size() - 1;
      for (size_t segment = 0; segment < last; ++segment) {
        auto result =
            SegmentRecurrence::apply(state, qs[segment], ks[segment], vs[segment], gs[segment]);
        outputs.push_back(result[0]);
        state = result[1];
      }
      outputs.push_back(RecurrenceThroughTime(qs[last], ks[last], vs[last], gs[last], state));
      return torch::cat(outputs, 1);
    };
    return ForwardBatched(Weights::View(parameters(), config().num_layers), batch,
                          config().num_heads, segments);
  }

 protected:
  void OnSetup() override {
    TORCH_CHECK(!(HasBudget() && OptionOr("checkpoint_every", 0) != 0),
                "checkpointed: set checkpoint_every or max_states, not both");
  }

 private:
  bool HasBudget() const { return OptionOr("max_states", 0) != 0; }

  int64_t SegmentLength(int64_t length) const {
    if (HasBudget()) {
      const auto fitting = UniformSegmentLength(length, OptionOr("max_states", 0));
      TORCH_CHECK(fitting, "checkpointed: max_states = ", OptionOr("max_states", 0),
                  " fits no uniform segment length at T = ", length);
      return *fitting;
    }
    const int64_t every =
        OptionOr("checkpoint_every",
                 static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(length)))));
    TORCH_CHECK(every >= 1, "checkpointed: checkpoint_every must be at least 1, got ", every);
    return every;
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("checkpointed", Checkpointed,
                          "batched + gradient checkpointing every K steps (custom autograd)");

}  // namespace seqbench::simple_rnn
