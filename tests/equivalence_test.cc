// Every simple_rnn variant computes the baseline's function: logits, loss and every
// parameter gradient, on ragged batches, in float64 and float32, within the tolerance
// the variant declares.
#include <catch2/catch.hpp>

#include "tests/test_support.h"
#include "variants/simple_rnn/recurrence_kernels.h"

namespace seqbench {
namespace {

using testing::MakeVariant;
using testing::SmallSimpleRnn;

void RequireEquivalent(const std::string& key, const ModelConfig& config, Mode mode,
                       torch::ScalarType dtype, const BatchShape& shape,
                       const VariantOptions& options = {}) {
  // Each variant is held to the modes and dtypes it declares (int8_dynamic: forward and
  // generate in float32); the harness skips the others the same way.
  const Capabilities& caps = GlobalVariants().Get(key).capabilities;
  if (!caps.Supports(mode) || !caps.Supports(dtype)) {
    CHECK(caps.category == "quantization");  // no other variant may drop a mode or dtype
    return;
  }
  const ParameterSet weights = simple_rnn::InitWeights(config, /*seed=*/7);
  auto reference = MakeVariant("baseline", config, weights, dtype);
  auto candidate = MakeVariant(key, config, weights, dtype, options);
  const Batch batch = MakeBatch(shape, config.vocab_size, /*seed=*/11);
  const Tolerance tolerance = candidate->capabilities().ToleranceFor(dtype);
  const EquivalenceResult result = CheckEquivalence(*candidate, *reference, mode, batch, tolerance);
  INFO(key << " " << ModeName(mode) << " " << DtypeName(dtype) << " B=" << shape.batch_size
           << " T=" << shape.max_length << ": logits max_abs=" << result.logits.max_abs
           << " loss max_abs=" << result.loss.max_abs
           << " grad max_rel=" << result.gradients.max_rel << " (" << result.worst_gradient << ")");
  CHECK(result.logits.within);
  CHECK(result.loss.within);
  CHECK(result.gradients.within);
  if (mode == Mode::kTrain) CHECK_FALSE(result.worst_gradient.empty());
}

TEST_CASE("every simple_rnn variant equals the baseline on ragged batches", "[equivalence]") {
  const auto keys = testing::VariantsOf(simple_rnn::kFamily, "baseline");
  REQUIRE(keys.size() >= 5);
  const BatchShape ragged{/*batch_size=*/4, /*max_length=*/13, /*min_length=*/2};
  for (const auto& key : keys) {
    for (const auto dtype : {torch::kFloat64, torch::kFloat32}) {
      for (const auto mode : {Mode::kTrain, Mode::kForward}) {
        DYNAMIC_SECTION(key << " " << ModeName(mode) << " " << DtypeName(dtype)) {
          RequireEquivalent(key, SmallSimpleRnn(), mode, dtype, ragged);
        }
      }
    }
  }
}

TEST_CASE("variants agree on other shapes: one layer, one head, one token", "[equivalence]") {
  for (const auto& key : testing::VariantsOf(simple_rnn::kFamily, "baseline")) {
    DYNAMIC_SECTION(key << " L=1 H=1 T=9") {
      RequireEquivalent(key, SmallSimpleRnn(1, 1), Mode::kTrain, torch::kFloat64, {3, 9, 1});
    }
    DYNAMIC_SECTION(key << " L=3 H=2 T=1") {
      RequireEquivalent(key, SmallSimpleRnn(3, 2), Mode::kForward, torch::kFloat64, {2, 1, 0});
    }
  }
}

TEST_CASE("fused_recurrent and packed equal the baseline where their vector kernels run",
          "[equivalence][kernels]") {
  ModelConfig config = SmallSimpleRnn(/*layers=*/2, /*heads=*/2);
  config.width = 128;  // dh = 64: the README's head width
  REQUIRE(simple_rnn::KernelsFor(float{}, 64).set != simple_rnn::KernelSet::kLoops);
  for (const std::string key : {"fused_recurrent", "packed"}) {
    // T = 37: two whole segments of the backward's recompute and a part of one.
    DYNAMIC_SECTION(key) {
      RequireEquivalent(key, config, Mode::kTrain, torch::kFloat32, {3, 37, 9});
    }
  }
}

TEST_CASE("scan is exact for every chunk size, including 1 and chunks longer than T",
          "[equivalence][scan]") {
  for (const int64_t chunk : {1, 3, 5, 16, 64}) {
    DYNAMIC_SECTION("chunk_size=" << chunk) {
      RequireEquivalent("scan", SmallSimpleRnn(), Mode::kTrain, torch::kFloat64, {3, 21, 4},
                        {{"chunk_size", chunk}});
    }
  }
}

TEST_CASE("padding changes nothing: a sequence alone equals it inside a ragged batch",
          "[equivalence][padding]") {
  const ModelConfig config = SmallSimpleRnn();
  const ParameterSet weights = simple_rnn::InitWeights(config, 3);
  const Batch ragged = MakeBatch({4, 17, 3}, config.vocab_size, 5);
  for (const auto& key : testing::VariantsOf(simple_rnn::kFamily, "")) {
    // Exactness is a float64 property. int8_dynamic, float32 only, takes its input's
    // quantization scale over the whole batch, so a sequence alone rounds differently:
    // by design, and bounded by its tolerance against the baseline instead.
    if (!GlobalVariants().Get(key).capabilities.Supports(torch::kFloat64)) continue;
    DYNAMIC_SECTION(key) {
      auto variant = MakeVariant(key, config, weights, torch::kFloat64);
      const auto batched_logits = variant->InferStep(ragged).logits;
      for (int64_t b = 0; b < ragged.batch_size(); ++b) {
        const int64_t length = ragged.lengths[b].item<int64_t>();
        const Batch alone{ragged.tokens[b].slice(0, 0, length).unsqueeze(0),
                          torch::full({1}, length, torch::kLong)};
        const auto alone_logits = variant->InferStep(alone).logits[0];
        const auto difference = Compare(batched_logits[b].slice(0, 0, length), alone_logits,
                                        variant->capabilities().float64);
        INFO("sequence " << b << " length " << length << " max_abs " << difference.max_abs);
        CHECK(difference.within);
      }
    }
  }
}

TEST_CASE("a step in row chunks has the whole batch's logits, loss and gradients",
          "[equivalence][check]") {
  const ModelConfig config = SmallSimpleRnn();
  const ParameterSet weights = simple_rnn::InitWeights(config, 3);
  // Ragged lengths: chunks hold different shares of the targets, which weight their losses.
  const Batch batch = MakeBatch({7, 13, 2}, config.vocab_size, 5);
  REQUIRE(batch.lengths.min().item<int64_t>() < batch.lengths.max().item<int64_t>());
  for (const Mode mode : {Mode::kTrain, Mode::kForward}) {
    auto whole = MakeVariant("baseline", config, weights, torch::kFloat64);
    const StepOutcome expected = RunStep(*whole, mode, batch);
    for (const int64_t rows : {1, 3, 7, 20}) {
      INFO(ModeName(mode) << ", " << rows << " rows a chunk");
      auto chunked = MakeVariant("baseline", config, weights, torch::kFloat64);
      const StepOutcome actual = RunStepInRowChunks(*chunked, mode, batch, 0, rows);
      const EquivalenceResult result =
          CompareOutcomes(actual, expected, mode, batch, Tolerance{1e-12, 1e-12});
      CHECK(result.logits.within);
      CHECK(result.loss.within);
      CHECK(result.gradients.within);
      CHECK(actual.gradients.size() == expected.gradients.size());
      // No optimizer step: the reference's weights are those it was set up with.
      for (const auto& item : chunked->parameters())
        CHECK(torch::equal(item.value().detach(), weights[item.key()]));
    }
  }
}

TEST_CASE("the checked rows: first, last, longest and shortest, every row of small batches",
          "[equivalence][check]") {
  Batch batch{torch::zeros({9, 10}, torch::kLong),
              torch::tensor({5, 7, 10, 3, 10, 2, 6, 8, 4}, torch::kLong)};
  CHECK(CheckRows(batch) == std::vector<int64_t>{0, 2, 5, 8});  // longest: the first of ties
  batch.lengths = torch::tensor({10, 7, 3, 5, 4, 6, 8, 9, 1}, torch::kLong);
  CHECK(CheckRows(batch) == std::vector<int64_t>{0, 8});  // first is longest, last shortest
  const Batch small{torch::zeros({3, 4}, torch::kLong), torch::tensor({4, 1, 2}, torch::kLong)};
  CHECK(CheckRows(small) == std::vector<int64_t>{0, 1, 2});
  const Batch selected = SelectRows(batch, {0, 8});
  CHECK(selected.batch_size() == 2);
  CHECK(selected.max_length() == 10);
  CHECK(selected.lengths[1].item<int64_t>() == 1);
}

TEST_CASE("the comparison catches a wrong result", "[equivalence]") {
  const Tolerance tolerance{1e-4, 1e-5};
  const auto expected = torch::randn({5, 7}, torch::kFloat64);
  CHECK(Compare(expected.clone(), expected, tolerance).within);
  auto off = expected.clone();
  off[2][3] += 1e-3;
  const auto difference = Compare(off, expected, tolerance);
  CHECK_FALSE(difference.within);
  CHECK(difference.max_abs == Approx(1e-3).epsilon(1e-6));
  auto nan = expected.clone();
  nan[0][0] = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(Compare(nan, expected, tolerance).within);
  // Masked-out positions are not compared.
  auto mask = torch::ones({5, 7}, torch::kBool);
  mask[2][3] = false;
  CHECK(Compare(off, expected, tolerance, mask).within);
}

TEST_CASE("the stored errors: logits over their real positions, the loss, the worst gradient",
          "[equivalence]") {
  // Logits of scale 4 off by 1e-3 at one real position and by 1 at a padding position;
  // the loss off by 0.002; two gradients, "a" of scale 10 off by 0.05 (relative 0.005) and
  // "b" of scale 0.1 off by 0.01 (relative 0.1): the largest absolute and the largest
  // relative error come from different parameters, and "b" is the worse.
  const Tolerance tolerance{1e-4, 1e-5};
  Batch batch;
  batch.tokens = torch::zeros({2, 3}, torch::kInt64);
  batch.lengths = torch::tensor({3, 2}, torch::kInt64);  // [1][2] is padding
  StepOutcome expected, actual;
  expected.output.logits = torch::full({2, 3, 4}, 2.0, torch::kFloat64);
  expected.output.logits[0][0][0] = -4.0;
  actual.output.logits = expected.output.logits.clone();
  actual.output.logits[1][1][2] += 1e-3;
  actual.output.logits[1][2][0] += 1.0;  // padding: not compared
  expected.output.loss = torch::tensor(1.5, torch::kFloat64);
  actual.output.loss = torch::tensor(1.502, torch::kFloat64);
  expected.gradients.insert("a", torch::full({3}, 10.0, torch::kFloat64));
  expected.gradients.insert("b", torch::full({2}, 0.1, torch::kFloat64));
  actual.gradients.insert("a", expected.gradients["a"] + torch::tensor({0.0, 0.05, 0.0}));
  actual.gradients.insert("b", expected.gradients["b"] + torch::tensor({0.01, 0.0}));

  const EquivalenceResult result =
      CompareOutcomes(actual, expected, Mode::kTrain, batch, tolerance);
  CHECK(result.logits.max_abs == Approx(1e-3));
  CHECK(result.logits.max_rel == Approx(1e-3 / 4));
  CHECK(result.loss.max_abs == Approx(0.002));
  CHECK(result.gradients.max_abs == Approx(0.05));
  CHECK(result.gradients.max_rel == Approx(0.1));
  CHECK(result.worst_gradient == "b");
  CHECK_FALSE(result.passed());

  // Generate mode: tokens compared one for one, 3 of 8 differ (2 in one row).
  StepOutcome generated, reference;
  reference.tokens = torch::tensor({{1, 2, 3, 4}, {5, 6, 7, 8}}, torch::kInt64);
  generated.tokens = torch::tensor({{1, 9, 9, 4}, {5, 6, 7, 0}}, torch::kInt64);
  CHECK(
      CompareOutcomes(generated, reference, Mode::kGenerate, batch, tolerance).mismatched_tokens ==
      3);
}

}  // namespace
}  // namespace seqbench

