// `naive`: the family's literal attention and its correctness reference. Every layer
// materialises the [B,H,T,T] score matrix, masks the future, takes the softmax and
// multiplies by v; autograd saves the probabilities for backward, so activation memory
// grows as T². Generate re-runs the whole prefix for every new token (no cache).
// A case whose score matrices would pass `score_budget_mib` is skipped with the reason
// instead of exhausting the machine's memory.
#include "variants/attention/model.h"
#include "variants/core/registry.h"

namespace seqbench::attention {
namespace {

constexpr int64_t kDefaultScoreBudgetMiB = 2048;

class Naive final : public Variant {
 public:
  Capabilities capabilities() const override {
    Capabilities caps = BaseCapabilities("reference");
    caps.options = {{"score_budget_mib",
                     "skip a case whose score matrices (B·H·T² a layer, ×2 and kept for every "
                     "layer in train mode) pass this many MiB (" +
                         std::to_string(kDefaultScoreBudgetMiB) + ")"}};
    return caps;
  }

  StepWork Work(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    return CausalWork(Variant::Work(mode, batch, num_tokens), mode, batch, num_tokens);
  }

  std::string SkipReason(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    const double steps =
        static_cast<double>(batch.max_length() + (mode == Mode::kGenerate ? num_tokens : 0));
    // Scores and probabilities, one pair alive in inference, every layer's in training.
    const double layers_alive = mode == Mode::kTrain ? config().num_layers : 1;
    const double bytes = 2 * layers_alive * static_cast<double>(batch.batch_size()) *
                         config().num_heads * steps * steps *
                         static_cast<double>(torch::elementSize(dtype()));
    const double budget = static_cast<double>(OptionOr("score_budget_mib", kDefaultScoreBudgetMiB));
    if (bytes <= budget * (1 << 20)) return "";
    return "naive attention's score matrices need " +
           std::to_string(std::llround(bytes / (1 << 20))) +
           " MiB, over score_budget_mib = " + std::to_string(std::llround(budget));
  }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardWith(Weights::View(parameters(), config().num_layers), config(), batch,
                       NaiveAttention);
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT("naive", Naive,
                          "attention's reference: the T×T score matrix, masked softmax, ·v");

}  // namespace seqbench::attention
