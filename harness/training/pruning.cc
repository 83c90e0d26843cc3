#include "harness/training/pruning.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

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
  if (PrunesAt(step)) PruneTo(SparsityAt(options_, step));
  // What was pruned stays pruned: the optimizer step just moved it off zero.
  for (size_t i = 0; i < pruned_.size(); ++i) matrices_[i].masked_fill_(pruned_[i], 0);
}

void MagnitudePruner::PruneTo(double sparsity) {
  std::vector<torch::Tensor> next;
  for (size_t i = 0; i < matrices_.size(); ++i) {
    const torch::Tensor& matrix = matrices_[i];
    const int64_t count = std::llround(sparsity * static_cast<double>(matrix.numel()));
    torch::Tensor magnitude = matrix.detach().abs().flatten();
    // The entries pruned before rank below any other, though the last step moved them and
    // whatever topk does with ties (a trained weight may be exactly zero too).
    if (!pruned_.empty()) magnitude.masked_fill_(pruned_[i].flatten(), -1);
    torch::Tensor pruned = torch::zeros({matrix.numel()}, matrix.options().dtype(torch::kBool));
    if (count > 0) {
      pruned.index_fill_(0, std::get<1>(magnitude.topk(count, 0, /*largest=*/false)), true);
    }
    next.push_back(pruned.view_as(matrix));
  }
  pruned_ = std::move(next);
}

void MagnitudePruner::RestoreMasks(int64_t step) {
  pruned_.clear();
  if (!options_.enabled() || step < options_.start) return;
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& matrix : matrices_) pruned_.push_back(matrix.eq(0));
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
