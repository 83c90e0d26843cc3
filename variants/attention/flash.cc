// `flash`: exact attention in tiles with an online softmax (FlashAttention, Dao et al.
// 2022, Algorithm 1 forward and the recomputing backward of FlashAttention-2): on the CPU
// per-head kernels (flash_cpu.h), elsewhere LibTorch ops over all heads. For each block of queries
// it walks the key blocks at or before it, keeps a running row maximum m, sum l and unnormalised
// output, and rescales them by exp(m_old - m_new) when a block raises the maximum. Forward saves
// only the output and the log-sum-exp per query; backward recomputes every tile's probabilities
// from them. Attention memory is O(T·block) instead of naive's O(T²); the work is the same O(T²),
// minus the tiles above the diagonal, which are never computed.
#include <algorithm>
#include <limits>
#include <vector>

#include "variants/attention/flash_cpu.h"
#include "variants/attention/model.h"
#include "variants/core/registry.h"

namespace seqbench::attention {
namespace {

constexpr int64_t kDefaultBlock = 128;

using torch::indexing::Slice;

// Masks, in place, the scores of a tile whose keys may come after its queries.
// scores: [B,H,nq,nk] for queries q0.. and keys k0..; written in place.
void MaskFuture(torch::Tensor& scores, int64_t q0, int64_t k0) {
  const int64_t nq = scores.size(2), nk = scores.size(3);
  if (k0 + nk - 1 <= q0) return;  // every key at or before every query
  const auto future = torch::ones({nq, nk}, scores.options().dtype(torch::kBool)).triu(q0 - k0 + 1);
  scores.masked_fill_(future, -std::numeric_limits<double>::infinity());
}

// The tensor form of forward, on any device: every op covers all B·H heads' tile at once.
// q, k, v: [B,H,T,dh] (q scaled) -> {o: [B,H,T,dh], lse: [B,H,T]}.
std::vector<torch::Tensor> TiledForward(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, int64_t block) {
  const int64_t steps = q.size(2);
  auto output = torch::empty_like(q);
  auto lse = torch::empty({q.size(0), q.size(1), steps}, q.options());
  for (int64_t q0 = 0; q0 < steps; q0 += block) {
    const int64_t q1 = std::min(steps, q0 + block);
    const auto qi = q.index({Slice(), Slice(), Slice(q0, q1)});
    auto row_max = torch::full({q.size(0), q.size(1), q1 - q0, 1},
                               -std::numeric_limits<double>::infinity(), q.options());
    auto row_sum = torch::zeros_like(row_max);
    auto accumulated = torch::zeros_like(qi);
    for (int64_t k0 = 0; k0 < q1; k0 += block) {
      const int64_t k1 = std::min(steps, k0 + block);
      auto scores = torch::matmul(qi, k.index({Slice(), Slice(), Slice(k0, k1)}).transpose(-2, -1));
      MaskFuture(scores, q0, k0);
      // Every row has a finite score in the first key block (key 0 precedes every
      // query), so the running maximum is finite from there on.
      const auto new_max = torch::maximum(row_max, std::get<0>(scores.max(-1, true)));
      const auto probabilities = torch::exp(scores - new_max);
      const auto rescale = torch::exp(row_max - new_max);
      row_sum = row_sum * rescale + probabilities.sum(-1, true);
      accumulated = accumulated * rescale +
                    torch::matmul(probabilities, v.index({Slice(), Slice(), Slice(k0, k1)}));
      row_max = new_max;
    }
    output.index({Slice(), Slice(), Slice(q0, q1)}).copy_(accumulated / row_sum);
    lse.index({Slice(), Slice(), Slice(q0, q1)}).copy_((row_max + torch::log(row_sum)).squeeze(-1));
  }
  return {output, lse};
}

// The tensor form of backward. With P = exp(S - lse) recomputed per tile:
// dV += Pᵀ·dO, dS = P ∘ (dO·Vᵀ - rowsum(dO ∘ O)), dQ += dS·K, dK += dSᵀ·Q.
std::vector<torch::Tensor> TiledBackward(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, const torch::Tensor& output,
                                         const torch::Tensor& lse, const torch::Tensor& grad_output,
                                         int64_t block) {
  const int64_t steps = q.size(2);
  const auto delta = (grad_output * output).sum(-1, true);  // [B,H,T,1]
  auto grad_q = torch::zeros_like(q), grad_k = torch::zeros_like(k), grad_v = torch::zeros_like(v);
  for (int64_t q0 = 0; q0 < steps; q0 += block) {
    const Slice queries(q0, std::min(steps, q0 + block));
    const auto qi = q.index({Slice(), Slice(), queries});
    const auto dout_i = grad_output.index({Slice(), Slice(), queries});
    const auto lse_i = lse.index({Slice(), Slice(), queries}).unsqueeze(-1);
    const auto delta_i = delta.index({Slice(), Slice(), queries});
    auto grad_qi = grad_q.index({Slice(), Slice(), queries});
    for (int64_t k0 = 0; k0 < std::min(steps, q0 + block); k0 += block) {
      const Slice keys(k0, std::min(steps, k0 + block));
      const auto kj = k.index({Slice(), Slice(), keys});
      const auto vj = v.index({Slice(), Slice(), keys});
      auto scores = torch::matmul(qi, kj.transpose(-2, -1));
      MaskFuture(scores, q0, k0);
      const auto probabilities = torch::exp(scores - lse_i);  // masked: exp(-inf) = 0
      grad_v.index({Slice(), Slice(), keys})
          .add_(torch::matmul(probabilities.transpose(-2, -1), dout_i));
      const auto grad_scores =
          probabilities * (torch::matmul(dout_i, vj.transpose(-2, -1)) - delta_i);
      grad_qi.add_(torch::matmul(grad_scores, kj));
      grad_k.index({Slice(), Slice(), keys}).add_(torch::matmul(grad_scores.transpose(-2, -1), qi));
    }
  }
  return {grad_q, grad_k, grad_v};
}

// Forward saves only the output and the log-sum-exp per query; backward recomputes every
// tile's probabilities from them. On the CPU both run flash_cpu.h's per-head kernels.
class FlashAttentionFunction : public torch::autograd::Function<FlashAttentionFunction> {
 public:
  // q, k, v: [B,H,T,dh] (q scaled) -> o: [B,H,T,dh]. Saves q, k, v, o and lse: [B,H,T].
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, int64_t block) {
    const auto result =
        q.device().is_cpu() ? FlashForwardCpu(q, k, v, block) : TiledForward(q, k, v, block);
    ctx->save_for_backward({q, k, v, result[0], result[1]});
    ctx->saved_data["block"] = block;
    return result[0];
  }

