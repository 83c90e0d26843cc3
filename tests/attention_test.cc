// The attention family: every variant computes `naive`'s function (logits, loss, every
// gradient; generated tokens) in each mode and dtype it supports (attention_int8_dynamic:
// float32 forward, within its int8 tolerance), flash attention is exact for every tile size, and
// its activation memory grows linearly in T where naive's grows quadratically, counted by the
// allocator rather than timed.
#include <catch2/catch.hpp>

#include "harness/memory.h"
#include "tests/test_support.h"
#include "variants/attention/model.h"

namespace seqbench {
namespace {

using testing::MakeVariant;

ModelConfig SmallAttention(const std::string& ffn = "gelu", int64_t layers = 2, int64_t heads = 2) {
  ModelConfig config;
  config.family = attention::kFamily;
  config.vocab_size = 29;
  config.width = 8 * heads;
  config.num_layers = layers;
  config.num_heads = heads;
  config.ffn = ffn;
  return config;
}

EquivalenceResult Compare(const std::string& key, const ModelConfig& config, Mode mode,
                          torch::ScalarType dtype, const BatchShape& shape,
                          const VariantOptions& options = {}, int64_t generate_tokens = 0) {
  const ParameterSet weights = attention::InitWeights(config, /*seed=*/7);
  auto reference = MakeVariant("naive", config, weights, dtype);
  auto candidate = MakeVariant(key, config, weights, dtype, options);
  const Batch batch = MakeBatch(shape, config.vocab_size, /*seed=*/11);
  return CheckEquivalence(*candidate, *reference, mode, batch,
                          candidate->capabilities().ToleranceFor(dtype), generate_tokens);
}

void RequireEquivalent(const std::string& key, const ModelConfig& config, Mode mode,
                       torch::ScalarType dtype, const BatchShape& shape,
                       const VariantOptions& options = {}) {
  // Held to every mode and dtype unless lossy by design (attention_int8_dynamic: float32
  // inference, held to its tolerance in int8_linear_test too).
  const Capabilities& caps = GlobalVariants().Get(key).capabilities;
  if (!caps.Supports(mode) || !caps.Supports(dtype)) {
    CHECK(caps.category == "quantization");
    return;
  }
  const EquivalenceResult result = Compare(key, config, mode, dtype, shape, options);
  INFO(key << " " << ModeName(mode) << " " << DtypeName(dtype) << " ffn=" << config.ffn
           << " T=" << shape.max_length << ": logits max_abs=" << result.logits.max_abs
           << " loss max_abs=" << result.loss.max_abs
           << " grad max_rel=" << result.gradients.max_rel << " (" << result.worst_gradient << ")");
  CHECK(result.logits.within);
  CHECK(result.loss.within);
  CHECK(result.gradients.within);
  if (mode == Mode::kTrain) CHECK_FALSE(result.worst_gradient.empty());
}

TEST_CASE("every attention variant equals naive on ragged batches", "[attention][equivalence]") {
  const auto keys = testing::VariantsOf(attention::kFamily, "naive");
  REQUIRE(keys.size() >= 2);  // flash, kv_cache (and sdpa on LibTorch 2.1+)
  const BatchShape ragged{/*batch_size=*/3, /*max_length=*/13, /*min_length=*/2};
  for (const auto& key : keys) {
    for (const auto dtype : {torch::kFloat64, torch::kFloat32}) {
      for (const auto mode : {Mode::kTrain, Mode::kForward}) {
        DYNAMIC_SECTION(key << " " << ModeName(mode) << " " << DtypeName(dtype)) {
          RequireEquivalent(key, SmallAttention(), mode, dtype, ragged);
        }
      }
    }
  }
}

TEST_CASE("every feed-forward activation gives the same function in naive and flash",
          "[attention][equivalence]") {
  for (const std::string ffn : {"gelu", "swiglu", "geglu"}) {
    DYNAMIC_SECTION(ffn) {
      RequireEquivalent("flash", SmallAttention(ffn), Mode::kTrain, torch::kFloat64, {2, 9, 3},
                        {{"block_size", 4}});
    }
  }
  // The activations are different functions: the same weights' names, other logits.
  const ParameterSet gelu_weights = attention::InitWeights(SmallAttention("gelu"), 7);
  const ParameterSet swiglu_weights = attention::InitWeights(SmallAttention("swiglu"), 7);
  CHECK(gelu_weights["layers.0.w_up"].size(1) == 4 * 16);
  CHECK(swiglu_weights["layers.0.w_up"].size(1) ==
        2 * attention::FeedForwardWidth(SmallAttention("swiglu")));
}

TEST_CASE("flash attention is exact for every tile size, gradients included",
          "[attention][flash]") {
  // Tiles of 1 (every step a new running maximum), sizes that do not divide T, one tile
  // longer than T; float64, where a wrong rescaling would show far above the tolerance.
  for (const int64_t block : {1, 3, 5, 8, 64}) {
    DYNAMIC_SECTION("block_size=" << block) {
      RequireEquivalent("flash", SmallAttention("swiglu", 2, 2), Mode::kTrain, torch::kFloat64,
                        {3, 21, 4}, {{"block_size", block}});
    }
  }
}

TEST_CASE("flash attention's own backward equals autograd through naive attention",
          "[attention][flash]") {
  torch::manual_seed(3);
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  // Scores large enough that the softmax is peaked: a running maximum that is not
  // rescaled, or a log-sum-exp off by one tile, changes the result well beyond 1e-10.
  auto q = (torch::randn({2, 3, 19, 4}, options) * 3).requires_grad_();
  auto k = (torch::randn({2, 3, 19, 4}, options) * 3).requires_grad_();
  auto v = torch::randn({2, 3, 19, 4}, options).requires_grad_();
  const auto upstream = torch::randn({2, 3, 19, 4}, options);
  const auto expected = attention::NaiveAttention(q, k, v);
  const auto expected_grads = torch::autograd::grad({expected}, {q, k, v}, {upstream});

  const auto actual = attention::FlashAttention(q, k, v, /*block=*/4);
  const auto actual_grads = torch::autograd::grad({actual}, {q, k, v}, {upstream});
  CHECK(torch::allclose(actual, expected, 1e-10, 1e-12));
  for (size_t i = 0; i < 3; ++i) {
    INFO("gradient " << i << " max abs error "
                     << (actual_grads[i] - expected_grads[i]).abs().max().item<double>());
    CHECK(torch::allclose(actual_grads[i], expected_grads[i], 1e-10, 1e-12));
  }
}

TEST_CASE("flash's CPU kernel refuses k and v of another shape than q", "[attention][flash]") {
  const auto q = torch::randn({2, 3, 8, 4}, torch::kFloat64);
  const auto fewer_heads = torch::randn({2, 1, 8, 4}, torch::kFloat64);
  CHECK_THROWS(attention::FlashAttention(q, fewer_heads, fewer_heads, 4));
  CHECK_NOTHROW(attention::FlashAttention(q, q, q, 4));
}

TEST_CASE("kv_cache generates naive's tokens, one for one", "[attention][generate]") {
  for (const std::string ffn : {"gelu", "geglu"}) {
    DYNAMIC_SECTION(ffn) {
      const EquivalenceResult result = Compare("kv_cache", SmallAttention(ffn), Mode::kGenerate,
                                               torch::kFloat64, {3, 7, 0}, {}, /*tokens=*/9);
      CHECK(result.mismatched_tokens == 0);
      CHECK(result.passed());
    }
  }
}

TEST_CASE("rotary embedding: scores depend on relative position only, offsets continue",
          "[attention]") {
  torch::manual_seed(4);
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const auto q = torch::randn({1, 1, 1, 8}, options), k = torch::randn({1, 1, 1, 8}, options);
  const auto score = [&](int64_t query_position, int64_t key_position) {
    return (attention::Rotary(q, query_position) * attention::Rotary(k, key_position))
        .sum()
        .item<double>();
  };
  CHECK(score(7, 3) == Approx(score(104, 100)).epsilon(1e-12));
  CHECK(score(7, 3) != Approx(score(7, 4)).epsilon(1e-6));
  CHECK(score(0, 0) == Approx((q * k).sum().item<double>()).epsilon(1e-12));  // no rotation
  // A cache's offset continues the positions of a longer sequence.
  const auto sequence = torch::randn({2, 3, 10, 8}, options);
  CHECK(torch::allclose(attention::Rotary(sequence, 0).slice(2, 6),
                        attention::Rotary(sequence.slice(2, 6), 6), 1e-12, 1e-12));
}

TEST_CASE("the gated activations are different functions of the same weights", "[attention]") {
  // swiglu and geglu draw the same shapes from the same seed, so the weights are equal and
  // only the activation tells the models apart.
  const ModelConfig swiglu = SmallAttention("swiglu"), geglu = SmallAttention("geglu");
  const ParameterSet weights = attention::InitWeights(swiglu, 7);
  CHECK(torch::equal(weights["layers.0.w_up"], attention::InitWeights(geglu, 7)["layers.0.w_up"]));
  const Batch batch = MakeBatch({2, 9, 0}, swiglu.vocab_size, 11);
  const auto with_silu = MakeVariant("naive", swiglu, weights, torch::kFloat64)->InferStep(batch);
  const auto with_gelu = MakeVariant("naive", geglu, weights, torch::kFloat64)->InferStep(batch);
  CHECK((with_silu.logits - with_gelu.logits).abs().max().item<double>() > 1e-3);
}

TEST_CASE("attention work counts: causal pairs, re-run prefixes, and a cache's keys",
          "[attention][roofline]") {
  const ModelConfig config = SmallAttention();
  const ParameterSet weights = attention::InitWeights(config, 7);
  const Batch prompt = MakeBatch({4, 12, 0}, config.vocab_size, 3);
  // Generate N=3 after P=12: naive re-runs prefixes of 12, 13, 14 (78 + 91 + 105 pairs);
  // kv_cache pays 78 for the prompt, then 13 and 14 keys for tokens 2 and 3.
  const StepWork naive =
      MakeVariant("naive", config, weights, torch::kFloat32)->Work(Mode::kGenerate, prompt, 3);
  const StepWork cached =
      MakeVariant("kv_cache", config, weights, torch::kFloat32)->Work(Mode::kGenerate, prompt, 3);
  CHECK(naive.attention_pairs == 4 * (78 + 91 + 105));
  CHECK(cached.attention_pairs == 4 * (78 + 13 + 14));
  CHECK(cached.positions == 4 * (12 + 2));
  const StepWork train =
      MakeVariant("flash", config, weights, torch::kFloat32)->Work(Mode::kTrain, prompt, 0);
  CHECK(train.attention_pairs == 4 * 78);
  CHECK(train.recomputed_pairs == train.attention_pairs);
}

TEST_CASE(
    "kv_cache's prefill and steps give the logits of the whole sequence, position by "
    "position",
    "[attention][generate]") {
  const ModelConfig config = SmallAttention("geglu");
  const ParameterSet weights = attention::InitWeights(config, 7);
  auto variant = MakeVariant("kv_cache", config, weights, torch::kFloat64);
  auto& decoder = dynamic_cast<IncrementalDecoder&>(*variant);
  const Batch batch = MakeBatch({2, 11, 0}, config.vocab_size, 5);
  const auto expected = variant->InferStep(batch).logits;  // [B,T,V]
  IncrementalDecoder::DecodeState state;
  torch::NoGradGuard no_grad;
  const auto prefill = decoder.Prefill(batch.tokens.slice(1, 0, 6), /*max_steps=*/5, state);
  CHECK(torch::allclose(prefill, expected.select(1, 5), 1e-10, 1e-12));
  for (int64_t t = 6; t < 11; ++t) {
    const auto step = decoder.Step(batch.tokens.select(1, t), state);
    INFO("position " << t);
    CHECK(torch::allclose(step, expected.select(1, t), 1e-10, 1e-12));
  }
}

// Peak bytes above what was live before one train step at sequence length `steps`.
int64_t TrainActivationBytes(const std::string& key, int64_t steps) {
  CountingCpuAllocator& allocator = CountingCpuAllocator::Install();
  const ModelConfig config = SmallAttention("gelu", /*layers=*/2, /*heads=*/4);
  const ParameterSet weights = attention::InitWeights(config, 7);
  auto variant = MakeVariant(key, config, weights, torch::kFloat32, {});
  const Batch batch = MakeBatch({/*batch_size=*/2, steps, /*min_length=*/0}, config.vocab_size, 3);
  variant->TrainStep(batch);
  allocator.ResetPeak();
  const int64_t before = allocator.live_bytes();
  variant->TrainStep(batch);
  return allocator.peak_bytes() - before;
}

TEST_CASE("flash's activation memory grows linearly in T, naive's quadratically",
          "[attention][memory]") {
  constexpr int64_t kShort = 256, kLong = 2 * kShort;
  const double flash_ratio = static_cast<double>(TrainActivationBytes("flash", kLong)) /
                             static_cast<double>(TrainActivationBytes("flash", kShort));
  const double naive_ratio = static_cast<double>(TrainActivationBytes("naive", kLong)) /
                             static_cast<double>(TrainActivationBytes("naive", kShort));
  INFO("activation bytes at T=" << kLong << " over T=" << kShort << ": flash " << flash_ratio
                                << ", naive " << naive_ratio);
  CHECK(flash_ratio <= 2.3);
  CHECK(naive_ratio >= 3.0);
}

TEST_CASE("naive skips a case past its score budget, with the reason", "[attention]") {
  const ModelConfig config = SmallAttention("gelu", 2, 4);
  auto naive = MakeVariant("naive", config, attention::InitWeights(config, 7), torch::kFloat32,
                           {{"score_budget_mib", 1}});
  const Batch small = MakeBatch({1, 64, 0}, config.vocab_size, 3);
  const Batch large = MakeBatch({1, 1024, 0}, config.vocab_size, 3);
  CHECK(naive->SkipReason(Mode::kTrain, small, 0).empty());
  // 2 layers x (scores + probabilities) x 4 heads x 1024² floats = 64 MiB > 1 MiB.
  const std::string reason = naive->SkipReason(Mode::kTrain, large, 0);
  CHECK(reason.find("64 MiB") != std::string::npos);
  CHECK(reason.find("score_budget_mib") != std::string::npos);
}

}  // namespace
}  // namespace seqbench
