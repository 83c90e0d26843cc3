#include "harness/training/batching.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

namespace seqbench::training {
namespace {

// One generator per (seed, epoch), so that epoch e's plan does not depend on whether
// epochs before it were planned in this process (resumption).
std::mt19937_64 EpochGenerator(uint64_t seed, int64_t epoch) {
  std::seed_seq sequence{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                         static_cast<uint32_t>(epoch), 0x5eedu};
  return std::mt19937_64(sequence);
}

std::vector<int64_t> ShuffledIndices(size_t count, std::mt19937_64& generator) {
  std::vector<int64_t> indices(count);
  std::iota(indices.begin(), indices.end(), 0);
  std::shuffle(indices.begin(), indices.end(), generator);
  return indices;
}

void SortByLength(std::vector<int64_t>::iterator begin, std::vector<int64_t>::iterator end,
                  const std::vector<int64_t>& lengths) {
  // Stable: equal lengths keep their shuffled order, so ties still vary between epochs.
  std::stable_sort(begin, end, [&](int64_t a, int64_t b) { return lengths[a] < lengths[b]; });
}

BatchPlan Chunk(const std::vector<int64_t>& order, size_t begin, size_t end, int64_t size) {
  BatchPlan plan;
  for (size_t first = begin; first < end; first += size) {
    const size_t last = std::min(end, first + static_cast<size_t>(size));
    plan.emplace_back(order.begin() + first, order.begin() + last);
  }
  return plan;
}

}  // namespace

std::string_view BatchingPolicyName(BatchingPolicy policy) {
  switch (policy) {
    case BatchingPolicy::kFixed:
      return "fixed";
    case BatchingPolicy::kBucketed:
      return "bucketed";
    case BatchingPolicy::kTokenBudget:
      return "token_budget";
    case BatchingPolicy::kCurriculum:
      return "curriculum";
  }
  return "?";
}

std::optional<BatchingPolicy> ParseBatchingPolicy(std::string_view name) {
  for (const auto policy : {BatchingPolicy::kFixed, BatchingPolicy::kBucketed,
                            BatchingPolicy::kTokenBudget, BatchingPolicy::kCurriculum}) {
    if (BatchingPolicyName(policy) == name) return policy;
  }
  return std::nullopt;
}

BatchPlan PlanEpoch(const std::vector<int64_t>& lengths, const BatchingOptions& options,
                    uint64_t seed, int64_t epoch) {
  auto generator = EpochGenerator(seed, epoch);
  std::vector<int64_t> order = ShuffledIndices(lengths.size(), generator);
  BatchPlan plan;
  switch (options.policy) {
    case BatchingPolicy::kFixed:
      if (options.batch_size < 1) throw std::invalid_argument("batch_size must be at least 1");
      return Chunk(order, 0, order.size(), options.batch_size);
    case BatchingPolicy::kCurriculum:
      if (options.batch_size < 1) throw std::invalid_argument("batch_size must be at least 1");
      // Short to long, in that order: the point of the first epoch. Then as fixed.
      if (epoch == 0) SortByLength(order.begin(), order.end(), lengths);
      return Chunk(order, 0, order.size(), options.batch_size);
    case BatchingPolicy::kBucketed: {
      if (options.batch_size < 1) throw std::invalid_argument("batch_size must be at least 1");
      if (options.pool_batches < 1) {
        throw std::invalid_argument("pool_batches must be at least 1");
      }
      const size_t pool = static_cast<size_t>(options.batch_size * options.pool_batches);
      for (size_t begin = 0; begin < order.size(); begin += pool) {
        const size_t end = std::min(order.size(), begin + pool);
        SortByLength(order.begin() + begin, order.begin() + end, lengths);
        auto batches = Chunk(order, begin, end, options.batch_size);
        std::move(batches.begin(), batches.end(), std::back_inserter(plan));
      }
      break;
    }
    case BatchingPolicy::kTokenBudget: {
      const int64_t longest =
          lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
      if (options.token_budget < longest) {
        throw std::invalid_argument("token_budget " + std::to_string(options.token_budget) +
                                    " is below the longest sample (" + std::to_string(longest) +
                                    " tokens); raise it or lower max_length");
      }
      SortByLength(order.begin(), order.end(), lengths);
      std::vector<int64_t> batch;
      for (const int64_t index : order) {
        // Ascending lengths: the newcomer is the batch's longest.
        if (!batch.empty() &&
            static_cast<int64_t>(batch.size() + 1) * lengths[index] > options.token_budget) {
          plan.push_back(std::move(batch));
          batch.clear();
        }
        batch.push_back(index);
      }
      if (!batch.empty()) plan.push_back(std::move(batch));
      break;
    }
  }
  // Sorted plans would otherwise visit short batches first, then long ones.
  std::shuffle(plan.begin(), plan.end(), generator);
  return plan;
}

BatchPlan ShardPlan(const BatchPlan& plan, const std::vector<int64_t>& lengths, int64_t rank,
                    int64_t ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    throw std::invalid_argument("rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  }
  size_t samples = 0;
  for (const auto& batch : plan) samples += batch.size();
  if (samples < static_cast<size_t>(ranks)) {
    throw std::invalid_argument("an epoch of " + std::to_string(samples) +
                                " samples cannot give each of " + std::to_string(ranks) +
                                " ranks one");
  }
  BatchPlan merged;
  for (size_t i = 0; i < plan.size(); ++i) {
    std::vector<int64_t> batch = plan[i];
    // Too small: joins the next batch, or (the last) the one before.
    while (batch.size() < static_cast<size_t>(ranks) && i + 1 < plan.size()) {
      ++i;
      batch.insert(batch.end(), plan[i].begin(), plan[i].end());
    }
    if (batch.size() < static_cast<size_t>(ranks)) {
      merged.back().insert(merged.back().end(), batch.begin(), batch.end());
    } else {
      merged.push_back(std::move(batch));
    }
  }
  BatchPlan shares;
  shares.reserve(merged.size());
  for (const auto& batch : merged) {
    std::vector<size_t> by_length(batch.size());
    std::iota(by_length.begin(), by_length.end(), 0);
    std::stable_sort(by_length.begin(), by_length.end(),
                     [&](size_t a, size_t b) { return lengths[batch[a]] > lengths[batch[b]]; });
    std::vector<int64_t> tokens(ranks, 0);
    std::vector<size_t> mine;  // positions in the batch
    for (const size_t position : by_length) {
      const auto least = std::min_element(tokens.begin(), tokens.end()) - tokens.begin();
      tokens[least] += lengths[batch[position]];
      if (least == rank) mine.push_back(position);
    }
    std::sort(mine.begin(), mine.end());
    std::vector<int64_t> share;
    for (const size_t position : mine) share.push_back(batch[position]);
    shares.push_back(std::move(share));
  }
  return shares;
}

PaddingStats MeasurePadding(const BatchPlan& plan, const std::vector<int64_t>& lengths) {
  PaddingStats stats;
  for (const auto& batch : plan) {
    int64_t longest = 0;
    for (const int64_t index : batch) {
      stats.real_tokens += lengths[index];
      longest = std::max(longest, lengths[index]);
    }
    stats.padded_tokens += longest * static_cast<int64_t>(batch.size());
  }
  return stats;
}

Samples SplitToMaxLength(const std::vector<std::vector<int64_t>>& sequences, int64_t max_length) {
  if (max_length < 2) throw std::invalid_argument("max_length must be at least 2");
  Samples samples;
  for (const auto& sequence : sequences) {
    for (size_t begin = 0; begin < sequence.size(); begin += max_length) {
      const size_t end = std::min(sequence.size(), begin + static_cast<size_t>(max_length));
      if (end - begin >= 2) samples.emplace_back(sequence.begin() + begin, sequence.begin() + end);
    }
  }
  return samples;
}

std::vector<int64_t> Lengths(const Samples& samples) {
  std::vector<int64_t> lengths;
  lengths.reserve(samples.size());
  for (const auto& sample : samples) lengths.push_back(static_cast<int64_t>(sample.size()));
  return lengths;
}

int64_t TargetCount(const Batch& batch) {
  return (batch.lengths - 1).clamp_min(0).sum().item<int64_t>();
}

Batch Collate(const Samples& samples, const std::vector<int64_t>& indices, int64_t pad_token,
              bool pin_memory) {
  int64_t longest = 0;
  for (const int64_t index : indices) {
    longest = std::max(longest, static_cast<int64_t>(samples.at(index).size()));
  }
  const auto batch_size = static_cast<int64_t>(indices.size());
  auto tokens = torch::full({batch_size, longest}, pad_token, torch::kInt64);
  auto lengths = torch::empty({batch_size}, torch::kInt64);
  auto* token_data = tokens.data_ptr<int64_t>();
  auto* length_data = lengths.data_ptr<int64_t>();
  for (int64_t row = 0; row < batch_size; ++row) {
    const auto& sample = samples[indices[row]];
    std::copy(sample.begin(), sample.end(), token_data + row * longest);
    length_data[row] = static_cast<int64_t>(sample.size());
  }
  if (pin_memory) tokens = tokens.pin_memory();
  return Batch{tokens, lengths};
}

}  // namespace seqbench::training
