// The hand-written CPU recurrence of `fused_recurrent`, taken straight from a layer's fused
// projections, for the variants built on it (`fused_recurrent`, `packed`): one autograd
// node per layer that scales the queries, applies the decays and stops each sequence at
// its length inside the kernel's pass over time, and whose backward writes the gradient
// of the projections as one tensor (fused_recurrent.cc).
//
// Thread-safety: stateless functions; the kernel splits its work with at::parallel_for
// on LibTorch's one intra-op pool.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {

// The layer's time mixing from projected = u·[W_q W_k W_v W_g] ([B,T,4D], neither scaled
// nor biased nor masked), b_g: [D] and lengths: [B] int64 (1 <= lengths[b] <= T; sequence
// b runs its first lengths[b] steps and carries its state through the rest unchanged, as
// the padding rule's masked steps would). `state` [B,H,dh,dh] is read and replaced by the
// final one. Returns o: [B,T,D], the heads side by side, 0 at padding positions (exact
// where nothing reads them: padding's logits are unspecified). Differentiable in
// projected, b_g and state; computed in their promoted type. Host code: CPU tensors only.
torch::Tensor GatedRecurrence(const torch::Tensor& projected, const torch::Tensor& b_g,
                              int64_t num_heads, const torch::Tensor& lengths,
                              torch::Tensor& state);

// The same on packed sequences: projected: [N,4D] holds sequence 0's lengths[0] steps,
// then sequence 1's, and so on (N = Σ lengths; FlashAttention's variable-length layout,
// the rows of the real positions of a right-padded batch in order). Returns o: [N,D].
torch::Tensor PackedGatedRecurrence(const torch::Tensor& projected, const torch::Tensor& b_g,
                                    int64_t num_heads, const torch::Tensor& lengths,
                                    torch::Tensor& state);

// One layer on the residual stream, as LayerForward with the recurrence above:
// h + GatedRecurrence(RMSNorm(h)·[W_q W_k W_v W_g])·W_o. h: [B,T,D] -> [B,T,D].
torch::Tensor FusedRecurrentLayer(const torch::Tensor& h, const LayerWeights& layer,
                                  int64_t num_heads, const torch::Tensor& lengths,
                                  torch::Tensor& state);

}  // namespace seqbench::simple_rnn
