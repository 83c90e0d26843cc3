// The registries: sorted keys, unknown keys listing the known ones, duplicates refused,
// and variants refusing what they did not declare.
#include <algorithm>
#include <catch2/catch.hpp>

#include "tests/test_support.h"

namespace seqbench {
namespace {

TEST_CASE("the registry lists the six seed variants, sorted", "[registry]") {
  const auto keys = GlobalVariants().Keys();
  for (const char* key : {"baseline", "batched", "checkpointed", "fused", "scan", "stepwise"}) {
    INFO(key);
    CHECK(std::count(keys.begin(), keys.end(), key) == 1);
  }
  CHECK(std::is_sorted(keys.begin(), keys.end()));
  for (const VariantEntry* entry : GlobalVariants().Entries()) {
    INFO(entry->key);
    CHECK_FALSE(entry->description.empty());
    const Capabilities& caps = entry->capabilities;
    CHECK(GlobalFamilies().Contains(caps.family));
    CHECK_FALSE(caps.modes.empty());
    CHECK_FALSE(caps.devices.empty());
  }
}

TEST_CASE("a CUDA-only variant declares it and refuses the CPU", "[registry]") {
  auto variant = CreateVariant("batched_cudagraph");
  const Capabilities caps = variant->capabilities();
  CHECK(caps.Supports(c10::DeviceType::CUDA));
  CHECK_FALSE(caps.Supports(c10::DeviceType::CPU));
  CHECK_FALSE(caps.Supports(Mode::kGenerate));
  ModelConfig config;
  config.family = caps.family;
  const auto weights = GlobalFamilies().Get(config.family).init_weights(config, 1);
  CHECK_THROWS_WITH(variant->Setup(config, weights, torch::kCPU, torch::kFloat32),
                    Catch::Contains("does not support device cpu"));
}

TEST_CASE("an unknown key fails with the list of known keys", "[registry]") {
  try {
    CreateVariant("no_such_variant");
    FAIL("CreateVariant accepted an unknown key");
  } catch (const UnknownKeyError& error) {
    const std::string message = error.what();
    CHECK_THAT(message, Catch::Contains("no_such_variant"));
    for (const auto& key : GlobalVariants().Keys()) CHECK_THAT(message, Catch::Contains(key));
  }
  CHECK_THROWS_AS(GlobalFamilies().Get("lstm_typo"), UnknownKeyError);
}

TEST_CASE("a duplicate key fails and keeps the first entry", "[registry]") {
  VariantRegistry registry("variant", "variants");
  registry.Add(VariantEntry{"alpha", "first", nullptr, "built-in", {}});
  CHECK_THROWS_AS(registry.Add(VariantEntry{"alpha", "second", nullptr, "built-in", {}}),
                  DuplicateKeyError);
  CHECK(registry.Get("alpha").description == "first");
  CHECK_THROWS_AS(registry.Add(VariantEntry{"", "empty", nullptr, "built-in", {}}),
                  std::invalid_argument);
  registry.Add(VariantEntry{"Beta", "", nullptr, "", {}});
  CHECK(registry.Keys() == std::vector<std::string>{"Beta", "alpha"});
}

TEST_CASE("Setup refuses undeclared options, other families and unsupported dtypes", "[registry]") {
  ModelConfig config = testing::SmallSimpleRnn();
  const ParameterSet weights = simple_rnn::InitWeights(config, 1);
  auto scan = CreateVariant("scan");
  CHECK_THROWS_WITH(
      scan->Setup(config, weights, torch::kCPU, torch::kFloat32, {{"chunk", 8}}),
      Catch::Contains("unknown variant option 'chunk'") && Catch::Contains("chunk_size"));
  CHECK_THROWS_WITH(scan->Setup(config, weights, torch::kCPU, torch::kInt32),
                    Catch::Contains("dtype"));
  config.family = "lstm";
  CHECK_THROWS_WITH(scan->Setup(config, weights, torch::kCPU, torch::kFloat32),
                    Catch::Contains("family"));
}

TEST_CASE("the family initializer is deterministic and seed-dependent", "[registry]") {
  const ModelConfig config = testing::SmallSimpleRnn();
  const auto& init = GlobalFamilies().Get(simple_rnn::kFamily).init_weights;
  const ParameterSet a = init(config, 42), b = init(config, 42), c = init(config, 43);
  REQUIRE(a.size() == b.size());
  for (const auto& item : a) {
    INFO(item.key());
    CHECK(torch::equal(item.value(), b[item.key()]));
    CHECK_FALSE(torch::equal(item.value(), c[item.key()]));
  }
}

}  // namespace
}  // namespace seqbench