  // grad: [dO] -> {dq, dk, dv, none}.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t block = ctx->saved_data["block"].toInt();
    const auto grad_output = grads[0].contiguous();
    auto result =
        saved[0].device().is_cpu()
            ? FlashBackwardCpu(saved[0], saved[1], saved[2], saved[3], saved[4], grad_output, block)
            : TiledBackward(saved[0], saved[1], saved[2], saved[3], saved[4], grad_output, block);
    result.push_back(torch::Tensor());
    return result;
  }
};

}  // namespace

torch::Tensor FlashAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             int64_t block) {
  TORCH_CHECK(q.size(2) == k.size(2) && k.sizes() == v.sizes(),
              "flash attention attends within one sequence: q, k, v must all be [B,H,T,dh]");
  TORCH_CHECK(block >= 1, "block_size must be at least 1, got ", block);
  return FlashAttentionFunction::apply(q.contiguous(), k.contiguous(), v.contiguous(), block);
}

namespace {

class Flash final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("tiling");
    caps.options = {
        {"block_size", "queries and keys per tile (" + std::to_string(kDefaultBlock) + ")"}};
    return caps;
  }

  // The causal pairs, and in train mode all of them again: backward recomputes the scores.
  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    return CausalWork(Variant::Work(mode, batch, num_tokens), batch, num_tokens,
                      /*scores_recomputed=*/true);
  }

  ForwardOutput Forward(const Batch& batch) override {
    const int64_t block = block_;
    return ForwardWith(Weights::View(parameters(), config().num_layers), config(), batch,
                       [block](const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v) { return FlashAttention(q, k, v, block); });
  }

 protected:
  void OnSetup() override {
    block_ = OptionOr("block_size", kDefaultBlock);
    TORCH_CHECK(block_ >= 1, "block_size must be at least 1, got ", block_);
  }

 private:
  int64_t block_ = kDefaultBlock;
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("flash", Flash,
                          "exact attention in tiles with an online softmax; backward "
                          "recomputes the tiles (memory O(T))");

}  // namespace seqbench::attention
