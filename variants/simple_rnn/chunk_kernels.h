// The back half of the chunkwise form's product form (chunkwise.h) as two autograd nodes
// with their backward written by hand: the states carried from chunk to chunk, and the
// outputs written straight into the positions' layout. ATen's expression of the same is a
// batched product of every chunk's keys and values, a loop of updates whose states are
// stacked (one copy forward, and a stack of N per-chunk gradients for each of the loop's
// inputs backward), then two batched products, an add and a permuted copy; here each
// node is one pass, and the outputs' gradient is read where the next product wrote it.
//
// On the CPU in float32 and float64; anything else takes the ATen expression.
//
// Thread-safety: pure functions of their arguments; the kernels split their work with
// at::parallel_for on LibTorch's one intra-op pool.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace seqbench::simple_rnn {

// The states entering each chunk of the product form: S_0 = initial,
// S_{n+1} = diag(decay[n])·(S_n + unscaled_k[n]ᵀ·v[n]), each chunk's keys already divided
// by their decay since the chunk's start (chunk_operands.h), so that one scaling by the
// chunk's total decay applies both the old state's decay and each key's remaining one.
// unscaled_k, v: [B,H,N,C,dh]; decay: [B,H,N,dh] (each chunk's total decay, scaling the
// state's rows; every entry > 0, as within the product form's range); initial:
// [B,H,dh,dh]; none written. Returns {incoming: [B,H,N,dh,dh] (S_0 … S_{N−1}), final:
// S_N [B,H,dh,dh]}; differentiable in all four. One task per (sequence, head) runs its
// chunks in order, each chunk's [dh,dh] product in a local buffer: no [B,H,N,dh,dh]
// tensor of per-chunk products is written or read back.
std::pair<torch::Tensor, torch::Tensor> ChunkStates(const torch::Tensor& unscaled_k,
                                                    const torch::Tensor& v,
                                                    const torch::Tensor& decay,
                                                    const torch::Tensor& initial);

// o = scores·v + decayed_q·incoming for every chunk, laid out by position: scores:
// [B,H,N,C,C], v and decayed_q: [B,H,N,C,dh], incoming: [B,H,N,dh,dh]; none written.
// Returns o: [B,N·C,H·dh], chunk n's row c at position n·C + c, head h in columns
// h·dh … h·dh + dh − 1. Differentiable in all four.
torch::Tensor ChunkOutput(const torch::Tensor& scores, const torch::Tensor& v,
                          const torch::Tensor& decayed_q, const torch::Tensor& incoming);

}  // namespace seqbench::simple_rnn
