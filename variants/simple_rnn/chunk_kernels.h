// The back half of the chunkwise form's product form (chunkwise.h) as one autograd node
// with its backward written by hand: each chunk's scores, its outputs written straight
// into the positions' layout, and the states carried from chunk to chunk. One task per
// (sequence, head) runs its chunks in order with every [C,C] and [dh,dh] intermediate in
// a local buffer, so that nothing of shape [B,H,N,C,C] or [B,H,N,dh,dh] is written but the
// states backward needs, and each input's gradient is one tensor: no autograd sums of the
// gradients of an operand read by several products. ATen's expression of the same is four
// batched products and their eight backward ones, a masked fill, a loop of state updates
// whose states are stacked (and a stack of N per-chunk gradients backward), an add and a
// permuted copy, and three gradient sums.
//
// On the CPU in float32 and float64; anything else takes the ATen expression.
//
// Thread-safety: a pure function of its arguments; the kernels split their work with
// at::parallel_for on LibTorch's one intra-op pool.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace seqbench::simple_rnn {

// The product form's chunks: for chunk n, scores = causal(decayed_q·unscaled_kᵀ) (pairs
// (t, s) with s <= t), o_n = scores·v + decayed_q·S_n, and S_{n+1} = diag(decay[n])·(S_n +
// unscaled_kᵀ·v), S_0 = initial: each chunk's keys already divided by their decay since
// the chunk's start (chunk_operands.h), so that one scaling by the chunk's total decay
// applies both the old state's decay and each key's remaining one. decayed_q, unscaled_k,
// v: [B,H,N,C,dh]; decay: [B,H,N,dh] (each chunk's total decay, scaling the state's rows;
// every entry > 0, as within the product form's range); initial: [B,H,dh,dh]; none
// written. Returns {o: [B,N·C,H·dh] (chunk n's row c at position n·C + c, head h in
// columns h·dh …), final: S_N [B,H,dh,dh]}; differentiable in all five.
std::pair<torch::Tensor, torch::Tensor> ChunkProducts(const torch::Tensor& decayed_q,
                                                      const torch::Tensor& unscaled_k,
                                                      const torch::Tensor& v,
                                                      const torch::Tensor& decay,
                                                      const torch::Tensor& initial);

}  // namespace seqbench::simple_rnn
