// `checkpointed`: `batched` with gradient checkpointing over time. The time loop runs in
// segments of K steps inside a custom autograd function that saves only the state at the
// segment's start (and its inputs, which the projections keep alive anyway) and re-runs
// the segment in backward. Activation memory for the states drops from T to T/K of
// [B,H,dh,dh], at the price of running the recurrence forward twice.
#include <cmath>

#include "variants/core/registry.h"
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
    return caps;
  }

  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    return WithRecomputedRecurrence(Variant::Work(mode, batch, num_tokens));
  }

  ForwardOutput Forward(const Batch& batch) override {
    const int64_t length = batch.max_length();
    const int64_t every =
        OptionOr("checkpoint_every",
                 static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(length)))));
    TORCH_CHECK(every >= 1, "checkpointed: checkpoint_every must be at least 1, got ", every);
    const TimeMixer segments = [every](const LayerInputs& in, const torch::Tensor& mask,
                                       torch::Tensor& state) {
      const auto g = Decay(in.decay_logits, mask);
      // Split once (its backward is one cat): a narrow per segment would scatter into a
      // zero tensor the size of the whole input for every segment.
      const auto qs = in.q.split(every, 1), ks = in.k.split(every, 1), vs = in.v.split(every, 1),
                 gs = g.split(every, 1);
      std::vector<torch::Tensor> outputs;
      for (size_t segment = 0; segment < qs.size(); ++segment) {
        auto result =
            SegmentRecurrence::apply(state, qs[segment], ks[segment], vs[segment], gs[segment]);
        outputs.push_back(result[0]);
        state = result[1];
      }
      return torch::cat(outputs, 1);
    };
    return ForwardBatched(Weights::View(parameters(), config().num_layers), batch,
                          config().num_heads, segments);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("checkpointed", Checkpointed,
                          "batched + gradient checkpointing every K steps (custom autograd)");

}  // namespace seqbench::simple_rnn
