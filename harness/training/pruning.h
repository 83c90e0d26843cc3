// Gradual magnitude pruning during training (Zhu & Gupta, "To prune, or not to prune:
// exploring the efficacy of pruning for model compression", arXiv:1710.01878). From
// optimizer step `start` to `end`, every `every` steps, each weight matrix's
// smallest-magnitude entries are set to zero until its sparsity reaches
//   s(t) = final · (1 − (1 − (t − start)/(end − start))³),   t in [start, end]
// (fast at first, while the network can recover, slow at the end), and s = final after
// `end`. Between those steps each matrix's mask holds its pruned entries at zero after
// every optimizer step (AdamW's moments would otherwise grow them back), and a pruned
// entry stays pruned: each new mask contains the last. Every matrix of
// the model (dim ≥ 2: projections, embedding and head) is pruned to the same sparsity;
// gains and biases are not. Each matrix keeps exactly round(s·numel) pruned entries (the
// earlier ones first, then the smallest magnitudes), so the sparsity a run reports is the
// schedule's to the entry. The masks are bool, one byte an entry.
//
// Thread-safety: a pruner belongs to one training loop; its matrices are written in place.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace seqbench::training {

struct PruningOptions {
  double sparsity = 0;  // the final fraction of each matrix at zero; 0: no pruning
  int64_t start = 0;    // optimizer steps done before the first pruning
  int64_t end = 0;      // the step at which the final sparsity is reached (> start)
  int64_t every = 1;    // steps between two prunings
  bool enabled() const { return sparsity > 0; }
};

// The target sparsity after `step` optimizer steps (0 before start, `sparsity` from end).
double SparsityAt(const PruningOptions& options, int64_t step);

class MagnitudePruner {
 public:
  // matrices: the parameters to prune, each [any shape, dim ≥ 2], written in place.
  MagnitudePruner(PruningOptions options, std::vector<torch::Tensor> matrices);

  // Called after optimizer step `step` (1-based) has updated the matrices: prunes to
  // SparsityAt(step) when the schedule says so, then zeroes every masked entry.
  void AfterStep(int64_t step);
  // After a checkpoint's weights were loaded at `step`: the masks again, from the
  // weights' zeros (a pruned entry is exactly zero; a trained one is not).
  void RestoreMasks(int64_t step);
  // The fraction of the matrices' entries that are zero now.
  double Sparsity() const;

 private:
  bool PrunesAt(int64_t step) const;
  // New masks of round(sparsity·numel) entries per matrix: the entries pruned before
  // first, then the smallest magnitudes (the matrices are not written).
  void PruneTo(double sparsity);

  PruningOptions options_;
  std::vector<torch::Tensor> matrices_;
  // [shape of each matrix] bool, true where pruned (1 byte an entry); empty before the
  // first pruning.
  std::vector<torch::Tensor> pruned_;
};

}  // namespace seqbench::training
