// Helpers shared by the tests: small models and variants set up from shared weights.
//
// Thread-safety: for the single-threaded Catch2 runner only.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "harness/equivalence.h"
#include "harness/text_data.h"
#include "harness/training/trainer.h"
#include "harness/workload.h"
#include "variants/core/registry.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::testing {

// `count` samples of uniform random bytes, each of a length uniform in [shortest, longest].
inline training::Samples RandomSamples(int64_t count, uint64_t seed, int64_t shortest = 2,
                                       int64_t longest = 64) {
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<int64_t> length(shortest, longest), byte(0, 255);
  training::Samples samples(count);
  for (auto& sample : samples) {
    sample.resize(length(generator));
    for (auto& token : sample) token = byte(generator);
  }
  return samples;
}

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

// The losses of steps save_at+1 .. until, twice: straight through from a new trainer, and
// from a trainer that loaded the checkpoint another wrote at step save_at (into `path`,
// left there). With everything the trajectory depends on in the checkpoint, the two are
// equal bit for bit.
struct LossesAcrossResume {
  std::vector<double> straight, resumed;
  int64_t loaded_step = 0;  // the resumed trainer's step() after Load
};
inline LossesAcrossResume StepAcrossResume(const training::TrainingConfig& config,
                                           const training::Samples& train,
                                           const training::Samples& validation,
                                           const std::string& path, int save_at, int until) {
  LossesAcrossResume losses;
  {
    training::Trainer trainer(config, train, validation);
    for (int i = 0; i < until; ++i) {
      const double loss = trainer.Step().loss;
      if (i >= save_at) losses.straight.push_back(loss);
    }
  }
  {
    training::Trainer first(config, train, validation);
    for (int i = 0; i < save_at; ++i) first.Step();
    first.Save(path);
  }
  training::Trainer second(config, train, validation);
  second.Load(path);
  losses.loaded_step = second.step();
  for (int i = save_at; i < until; ++i) losses.resumed.push_back(second.Step().loss);
  return losses;
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
