// Every lstm variant equals torch::nn::LSTM loaded with the same weights: the top layer's
// outputs and the final (h, c) in forward mode, and every parameter gradient in train
// mode, over several L, H, B and T, with ragged batches. lstm_wavefront gives the same
// bits for any thread count, including more layers than steps.
#include <catch2/catch.hpp>

#include "harness/equivalence.h"
#include "harness/workload.h"
#include "tests/test_support.h"
#include "variants/core/registry.h"
#include "variants/lstm/model.h"

namespace seqbench {
namespace {

namespace rnn = torch::nn::utils::rnn;

struct Shape {
  int64_t layers, hidden, batch, steps, min_len;
};

ModelConfig LstmConfig(const Shape& shape) {
  ModelConfig config;
  config.family = lstm::kFamily;
  config.vocab_size = 23;
  config.width = shape.hidden;
  config.num_layers = shape.layers;
  return config;
}

// torch::nn::LSTM with the shared weights, run the way a user would run it: packed when
// the batch is ragged. Returns its outputs and, after backward through the shared head and
// loss, its parameters' gradients under seqbench's names.
struct ModuleResult {
  lstm::LstmOutputs outputs;
  ParameterSet lstm_gradients;
};

torch::nn::LSTM MakeModule(const ModelConfig& config, const ParameterSet& weights) {
  torch::nn::LSTM module(torch::nn::LSTMOptions(config.width, config.width)
                             .num_layers(config.num_layers)
                             .batch_first(true));
  module->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const std::string layer = "layers." + std::to_string(l) + ".";
    const std::string suffix = "_l" + std::to_string(l);
    for (const char* name : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
      module->named_parameters()[name + suffix].copy_(weights[layer + name]);
    }
  }
  return module;
}

// The module's outputs on the embedded batch, packed as a user packs a ragged batch.
lstm::LstmOutputs RunPacked(torch::nn::LSTM& module, const torch::Tensor& inputs,
                            const Batch& batch) {
  const auto packed = rnn::pack_padded_sequence(inputs, batch.lengths, /*batch_first=*/true,
                                                /*enforce_sorted=*/false);
  auto [packed_outputs, state] = module->forward_with_packed_input(packed);
  auto [outputs, unused] =
      rnn::pad_packed_sequence(packed_outputs, /*batch_first=*/true, 0.0, batch.max_length());
  return {outputs, std::get<0>(state), std::get<1>(state)};
}

// The module's LSTM parameter gradients under seqbench's names.
ParameterSet ModuleGradients(torch::nn::LSTM& module, const ModelConfig& config) {
  ParameterSet gradients;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const std::string suffix = "_l" + std::to_string(l);
    for (const char* name : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
      gradients.insert("layers." + std::to_string(l) + "." + name,
                       module->named_parameters()[name + suffix].grad());
    }
  }
  return gradients;
}

ModuleResult RunModule(const ModelConfig& config, const ParameterSet& weights, const Batch& batch) {
  torch::nn::LSTM module = MakeModule(config, weights);
  const auto embedding = weights["embedding"].detach().clone().requires_grad_(true);
  const auto norm_out = weights["norm_out"].detach().clone().requires_grad_(true);
  const auto w_out = weights["w_out"].detach().clone().requires_grad_(true);
  ModuleResult result;
  result.outputs = RunPacked(module, torch::embedding(embedding, batch.tokens), batch);
  const auto logits = LanguageModelHead(result.outputs.outputs, norm_out, w_out);
  NextTokenLoss(logits, batch).backward();
  result.lstm_gradients = ModuleGradients(module, config);
  return result;
}

// A loss that reads everything the stack returns, with a different weight for every
// value: the real outputs, and h_n and c_n, through which a padded row's carried state
// reaches the loss (the next-token loss never takes that path).
torch::Tensor StateLoss(const lstm::LstmOutputs& out, const Batch& batch) {
  const auto weigh = [](const torch::Tensor& value) {
    return torch::sin(torch::arange(value.numel(), value.options()) * 0.37 + 1).view_as(value);
  };
  const auto real = batch.PaddingMask().unsqueeze(-1).to(out.outputs.dtype());
  return (out.outputs * real * weigh(out.outputs)).sum() + (out.h_n * weigh(out.h_n)).sum() +
         (out.c_n * weigh(out.c_n)).sum();
}

const std::vector<Shape> kShapes = {
    {1, 8, 1, 5, 0},    // one layer, one sequence
    {3, 16, 4, 9, 2},   // ragged batch
    {4, 12, 3, 2, 1},   // fewer steps than layers
    {2, 24, 2, 17, 9},  // wider
};

