// `layer_checkpointed`: `batched` with activation checkpointing every N layers
// (CheckpointedSegment): a train step keeps only the residual stream entering each segment of
// `every` layers, and backward runs each segment forward again (projections, norms and
// recurrence) before going through it. Against checkpointing over time (`checkpointed`),
// which re-runs only the recurrence inside every layer, this saves the projections' and
// norms' activations too, at the cost of one more forward of every layer.
#include "variants/core/registry.h"
#include "variants/core/segment_checkpoint.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

class LayerCheckpointed final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("memory (recompute)");
    caps.options = {{"every",
                     "layers per checkpointed segment: backward keeps the residual stream "
                     "entering each segment and re-runs its layers (1)"}};
    return caps;
  }

  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    // Every layer's time mixing runs again in backward. The family's cost counts a
    // recomputed position as its recurrence only (what `checkpointed` re-runs), so this
    // variant's FLOPs leave out its recomputed projections, 10·D² per position and layer:
    // its GFLOP/s is understated by that much.
    return WithRecomputedRecurrence(Variant::Work(mode, batch, num_tokens));
  }

  ForwardOutput Forward(const Batch& batch) override {
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const bool has_padding = batch.lengths.min().item<int64_t>() < batch.max_length();
    const torch::Tensor mask = has_padding ? batch.PaddingMask() : torch::Tensor();
    const int64_t num_heads = config().num_heads, num_layers = config().num_layers;
    const int64_t every = OptionOr("every", 1);
    torch::Tensor h = torch::embedding(weights.embedding, batch.tokens);  // [B,T,D]
    for (int64_t first = 0; first < num_layers; first += every) {
      const std::vector<LayerWeights> segment_layers(
          weights.layers.begin() + first,
          weights.layers.begin() + std::min(num_layers, first + every));
      std::vector<torch::Tensor> segment_parameters;
      for (const LayerWeights& l : segment_layers) {
        segment_parameters.insert(segment_parameters.end(),
                                  {l.norm, l.w_q, l.w_k, l.w_v, l.w_g, l.b_g, l.w_o});
      }
      const SegmentFn segment = [segment_layers, mask, num_heads](const torch::Tensor& input) {
        torch::Tensor x = input;
        for (const LayerWeights& layer : segment_layers) {
          const int64_t head_width = x.size(-1) / num_heads;
          torch::Tensor state =
              torch::zeros({x.size(0), num_heads, head_width, head_width}, x.options());
          x = LayerForward(x, layer, mask, num_heads, ThroughTimeMixer(), state);
        }
        return std::vector<torch::Tensor>{x};
      };
      h = CheckpointedSegment(segment, h, segment_parameters)[0];
    }
    auto logits = Head(h, weights);
    auto loss = NextTokenLoss(logits, batch.tokens, mask);
    return {logits, loss};
  }

 protected:
  void OnSetup() override {
    TORCH_CHECK(OptionOr("every", 1) >= 1, "layer_checkpointed: every must be >= 1 layer, got ",
                OptionOr("every", 1));
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("layer_checkpointed", LayerCheckpointed,
                          "batched + activation checkpointing every N layers (re-runs whole "
                          "layers in backward)");

}  // namespace seqbench::simple_rnn
