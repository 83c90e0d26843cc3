// `sdpa`: the layer's attention through ATen's at::scaled_dot_product_attention with
// is_causal, which dispatches to its own fused kernels (FlashAttention-2 or the
// memory-efficient kernel on CUDA, a blocked flash kernel on CPU) with their hand-written
// backward: what LibTorch itself offers, measured beside our `flash`. Needs LibTorch 2.1 or
// newer; on Debian's 1.13 it registers and its cases are skipped with that reason.
#include "variants/attention/model.h"
#include "variants/core/registry.h"
#include "variants/core/torch_compat.h"

namespace seqbench::attention {
namespace {

class ScaledDotProduct final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("fused kernel");
    if (!compat::kHasScaledDotProductAttention) {
      caps.unavailable =
          "sdpa needs at::scaled_dot_product_attention (LibTorch 2.1 or newer); "
          "this build has LibTorch " +
          compat::TorchVersion();
    }
    return caps;
  }

  // ATen's flash kernels skip the tiles above the diagonal and recompute in backward, as
  // `flash` does; counted the same way.
  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    return CausalWork(Variant::Work(mode, batch, num_tokens), batch, num_tokens,
                      /*scores_recomputed=*/true);
  }

  ForwardOutput Forward(const Batch& batch) override {
    // q arrives scaled by 1/sqrt(dh) already: scale 1.
    return ForwardWith(Weights::View(parameters(), config().num_layers), config(), batch,
                       [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
                         TORCH_CHECK(q.size(2) == k.size(2), "sdpa attends within one sequence");
                         return compat::CausalScaledDotProductAttention(q, k, v, 1.0);
                       });
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("sdpa", ScaledDotProduct,
                          "at::scaled_dot_product_attention, causal (LibTorch 2.1+)");

}  // namespace seqbench::attention
