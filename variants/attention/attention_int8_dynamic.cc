// `attention_int8_dynamic`: `naive` inference with every weight matrix in int8 (dynamic
// quantization, variants/core/int8_linear.h): each layer's q, k, v and output projections
// ([D,D]), its feed-forward block's two matrices, and the [D,V] head. The embedding, the
// norms, the rotary embedding and attention itself (q·kᵀ, softmax, ·v, whose operands are
// activations, not weights) stay float32. Attention's own products are the part of the step
// that int8 leaves alone, so int8's share of the step grows with D and shrinks with T. It is
// lossy by design:
// its tolerance against the baseline is the int8 error measured (below), not float32
// rounding; and because an input's scale is taken per call over the whole batch, a
// sequence's logits depend slightly on what else is in its batch. CPU, float32, forward
// only in the harness.
#include <array>

#include "variants/attention/model.h"
#include "variants/core/int8_linear.h"
#include "variants/core/registry.h"

namespace seqbench::attention {
namespace {

class Int8Dynamic final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = Int8InferenceCapabilities(BaseCapabilities("quantization"));
    caps.options = {
        {"score_budget_mib", "as naive's (" + std::to_string(kDefaultScoreBudgetMiB) + ")"}};
    // The int8 error on random weights, measured by suites/int8_attention.toml against
    // naive's float64 reference (B=8, T=256, L=2, H=8): the largest logit error 0.106 at
    // D=256, 0.112 at 512 and at 1024; LibTorch 2.11's FBGEMM gave 0.216 on the test's
    // D=64 model (ci/gpu/README.md, fourth lease). The bound is above both: for gross
    // errors (a wrong scale or layout moves logits by their own size), not for rounding.
    caps.float32 = {/*rtol=*/0.05, /*atol=*/0.3};
    return caps;
  }

  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    return CausalWork(Variant::Work(mode, batch, num_tokens), batch, num_tokens);
  }

  std::string SkipReason(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    return NaiveBudgetReason(
        NaiveScoreBytes(config(), mode, batch.batch_size(), batch.max_length(), dtype()),
        OptionOr("score_budget_mib", kDefaultScoreBudgetMiB));
  }

  ForwardOutput Forward(const Batch& batch) override {
    torch::NoGradGuard no_grad;
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const auto h = RunLayers(weights, config(), batch.tokens, NaiveAttention, /*cache=*/nullptr,
                             [this](size_t layer, Matrix matrix, const torch::Tensor& x) {
                               return layers_[layer][Index(matrix)](x);
                             });
    const auto logits = head_(RmsNorm(h, weights.norm_out));
    return {logits, NextTokenLoss(logits, batch)};
  }

 protected:
  void OnSetup() override {
    TORCH_CHECK(dtype() == torch::kFloat32 && device().is_cpu(),
                "attention_int8_dynamic runs in float32 on the CPU");
    const Weights weights = Weights::View(parameters(), config().num_layers);
    layers_.clear();
    for (const LayerWeights& layer : weights.layers) {
      Int8Layer& int8 = layers_.emplace_back();
      for (const Matrix matrix : kMatrices)
        int8[Index(matrix)] = Int8Linear(MatrixOf(layer, matrix));
    }
    head_ = Int8Linear(weights.w_out);
    // As in int8_dynamic: the float32 copies of the matrices are read by nothing once they
    // are in int8, so they are freed (their tensors left empty; parameters() share them).
    torch::NoGradGuard no_grad;
    for (const LayerWeights& layer : weights.layers) {
      for (const Matrix matrix : kMatrices) MatrixOf(layer, matrix).set_();
    }
    weights.w_out.set_();
  }

 private:
  // One layer's matrices, at Index(matrix).
  using Int8Layer = std::array<Int8Linear, kMatrices.size()>;
  static size_t Index(Matrix matrix) { return static_cast<size_t>(matrix); }

  std::vector<Int8Layer> layers_;
  Int8Linear head_;
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("attention_int8_dynamic", Int8Dynamic,
                          "naive with int8 weight matrices (dynamic quantization)");

}  // namespace seqbench::attention
