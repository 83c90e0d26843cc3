// `checkpointed` recomputes segments in backward; whatever K, its gradients must be those
// of `batched`, which runs the same arithmetic without checkpoints.
#include <catch2/catch.hpp>

#include "tests/test_support.h"

namespace seqbench {
namespace {

TEST_CASE("checkpointed gives batched's gradients for every K, including 1 and T",
          "[checkpointed]") {
  const ModelConfig config = testing::SmallSimpleRnn();
  const ParameterSet weights = simple_rnn::InitWeights(config, 5);
  const int64_t length = 19;
  const Batch batch = MakeBatch({3, length, 4}, config.vocab_size, 8);
  for (const int64_t every :
       {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{5}, length - 1, length, length + 7}) {
    DYNAMIC_SECTION("checkpoint_every=" << every << (every == 0 ? " (default)" : "")) {
      VariantOptions options;
      if (every > 0) options["checkpoint_every"] = every;
      auto checkpointed =
          testing::MakeVariant("checkpointed", config, weights, torch::kFloat64, options);
      auto batched = testing::MakeVariant("batched", config, weights, torch::kFloat64);
      // Same operations in the same order: the results agree to the last bit.
      const auto result =
          CheckEquivalence(*checkpointed, *batched, Mode::kTrain, batch, Tolerance{0.0, 0.0});
      INFO("grad max_abs " << result.gradients.max_abs << " at " << result.worst_gradient);
      CHECK(result.logits.within);
      CHECK(result.loss.within);
      CHECK(result.gradients.within);
    }
  }
}

TEST_CASE("checkpointed rejects a non-positive K", "[checkpointed]") {
  const ModelConfig config = testing::SmallSimpleRnn();
  auto variant = testing::MakeVariant("checkpointed", config, simple_rnn::InitWeights(config, 1),
                                      torch::kFloat32, {{"checkpoint_every", -3}});
  const Batch batch = MakeBatch({1, 4, 0}, config.vocab_size, 1);
  CHECK_THROWS_WITH(variant->TrainStep(batch), Catch::Contains("at least 1"));
}

}  // namespace
}  // namespace seqbench
