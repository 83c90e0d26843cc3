// Every variant's train step does work linear in the sequence length T, measured without a
// clock: the bytes one step allocates (the counting CPU allocator sees every tensor) at T
// and at 2T. A per-step select()/narrow() in an autograd'ed time loop makes each step's
// backward scatter into a zero buffer the size of the whole input, which is O(T^2) bytes
// and shows here as a ratio near 4.
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

TEST_CASE("every variant that claims O(T) allocates at most 2.3x the bytes at 2T", "[scaling]") {
  for (const std::string family : {simple_rnn::kFamily, lstm::kFamily, qrnn::kFamily,
                                   min_gru::kFamily, min_lstm::kFamily, rhn::kFamily}) {
    const ModelConfig config = SmallModel(family);
    const ParameterSet weights = GlobalFamilies().Get(config.family).init_weights(config, 7);
    for (const std::string& key : testing::VariantsOf(family, "")) {
      const Capabilities& caps = GlobalVariants().Get(key).capabilities;
      if (!caps.Supports(Mode::kTrain) || caps.complexity != "T") continue;
      DYNAMIC_SECTION(key) {
        const ScalingCheck check = CheckTrainScaling(key, config, weights, torch::kFloat32);
        INFO(key << ": " << check.short_bytes << " bytes at T=" << check.steps << ", "
                 << check.long_bytes << " at T=" << 2 * check.steps << ", ratio " << check.ratio());
        CHECK(check.short_bytes > 0);
        CHECK(check.ratio() <= kLinearBytesRatio);
        CHECK(check.ratio() >= kGrowingBytesRatio);  // it does grow with T
        CHECK(check.linear());
      }
    }
  }
}

TEST_CASE("the scaling check's verdict at both ends of its bounds", "[scaling]") {
  ScalingCheck check;
  check.steps = 96;
  check.short_bytes = 1000;
  for (const auto& [long_bytes, linear] : std::vector<std::pair<int64_t, bool>>{
           {1499, false}, {1500, true}, {2300, true}, {2301, false}, {4000, false}}) {
    check.long_bytes = long_bytes;
    INFO(long_bytes);
    CHECK(check.linear() == linear);
  }
  check.short_bytes = 0;  // nothing counted: no verdict of linear
  check.long_bytes = 0;
  CHECK_FALSE(check.linear());
}

}  // namespace
}  // namespace seqbench