namespace seqbench {
namespace {

// With right padding, padding can only show in the state carried past the last token:
// the padding rule says that state must be the one after the sequence's own last token.
TEST_CASE("padding leaves the carried state unchanged", "[padding]") {
  const ModelConfig config = testing::SmallSimpleRnn();
  const ParameterSet parameters = simple_rnn::InitWeights(config, 6);
  const auto weights = simple_rnn::Weights::View(parameters, config.num_layers);
  const Batch ragged = MakeBatch({3, 11, 2}, config.vocab_size, 12);
  REQUIRE(ragged.lengths.min().item<int64_t>() < ragged.max_length());
  std::vector<torch::Tensor> batch_states;
  simple_rnn::RunLayers(weights, ragged.tokens, ragged.PaddingMask(), config.num_heads,
                        simple_rnn::StepLoopMixer(), batch_states);
  for (int64_t b = 0; b < ragged.batch_size(); ++b) {
    const int64_t length = ragged.lengths[b].item<int64_t>();
    std::vector<torch::Tensor> alone_states;
    simple_rnn::RunLayers(weights, ragged.tokens[b].slice(0, 0, length).unsqueeze(0),
                          torch::Tensor(), config.num_heads, simple_rnn::StepLoopMixer(),
                          alone_states);
    for (size_t layer = 0; layer < alone_states.size(); ++layer) {
      INFO("sequence " << b << " (length " << length << ") layer " << layer);
      CHECK(Compare(batch_states[layer][b], alone_states[layer][0], Tolerance{1e-6, 1e-7}).within);
    }
  }
  // The log-space decay used by `scan` follows the same rule: log g = 0 at padding.
  const auto logits = torch::randn({1, 3, 2, 4});
  const auto mask = torch::tensor({true, true, false}).unsqueeze(0);
  const auto log_g = simple_rnn::LogDecay(logits, mask);
  CHECK(torch::equal(log_g[0][2], torch::zeros({2, 4})));
  CHECK((log_g[0].slice(0, 0, 2) < 0).all().item<bool>());
}

}  // namespace
}  // namespace seqbench
