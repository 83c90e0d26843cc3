#include "harness/workload.h"

#include "variants/core/torch_compat.h"

namespace seqbench {

Batch MakeBatch(const BatchShape& shape, int64_t vocab_size, uint64_t seed, torch::Device device) {
  TORCH_CHECK(shape.batch_size >= 1, "batch size must be at least 1, got ", shape.batch_size);
  TORCH_CHECK(shape.max_length >= 1, "sequence length must be at least 1, got ", shape.max_length);
  TORCH_CHECK(shape.min_length >= 0 && shape.min_length <= shape.max_length,
              "min_length must lie in [0, max_length], got ", shape.min_length);
  TORCH_CHECK(vocab_size >= 2, "vocab_size must be at least 2, got ", vocab_size);
  auto generator = compat::MakeCpuGenerator(seed);
  auto tokens =
      torch::randint(1, vocab_size, {shape.batch_size, shape.max_length}, generator, torch::kLong);
  auto lengths = torch::full({shape.batch_size}, shape.max_length, torch::kLong);
  if (shape.min_length > 0 && shape.batch_size > 1) {
    // The first sequence keeps the full length so that T is what the shape says.
    lengths.slice(0, 1).copy_(torch::randint(shape.min_length, shape.max_length + 1,
                                             {shape.batch_size - 1}, generator, torch::kLong));
  }
  const auto positions = torch::arange(shape.max_length, torch::kLong);
  tokens.masked_fill_(positions.unsqueeze(0) >= lengths.unsqueeze(1), kPaddingToken);
  return Batch{tokens.to(device), lengths};
}

}  // namespace seqbench
