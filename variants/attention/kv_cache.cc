// `kv_cache`: incremental decoding, the attention counterpart of simple_rnn's `stepwise`.
// Prefill runs the prompt once and writes every layer's keys and values into a cache
// allocated for the whole generation ([B,H,P+N,dh] a layer); every further token computes
// its own q, k, v, appends k and v in place and attends over the cache: O(P+n) work for the
// n-th token instead of re-running the prefix (O((P+n)²)), and cache memory that grows
// linearly with the prefix, where stepwise's state stays [H,dh,dh] whatever the length.
// Train and forward are `naive`.
#include "variants/attention/model.h"
#include "variants/core/registry.h"

namespace seqbench::attention {
namespace {

class KeyValueCached final : public Variant, public IncrementalDecoder {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("incremental inference");
    caps.options = {
        {"score_budget_mib", "as naive's, for its train and forward steps and its prefill (" +
                                 std::to_string(kDefaultScoreBudgetMiB) + ")"}};
    return caps;
  }

  // Train and forward are naive's; generate materialises the prompt's scores once.
  std::string SkipReason(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    return NaiveBudgetReason(
        NaiveScoreBytes(config(), mode, batch.batch_size(), batch.max_length(), dtype()),
        OptionOr("score_budget_mib", kDefaultScoreBudgetMiB));
  }

  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    StepWork work = CausalWork(Variant::Work(mode, batch, num_tokens), batch, num_tokens);
    if (mode == Mode::kGenerate) {
      const double sequences = static_cast<double>(batch.batch_size());
      const double prompt = static_cast<double>(batch.max_length());
      // The prompt's causal pairs once, then token n (n >= 1) attends P + n keys.
      double pairs = prompt * (prompt + 1) / 2;
      for (int64_t n = 1; n < num_tokens; ++n) pairs += prompt + static_cast<double>(n);
      work.attention_pairs = sequences * pairs;
      work.positions = batch.batch_size() * (batch.max_length() + num_tokens - 1);
      work.head_positions = batch.batch_size() * num_tokens;
    }
    return work;
  }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardWith(Weights::View(parameters(), config().num_layers), config(), batch,
                       NaiveAttention);
  }

  // state.tensors: the cache's keys of every layer, then its values, then the filled
  // length as a one-element int64 tensor; room for the prompt and max_steps more tokens.
  torch::Tensor Prefill(const torch::Tensor& prompt, int64_t max_steps,
                        DecodeState& state) override {
    TORCH_CHECK(prompt.dim() == 2 && prompt.size(1) > 0, "prompt must be [B,P] with P > 0");
    TORCH_CHECK(max_steps >= 0, "max_steps must not be negative, got ", max_steps);
    const int64_t capacity = prompt.size(1) + max_steps;
    const int64_t head_width = config().width / config().num_heads;
    KeyValueCache cache;
    for (int64_t layer = 0; layer < config().num_layers; ++layer) {
      const auto options = parameters()["embedding"].options();
      cache.keys.push_back(
          torch::empty({prompt.size(0), config().num_heads, capacity, head_width}, options));
      cache.values.push_back(torch::empty_like(cache.keys.back()));
    }
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const auto h = RunLayers(weights, config(), prompt, NaiveAttention, &cache);
    Store(cache, state);
    return Head(h.select(1, -1), weights);
  }

  torch::Tensor Step(const torch::Tensor& token, DecodeState& state) override {
    TORCH_CHECK(!state.tensors.empty(), "Step() needs a state from Prefill()");
    KeyValueCache cache = Load(state);
    const Weights weights = Weights::View(parameters(), config().num_layers);
    const auto h = RunLayers(weights, config(), token.unsqueeze(1), NaiveAttention, &cache);
    Store(cache, state);
    return Head(h.squeeze(1), weights);
  }

  torch::Tensor Generate(const torch::Tensor& prompt, int64_t num_tokens) override {
    return GreedyDecode(*this, prompt, num_tokens);
  }

 private:
  void Store(const KeyValueCache& cache, DecodeState& state) const {
    state.tensors = cache.keys;
    state.tensors.insert(state.tensors.end(), cache.values.begin(), cache.values.end());
    state.tensors.push_back(torch::tensor(cache.length, torch::kLong));
  }

  KeyValueCache Load(const DecodeState& state) const {
    const size_t layers = static_cast<size_t>(config().num_layers);
    TORCH_CHECK(state.tensors.size() == 2 * layers + 1, "not a key/value cache state");
    KeyValueCache cache;
    cache.keys.assign(state.tensors.begin(), state.tensors.begin() + layers);
    cache.values.assign(state.tensors.begin() + layers, state.tensors.begin() + 2 * layers);
    cache.length = state.tensors.back().item<int64_t>();
    return cache;
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("kv_cache", KeyValueCached,
                          "incremental decoding with a key/value cache: O(P+n) work for token n");

}  // namespace seqbench::attention
