// Every variant's train step does work linear in the sequence length T, measured without a
// clock (harness/scaling.h): the bytes one step allocates at T, 2T and 4T, whose growth
// ratio is 2 for linear work; a per-step select()/narrow() in an autograd'ed time loop
// makes each step's backward scatter into a zero buffer the size of the whole input,
// O(T^2) bytes, a ratio near 4.
#include "harness/scaling.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "tests/test_support.h"
#include "variants/lstm/model.h"
#include "variants/min_gru/model.h"
#include "variants/min_lstm/model.h"
#include "variants/qrnn/model.h"
#include "variants/rhn/model.h"

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

TEST_CASE("every variant that claims O(T) grows its bytes linearly from T to 4T", "[scaling]") {
  for (const std::string family : {simple_rnn::kFamily, lstm::kFamily, qrnn::kFamily,
                                   min_gru::kFamily, min_lstm::kFamily, rhn::kFamily}) {
    const ModelConfig config = SmallModel(family);
    const ParameterSet weights = GlobalFamilies().Get(config.family).init_weights(config, 7);
    for (const std::string& key : testing::VariantsOf(family, "")) {
      const Capabilities& caps = GlobalVariants().Get(key).capabilities;
      if (!caps.Supports(Mode::kTrain) || caps.complexity != "T") continue;
      DYNAMIC_SECTION(key) {
        const ScalingCheck check = CheckTrainScaling(key, config, weights, torch::kFloat32);
        INFO(key << ": " << check.bytes[0] << ", " << check.bytes[1] << ", " << check.bytes[2]
                 << " bytes at T=" << check.steps << ", 2T, 4T: growth ratio " << check.ratio());
        CHECK(check.bytes[0] > 0);
        CHECK(check.ratio() <= kLinearBytesRatio);
        CHECK(check.ratio() >= kGrowingBytesRatio);  // it does grow with T
        CHECK(check.linear());
      }
    }
  }
}

TEST_CASE("the scaling check's verdict at both ends of its bounds", "[scaling]") {
  // A fixed 5000 bytes whatever T (cancelled), then 1000 more from T to 2T.
  ScalingCheck check;
  check.steps = 64;
  check.bytes[0] = 6000;
  check.bytes[1] = 7000;
  for (const auto& [growth, linear] : std::vector<std::pair<int64_t, bool>>{
           {1499, false}, {1500, true}, {2000, true}, {2300, true}, {2301, false}, {4000, false}}) {
    check.bytes[2] = check.bytes[1] + growth;
    INFO(growth);
    CHECK(check.linear() == linear);
  }
  // Quadratic with a fixed part: a·T² + c at T = 1, 2, 4 is c + a, c + 4a, c + 16a: ratio 4.
  check.bytes[0] = 5000 + 100;
  check.bytes[1] = 5000 + 400;
  check.bytes[2] = 5000 + 1600;
  CHECK(check.ratio() == Approx(4.0));
  CHECK_FALSE(check.linear());
  check.bytes[1] = check.bytes[0];  // nothing grew: no verdict of linear
  CHECK_FALSE(check.linear());
}

}  // namespace
}  // namespace seqbench
