// Every variant's train step does work linear in the sequence length T, measured without a
// clock: the bytes one step allocates (the counting CPU allocator sees every tensor) at T
// and at 2T. A per-step select()/narrow() in an autograd'ed time loop makes each step's
// backward scatter into a zero buffer the size of the whole input, which is O(T^2) bytes
// and shows here as a ratio near 4.
#include <catch2/catch.hpp>

#include "harness/memory.h"
#include "tests/test_support.h"
#include "variants/lstm/model.h"
#include "variants/min_gru/model.h"
#include "variants/min_lstm/model.h"
#include "variants/qrnn/model.h"

namespace seqbench {
namespace {

ModelConfig SmallModel(const std::string& family) {
  if (family == simple_rnn::kFamily) return testing::SmallSimpleRnn(/*layers=*/1, /*heads=*/3);
  ModelConfig config;
  config.family = family;
  config.vocab_size = 29;
  config.width = 16;
  config.num_layers = 2;
  return config;
}

// Bytes allocated by one train step at sequence length `steps`, after one untimed step at
// that length (so that nothing allocated once, e.g. by a first call, is counted).
int64_t TrainStepBytes(const std::string& key, const ModelConfig& config, int64_t steps) {
  CountingCpuAllocator& allocator = CountingCpuAllocator::Install();
  const ParameterSet weights = GlobalFamilies().Get(config.family).init_weights(config, 7);
  auto variant = testing::MakeVariant(key, config, weights, torch::kFloat32);
  const Batch batch = MakeBatch({/*batch_size=*/2, steps, /*min_length=*/0}, config.vocab_size, 3);
  variant->TrainStep(batch);
  const int64_t before = allocator.allocated_bytes();
  variant->TrainStep(batch);
  return allocator.allocated_bytes() - before;
}

TEST_CASE("every variant that claims O(T) allocates at most 2.3x the bytes at 2T", "[scaling]") {
  constexpr int64_t kShort = 96, kLong = 2 * kShort;
  constexpr double kLinearBound = 2.3;  // 2 for linear work, plus slack for fixed costs
  for (const std::string family :
       {simple_rnn::kFamily, lstm::kFamily, qrnn::kFamily, min_gru::kFamily, min_lstm::kFamily}) {
    const ModelConfig config = SmallModel(family);
    for (const std::string& key : testing::VariantsOf(family, "")) {
      const Capabilities& caps = GlobalVariants().Get(key).capabilities;
      if (!caps.Supports(Mode::kTrain) || caps.complexity != "T") continue;
      DYNAMIC_SECTION(key) {
        const int64_t short_bytes = TrainStepBytes(key, config, kShort);
        const int64_t long_bytes = TrainStepBytes(key, config, kLong);
        const double ratio = static_cast<double>(long_bytes) / static_cast<double>(short_bytes);
        INFO(key << ": " << short_bytes << " bytes at T=" << kShort << ", " << long_bytes
                 << " at T=" << kLong << ", ratio " << ratio);
        CHECK(short_bytes > 0);
        CHECK(ratio <= kLinearBound);
        CHECK(ratio >= 1.5);  // it does grow with T: the count sees the step's work
      }
    }
  }
}

}  // namespace
}  // namespace seqbench
