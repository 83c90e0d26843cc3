// Workloads: the synthetic batches a case runs on. Deterministic for a seed, so that a
// variant and its baseline see the same tokens, and a rerun sees the same data.
//
// Thread-safety: plain functions; safe from any thread.
#pragma once

#include <cstdint>

#include "variants/core/variant.h"

namespace seqbench {

struct BatchShape {
  int64_t batch_size = 1;
  int64_t max_length = 16;  // T: the padded length; at least one sequence has it
  int64_t min_length = 0;   // 0: every sequence has max_length (no padding); else lengths
                            // are drawn uniformly from [min_length, max_length]
};

inline constexpr int64_t kPaddingToken = 0;

// Tokens uniform in [1, vocab_size), padding positions set to kPaddingToken.
Batch MakeBatch(const BatchShape& shape, int64_t vocab_size, uint64_t seed,
                torch::Device device = torch::kCPU);

}  // namespace seqbench
