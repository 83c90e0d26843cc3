// `scan` at long sequence lengths: finite and equal to the step loop where a naive
// cumulative product of decays would underflow (0.9^4096 ~ 1e-188).
#include <catch2/catch.hpp>
#include <cmath>

#include "tests/test_support.h"

namespace seqbench {
namespace {

// Weights whose decays all sit near `decay` whatever the input.
ParameterSet WeightsWithDecayNear(const ModelConfig& config, double decay) {
  ParameterSet weights = simple_rnn::InitWeights(config, 21);
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    weights[prefix + "w_g"].mul_(0.01);
    weights[prefix + "b_g"].fill_(std::log(decay / (1 - decay)));
  }
  return weights;
}

// The reference is the baseline in float64: over thousands of steps the float32 step loop
// accumulates more rounding (6.5e-5 on these logits at decay 0.999) than the chunked scan
// does (2e-6), so comparing float32 with float32 would measure the baseline's error.
TEST_CASE("scan stays finite and equals the baseline at T = 2048 and 4096", "[scan][long]") {
  const ModelConfig config = testing::SmallSimpleRnn(/*layers=*/1, /*heads=*/2);
  for (const double decay : {0.9, 0.999}) {
    for (const int64_t length : {2048, 4096}) {
      const ParameterSet weights = WeightsWithDecayNear(config, decay);
      const Batch batch = MakeBatch({1, length, 0}, config.vocab_size, 9);
      const ForwardOutput truth =
          testing::MakeVariant("baseline", config, weights, torch::kFloat64)->InferStep(batch);
      for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
        DYNAMIC_SECTION("decay~" << decay << " T=" << length << " " << DtypeName(dtype)) {
          auto scan = testing::MakeVariant("scan", config, weights, dtype);
          const ForwardOutput actual = scan->InferStep(batch);
          REQUIRE(torch::isfinite(actual.logits).all().item<bool>());
          REQUIRE(std::isfinite(actual.loss.item<double>()));
          const Tolerance tolerance = scan->capabilities().ToleranceFor(dtype);
          const auto logits = Compare(actual.logits, truth.logits, tolerance);
          const auto loop = testing::MakeVariant("baseline", config, weights, dtype);
          const auto loop_logits = Compare(loop->InferStep(batch).logits, truth.logits, tolerance);
          INFO("scan max_abs " << logits.max_abs << ", same-dtype baseline max_abs "
                               << loop_logits.max_abs);
          CHECK(logits.within);
          CHECK(Compare(actual.loss, truth.loss, tolerance).within);
          // In float32, no less accurate than the step loop (in float64 the loop is the truth).
          if (dtype == torch::kFloat32) CHECK(logits.max_abs <= 2 * loop_logits.max_abs);
        }
      }
    }
  }
}

TEST_CASE("scan stays finite when decays underflow inside a chunk", "[scan]") {
  // sigmoid(-40) ~ 4e-18: a chunk of 16 such steps spans e^-640, far below float32's range
  // (the explicit form), within float64's (the factorized one, e^{±640}).
  const ModelConfig config = testing::SmallSimpleRnn(1, 2);
  ParameterSet weights = simple_rnn::InitWeights(config, 4);
  weights["layers.0.b_g"].fill_(-40.0);
  const Batch batch = MakeBatch({2, 64, 0}, config.vocab_size, 2);
  for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
    DYNAMIC_SECTION(DtypeName(dtype)) {
      auto scan = testing::MakeVariant("scan", config, weights, dtype);
      auto baseline = testing::MakeVariant("baseline", config, weights, dtype);
      const auto result = CheckEquivalence(*scan, *baseline, Mode::kTrain, batch,
                                           scan->capabilities().ToleranceFor(dtype));
      CHECK(result.logits.within);
      CHECK(result.gradients.within);
    }
  }
}

}  // namespace
}  // namespace seqbench
