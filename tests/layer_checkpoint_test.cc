// Checkpointing every N layers (CheckpointedSegment): whatever N, a train step gives the
// gradients of the variant it builds on, bit for bit (the same arithmetic, run twice), and
// what the forward pass keeps for backward shrinks: counted by the allocator, not timed.
#include <catch2/catch.hpp>

#include "harness/memory.h"
#include "tests/test_support.h"
#include "variants/core/segment_checkpoint.h"
#include "variants/lstm/model.h"

namespace seqbench {
namespace {

ModelConfig ThreeLayers(const std::string& family) {
  ModelConfig config = testing::SmallSimpleRnn(/*layers=*/3, /*heads=*/2);
  config.family = family;
  return config;
}

// Bytes that stay allocated after a forward pass with gradients on, while its output is
// held: the activations its graph keeps for backward.
int64_t KeptForBackward(Variant& variant, const Batch& batch) {
  CountingCpuAllocator& allocator = CountingCpuAllocator::Install();
  variant.Forward(batch);  // anything a first call allocates once (no update: weights stay)
  const int64_t before = allocator.live_bytes();
  const ForwardOutput out = variant.Forward(batch);
  return allocator.live_bytes() - before;
}

struct Pair {
  std::string family, checkpointed, plain;
};

TEST_CASE(
    "layer checkpointing gives its base's gradients for every segment length, and keeps "
    "less for backward",
    "[layer_checkpoint]") {
  for (const Pair& pair : {Pair{simple_rnn::kFamily, "layer_checkpointed", "batched"},
                           Pair{lstm::kFamily, "lstm_layer_checkpointed", "lstm_fused"}}) {
    const ModelConfig config = ThreeLayers(pair.family);
    const ParameterSet weights = GlobalFamilies().Get(pair.family).init_weights(config, 5);
    const Batch batch = MakeBatch({3, 17, 4}, config.vocab_size, 8);
    auto plain = testing::MakeVariant(pair.plain, config, weights, torch::kFloat64);
    const int64_t plain_bytes = KeptForBackward(*plain, batch);
    for (const int64_t every : {1, 2, 3, 5}) {
      DYNAMIC_SECTION(pair.checkpointed << " every=" << every) {
        auto checkpointed = testing::MakeVariant(pair.checkpointed, config, weights,
                                                 torch::kFloat64, {{"every", every}});
        const auto result =
            CheckEquivalence(*checkpointed, *plain, Mode::kTrain, batch, Tolerance{0.0, 0.0});
        INFO("grad max_abs " << result.gradients.max_abs << " at " << result.worst_gradient);
        CHECK(result.passed());
        CHECK_FALSE(result.worst_gradient.empty());
        const int64_t bytes = KeptForBackward(*checkpointed, batch);
        INFO(pair.plain << " keeps " << plain_bytes << " bytes for backward, every=" << every << " "
                        << bytes);
        CHECK(bytes < plain_bytes);
      }
    }
    // Longer segments keep fewer inputs: every=3 (one segment) keeps less than every=1.
    auto one =
        testing::MakeVariant(pair.checkpointed, config, weights, torch::kFloat64, {{"every", 1}});
    auto all =
        testing::MakeVariant(pair.checkpointed, config, weights, torch::kFloat64, {{"every", 3}});
    CHECK(KeptForBackward(*all, batch) < KeptForBackward(*one, batch));
  }
}

// A segment with two outputs that both reach the loss, a third that nothing uses, a trained
// parameter and a frozen one: the checkpointed segment's gradients are the plain segment's.
TEST_CASE("a checkpointed segment routes every output's gradient and skips frozen parameters",
          "[layer_checkpoint]") {
  torch::manual_seed(4);
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor trained = torch::randn({5, 5}, options).requires_grad_();
  const torch::Tensor frozen = torch::randn({5, 5}, options);
  const torch::Tensor source = torch::randn({3, 5}, options).requires_grad_();
  const SegmentFn segment = [trained, frozen](const torch::Tensor& x) {
    const torch::Tensor hidden = torch::tanh(torch::matmul(x, trained));
    return std::vector<torch::Tensor>{torch::matmul(hidden, frozen), hidden * 3,
                                      hidden.pow(2).sum(1)};
  };
  const auto gradients = [&](bool checkpointed) {
    trained.mutable_grad() = torch::Tensor();
    source.mutable_grad() = torch::Tensor();
    const torch::Tensor input = source * 2;  // a non-leaf input, as between layers
    const std::vector<torch::Tensor> outputs =
        checkpointed ? CheckpointedSegment(segment, input, {trained, frozen}) : segment(input);
    // Outputs 0 and 1 have one shape and different gradients: a mix-up shows.
    (outputs[0].sin().sum() + 0.5 * outputs[1].pow(2).sum()).backward();
    return std::pair{trained.grad().clone(), source.grad().clone()};
  };
  const auto [plain_trained, plain_source] = gradients(false);
  const auto [checkpointed_trained, checkpointed_source] = gradients(true);
  CHECK(torch::equal(checkpointed_trained, plain_trained));
  CHECK(torch::equal(checkpointed_source, plain_source));
  CHECK_FALSE(frozen.grad().defined());
}

TEST_CASE("layer checkpointing refuses a segment of fewer than one layer", "[layer_checkpoint]") {
  for (const std::string key : {"layer_checkpointed", "lstm_layer_checkpointed"}) {
    const std::string family = GlobalVariants().Get(key).capabilities.family;
    const ModelConfig config = ThreeLayers(family);
    CHECK_THROWS_WITH(
        testing::MakeVariant(key, config, GlobalFamilies().Get(family).init_weights(config, 1),
                             torch::kFloat32, {{"every", 0}}),
        Catch::Contains("every must be >= 1"));
  }
}

}  // namespace
}  // namespace seqbench
