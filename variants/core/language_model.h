// Pieces every language-model family shares: RMSNorm, the output head and the
// next-token loss, so that families differ only in their recurrent stack.
//
// Thread-safety: free functions over tensors; safe from any thread.
#pragma once

#include <torch/torch.h>

#include <string>

#include "variants/core/variant.h"

namespace seqbench {

inline constexpr double kRmsNormEpsilon = 1e-6;

// "layers.{layer}.{name}": how every family names a layer's parameters in a ParameterSet.
std::string LayerParameterName(int64_t layer, const char* name);

// What a language-model variant supports unless it says otherwise: every mode, CPU and
// CUDA, float32 and float64, under `family` and its improvement `category`.
Capabilities LanguageModelCapabilities(const std::string& family, const std::string& category);

// One layer's forward FLOPs at one position, by where they run: matrix products (`gemm`)
// or not (`other`: a recurrence's state update); and those of a position whose time
// mixing backward runs again (gradient checkpointing), split the same way.
struct LayerFlops {
  double gemm = 0;
  double other = 0;
  double recomputed_gemm = 0;
  double recomputed_other = 0;
};

// The cost of one step of a language model whose layers each do `layer` per position,
// around the shared embedding and head, with `parameters` trainable values in all:
//   forward  = positions·L·(gemm + other) + head_positions·2·D·V
//   train    = 3·forward (backward ~ twice forward) + recomputed·L·(recomputed_gemm +
//              recomputed_other) + 2·parameters (the SGD update)
//   gemm_flops: the same sums over the products alone (gemm, the head, recomputed_gemm)
//   bytes    = parameters·element_bytes, ×4 in train (weights read, gradients written,
//              the update's read and write), + forward mode's logits written.
// Embedding lookups, norms and activations are left out: O(D) per position against O(D^2).
// Padded positions count where the variant computes them (StepWork::positions).
StepCost LanguageModelCost(const ModelConfig& config, const StepWork& work, const LayerFlops& layer,
                           double parameters);

// x: [...,D], gain: [D] -> [...,D]
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& gain);

// RmsNorm as one autograd node with a hand-written backward, for the CPU variants that
// fuse their elementwise work: one pass over x forward (a row's sum of squares, then the
// scaled write) and two backward (a row's dot product dy·gain·x, then dx; the gain's
// gradient summed per thread), where ATen's expression runs six operations forward and a
// dozen backward over [...,D]. The same function up to rounding. Computed in the promoted
// type of x and gain; on any other device than the CPU it is RmsNorm().
torch::Tensor FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& gain);

// logits = RMSNorm(h; gain)·W_out. h: [...,D], w_out: [D,V] -> [...,V]
torch::Tensor LanguageModelHead(const torch::Tensor& h, const torch::Tensor& gain,
                                const torch::Tensor& w_out);
// The same with FusedRmsNorm().
torch::Tensor FusedLanguageModelHead(const torch::Tensor& h, const torch::Tensor& gain,
                                     const torch::Tensor& w_out);

// Mean cross-entropy of next-token prediction over non-padding targets (0 when the batch
// has none). logits: [B,T,V]
torch::Tensor NextTokenLoss(const torch::Tensor& logits, const Batch& batch);
// The same from tokens: [B,T] and the padding mask: [B,T] bool (undefined: no padding).
torch::Tensor NextTokenLoss(const torch::Tensor& logits, const torch::Tensor& tokens,
                            const torch::Tensor& mask);

}  // namespace seqbench