TEST_CASE("every lstm variant equals torch::nn::LSTM: outputs, final state, gradients", "[lstm]") {
  const Tolerance tolerance{1e-9, 1e-11};
  // Every registered lstm variant, so that a new one is held to the module too.
  const std::vector<std::string> keys = testing::VariantsOf(lstm::kFamily, "");
  REQUIRE(keys.size() >= 5);
  for (const std::string& key : keys) {
    // Held to float64 and training unless lossy by design (lstm_int8_dynamic: float32
    // inference, held to its tolerance in int8_linear_test).
    const Capabilities& caps = GlobalVariants().Get(key).capabilities;
    if (!caps.Supports(Mode::kTrain) || !caps.Supports(torch::kFloat64)) {
      CHECK(caps.category == "quantization");
      continue;
    }
    for (const Shape& shape : kShapes) {
      DYNAMIC_SECTION(key << " L=" << shape.layers << " H=" << shape.hidden << " B=" << shape.batch
                          << " T=" << shape.steps) {
        const ModelConfig config = LstmConfig(shape);
        const ParameterSet weights = lstm::InitWeights(config, 5);
        const Batch batch =
            MakeBatch({shape.batch, shape.steps, shape.min_len}, config.vocab_size, 6);
        const ModuleResult expected = RunModule(config, weights, batch);

        auto variant = CreateVariant(key);
        variant->Setup(config, weights, torch::kCPU, torch::kFloat64);
        auto* stack = dynamic_cast<lstm::LstmVariant*>(variant.get());
        REQUIRE(stack != nullptr);
        lstm::LstmOutputs actual;
        {
          torch::NoGradGuard no_grad;
          actual = stack->RunBatch(batch);
        }
        CHECK(Compare(actual.outputs, expected.outputs.outputs, tolerance, batch.PaddingMask())
                  .within);
        CHECK(Compare(actual.h_n, expected.outputs.h_n, tolerance).within);
        CHECK(Compare(actual.c_n, expected.outputs.c_n, tolerance).within);

        variant->TrainStep(batch);
        for (const auto& item : expected.lstm_gradients) {
          INFO(item.key());
          CHECK(Compare(variant->parameters()[item.key()].grad(), item.value(), tolerance).within);
        }
        // The embedding and head gradients: against lstm_torch, itself checked above.
        auto reference = CreateVariant("lstm_torch");
        reference->Setup(config, weights, torch::kCPU, torch::kFloat64);
        auto fresh = CreateVariant(key);
        fresh->Setup(config, weights, torch::kCPU, torch::kFloat64);
        const auto result = CheckEquivalence(*fresh, *reference, Mode::kTrain, batch, tolerance);
        INFO("worst gradient " << result.worst_gradient);
        CHECK(result.passed());
      }
    }
  }
}

TEST_CASE("lstm variants' gradients through h_n and c_n equal torch::nn::LSTM's", "[lstm]") {
  const Tolerance tolerance{1e-9, 1e-11};
  const Shape shape{2, 12, 4, 9, 2};  // ragged: some rows carry their state for 7 steps
  const ModelConfig config = LstmConfig(shape);
  const ParameterSet weights = lstm::InitWeights(config, 11);
  const Batch batch = MakeBatch({shape.batch, shape.steps, shape.min_len}, config.vocab_size, 12);
  REQUIRE(batch.lengths.min().item<int64_t>() < shape.steps);
  torch::nn::LSTM module = MakeModule(config, weights);
  const auto inputs = torch::embedding(weights["embedding"], batch.tokens);
  StateLoss(RunPacked(module, inputs, batch), batch).backward();
  const ParameterSet expected = ModuleGradients(module, config);
  for (const std::string& key : testing::VariantsOf(lstm::kFamily, "")) {
    const Capabilities& caps = GlobalVariants().Get(key).capabilities;
    if (!caps.Supports(Mode::kTrain) || !caps.Supports(torch::kFloat64)) continue;
    DYNAMIC_SECTION(key) {
      auto variant = CreateVariant(key);
      variant->Setup(config, weights, torch::kCPU, torch::kFloat64);
      auto* stack = dynamic_cast<lstm::LstmVariant*>(variant.get());
      REQUIRE(stack != nullptr);
      StateLoss(stack->Run(inputs, batch.PaddingMask()), batch).backward();
      for (const auto& item : expected) {
        INFO(item.key());
        const auto gradient = variant->parameters()[item.key()].grad();
        REQUIRE(gradient.defined());
        CHECK(Compare(gradient, item.value(), tolerance).within);
      }
    }
  }
}

TEST_CASE("lstm_fused refuses a mask that is not right padding", "[lstm]") {
  const Shape shape{1, 8, 2, 5, 0};
  const ModelConfig config = LstmConfig(shape);
  auto variant = CreateVariant("lstm_fused");
  variant->Setup(config, lstm::InitWeights(config, 3), torch::kCPU, torch::kFloat64);
  auto* stack = dynamic_cast<lstm::LstmVariant*>(variant.get());
  REQUIRE(stack != nullptr);
  const auto inputs = torch::randn({2, 5, 8}, torch::kFloat64);
  auto holes = torch::ones({2, 5}, torch::kBool);
  holes[1][2] = false;  // a gap before real positions: not a prefix
  CHECK_THROWS(stack->Run(inputs, holes));
  auto prefix = torch::ones({2, 5}, torch::kBool);
  prefix[1][4] = false;
  CHECK_NOTHROW(stack->Run(inputs, prefix));
}

