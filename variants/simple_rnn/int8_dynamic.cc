// `int8_dynamic`: `stepwise` inference with every weight matrix in int8 (dynamic
// quantization, variants/core/int8_linear.h): each layer's fused [D,4D] projection and its
// [D,D] output projection, and the [D,V] head. The embedding (a gather), the norms, the
// gate bias and the recurrence stay float32. The products read a quarter of the weight
// bytes and run in the quantized engine's integer kernels, and the variant keeps no
// float32 copy of them. It is lossy by design, so its tolerance against
// the baseline is the int8 error measured (below), not float32 rounding; and because the
// input's scale is
// taken per call over the whole batch, a sequence's logits depend slightly on what else is
// in its batch. CPU, float32, forward only in the harness (there is no int8 training here).
#include "variants/core/int8_linear.h"
#include "variants/core/registry.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

class Int8Dynamic final : public Variant, public IncrementalDecoder {
 public:
  Capabilities capabilities() const override {
    // Forward only in the harness (why: Int8InferenceCapabilities); the incremental
    // decoder is tested against Forward() instead.
    Capabilities caps = Int8InferenceCapabilities(BaseCapabilities("quantization"));
    // The int8 error on random weights, measured with seqbench verify (B=8, T=256, H=8):
    // the largest logit error 0.67 at D=64, 0.39 at 256, 0.28 at 512, 0.33 at 1024 (the
    // loss moved by 0.0015 nats or less). A bound for gross errors, not for rounding.
    caps.float32 = {/*rtol=*/0.25, /*atol=*/0.5};
    return caps;
  }

  ForwardOutput Forward(const Batch& batch) override {
    const bool has_padding = batch.lengths.min().item<int64_t>() < batch.max_length();
    const torch::Tensor mask = has_padding ? batch.PaddingMask() : torch::Tensor();
    std::vector<torch::Tensor> states;
    const auto logits = Head(RunLayers(batch.tokens, mask, states));
    return {logits, NextTokenLoss(logits, batch.tokens, mask)};
  }

  torch::Tensor Prefill(const torch::Tensor& prompt, int64_t /*max_steps*/,
                        DecodeState& state) override {
    TORCH_CHECK(prompt.dim() == 2 && prompt.size(1) > 0, "prompt must be [B,P] with P > 0");
    state.tensors.clear();
    return Head(RunLayers(prompt, torch::Tensor(), state.tensors).select(1, -1));
  }

  torch::Tensor Step(const torch::Tensor& token, DecodeState& state) override {
    TORCH_CHECK(!state.tensors.empty(), "Step() needs a state from Prefill()");
    return Head(RunLayers(token.unsqueeze(1), torch::Tensor(), state.tensors).squeeze(1));
  }

  torch::Tensor Generate(const torch::Tensor& prompt, int64_t num_tokens) override {
    return GreedyDecode(*this, prompt, num_tokens);
  }

 protected:
  void OnSetup() override {
    TORCH_CHECK(dtype() == torch::kFloat32 && device().is_cpu(),
                "int8_dynamic runs in float32 on the CPU");
    const Weights weights = Weights::View(parameters(), config().num_layers);
    layers_.clear();
    for (const LayerWeights& layer : weights.layers) {
      layers_.push_back({Int8Linear(FusedProjectionWeight(layer)), Int8Linear(layer.w_o)});
    }
    head_ = Int8Linear(weights.w_out);
    // Setup() gave this variant a float32 copy of every weight, for training, which it has
    // not got: once in int8, the matrices' float32 copies are read by nothing, so they are
    // freed (their tensors left empty; parameters() share them), and the variant holds
    // what int8 inference holds: int8 matrices with their scales, and the float32
    // embedding, gains and gate biases.
    torch::NoGradGuard no_grad;
    for (const LayerWeights& layer : weights.layers) {
      for (const torch::Tensor& matrix : {layer.w_q, layer.w_k, layer.w_v, layer.w_g, layer.w_o})
        matrix.set_();
    }
    weights.w_out.set_();
  }

 private:
  struct Int8Layer {
    Int8Linear projections;  // [D,4D]: q, k, v, decay logits
    Int8Linear output;       // [D,D]
  };

  // The residual stream after every layer: simple_rnn::RunLayers with the int8 products.
  // tokens: [B,T]; mask: [B,T] or undefined; states: one [B,H,dh,dh] per layer, carried in
  // and out (empty: zeros). -> h: [B,T,D]
  torch::Tensor RunLayers(const torch::Tensor& tokens, const torch::Tensor& mask,
                          std::vector<torch::Tensor>& states) const {
    torch::NoGradGuard no_grad;
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const int64_t heads = config().num_heads;
    static const TimeMixer mixer = StepLoopMixer();
    return simple_rnn::RunLayers(
        weights, tokens, heads,
        [&](const torch::Tensor& h, int64_t l, torch::Tensor& state) {
          const auto u = RmsNorm(h, weights.layers[l].norm);
          const LayerInputs inputs =
              SplitProjections(layers_[l].projections(u), weights.layers[l].b_g, heads, mask);
          const auto o = mixer(inputs, mask, state);  // [B,T,H,dh]
          return h + layers_[l].output(o.flatten(-2));
        },
        states);
  }

  // logits = RMSNorm(h)·W_out in int8. h: [...,D] -> [...,V]
  torch::Tensor Head(const torch::Tensor& h) const {
    torch::NoGradGuard no_grad;
    return head_(RmsNorm(h, parameters()["norm_out"]));
  }

  std::vector<Int8Layer> layers_;
  Int8Linear head_;
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("int8_dynamic", Int8Dynamic,
                          "stepwise with int8 weight matrices (dynamic quantization)");

}  // namespace seqbench::simple_rnn
