// flash's CPU kernels (flash.cc): FlashAttention's forward and recomputing backward with
// one (sequence, head) pair per task of at::parallel_for. A task walks its own [T,dh]
// matrices tile by tile, so a tile's scores ([block,block], 64 KiB at 128 in float32)
// stay in the core's cache from the product that writes them to the one that reads them,
// and the online softmax is one pass over a tile's rows plus ATen's vectorized exp. The
// tensor form (flash.cc's TiledForward/TiledBackward, used on other devices) runs every
// op over all B·H heads' tiles at once, each through memory.
//
// Thread-safety: stateless; each call parallelises internally over (sequence, head).
#pragma once

#include <torch/torch.h>

#include <vector>

namespace seqbench::attention {

// q, k, v: [B,H,T,dh] contiguous, q already scaled, CPU -> {o: [B,H,T,dh], lse: [B,H,T]}
// (the log-sum-exp of each query's causal scores).
std::vector<torch::Tensor> FlashForwardCpu(const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v, int64_t block);

// The forward's inputs and results, and d_o: [B,H,T,dh] contiguous -> {dq, dk, dv}, each
// [B,H,T,dh]. Every tile's probabilities are recomputed from lse.
std::vector<torch::Tensor> FlashBackwardCpu(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, const torch::Tensor& o,
                                            const torch::Tensor& lse, const torch::Tensor& d_o,
                                            int64_t block);

}  // namespace seqbench::attention
