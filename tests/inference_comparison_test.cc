// Trained weights through another variant (a pipeline's evaluate_with): a variant that
// computes the trained model's function compares equal on every measure, and int8
// inference holds a fraction of the float32 bytes while keeping a trained model's
// predictions.
#include "harness/training/inference_comparison.h"

#include <catch2/catch.hpp>

#include "tests/test_support.h"
#include "variants/core/int8_linear.h"

namespace seqbench::training {
namespace {

// Text a small model learns within a few dozen steps, so that its predictions are
// confident: each sample repeats one short phrase from a varying offset, with varying length.
Samples PhraseSamples(int64_t count, uint64_t seed) {
  const std::string phrase = "the quick brown fox jumps over the lazy dog. ";
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<int64_t> offset(0, static_cast<int64_t>(phrase.size()) - 1);
  std::uniform_int_distribution<int64_t> length(40, 72);
  Samples samples(count);
  for (auto& sample : samples) {
    const int64_t start = offset(generator);
    sample.resize(length(generator));
    for (size_t i = 0; i < sample.size(); ++i)
      sample[i] = static_cast<unsigned char>(phrase[(start + i) % phrase.size()]);
  }
  return samples;
}

struct TrainedModel {
  Samples train = PhraseSamples(96, 1), validation = PhraseSamples(24, 2);
  std::unique_ptr<Trainer> trainer;
  int64_t float32_bytes = 0;

  explicit TrainedModel(int64_t steps) {
    TrainingConfig config = testing::SmallTrainingConfig();
    config.model.width = 128;
    config.model.num_heads = 4;
    config.schedule.cycle_steps = steps;
    trainer = std::make_unique<Trainer>(config, train, validation);
    for (int64_t i = 0; i < steps; ++i) trainer->Step();
    for (const auto& item : trainer->variant().parameters())
      float32_bytes += item.value().numel() * static_cast<int64_t>(sizeof(float));
  }
};

TEST_CASE("trained weights through a variant of the same function compare equal", "[inference]") {
  TrainedModel model(30);
  const GenerationProbe probe{/*prompts=*/6, /*prompt_tokens=*/24, /*new_tokens=*/12};
  const InferenceComparison same = CompareInference(*model.trainer, "stepwise", probe);
  // The reference is the trainer's own evaluation, the same batches weighted the same way.
  CHECK(same.reference_loss == Approx(model.trainer->Evaluate()).epsilon(1e-9));
  CHECK(same.loss == Approx(same.reference_loss).epsilon(1e-5));
  CHECK(same.PerplexityRatio() == Approx(1).epsilon(1e-5));
  int64_t targets = 0;
  for (const auto& sample : model.validation) targets += static_cast<int64_t>(sample.size()) - 1;
  CHECK(same.targets == targets);
  CHECK(same.argmax_agreement == 1.0);
  CHECK(same.logit_rms_error < 1e-4);
  CHECK(same.generated_tokens == 6 * 12);
  CHECK(same.generated_agreement == 1.0);
  CHECK(same.generated_common_prefix == 12.0);  // every row agrees to its end
  // stepwise keeps its float32 copy of the weights; beside them only the tensors' own
  // objects and the heap's bookkeeping, a few percent at this size.
  CHECK(same.weight_bytes >= model.float32_bytes);
  CHECK(same.weight_bytes < model.float32_bytes * 1.1);
}

TEST_CASE("int8 inference keeps a trained model's predictions in fewer bytes",
          "[inference][int8]") {
  if (!Int8UnavailableReason().empty()) {
    WARN("skipped: " << Int8UnavailableReason());
    return;
  }
  TrainedModel model(40);
  const GenerationProbe probe{/*prompts=*/6, /*prompt_tokens=*/24, /*new_tokens=*/12};
  const InferenceComparison int8 = CompareInference(*model.trainer, "int8_dynamic", probe);
  INFO("loss " << int8.reference_loss << " -> " << int8.loss << ", argmax agreement "
               << int8.argmax_agreement << ", rms " << int8.logit_rms_error << ", generated "
               << int8.generated_agreement << ", bytes " << int8.weight_bytes << " of "
               << model.float32_bytes);
  // The model has learnt the phrase (uniform guessing is ln 256 = 5.5 nats).
  REQUIRE(int8.reference_loss < 1.5);
  // Lossy, but close: a different function, the same predictions almost everywhere.
  CHECK(int8.logit_rms_error > 0);
  CHECK(std::abs(int8.LossDifference()) < 0.05);
  CHECK(int8.argmax_agreement > 0.95);
  CHECK(int8.generated_common_prefix <= 12.0);
  CHECK(int8.generated_agreement * 12.0 >= int8.generated_common_prefix);
  // The matrices in one byte a weight, twice (the quantized tensor, and QNNPACK's packed
  // copy), with per-channel scales, and their float32 copies freed; the float32 embedding
  // (an eighth of this model's float32 bytes) stays. Kept float32 copies would put it
  // above the float32 model.
  CHECK(int8.weight_bytes > model.float32_bytes / 8);
  CHECK(int8.weight_bytes < model.float32_bytes * 0.8);
}

}  // namespace
}  // namespace seqbench::training
