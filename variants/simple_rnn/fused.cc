// `fused`: the four projections become one [D,4D] GEMM over all timesteps of a sequence,
// hoisted out of the time loop (as is the output projection); only the recurrence itself
// stays a loop. Still one sequence at a time, so the gain over `baseline` isolates GEMM
// fusion and hoisting from batching.
#include "variants/core/registry.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

class Fused final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("GEMM fusion"); }

  // One sequence at a time, each to its own length: padding is never computed.
  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    StepWork work = Variant::Work(mode, batch, num_tokens);
    if (mode != Mode::kGenerate) work.positions = work.head_positions = batch.NumTokens();
    return work;
  }

  ForwardOutput Forward(const Batch& batch) override {
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const auto lengths = batch.lengths.to(torch::kCPU);
    const TimeMixer loop = StepLoopMixer();
    std::vector<torch::Tensor> padded_logits;
    torch::Tensor loss_sum = torch::zeros({}, weights.embedding.options());
    int64_t num_targets = 0;
    for (int64_t b = 0; b < batch.batch_size(); ++b) {
      const int64_t length = lengths[b].item<int64_t>();
      const Batch sequence{batch.tokens[b].slice(0, 0, length).unsqueeze(0),  // [1,T_b]
                           lengths.slice(0, b, b + 1)};
      std::vector<torch::Tensor> states;
      const auto h =
          RunLayers(weights, sequence.tokens, torch::Tensor(), config().num_heads, loop, states);
      const auto logits = Head(h, weights);  // [1,T_b,V]
      loss_sum = loss_sum + NextTokenLoss(logits, sequence) * (length - 1);
      num_targets += length - 1;
      padded_logits.push_back(
          torch::constant_pad_nd(logits.squeeze(0), {0, 0, 0, batch.max_length() - length}));
    }
    return {torch::stack(padded_logits, 0), loss_sum / std::max<int64_t>(num_targets, 1)};
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("fused", Fused,
                          "one [D,4D] GEMM per sequence hoisted out of the time loop");

}  // namespace seqbench::simple_rnn
