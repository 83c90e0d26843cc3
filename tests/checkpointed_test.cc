// `checkpointed` recomputes segments in backward; whatever K, its gradients must be those
// of `batched`, which runs the same arithmetic without checkpoints. K may come from a
// budget of states instead.
#include <catch2/catch.hpp>

#include "tests/test_support.h"
#include "variants/simple_rnn/checkpoint_schedule.h"

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

TEST_CASE("checkpointed takes a budget of states instead of K", "[checkpointed]") {
  const ModelConfig config = testing::SmallSimpleRnn();
  const ParameterSet weights = simple_rnn::InitWeights(config, 5);
  const int64_t length = 21;
  const Batch batch = MakeBatch({3, length, 4}, config.vocab_size, 8);
  // T = 21 in 12 states: K = 7 (3 segments + 7 states = 10). K = 8 and 9 fit too, but
  // leave a shorter last segment (the one not recomputed): 16 and 18 steps run again, not 14.
  REQUIRE(simple_rnn::UniformSegmentLength(length, 12) == 7);
  auto budgeted =
      testing::MakeVariant("checkpointed", config, weights, torch::kFloat64, {{"max_states", 12}});
  auto every_7 = testing::MakeVariant("checkpointed", config, weights, torch::kFloat64,
                                      {{"checkpoint_every", 7}});
  auto every_8 = testing::MakeVariant("checkpointed", config, weights, torch::kFloat64,
                                      {{"checkpoint_every", 8}});
  CHECK(budgeted->Work(Mode::kTrain, batch, 0).recomputed_positions == 3 * 14);
  CHECK(every_8->Work(Mode::kTrain, batch, 0).recomputed_positions == 3 * 16);
  const auto result =
      CheckEquivalence(*budgeted, *every_7, Mode::kTrain, batch, Tolerance{0.0, 0.0});
  CHECK(result.gradients.within);
  // Below the least uniform budget (2·sqrt(21) ≈ 9.2): skipped with the reason, not run.
  auto starved =
      testing::MakeVariant("checkpointed", config, weights, torch::kFloat64, {{"max_states", 9}});
  CHECK_THAT(starved->SkipReason(Mode::kTrain, batch, 0), Catch::Contains("below"));
  CHECK(budgeted->SkipReason(Mode::kTrain, batch, 0).empty());
  CHECK_THROWS_WITH(testing::MakeVariant("checkpointed", config, weights, torch::kFloat64,
                                         {{"max_states", 12}, {"checkpoint_every", 4}}),
                    Catch::Contains("not both"));
}

}  // namespace
}  // namespace seqbench
