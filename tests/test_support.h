// Helpers shared by the tests: small models and variants set up from shared weights.
//
// Thread-safety: for the single-threaded Catch2 runner only.
#pragma once

#include <memory>
#include <string>

#include "harness/equivalence.h"
#include "harness/text_data.h"
#include "harness/training/trainer.h"
#include "harness/workload.h"
#include "variants/core/registry.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::testing {

inline ModelConfig SmallSimpleRnn(int64_t layers = 2, int64_t heads = 3) {
  ModelConfig config;
  config.family = simple_rnn::kFamily;
  config.vocab_size = 29;
  config.width = 8 * heads;
  config.num_layers = layers;
  config.num_heads = heads;
  return config;
}

// A training configuration small enough for many steps in a test: `fused`, D=16, L=2.
inline training::TrainingConfig SmallTrainingConfig() {
  training::TrainingConfig config;
  config.variant = "fused";
  config.model.family = "simple_rnn";
  config.model.vocab_size = text::kVocabularySize;
  config.model.width = 16;
  config.model.num_layers = 2;
  config.model.num_heads = 2;
  config.batching.batch_size = 8;
  config.schedule.peak = 1e-2;
  config.schedule.warmup_steps = 2;
  config.schedule.cycle_steps = 20;
  config.eval_batch_size = 16;
  return config;
}

inline std::unique_ptr<Variant> MakeVariant(const std::string& key, const ModelConfig& config,
                                            const ParameterSet& weights, torch::ScalarType dtype,
                                            const VariantOptions& options = {}) {
  auto variant = CreateVariant(key);
  variant->Setup(config, weights, torch::kCPU, dtype, options);
  return variant;
}

// Every registered variant of `family` that runs on the CPU (the tests' device), except
// `exclude` and the tests' own deliberately broken variants (keys starting with "test_").
// CUDA-only variants (batched_cudagraph) and those this build cannot run (sdpa before
// LibTorch 2.1) are held to the baseline by the harness's correctness check on a GPU
// machine instead.
inline std::vector<std::string> VariantsOf(const std::string& family, const std::string& exclude) {
  std::vector<std::string> keys;
  for (const VariantEntry* entry : GlobalVariants().Entries()) {
    if (entry->key.rfind("test_", 0) == 0) continue;
    const Capabilities& caps = entry->capabilities;
    if (entry->key != exclude && caps.family == family && caps.Supports(torch::kCPU) &&
        caps.unavailable.empty()) {
      keys.push_back(entry->key);
    }
  }
  return keys;
}

}  // namespace seqbench::testing
