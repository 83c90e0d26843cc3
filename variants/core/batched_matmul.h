// BatchedMatmul: a batch of small matrix products, [...,m,k]·[...,k,n] -> [...,m,n], with
// its backward written by hand, for the chunkwise forms whose every chunk is a few
// [C,dh]-sized products (variants/simple_rnn/chunkwise.h).
//
// Why not torch::matmul: LibTorch 1.13's CPU bmm without MKL (Debian's links OpenBLAS)
// loops over the batch with three select()s and an addmm per matrix, so a [1024,32,64]
// product pays a thousand dispatches, views and stride checks (73,778 select calls a
// `scan` train step at the README shapes, `seqbench profile`). Here each matrix is one
// TileGemm call (the same BLAS sgemm_/dgemm_, on raw pointers) inside at::parallel_for,
// on the operands' own strides: a permuted view whose last or second-last dimension is
// contiguous is read in place, as no copy is needed for a row- or column-major matrix.
// Backward is two more such batches, dA = dC·Bᵀ and dB = Aᵀ·dC, reading A and B
// transposed in place.
//
// Float32 and float64 on the CPU; anything else (another dtype, CUDA, mismatched batch
// shapes) goes to torch::matmul unchanged.
//
// Thread-safety: a pure function of its arguments; safe from any thread.
#pragma once

#include <torch/torch.h>

namespace seqbench {

// a: [...,m,k], b: [...,k,n] with equal leading dimensions (not written) -> [...,m,n], a
// new contiguous tensor; differentiable in both.
torch::Tensor BatchedMatmul(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace seqbench
