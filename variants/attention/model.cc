#include "variants/attention/model.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "variants/core/registry.h"
#include "variants/core/torch_compat.h"

namespace seqbench::attention {

void ValidateConfig(const ModelConfig& config) {
  TORCH_CHECK(
      config.vocab_size > 0 && config.width > 0 && config.num_layers > 0 && config.num_heads > 0,
      "attention needs positive vocab_size, width, layers and heads");
  TORCH_CHECK(config.width % config.num_heads == 0, "attention width (", config.width,
              ") must be divisible by heads (", config.num_heads, ")");
  TORCH_CHECK((config.width / config.num_heads) % 2 == 0, "attention head width D/H (",
              config.width / config.num_heads, ") must be even: rotary embedding rotates pairs");
  TORCH_CHECK(config.ffn == "gelu" || config.ffn == "swiglu" || config.ffn == "geglu",
              "attention ffn must be gelu, swiglu or geglu, got '", config.ffn, "'");
}

int64_t FeedForwardWidth(const ModelConfig& config) {
  return config.ffn == "gelu" ? 4 * config.width : (8 * config.width + 2) / 3;
}

ParameterSet InitWeights(const ModelConfig& config, uint64_t seed) {
  ValidateConfig(config);
  auto generator = compat::MakeCpuGenerator(seed);
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const int64_t d = config.width;
  const int64_t f = FeedForwardWidth(config);
  const int64_t up_width = config.ffn == "gelu" ? f : 2 * f;
  const auto normal = [&](std::vector<int64_t> shape, double std) {
    return torch::randn(shape, generator, options) * std;
  };
  // Gains near 1 (not exactly 1) so that their gradients are exercised by the checks.
  const auto gain = [&] { return 1.0 + normal({d}, 0.1); };
  const double d_std = 1.0 / std::sqrt(static_cast<double>(d));
  const double f_std = 1.0 / std::sqrt(static_cast<double>(f));

  ParameterSet weights;
  weights.insert("embedding", normal({config.vocab_size, d}, 1.0));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    weights.insert(LayerParameterName(layer, "norm"), gain());
    for (const char* name : {"w_q", "w_k", "w_v", "w_o"}) {
      weights.insert(LayerParameterName(layer, name), normal({d, d}, d_std));
    }
    weights.insert(LayerParameterName(layer, "ffn_norm"), gain());
    weights.insert(LayerParameterName(layer, "w_up"), normal({d, up_width}, d_std));
    weights.insert(LayerParameterName(layer, "w_down"), normal({f, d}, f_std));
  }
  weights.insert("norm_out", gain());
  weights.insert("w_out", normal({d, config.vocab_size}, d_std));
  return weights;
}

Weights Weights::View(const ParameterSet& parameters, int64_t num_layers) {
  Weights weights;
  weights.embedding = parameters["embedding"];
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    const auto get = [&](const char* name) { return parameters[LayerParameterName(layer, name)]; };
    weights.layers.push_back(LayerWeights{get("norm"), get("w_q"), get("w_k"), get("w_v"),
                                          get("w_o"), get("ffn_norm"), get("w_up"), get("w_down")});
  }
  weights.norm_out = parameters["norm_out"];
  weights.w_out = parameters["w_out"];
  return weights;
}

