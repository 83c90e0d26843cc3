#include "harness/scaling.h"

#include "harness/memory.h"
#include "harness/workload.h"
#include "variants/core/registry.h"

namespace seqbench {
namespace {

int64_t TrainStepBytes(Variant& variant, const ModelConfig& config, int64_t steps) {
  CountingCpuAllocator& allocator = CountingCpuAllocator::Install();
  const Batch batch = MakeBatch({/*batch_size=*/2, steps, /*min_length=*/0}, config.vocab_size, 3);
  variant.TrainStep(batch);
  const int64_t before = allocator.allocated_bytes();
  variant.TrainStep(batch);
  return allocator.allocated_bytes() - before;
}

}  // namespace

ScalingCheck CheckTrainScaling(const std::string& key, const ModelConfig& config,
                               const ParameterSet& weights, torch::ScalarType dtype,
                               int64_t steps) {
  ScalingCheck check;
  check.steps = steps;
  for (int i = 0; i < 3; ++i) {
    // A fresh variant at each length: nothing one length cached serves the next.
    auto variant = CreateVariant(key);
    variant->Setup(config, weights, torch::kCPU, dtype);
    check.bytes[i] = TrainStepBytes(*variant, config, steps << i);
  }
  return check;
}

}  // namespace seqbench
