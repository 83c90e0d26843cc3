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
    return CausalWork(Variant::Work(mode, batch, num_tokens), batch, num_tokens);
  }

  std::string SkipReason(Mode mode, const Batch& batch, int64_t num_tokens) const override {
    const int64_t positions = batch.max_length() + (mode == Mode::kGenerate ? num_tokens : 0);
    return NaiveBudgetReason(
        NaiveScoreBytes(config(), mode, batch.batch_size(), positions, dtype()),
        OptionOr("score_budget_mib", kDefaultScoreBudgetMiB));
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