TEST_CASE("float32 lstm variants stay within their declared tolerance", "[lstm]") {
  const Shape shape{3, 32, 4, 33, 8};
  const ModelConfig config = LstmConfig(shape);
  const ParameterSet weights = lstm::InitWeights(config, 9);
  const Batch batch = MakeBatch({shape.batch, shape.steps, shape.min_len}, config.vocab_size, 10);
  for (const std::string& key : testing::VariantsOf(lstm::kFamily, "lstm_torch")) {
    if (!GlobalVariants().Get(key).capabilities.Supports(Mode::kTrain)) continue;
    DYNAMIC_SECTION(key) {
      auto reference = CreateVariant("lstm_torch");
      auto candidate = CreateVariant(key);
      reference->Setup(config, weights, torch::kCPU, torch::kFloat32);
      candidate->Setup(config, weights, torch::kCPU, torch::kFloat32);
      const auto result = CheckEquivalence(*candidate, *reference, Mode::kTrain, batch,
                                           candidate->capabilities().float32);
      INFO("logits " << result.logits.max_abs << ", grads " << result.gradients.max_rel);
      CHECK(result.passed());
    }
  }
}

TEST_CASE("lstm_wavefront gives identical results for 1, 2 and L threads, and T < L",
          "[lstm][wavefront]") {
  for (const Shape& shape : {Shape{4, 16, 3, 11, 3}, Shape{5, 8, 2, 3, 1}, Shape{8, 8, 1, 6, 0}}) {
    const ModelConfig config = LstmConfig(shape);
    const ParameterSet weights = lstm::InitWeights(config, 2);
    const Batch batch = MakeBatch({shape.batch, shape.steps, shape.min_len}, config.vocab_size, 3);
    for (const int64_t block : {int64_t{1}, int64_t{4}, int64_t{64}}) {
      for (const int64_t threads : {int64_t{2}, int64_t{3}, shape.layers, shape.layers + 4}) {
        DYNAMIC_SECTION("L=" << shape.layers << " T=" << shape.steps << " block=" << block
                             << " threads=" << threads) {
          auto parallel = CreateVariant("lstm_wavefront");
          parallel->Setup(config, weights, torch::kCPU, torch::kFloat32,
                          {{"threads", threads}, {"block", block}});
          auto reference = CreateVariant("lstm_wavefront");
          reference->Setup(config, weights, torch::kCPU, torch::kFloat32,
                           {{"threads", 1}, {"block", block}});
          // Bit for bit: every cell does the same arithmetic whatever thread runs it.
          const auto result =
              CheckEquivalence(*parallel, *reference, Mode::kTrain, batch, Tolerance{0, 0});
          CHECK(result.logits.within);
          CHECK(result.gradients.within);
          torch::NoGradGuard no_grad;
          auto* a = dynamic_cast<lstm::LstmVariant*>(parallel.get());
          auto* b = dynamic_cast<lstm::LstmVariant*>(reference.get());  // same step taken
          const auto x = a->RunBatch(batch), y = b->RunBatch(batch);
          CHECK(torch::equal(x.outputs, y.outputs));
          CHECK(torch::equal(x.h_n, y.h_n));
          CHECK(torch::equal(x.c_n, y.c_n));
        }
      }
    }
  }
}

// Both of the variant's forms: with grad mode off on the CPU the hand-written blocks, with
// it on the graph autograd goes back through.
TEST_CASE("lstm_wavefront equals torch::nn::LSTM for every block size, with and without grad",
          "[lstm][wavefront]") {
  const Shape shape{3, 16, 3, 21, 5};
  const ModelConfig config = LstmConfig(shape);
  const ParameterSet weights = lstm::InitWeights(config, 8);
  const Batch batch = MakeBatch({shape.batch, shape.steps, shape.min_len}, config.vocab_size, 4);
  const ModuleResult expected = RunModule(config, weights, batch);
  for (const int64_t block : {1, 2, 5, 21, 100}) {
    for (const bool grad : {false, true}) {
      DYNAMIC_SECTION("block=" << block << " grad=" << grad) {
        auto variant = CreateVariant("lstm_wavefront");
        variant->Setup(config, weights, torch::kCPU, torch::kFloat64,
                       {{"threads", 2}, {"block", block}});
        torch::AutoGradMode grad_mode(grad);
        const auto actual = dynamic_cast<lstm::LstmVariant*>(variant.get())->RunBatch(batch);
        CHECK(actual.outputs.requires_grad() == grad);
        const Tolerance tolerance{1e-9, 1e-11};
        CHECK(Compare(actual.outputs, expected.outputs.outputs, tolerance, batch.PaddingMask())
                  .within);
        CHECK(Compare(actual.h_n, expected.outputs.h_n, tolerance).within);
        CHECK(Compare(actual.c_n, expected.outputs.c_n, tolerance).within);
      }
    }
  }
}

}  // namespace
}  // namespace seqbench
