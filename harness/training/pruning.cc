#include "harness/training/pruning.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace seqbench::training {

double SparsityAt(const PruningOptions& options, int64_t step) {
  if (!options.enabled() || step < options.start) return 0;
  if (step >= options.end) return options.sparsity;
  const double progress =
      static_cast<double>(step - options.start) / static_cast<double>(options.end - options.start);
  return options.sparsity * (1 - std::pow(1 - progress, 3));
}

MagnitudePruner::MagnitudePruner(PruningOptions options, std::vector<torch::Tensor> matrices)
    : options_(options), matrices_(std::move(matrices)) {
  if (options_.sparsity < 0 || options_.sparsity >= 1) {
    throw std::invalid_argument("pruning sparsity must be in [0, 1), not " +
                                std::to_string(options_.sparsity));
  }
  if (options_.enabled() && (options_.start < 0 || options_.end <= options_.start)) {
    throw std::invalid_argument("pruning must end after it starts (start " +
                                std::to_string(options_.start) + ", end " +
                                std::to_string(options_.end) + ")");
  }
  if (options_.every < 1) throw std::invalid_argument("pruning's interval must be at least 1");
}

// Prunes on the schedule's steps: from start, every `every` steps up to end, and at end
// itself (so that the final sparsity is reached whatever the interval).
bool MagnitudePruner::PrunesAt(int64_t step) const {
  if (!options_.enabled() || step < options_.start || step > options_.end) return false;
  return step == options_.end || (step - options_.start) % options_.every == 0;
}

void MagnitudePruner::AfterStep(int64_t step) {
  torch::NoGradGuard no_grad;
  // The old masks first: what was pruned stays pruned (the optimizer step just moved it
  // off zero), so each new mask contains the last and sparsity only grows.
  for (size_t i = 0; i < masks_.size(); ++i) matrices_[i].mul_(masks_[i]);
  if (PrunesAt(step)) {
    const double sparsity = SparsityAt(options_, step);
    masks_.clear();
    for (const torch::Tensor& matrix : matrices_) {
      const int64_t pruned = std::llround(sparsity * static_cast<double>(matrix.numel()));
      torch::Tensor mask = torch::ones({matrix.numel()}, matrix.options());
      if (pruned > 0) {
        // The `pruned` smallest magnitudes: the entries pruned before (zero) among them.
        const torch::Tensor smallest =
            std::get<1>(matrix.detach().abs().flatten().topk(pruned, 0, /*largest=*/false));
        mask.index_fill_(0, smallest, 0);
      }
      masks_.push_back(mask.view_as(matrix));
    }
    for (size_t i = 0; i < masks_.size(); ++i) matrices_[i].mul_(masks_[i]);
  }
}

void MagnitudePruner::RestoreMasks(int64_t step) {
  masks_.clear();
  if (!options_.enabled() || step < options_.start) return;
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& matrix : matrices_) masks_.push_back(matrix.ne(0).to(matrix.dtype()));
}

double MagnitudePruner::Sparsity() const {
  int64_t zeros = 0, total = 0;
  for (const torch::Tensor& matrix : matrices_) {
    zeros += matrix.eq(0).sum().item<int64_t>();
    total += matrix.numel();
  }
  return total == 0 ? 0 : static_cast<double>(zeros) / static_cast<double>(total);
}

}  // namespace seqbench::training
