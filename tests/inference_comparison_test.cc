// Trained weights through another variant (a pipeline's evaluate_with): a variant that
// computes the trained model's function compares equal on every measure, and int8
// inference holds a fraction of the float32 bytes while keeping a trained model's
// predictions.
#include "harness/training/inference_comparison.h"

#include <catch2/catch.hpp>

#include "tests/test_support.h"
#include "variants/core/int8_linear.h"
#include "variants/core/language_model.h"

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

// `stepwise` with differences a test can count by hand, so that each measure's formula is
// seen to weigh them the way its definition says:
// - at every real position t with t % 3 == 0, the logit one past the argmax gains kBump, so
//   the argmax moves there and only there, by one logit's error of exactly kBump;
// - every logit of a padding position gains kPaddingShift, which leaves its argmax alone but
//   weighs on any measure that forgets the padding mask;
// - greedy row g first differs at token FirstDifference(g), by one token.
class PerturbedStepwise : public Variant {
 public:
  static constexpr double kBump = 100, kPaddingShift = 1000;
  static int64_t FirstDifference(int64_t row, int64_t new_tokens) {
    return row * 5 % (new_tokens + 1);  // new_tokens: the row agrees to its end
  }

  Capabilities capabilities() const override { return inner_->capabilities(); }

  ForwardOutput Forward(const Batch& batch) override {
    ForwardOutput output = inner_->Forward(batch);
    const torch::Tensor mask = batch.PaddingMask();  // [B,T]
    const torch::Tensor positions = torch::arange(batch.max_length(), batch.tokens.options());
    const torch::Tensor bumped = mask & (positions % 3 == 0).unsqueeze(0);  // [B,T]
    const int64_t vocabulary = output.logits.size(-1);
    const torch::Tensor runner_up = (output.logits.argmax(-1) + 1) % vocabulary;  // [B,T]
    const torch::Tensor bump =
        torch::zeros_like(output.logits).scatter_(-1, runner_up.unsqueeze(-1), kBump);
    output.logits = output.logits + bump * bumped.unsqueeze(-1) +
                    kPaddingShift * (~mask).unsqueeze(-1).to(output.logits.dtype());
    output.loss = NextTokenLoss(output.logits, batch);
    return output;
  }

  torch::Tensor Generate(const torch::Tensor& prompt, int64_t num_tokens) override {
    torch::Tensor tokens = inner_->Generate(prompt, num_tokens).to(torch::kCPU).clone();  // [G,N]
    auto token = tokens.accessor<int64_t, 2>();
    for (int64_t row = 0; row < tokens.size(0); ++row) {
      const int64_t at = FirstDifference(row, num_tokens);
      if (at < num_tokens) token[row][at] = (token[row][at] + 1) % config().vocab_size;
    }
    return tokens.to(prompt.device());
  }

 protected:
  void OnSetup() override { inner_->Setup(config(), parameters(), device(), dtype()); }

 private:
  std::unique_ptr<Variant> inner_ = CreateVariant("stepwise");
};

// Registers a test's variant for the test's lifetime only, so that the tests that walk the
// whole registry never meet it.
class ScopedVariant {
 public:
  template <typename VariantClass>
  static ScopedVariant Of(const std::string& key) {
    VariantEntry entry{key, "test variant", [] { return std::make_unique<VariantClass>(); }, "test",
                       VariantClass().capabilities()};
    GlobalVariants().Add(std::move(entry));
    return ScopedVariant(key);
  }
  ScopedVariant(const ScopedVariant&) = delete;
  ~ScopedVariant() { GlobalVariants().Remove(key_); }

 private:
  explicit ScopedVariant(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

TEST_CASE("each inference measure weighs known differences as its definition says", "[inference]") {
  TrainedModel model(30);
  const ScopedVariant perturbed = ScopedVariant::Of<PerturbedStepwise>("test_perturbed");
  const GenerationProbe probe{/*prompts=*/6, /*prompt_tokens=*/24, /*new_tokens=*/12};
  const InferenceComparison result = CompareInference(*model.trainer, "test_perturbed", probe);

  // Counted from the samples alone: the batches pad them, the measures must not count it.
  double positions = 0, bumped = 0;
  for (const auto& sample : model.validation) {
    positions += static_cast<double>(sample.size());
    bumped += static_cast<double>((sample.size() + 2) / 3);  // t = 0, 3, 6, ... < length
  }
  const double vocabulary = static_cast<double>(model.trainer->variant().config().vocab_size);
  CHECK(result.argmax_agreement == Approx(1 - bumped / positions).epsilon(1e-12));
  // The root of the mean over every real logit, not the largest error (kBump) nor the mean
  // of each position's norm.
  CHECK(result.logit_rms_error ==
        Approx(std::sqrt(bumped * PerturbedStepwise::kBump * PerturbedStepwise::kBump /
                         (positions * vocabulary)))
            .epsilon(1e-5));
  // The bumped logit takes the argmax from a trained model's mostly right guess: the
  // variant's loss rises, by tens of nats at a third of the targets.
  CHECK(result.reference_loss == Approx(model.trainer->Evaluate()).epsilon(1e-9));
  CHECK(result.LossDifference() > 10);

  // Greedy rows first differ at 0, 5, 10, 2, 7 and never (12 of 12 agree).
  double agreeing = 0, prefix = 0;
  for (int64_t row = 0; row < probe.prompts; ++row) {
    const int64_t at = PerturbedStepwise::FirstDifference(row, probe.new_tokens);
    agreeing += static_cast<double>(probe.new_tokens - (at < probe.new_tokens ? 1 : 0));
    prefix += static_cast<double>(at);
  }
  REQUIRE(result.generated_tokens == probe.prompts * probe.new_tokens);
  CHECK(result.generated_agreement == Approx(agreeing / 72.0).epsilon(1e-12));
  CHECK(result.generated_common_prefix == Approx(prefix / 6.0).epsilon(1e-12));
  CHECK(result.generated_common_prefix == Approx(6.0));  // (0 + 5 + 10 + 2 + 7 + 12) / 6
}

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
  INFO("engine " << PreferredInt8Engine() << ", loss " << int8.reference_loss << " -> " << int8.loss << ", argmax agreement "
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
