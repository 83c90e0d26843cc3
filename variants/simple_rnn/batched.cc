// `batched`: `fused` over the whole padded batch at once. Padding is masked so that it
// leaves the state unchanged (decay 1, key 0), which makes the result independent of how
// much padding a sequence carries. The recurrence's backward is written by hand
// (RecurrenceThroughTime): with B sequences a step, autograd's graph of ~5 nodes per step
// and its per-step allocations of [B,H,dh,dh] would dominate the step.
#include "variants/core/registry.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

class Batched final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("batching"); }

  ForwardOutput Forward(const Batch& batch) override {
    return ForwardBatched(Weights::View(parameters(), config().num_layers), batch,
                          config().num_heads, ThroughTimeMixer());
  }
};

}  // namespace

SEQBENCH_REGISTER_VARIANT(
    "batched", Batched,
    "fused, over the whole padded batch with masking; backward through time by hand");

}  // namespace seqbench::simple_rnn
