// `scan`: no loop over timesteps. The sequence is cut into chunks of C positions; inside
// a chunk the recurrence is evaluated in closed form with attention-like matmuls, and
// only one state per chunk is passed on (a loop over T/C chunks of elementwise work), as
// in Gated Linear Attention / flash-linear-attention's chunkwise form.
// The chunkwise form itself is variants/simple_rnn/chunkwise.h (stepwise prefills with it).
#include <torch/torch.h>

#include <cstdint>

#include "variants/core/language_model.h"
#include "variants/core/registry.h"
#include "variants/simple_rnn/chunkwise.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

class Scan final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("parallel scan");
    caps.float32 = {2e-4, 2e-5};  // sums in another order than the step loop
    caps.float64 = {1e-9, 1e-11};
    caps.options["chunk_size"] = "positions per chunk (default 16)";
    return caps;
  }

  // Each layer: the fused norm, one [D,4D] GEMM, the chunkwise form straight from its
  // output, W_o; then the fused head. The same model as `batched`, whose norms, splits,
  // scales, masks and decays ATen runs op by op (and `pytorch_chunk` likewise in Python).
  ForwardOutput Forward(const Batch& batch) override {
    const int64_t chunk = OptionOr("chunk_size", kDefaultChunkSize);
    TORCH_CHECK(chunk >= 1, "scan: chunk_size must be at least 1, got ", chunk);
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const int64_t heads = config().num_heads;
    return ForwardWithFusedHead(
        weights, batch, heads, [&](const torch::Tensor& x, int64_t layer, torch::Tensor& state) {
          const LayerWeights& w = weights.layers[layer];
          const torch::Tensor projected =
              torch::matmul(FusedRmsNorm(x, w.norm), FusedProjectionWeight(w));  // [B,T,4D]
          return x + torch::matmul(ChunkwiseFromProjections(projected, w.b_g, heads, batch.lengths,
                                                            state, chunk),
                                   w.w_o);
        });
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("scan", Scan,
                          "chunkwise parallel form: matmuls inside chunks, a state per chunk");

}  // namespace seqbench::simple_rnn
