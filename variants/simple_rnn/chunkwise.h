// The chunkwise parallel form of the SimpleRNN recurrence (Gated Linear Attention's,
// flash-linear-attention's): the sequence cut into chunks of C positions, each chunk
// evaluated in closed form with attention-like matmuls, one state per chunk passed on.
// `scan` computes whole sequences with it; `stepwise` prefills a prompt with it.
//
// Numerics: decays are handled in log space, relative to the chunk's start: with b_t the
// log of the decay since then (b_t <= 0, falling), a query is scaled by e^{b_t} and a key
// by e^{-b_s}, so that every pair (t, s) of the chunk is one [C,dh]·[dh,C] product. That
// is exact while no factor leaves the dtype's range: while every chunk's total log decay
// stays above -MaxLogDecayRange(dtype) (float32: e^{±80} inside its e^{±87} normal range).
// A chunk that decays further (a gate closing, a long chunk) would overflow e^{-b_s}; then
// the whole call takes the explicit form instead, which forms only e^{b_t - b_s} <= 1 for
// s <= t (nothing below the true value underflows), at the price of a [C,C,dh]
// relative-decay tensor per chunk: B*T*C*D elements, several passes over them.
//
// Thread-safety: free functions over tensors; safe from any thread.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {

inline constexpr int64_t kDefaultChunkSize = 16;

// q, k, v, log_g: [B,T,H,dh] (not written); state: [B,H,dh,dh], carried in and out
// (replaced by the state after the last position) -> o: [B,T,H,dh]. chunk >= 1.
torch::Tensor ChunkwiseRecurrence(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& log_g,
                                  torch::Tensor& state, int64_t chunk);

// The same recurrence from a layer's fused projection, as `scan` runs it: projected:
// [B,T,4D] = u·[W_q W_k W_v W_g] (unscaled, unbiased, unmasked; not written), b_g: [D],
// lengths: [B] int64 (positions at or past lengths[b] are padding); state as above ->
// o: [B,T,D], the heads side by side. On the CPU in float32/float64 the elementwise front
// is one autograd node (chunk_operands.h); elsewhere, and whenever a chunk decays past the
// product form's range, it is SplitProjections() and ChunkwiseRecurrence().
torch::Tensor ChunkwiseFromProjections(const torch::Tensor& projected, const torch::Tensor& b_g,
                                       int64_t num_heads, const torch::Tensor& lengths,
                                       torch::Tensor& state, int64_t chunk);

// ChunkwiseRecurrence() over log-sigmoid decays (padding decays by 1) as a TimeMixer.
TimeMixer ChunkwiseMixer(int64_t chunk);

}  // namespace seqbench::simple_rnn
