// Batching of variable-length text for training: which samples go into which batch, in
// which order, for one epoch. Four policies, the seeds' techniques:
//   fixed         shuffled, `batch_size` samples a batch, padded to the longest
//   bucketed      shuffled, then sorted by length within pools of `pool_batches`
//                 batches, so that a batch holds similar lengths; batch order shuffled
//   token_budget  sorted by length, each batch as many samples as fit B·T_max <= budget;
//                 batch order shuffled
//   curriculum    the first epoch sorted by length, `batch_size` samples a batch,
//                 visited short to long (curriculum learning: easy examples first,
//                 Bengio et al. 2009; short sequences first); later epochs as fixed
// Every sample is in exactly one batch of an epoch. The plan depends only on the lengths,
// the options, the seed and the epoch, so that a run and its resumption see the same data.
//
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "variants/core/variant.h"

namespace seqbench::training {

// Token sequences, each at least 2 tokens (one next-token target).
using Samples = std::vector<std::vector<int64_t>>;

enum class BatchingPolicy { kFixed, kBucketed, kTokenBudget, kCurriculum };

std::string_view BatchingPolicyName(BatchingPolicy policy);
std::optional<BatchingPolicy> ParseBatchingPolicy(std::string_view name);

struct BatchingOptions {
  BatchingPolicy policy = BatchingPolicy::kFixed;
  int64_t batch_size = 16;    // fixed, bucketed, curriculum
  int64_t pool_batches = 32;  // bucketed: batches sorted together
  int64_t token_budget = 0;   // token_budget: B·T_max at most this; >= the longest sample
};

// Sample indices per batch, in the order the epoch visits them.
using BatchPlan = std::vector<std::vector<int64_t>>;

// The batches of `epoch`. Throws std::invalid_argument for options that cannot hold every
// sample (a token budget below the longest sample, a batch size below 1).
BatchPlan PlanEpoch(const std::vector<int64_t>& lengths, const BatchingOptions& options,
                    uint64_t seed, int64_t epoch);

// Data parallelism over `ranks` ranks: rank `rank`'s share of each batch of `plan`, so that
// every rank takes one step per batch and the ranks' shares of a batch make up exactly
// that batch. A batch with fewer samples than ranks is first merged into the batch after
// it (the one before, for the last), so that no share is empty. Shares balance tokens:
// samples go, longest first, to the rank with the fewest tokens so far (ties: the lower
// rank), which for equal lengths deals them out in turn; within a share they keep their
// order in the batch. Throws std::invalid_argument when the epoch has fewer samples than
// ranks.
BatchPlan ShardPlan(const BatchPlan& plan, const std::vector<int64_t>& lengths, int64_t rank,
                    int64_t ranks);

struct PaddingStats {
  int64_t real_tokens = 0;    // sum of the lengths
  int64_t padded_tokens = 0;  // sum over batches of B·T_max
  // Non-padding tokens over all tokens the model processes: 1 = no padding.
  double efficiency() const {
    return padded_tokens == 0 ? 1.0 : static_cast<double>(real_tokens) / padded_tokens;
  }
};

PaddingStats MeasurePadding(const BatchPlan& plan, const std::vector<int64_t>& lengths);

// Splits sequences longer than `max_length` into consecutive pieces of at most that many
// tokens, and drops pieces shorter than 2 tokens (they have no next-token target).
Samples SplitToMaxLength(const std::vector<std::vector<int64_t>>& sequences, int64_t max_length);

std::vector<int64_t> Lengths(const Samples& samples);

// The samples `indices` as one right-padded batch on the CPU (lengths always on the CPU):
// tokens [B,T_max] int64, positions past a sample's length hold `pad_token`.
Batch Collate(const Samples& samples, const std::vector<int64_t>& indices, int64_t pad_token,
              bool pin_memory = false);

// The batch's next-token targets, Σ max(length − 1, 0): the count that a mean loss over
// several batches weighs each batch's mean by.
int64_t TargetCount(const Batch& batch);

}  // namespace seqbench::training