torch::Tensor NaiveAttention(const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v) {
  const int64_t queries = q.size(2), keys = k.size(2);
  auto scores = torch::matmul(q, k.transpose(-2, -1));  // [B,H,T,S]
  // Query i sits at absolute position keys - queries + i and sees keys up to there.
  const auto future =
      torch::ones({queries, keys}, q.options().dtype(torch::kBool)).triu(keys - queries + 1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}

double NaiveScoreBytes(const ModelConfig& config, Mode mode, int64_t batch_size, int64_t positions,
                       torch::ScalarType dtype) {
  const double layers_alive = mode == Mode::kTrain ? static_cast<double>(config.num_layers) : 1;
  const double steps = static_cast<double>(positions);
  return 2 * layers_alive * static_cast<double>(batch_size) *
         static_cast<double>(config.num_heads) * steps * steps *
         static_cast<double>(c10::elementSize(dtype));
}

std::string NaiveBudgetReason(double bytes, int64_t budget_mib) {
  if (bytes <= static_cast<double>(budget_mib) * (1 << 20)) return "";
  return "naive attention's score matrices need " +
         std::to_string(std::llround(bytes / (1 << 20))) +
         " MiB, over score_budget_mib = " + std::to_string(budget_mib);
}

torch::Tensor Rotary(const torch::Tensor& x, int64_t offset) {
  const int64_t steps = x.size(2), head_width = x.size(3), half = head_width / 2;
  const auto float64 = torch::TensorOptions().dtype(torch::kFloat64).device(x.device());
  const auto inverse_frequency =
      torch::pow(10000.0, -torch::arange(0, half, float64) * (2.0 / head_width));  // [dh/2]
  const auto angles = torch::outer(torch::arange(offset, offset + steps, float64),
                                   inverse_frequency);  // [T,dh/2]
  const auto cos = torch::cat({angles.cos(), angles.cos()}, -1).to(x.scalar_type());
  const auto sin = torch::cat({angles.sin(), angles.sin()}, -1).to(x.scalar_type());
  const auto halves = x.chunk(2, -1);
  const auto rotated = torch::cat({-halves[1], halves[0]}, -1);
  return x * cos + rotated * sin;
}

const torch::Tensor& MatrixOf(const LayerWeights& layer, Matrix matrix) {
  switch (matrix) {
    case Matrix::kQuery:
      return layer.w_q;
    case Matrix::kKey:
      return layer.w_k;
    case Matrix::kValue:
      return layer.w_v;
    case Matrix::kOutput:
      return layer.w_o;
    case Matrix::kUp:
      return layer.w_up;
    case Matrix::kDown:
      return layer.w_down;
  }
  TORCH_CHECK(false, "unknown attention matrix");
}

namespace {

// u: [B,T,D] -> [B,H,T,dh]
torch::Tensor SplitHeads(const torch::Tensor& u, int64_t num_heads) {
  return u.unflatten(-1, {num_heads, u.size(-1) / num_heads}).transpose(1, 2);
}

// u: [B,T,D] normed -> [B,T,D]; `project(matrix, x)` applies this layer's matrices.
template <typename Project>
torch::Tensor FeedForward(const torch::Tensor& u, const Project& project,
                          const std::string& activation) {
  const auto up = project(Matrix::kUp, u);
  if (activation == "gelu") return project(Matrix::kDown, torch::gelu(up));
  const auto parts = up.chunk(2, -1);  // gate, value
  const auto gate = activation == "swiglu" ? torch::silu(parts[0]) : torch::gelu(parts[0]);
  return project(Matrix::kDown, gate * parts[1]);
}

}  // namespace

torch::Tensor RunLayers(const Weights& weights, const ModelConfig& config,
                        const torch::Tensor& tokens, const AttentionFn& attend,
                        KeyValueCache* cache, const ProjectFn& project) {
  const int64_t num_heads = config.num_heads;
  const int64_t head_width = config.width / num_heads;
  // A cache is written in place: under autograd its buffers would join the graph and every
  // later write would invalidate what earlier steps saved.
  std::optional<torch::NoGradGuard> no_grad;
  if (cache != nullptr) no_grad.emplace();
  const int64_t offset = cache != nullptr ? cache->length : 0;
  const int64_t steps = tokens.size(1);
  auto h = torch::embedding(weights.embedding, tokens);  // [B,T,D]
  for (size_t layer = 0; layer < weights.layers.size(); ++layer) {
    const LayerWeights& w = weights.layers[layer];
    const auto apply = [&](Matrix matrix, const torch::Tensor& x) {
      return project ? project(layer, matrix, x) : torch::matmul(x, MatrixOf(w, matrix));
    };
    const auto u = RmsNorm(h, w.norm);
    const auto q = Rotary(SplitHeads(apply(Matrix::kQuery, u), num_heads), offset) *
                   (1.0 / std::sqrt(static_cast<double>(head_width)));
    auto k = Rotary(SplitHeads(apply(Matrix::kKey, u), num_heads), offset);
    auto v = SplitHeads(apply(Matrix::kValue, u), num_heads);
    if (cache != nullptr) {
      TORCH_CHECK(offset + steps <= cache->keys[layer].size(2), "the key/value cache holds ",
                  cache->keys[layer].size(2), " positions, ", offset + steps, " needed");
      cache->keys[layer].narrow(2, offset, steps).copy_(k);
      cache->values[layer].narrow(2, offset, steps).copy_(v);
      k = cache->keys[layer].narrow(2, 0, offset + steps);
      v = cache->values[layer].narrow(2, 0, offset + steps);
    }
    const auto o = attend(q, k, v).transpose(1, 2).flatten(-2);  // [B,T,D]
    h = h + apply(Matrix::kOutput, o);
    h = h + FeedForward(RmsNorm(h, w.ffn_norm), apply, config.ffn);
  }
  if (cache != nullptr) cache->length = offset + steps;
  return h;
}

torch::Tensor Head(const torch::Tensor& h, const Weights& weights) {
  return LanguageModelHead(h, weights.norm_out, weights.w_out);
}

ForwardOutput ForwardWith(const Weights& weights, const ModelConfig& config, const Batch& batch,
                          const AttentionFn& attend) {
  const auto h = RunLayers(weights, config, batch.tokens, attend);
  auto logits = Head(h, weights);
  auto loss = NextTokenLoss(logits, batch);
  return {logits, loss};
}

StepCost StepCostOf(const ModelConfig& config, const StepWork& work) {
  const double d = static_cast<double>(config.width);
  const double f = static_cast<double>(FeedForwardWidth(config));
  const double up = config.ffn == "gelu" ? f : 2 * f;
  // Per position and layer: q, k, v, o projections and the feed-forward's two GEMMs.
  const double layer = 8 * d * d + 2 * d * up + 2 * f * d;
  const double v = static_cast<double>(config.vocab_size);
  const double layers = static_cast<double>(config.num_layers);
  const double parameters = 2 * v * d + layers * (4 * d * d + d * up + f * d + 2 * d) + d;
  StepCost cost = LanguageModelCost(config, work, {layer, 0, 0, 0}, parameters);
  // Attention: q·k and p·v, 2·dh each per head and pair, both products; backward about
  // twice forward, plus the scores recomputed (2·dh per head and pair).
  const double pair_flops = 4 * d;
  const double attention = layers * work.attention_pairs * pair_flops;
  const double attention_flops =
      work.mode == Mode::kTrain ? 3 * attention + layers * work.recomputed_pairs * pair_flops / 2
                                : attention;
  cost.flops += attention_flops;
  cost.gemm_flops += attention_flops;
  return cost;
}

StepWork CausalWork(StepWork work, const Batch& batch, int64_t num_tokens, bool scores_recomputed) {
  const double sequences = static_cast<double>(batch.batch_size());
  const auto causal_pairs = [](double steps) { return steps * (steps + 1) / 2; };
  const double prompt = static_cast<double>(batch.max_length());
  if (work.mode == Mode::kGenerate) {
    // The default Generate() re-runs the whole prefix for every new token.
    double pairs = 0;
    for (int64_t n = 0; n < num_tokens; ++n) pairs += causal_pairs(prompt + n);
    work.attention_pairs = sequences * pairs;
  } else {
    work.attention_pairs = sequences * causal_pairs(prompt);
  }
  if (scores_recomputed && work.mode == Mode::kTrain) work.recomputed_pairs = work.attention_pairs;
  return work;
}

Capabilities BaseCapabilities(const std::string& category) {
  Capabilities caps = LanguageModelCapabilities(kFamily, category);
  caps.complexity = "T^2";
  return caps;
}

SEQBENCH_REGISTER_FAMILY(kFamily, InitWeights, ValidateConfig, StepCostOf,
                         "causal self-attention language model (variants/attention/README.md)");

}  // namespace seqbench::attention
