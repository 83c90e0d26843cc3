// `lstm_int8_dynamic`: `lstm_fused` inference with every weight matrix in int8 (dynamic
// quantization, variants/core/int8_linear.h), as PyTorch's dynamically quantized LSTM
// (torch.ao.nn.quantized.dynamic.LSTM) holds it: each layer's input projection W_ih and
// recurrent W_hh ([H,4H] each in y = x·W), and the [H,V] head. The embedding, the norm,
// the biases and the cell's gate arithmetic stay float32. The input projection of all T
// steps is one int8 GEMM; the recurrent product quantizes h afresh at every step, as
// PyTorch's does, since h changes every step. It is lossy by design: its tolerance against
// the baseline is the int8 error measured (below), not float32 rounding; and because an
// input's scale is taken per call over the whole batch, a sequence's logits depend
// slightly on what else is in its batch. CPU, float32, forward only in the harness.
#include "variants/core/int8_linear.h"
#include "variants/core/registry.h"
#include "variants/lstm/model.h"

namespace seqbench::lstm {
namespace {

class LstmInt8Dynamic final : public LstmVariant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = Int8InferenceCapabilities(LstmCapabilities("quantization"));
    // The int8 error on random weights, measured by suites/int8_lstm.toml against
    // lstm_fused's float64 reference (B=8, T=256, L=2): the largest logit error 0.089 at
    // H=256, 0.10 at 512, 0.098 at 1024, a quarter to a third of the SimpleRNN's int8_dynamic at
    // the same sizes. The bound is twice that: for gross errors, not for rounding.
    caps.float32 = {/*rtol=*/0.05, /*atol=*/0.2};
    return caps;
  }

  ForwardOutput Forward(const Batch& batch) override {
    torch::NoGradGuard no_grad;
    const LstmOutputs out = RunBatch(batch);
    const auto logits = head_(RmsNorm(out.outputs, parameters()["norm_out"]));
    return {logits, NextTokenLoss(logits, batch)};
  }

  // inputs: [B,T,H] embedded; mask: [B,T] bool or undefined -> the stack's outputs.
  LstmOutputs Run(const torch::Tensor& inputs, const torch::Tensor& mask) override {
    torch::NoGradGuard no_grad;
    torch::Tensor x = inputs;  // [B,T,H]: this layer's input sequence
    std::vector<torch::Tensor> h_n, c_n;
    for (const Int8Layer& layer : layers_) {
      const LayerOutputs out =
          RunSteps(layer.input(x) + layer.bias, mask,
                   [&](const torch::Tensor& projected_t, const torch::Tensor& h) {
                     return projected_t + layer.recurrent(h);
                   });
      x = out.outputs;
      h_n.push_back(out.h);
      c_n.push_back(out.c);
    }
    return {x, torch::stack(h_n, 0), torch::stack(c_n, 0)};
  }

 protected:
  void OnSetup() override {
    TORCH_CHECK(dtype() == torch::kFloat32 && device().is_cpu(),
                "lstm_int8_dynamic runs in float32 on the CPU");
    const Weights w = weights();
    layers_.clear();
    for (const LayerWeights& layer : w.layers) {
      layers_.push_back({Int8Linear(layer.weight_ih.t()), Int8Linear(layer.weight_hh.t()),
                         layer.bias_ih + layer.bias_hh});
    }
    head_ = Int8Linear(w.w_out);
    // As in int8_dynamic: the float32 copies of the matrices are read by nothing once they
    // are in int8, so they are freed (their tensors left empty; parameters() share them).
    torch::NoGradGuard no_grad;
    for (const LayerWeights& layer : w.layers) {
      layer.weight_ih.set_();
      layer.weight_hh.set_();
    }
    w.w_out.set_();
  }

 private:
  struct Int8Layer {
    Int8Linear input;      // W_ihᵀ: [H,4H]
    Int8Linear recurrent;  // W_hhᵀ: [H,4H]
    torch::Tensor bias;    // b_ih + b_hh: [4H], float32
  };

  std::vector<Int8Layer> layers_;
  Int8Linear head_;
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("lstm_int8_dynamic", LstmInt8Dynamic,
                          "lstm_fused with int8 weight matrices (dynamic quantization)");

}  // namespace seqbench::lstm
