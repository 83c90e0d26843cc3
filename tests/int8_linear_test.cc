// Int8Linear against its definition: the weight's round trip within half a quantization
// step per channel; the product within the error bound of quantizing the input once; a
// quarter of the bytes. And each family's int8 variant as a model: int8_dynamic's
// incremental decoder computes its forward's logits; int8_dynamic's, lstm_int8_dynamic's
// and attention_int8_dynamic's logits are int8's, within their tolerance of float32's, and
// the float32 copies of their matrices are freed.
#include "variants/core/int8_linear.h"

#include <catch2/catch.hpp>

#include "harness/equivalence.h"
#include "tests/test_support.h"
#include "variants/attention/model.h"
#include "variants/lstm/model.h"

namespace seqbench {
namespace {

// Whether this build can run int8 (a quantized engine); warns with the reason where not,
// so that the skip shows in the test output.
bool Int8Available() {
  if (Int8UnavailableReason().empty()) return true;
  WARN("skipped: " << Int8UnavailableReason());
  return false;
}

// The int8 variant `key`'s capabilities; every int8 variant runs inference only.
const Capabilities& InferenceOnlyCapabilities(const std::string& key) {
  const Capabilities& caps = GlobalVariants().Get(key).capabilities;
  CHECK_FALSE(caps.Supports(Mode::kTrain));
  return caps;
}

// The int8 variant `key`'s forward against `reference_key`'s on the same weights, over a
// ragged batch (padding keeps a recurrent state, in int8 as in float32): within `key`'s
// int8 tolerance, and int8's result, not float32's (the error is nonzero). Returns the int8
// variant, to inspect what it holds.
std::unique_ptr<Variant> CheckInt8Forward(const std::string& key, const std::string& reference_key,
                                          const ModelConfig& config, const ParameterSet& weights) {
  const Capabilities& caps = InferenceOnlyCapabilities(key);
  auto variant = testing::MakeVariant(key, config, weights, torch::kFloat32);
  auto reference = testing::MakeVariant(reference_key, config, weights, torch::kFloat32);
  const Batch batch = MakeBatch({4, 29, 6}, config.vocab_size, 19);
  const EquivalenceResult result =
      CheckEquivalence(*variant, *reference, Mode::kForward, batch, caps.float32);
  INFO(key << ": int8 logits max_abs " << result.logits.max_abs << ", loss "
           << result.loss.max_abs);
  CHECK(result.passed());
  CHECK(result.logits.max_abs > 1e-4);
  return variant;
}

TEST_CASE("an int8 weight dequantizes within half a step of its channel's scale", "[int8]") {
  if (!Int8Available()) return;
  torch::manual_seed(3);
  // Channels of very different ranges, and one of zeros (scale clamped, values exact).
  auto weight = torch::randn({48, 24}) * torch::logspace(-3, 1, 24).unsqueeze(0);
  weight.select(1, 5).zero_();
  const Int8Linear linear(weight);
  const auto scales = linear.Scales().to(torch::kFloat);  // [out]
  CHECK(scales[7].item<float>() ==
        Approx(weight.select(1, 7).abs().max().item<float>() / 127).epsilon(1e-6));
  const auto error = (linear.Dequantized() - weight).abs();  // [in,out]
  const auto half_step = scales.unsqueeze(0) / 2;
  INFO("largest error / half step: " << (error / half_step).max().item<float>());
  CHECK((error <= half_step * (1 + 1e-5)).all().item<bool>());
  CHECK(linear.Dequantized().select(1, 5).abs().max().item<float>() == 0);
  // One byte a value and a float32 scale per output channel.
  CHECK(linear.WeightBytes() == 48 * 24 + 24 * 4);
}

TEST_CASE("an int8 product errs no more than quantizing its input once allows", "[int8]") {
  if (!Int8Available()) return;
  torch::manual_seed(5);
  const auto weight = torch::randn({64, 40}) * 0.2;
  const Int8Linear linear(weight);
  // Inputs with a mean away from zero, as a norm's output has: the range is not symmetric.
  const auto x = torch::randn({3, 7, 64}) + 0.5;
  const auto y = linear(x);
  REQUIRE(y.sizes() == torch::IntArrayRef({3, 7, 40}));
  // Against the dequantized weight, the only other error is the input's rounding to uint8
  // (0…127 with reduce_range) over [min(x, 0), max(x, 0)]: at most half a step per element,
  // so per output j at most (step/2)·Σ_i |W_ij|. The integer sums are exact.
  const auto exact = torch::matmul(x.to(torch::kDouble), linear.Dequantized().to(torch::kDouble));
  const double step =
      (std::max(x.max().item<double>(), 0.0) - std::min(x.min().item<double>(), 0.0)) /
      (linear.reduce_range() ? 127 : 255);
  const auto bound =
      linear.Dequantized().to(torch::kDouble).abs().sum(0) * (step / 2) * 1.01 + 1e-5;  // [out]
  const auto error = (y.to(torch::kDouble) - exact).abs();
  INFO(PreferredInt8Engine() << ": largest error / bound " << (error / bound).max().item<double>());
  CHECK((error <= bound).all().item<bool>());
}

TEST_CASE("int8_dynamic: its incremental decoder computes its forward's logits",
          "[int8][equivalence]") {
  if (!Int8Available()) return;
  const Capabilities& caps = InferenceOnlyCapabilities("int8_dynamic");
  const ModelConfig config = testing::SmallSimpleRnn();
  const ParameterSet weights = simple_rnn::InitWeights(config, 7);
  auto variant = testing::MakeVariant("int8_dynamic", config, weights, torch::kFloat32);
  auto& decoder = dynamic_cast<IncrementalDecoder&>(*variant);
  // Prefill and each Step against Forward() over the same prefix. Each call quantizes its
  // input with a scale over that call's rows, so they agree within the int8 tolerance,
  // not to the bit.
  const Batch prompt = MakeBatch({2, 5, 5}, config.vocab_size, 13);
  IncrementalDecoder::DecodeState state;
  torch::Tensor logits = decoder.Prefill(prompt.tokens, 4, state);
  torch::Tensor prefix = prompt.tokens;
  for (int64_t i = 0; i < 4; ++i) {
    const Batch whole{prefix, torch::full({prefix.size(0)}, prefix.size(1), torch::kLong)};
    const auto expected = variant->InferStep(whole).logits.select(1, -1);
    const auto difference = Compare(logits, expected, caps.float32);
    INFO("position " << prefix.size(1) << ": max_abs " << difference.max_abs);
    CHECK(difference.within);
    const auto next = expected.argmax(-1);
    prefix = torch::cat({prefix, next.unsqueeze(1)}, 1);
    logits = decoder.Step(next, state);
  }
  // The logits are int8's, not float32's: different from the float model, within the
  // declared tolerance of it.
  auto reference = testing::MakeVariant("baseline", config, weights, torch::kFloat32);
  const Batch batch = MakeBatch({3, 9, 4}, config.vocab_size, 17);
  const auto difference =
      Compare(variant->InferStep(batch).logits, reference->InferStep(batch).logits, caps.float32,
              batch.PaddingMask());
  INFO("int8 logits max_abs " << difference.max_abs);
  CHECK(difference.within);
  CHECK(difference.max_abs > 1e-4);
}

TEST_CASE("lstm_int8_dynamic: the LSTM's logits in int8, within its tolerance of float32's",
          "[int8][lstm]") {
  if (!Int8Available()) return;
  ModelConfig config;
  config.family = lstm::kFamily;
  config.vocab_size = 37;
  config.width = 48;
  config.num_layers = 3;
  const ParameterSet weights = lstm::InitWeights(config, 11);
  const auto variant = CheckInt8Forward("lstm_int8_dynamic", "lstm_torch", config, weights);
  // What it holds: the matrices in int8, their float32 copies freed.
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const std::string layer = "layers." + std::to_string(l) + ".";
    CHECK(variant->parameters()[layer + "weight_ih"].numel() == 0);
    CHECK(variant->parameters()[layer + "weight_hh"].numel() == 0);
    CHECK(variant->parameters()[layer + "bias_ih"].numel() == 4 * config.width);
  }
}

TEST_CASE("attention_int8_dynamic: attention's logits in int8, within its tolerance of float32's",
          "[int8][attention]") {
  if (!Int8Available()) return;
  // Both shapes of feed-forward: gelu's [D,F] up-projection and the gated activations'
  // [D,2F] (swiglu; geglu's matrices are the same).
  for (const std::string ffn : {"gelu", "swiglu"}) {
    DYNAMIC_SECTION(ffn) {
      ModelConfig config;
      config.family = attention::kFamily;
      config.vocab_size = 37;
      config.width = 64;
      config.num_layers = 2;
      config.num_heads = 4;
      config.ffn = ffn;
      const ParameterSet weights = attention::InitWeights(config, 11);
      const auto variant = CheckInt8Forward("attention_int8_dynamic", "naive", config, weights);
      // What it holds: every matrix in int8, its float32 copy freed; the norms kept.
      for (int64_t l = 0; l < config.num_layers; ++l) {
        for (const char* name : {"w_q", "w_k", "w_v", "w_o", "w_up", "w_down"}) {
          CHECK(variant->parameters()[LayerParameterName(l, name)].numel() == 0);
        }
        CHECK(variant->parameters()[LayerParameterName(l, "ffn_norm")].numel() == config.width);
      }
      CHECK(variant->parameters()["w_out"].numel() == 0);
    }
  }
}

}  // namespace
}  // namespace seqbench
