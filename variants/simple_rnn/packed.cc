// `packed`: `fused_recurrent` without a product for any padded position. Every per-position
// piece of the step (the embedding, each layer's norm, its [D,4D] and [D,D] products and
// residual, the head's norm and [D,V] product, the loss) runs on the N real tokens of the
// batch, gathered once as rows of an [N,D] residual stream (FlashAttention's varlen layout:
// no padding and no sort). The recurrence reads the packed rows in place
// (PackedGatedRecurrence: sequence b's steps are consecutive rows, from the sum of the
// lengths before it), so no layer scatters into or gathers from the padded grid; only the
// returned logits are laid out on it. With lengths uniform in [T/2, T] a quarter of the
// positions are padding: that quarter of the whole step goes.
#include <algorithm>

#include "variants/core/language_model.h"
#include "variants/core/registry.h"
#include "variants/simple_rnn/fused_recurrent.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

// Where the real tokens sit in the flattened [B·T] grid, and their next-token targets.
struct Packing {
  torch::Tensor rows;        // [N] int64: b·T + t of each real position, ascending
  torch::Tensor has_target;  // [N] bool: the sequence goes on after the position
  torch::Tensor targets;     // [M] int64: the next tokens, for the positions that have one
  int64_t grid = 0;          // B·T
};

Packing PackingOf(const Batch& batch) {
  Packing packing;
  const torch::Tensor mask = batch.PaddingMask();  // [B,T]
  const int64_t length = batch.max_length();
  packing.grid = mask.numel();
  packing.rows = mask.reshape({-1}).nonzero().reshape({-1});
  const torch::Tensor next = packing.rows + 1;
  const torch::Tensor in_sequence = (packing.rows % length) < (length - 1);
  const torch::Tensor next_real =
      mask.reshape({-1}).index_select(0, next.clamp_max(packing.grid - 1));
  packing.has_target = in_sequence & next_real;
  packing.targets =
      batch.tokens.reshape({-1}).index_select(0, next.masked_select(packing.has_target));
  return packing;
}

// x: [N,C] rows of the packed grid -> [B,T,C] with zeros at padding.
torch::Tensor Unpack(const torch::Tensor& x, const Packing& packing, const Batch& batch) {
  const torch::Tensor grid = torch::zeros({packing.grid, x.size(1)}, x.options());
  return grid.index_copy(0, packing.rows, x).reshape({batch.batch_size(), batch.max_length(), -1});
}

// One layer on the packed residual stream h: [N,D] -> [N,D]; `state` [B,H,dh,dh] carried.
torch::Tensor PackedLayer(const torch::Tensor& h, const LayerWeights& layer, int64_t num_heads,
                          const Batch& batch, torch::Tensor& state) {
  const torch::Tensor projected =
      torch::matmul(FusedRmsNorm(h, layer.norm), FusedProjectionWeight(layer));  // [N,4D]
  const torch::Tensor o =
      PackedGatedRecurrence(projected, layer.b_g, num_heads, batch.lengths, state);  // [N,D]
  return h + torch::matmul(o, layer.w_o);
}

class Packed final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("padding skipped (packed)");
    caps.devices = {torch::kCPU};  // fused_recurrent's kernel is host code
    return caps;
  }

  // Everything runs on real tokens only; the kernel's recurrence runs forward twice in
  // train (fused_recurrent's recompute).
  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    StepWork work = Variant::Work(mode, batch, num_tokens);
    if (mode != Mode::kGenerate) work.positions = work.head_positions = batch.NumTokens();
    return WithRecomputedRecurrence(work);
  }

  ForwardOutput Forward(const Batch& batch) override {
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const Packing packing = PackingOf(batch);
    const int64_t num_heads = config().num_heads;
    const int64_t width = config().width;
    torch::Tensor h = torch::embedding(
        weights.embedding, batch.tokens.reshape({-1}).index_select(0, packing.rows));  // [N,D]
    for (const LayerWeights& layer : weights.layers) {
      torch::Tensor state = torch::zeros(
          {batch.batch_size(), num_heads, width / num_heads, width / num_heads}, h.options());
      h = PackedLayer(h, layer, num_heads, batch, state);
    }
    const torch::Tensor logits =
        FusedLanguageModelHead(h, weights.norm_out, weights.w_out);  // [N,V]
    const torch::Tensor losses = torch::nn::functional::cross_entropy(
        logits.index({packing.has_target}), packing.targets,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    const double count = std::max<double>(1.0, static_cast<double>(packing.targets.numel()));
    return {Unpack(logits, packing, batch), losses.sum() / count};
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT(
    "packed", Packed,
    "fused_recurrent with every product on real tokens only (no padded position computed)");

}  // namespace seqbench::simple_rnn
