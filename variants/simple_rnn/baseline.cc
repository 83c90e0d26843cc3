// `baseline`: the literal reference. One sequence at a time; for each layer a loop over
// time with four separate projections (and the output projection) inside it at every
// step. Every other simple_rnn variant is checked against this one.
#include <cmath>

#include "variants/core/registry.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

class Baseline final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("reference"); }

  // One sequence at a time, each to its own length: padding is never computed.
  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    StepWork work = Variant::Work(mode, batch, num_tokens);
    if (mode != Mode::kGenerate) work.positions = work.head_positions = batch.NumTokens();
    return work;
  }

  ForwardOutput Forward(const Batch& batch) override {
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const int64_t num_heads = config().num_heads;
    const int64_t head_width = config().width / num_heads;
    const double q_scale = 1.0 / std::sqrt(static_cast<double>(head_width));
    const auto lengths = batch.lengths.to(torch::kCPU);

    std::vector<torch::Tensor> padded_logits;
    torch::Tensor loss_sum = torch::zeros({}, weights.embedding.options());
    int64_t num_targets = 0;
    for (int64_t b = 0; b < batch.batch_size(); ++b) {
      const int64_t length = lengths[b].item<int64_t>();
      const auto tokens = batch.tokens[b].slice(0, 0, length);  // [T_b]
      auto h = torch::embedding(weights.embedding, tokens);     // [T_b,D]
      for (const LayerWeights& layer : weights.layers) {
        auto state = torch::zeros({num_heads, head_width, head_width}, h.options());
        std::vector<torch::Tensor> next_h;
        // Unbound once (its backward is one stack); h[t] per step would be O(T^2).
        const std::vector<torch::Tensor> h_steps = h.unbind(0);
        for (int64_t t = 0; t < length; ++t) {
          const auto& h_t = h_steps[t];  // [D]
          const auto u_t = RmsNorm(h_t, layer.norm);
          const auto q_t = torch::matmul(u_t, layer.w_q).view({num_heads, head_width});
          const auto k_t = torch::matmul(u_t, layer.w_k).view({num_heads, head_width});
          const auto v_t = torch::matmul(u_t, layer.w_v).view({num_heads, head_width});
          const auto g_t = torch::sigmoid(torch::matmul(u_t, layer.w_g) + layer.b_g)
                               .view({num_heads, head_width});
          state = g_t.unsqueeze(-1) * state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2);
          const auto o_t = torch::matmul(state.transpose(-1, -2), q_t.unsqueeze(-1)).squeeze(-1) *
                           q_scale;  // [H,dh]
          next_h.push_back(h_t + torch::matmul(o_t.reshape({-1}), layer.w_o));
        }
        h = torch::stack(next_h, 0);
      }
      const auto logits = Head(h, weights);  // [T_b,V]
      if (length > 1) {
        loss_sum =
            loss_sum + torch::nn::functional::cross_entropy(
                           logits.slice(0, 0, length - 1), tokens.slice(0, 1, length),
                           torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
        num_targets += length - 1;
      }
      padded_logits.push_back(
          torch::constant_pad_nd(logits, {0, 0, 0, batch.max_length() - length}));
    }
    return {torch::stack(padded_logits, 0), loss_sum / std::max<int64_t>(num_targets, 1)};
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("baseline", Baseline,
                          "literal reference: per-sequence, per-step loop, 4 Linear calls a step");

}  // namespace seqbench::simple_rnn
