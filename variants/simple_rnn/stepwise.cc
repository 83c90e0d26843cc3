// `stepwise`: incremental inference. Prefill runs the prompt once and keeps each layer's
// [B,H,dh,dh] state; every further token is one step of the recurrence on that state, so
// N generated tokens cost O(N) work instead of re-running the growing prefix (O(N*(P+N))).
// The prompt is known whole, so the prefill evaluates it in the chunkwise parallel form
// (`scan`'s, chunkwise.h), as recurrent decoders with a parallel form do (RetNet, GLA):
// a step loop over P positions is P dependent launches on a GPU, the chunkwise form P/C.
// Option prefill_chunk = 0 prefills with the step loop instead.
// Forward and train run the prefill over the whole batch, i.e. `batched`.
#include "variants/core/registry.h"
#include "variants/simple_rnn/chunkwise.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

class Stepwise final : public Variant, public IncrementalDecoder {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("incremental inference");
    caps.options["prefill_chunk"] =
        "positions per chunk of the chunkwise prefill (default 16; 0: the step loop)";
    return caps;
  }

  // Generate: the prompt once (logits of its last position only), then one position per
  // new token after the first.
  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    StepWork work = Variant::Work(mode, batch, num_tokens);
    if (mode == Mode::kGenerate) {
      work.positions = batch.batch_size() * (batch.max_length() + num_tokens - 1);
      work.head_positions = batch.batch_size() * num_tokens;
    }
    return work;
  }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardBatched(Weights::View(parameters(), config().num_layers), batch,
                          config().num_heads, StepLoopMixer());
  }

  // A recurrence's state has the same size whatever follows: max_steps is not needed.
  torch::Tensor Prefill(const torch::Tensor& prompt, int64_t /*max_steps*/,
                        DecodeState& state) override {
    TORCH_CHECK(prompt.dim() == 2 && prompt.size(1) > 0, "prompt must be [B,P] with P > 0");
    state.tensors.clear();
    const int64_t chunk = OptionOr("prefill_chunk", kDefaultChunkSize);
    TORCH_CHECK(chunk >= 0, "stepwise: prefill_chunk must be 0 or more, got ", chunk);
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const auto h = RunLayers(weights, prompt, torch::Tensor(), config().num_heads,
                             chunk > 0 ? ChunkwiseMixer(chunk) : StepLoopMixer(), state.tensors);
    return Head(h.select(1, -1), weights);
  }

  torch::Tensor Step(const torch::Tensor& token, DecodeState& state) override {
    TORCH_CHECK(!state.tensors.empty(), "Step() needs a state from Prefill()");
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const auto h = RunLayers(weights, token.unsqueeze(1), torch::Tensor(), config().num_heads,
                             StepLoopMixer(), state.tensors);
    return Head(h.squeeze(1), weights);
  }

  torch::Tensor Generate(const torch::Tensor& prompt, int64_t num_tokens) override {
    return GreedyDecode(*this, prompt, num_tokens);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("stepwise", Stepwise,
                          "incremental decoding: prefill once, then O(1) work per new token");

}  // namespace seqbench::simple_rnn
