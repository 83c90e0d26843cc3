// The elementwise front of the chunkwise form (chunkwise.h) as one autograd node, for
// `scan` on the CPU: from a layer's fused projection [B,T,4D], where the GEMM wrote it,
// straight to the chunk-major operands that the chunk products read. One pass forward
// scales the queries, masks the keys, applies the decays and lays the four parts out by
// chunk; one pass backward writes the gradient of all four projections into one [B,T,4D]
// tensor. ATen's expression of the same front is a dozen passes each way over [B,T,D]
// (split, scale, mask, bias, log-sigmoid, pad, permuted copies, a cumulative sum, two
// exps, three products) and the concatenation of four gradients. ATen keeps the
// log-sigmoid and σ(−logit) here (its vectorised exp); the decay since the chunk's start
// is E_t = exp(log g_{c0} + … + log g_t) in log space, as chunkwise.h forms it: a float32
// g near 1 keeps few digits of 1 − g, and a product of such g over a long memory drifts
// (measured: 6.5e-5 on scan_test's logits at decay 0.999, T = 4096, against 2e-6 in log
// space). Backward reads E_t and σ(−logit) as forward wrote them.
//
// Thread-safety: a pure function of its arguments; its kernels split the work with
// at::parallel_for on LibTorch's one intra-op pool.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace seqbench::simple_rnn {

// A layer's operands in chunk-major layout, each [B,H,N,C,dh] (N = ⌈T/C⌉ chunks of C
// positions; positions past T are zeros), contiguous. E_t is the decay since the chunk's
// start, up to and including position t.
struct ChunkOperands {
  torch::Tensor decayed_q;    // q_t·scale·E_t
  torch::Tensor unscaled_k;   // k_t/E_t, 0 at padding
  torch::Tensor v;            // v_t
  torch::Tensor chunk_decay;  // [B,H,N,dh]: E at the chunk's last position
};

// projected: [B,T,4D] = u·[W_q W_k W_v W_g] (unscaled, unbiased, unmasked; not written),
// b_g: [D], lengths: [B] int64 (positions at or past lengths[b] are padding: their key is
// 0 and their decay 1). scale multiplies the queries. Differentiable in projected and
// b_g. CPU, float32 or float64, projected and b_g of one dtype.
ChunkOperands ChunkOperandsOf(const torch::Tensor& projected, const torch::Tensor& b_g,
                              const torch::Tensor& lengths, int64_t num_heads, int64_t chunk,
                              double scale);

}  // namespace seqbench::simple_rnn
