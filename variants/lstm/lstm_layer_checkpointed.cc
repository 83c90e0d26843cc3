// `lstm_layer_checkpointed`: `lstm_fused` with activation checkpointing every N layers
// (CheckpointedSegment): a train step keeps only the sequence entering each segment of
// `every` layers, and backward runs the segment's layers forward again before going
// through them. Memory: one [B,T,H] sequence per segment instead of every layer's gates and
// states; time: one more forward of every layer.
#include "variants/core/registry.h"
#include "variants/core/segment_checkpoint.h"
#include "variants/lstm/model.h"

namespace seqbench::lstm {
namespace {

class LstmLayerCheckpointed final : public LstmVariant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = LstmCapabilities("memory (recompute)");
    caps.options = {{"every",
                     "layers per checkpointed segment: backward keeps the sequence entering "
                     "each segment and re-runs its layers (1)"}};
    return caps;
  }

  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    StepWork work = Variant::Work(mode, batch, num_tokens);
    // Every layer runs forward again in backward; the family counts a recomputed position
    // as a layer's whole forward (StepCostOf), which is what is re-run.
    if (mode == Mode::kTrain) work.recomputed_positions = work.positions;
    return work;
  }

  LstmOutputs Run(const torch::Tensor& inputs, const torch::Tensor& mask) override {
    const Weights w = weights();
    const int64_t num_layers = static_cast<int64_t>(w.layers.size());
    const int64_t every = OptionOr("every", 1);
    torch::Tensor x = inputs;  // [B,T,H]: the segment's input sequence
    std::vector<torch::Tensor> h_n, c_n;
    for (int64_t first = 0; first < num_layers; first += every) {
      const std::vector<LayerWeights> segment_layers(
          w.layers.begin() + first, w.layers.begin() + std::min(num_layers, first + every));
      std::vector<torch::Tensor> segment_parameters;
      for (const LayerWeights& l : segment_layers) {
        segment_parameters.insert(segment_parameters.end(),
                                  {l.weight_ih, l.weight_hh, l.bias_ih, l.bias_hh});
      }
      // -> {the segment's output sequence, its layers' h_n [N,B,H], their c_n [N,B,H]}
      const SegmentFn segment = [segment_layers, mask](const torch::Tensor& input) {
        torch::Tensor sequence = input;
        std::vector<torch::Tensor> hs, cs;
        for (const LayerWeights& layer : segment_layers) {
          LayerOutputs out = FusedLayer(sequence, layer, mask);
          sequence = out.outputs;
          hs.push_back(out.h);
          cs.push_back(out.c);
        }
        return std::vector<torch::Tensor>{sequence, torch::stack(hs, 0), torch::stack(cs, 0)};
      };
      const std::vector<torch::Tensor> outputs =
          CheckpointedSegment(segment, x, segment_parameters);
      x = outputs[0];
      h_n.push_back(outputs[1]);
      c_n.push_back(outputs[2]);
    }
    return {x, torch::cat(h_n, 0), torch::cat(c_n, 0)};
  }

 protected:
  void OnSetup() override {
    TORCH_CHECK(OptionOr("every", 1) >= 1,
                "lstm_layer_checkpointed: every must be >= 1 layer, got ", OptionOr("every", 1));
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("lstm_layer_checkpointed", LstmLayerCheckpointed,
                          "lstm_fused + activation checkpointing every N layers (re-runs whole "
                          "layers in backward)");

}  // namespace seqbench::lstm
