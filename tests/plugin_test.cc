// Out-of-tree variants: the example plugin loads, registers and computes the baseline's
// function; bad plugins fail with a message and leave the registry as it was.
#include "variants/core/plugin.h"

#include <catch2/catch.hpp>

#include "tests/test_support.h"

namespace seqbench {
namespace {

TEST_CASE("the example plugin loads, registers and equals the baseline", "[plugin]") {
  const LoadedPlugin plugin = LoadPlugin(SEQBENCH_EXAMPLE_PLUGIN);
  CHECK(plugin.variant_keys == std::vector<std::string>{"example_einsum"});
  REQUIRE(GlobalVariants().Contains("example_einsum"));
  CHECK(GlobalVariants().Get("example_einsum").origin == SEQBENCH_EXAMPLE_PLUGIN);

  const ModelConfig config = testing::SmallSimpleRnn();
  const ParameterSet weights = simple_rnn::InitWeights(config, 3);
  auto candidate = testing::MakeVariant("example_einsum", config, weights, torch::kFloat64);
  auto reference = testing::MakeVariant("baseline", config, weights, torch::kFloat64);
  const Batch batch = MakeBatch({3, 10, 2}, config.vocab_size, 4);
  const auto result = CheckEquivalence(*candidate, *reference, Mode::kTrain, batch,
                                       candidate->capabilities().float64);
  CHECK(result.passed());

  CHECK_THROWS_WITH(LoadPlugin(SEQBENCH_EXAMPLE_PLUGIN), Catch::Contains("already loaded"));
}

TEST_CASE("a plugin with a duplicate key is refused and leaves nothing behind", "[plugin]") {
  CHECK_THROWS_WITH(LoadPlugin(SEQBENCH_DUPLICATE_PLUGIN),
                    Catch::Contains(SEQBENCH_DUPLICATE_PLUGIN) &&
                        Catch::Contains("duplicate variant key 'baseline'"));
  CHECK_FALSE(GlobalVariants().Contains("duplicate_plugin_fresh_key"));
  CHECK(GlobalVariants().Get("baseline").origin == "built-in");
}

TEST_CASE("missing files and non-plugins are refused with the path", "[plugin]") {
  CHECK_THROWS_AS(LoadPlugin("/nonexistent/libnothing.so"), PluginError);
  CHECK_THROWS_WITH(LoadPlugin("/nonexistent/libnothing.so"),
                    Catch::Contains("/nonexistent/libnothing.so"));
  CHECK_THROWS_WITH(LoadPlugin(SEQBENCH_NOT_A_PLUGIN), Catch::Contains("not a seqbench plugin"));
}

}  // namespace
}  // namespace seqbench
