// An example out-of-tree variant: `batched`, with the recurrence step written as
// einsums. Built as a shared library and loaded with `seqbench --plugin`; the tests
// load it and hold it to the same equivalence check as the built-in variants.
#include "variants/core/plugin.h"
#include "variants/core/registry.h"
#include "variants/simple_rnn/model.h"

namespace {

using namespace seqbench;
using namespace seqbench::simple_rnn;

class EinsumRecurrence final : public Variant {
 public:
  Capabilities capabilities() const override { return BaseCapabilities("example plugin"); }

  ForwardOutput Forward(const Batch& batch) override {
    const TimeMixer einsum_loop = [](const LayerInputs& in, const torch::Tensor& mask,
                                     torch::Tensor& state) {
      const auto g = Decay(in.decay_logits, mask);  // [B,T,H,dh]
      std::vector<torch::Tensor> outputs;
      for (int64_t t = 0; t < in.q.size(1); ++t) {
        state = torch::einsum("bhi,bhij->bhij", {g.select(1, t), state}) +
                torch::einsum("bhi,bhj->bhij", {in.k.select(1, t), in.v.select(1, t)});
        outputs.push_back(torch::einsum("bhi,bhij->bhj", {in.q.select(1, t), state}));
      }
      return torch::stack(outputs, 1);
    };
    return ForwardBatched(Weights::View(parameters(), config().num_layers), batch,
                          config().num_heads, einsum_loop);
  }
};

}  // namespace

SEQBENCH_PLUGIN()
SEQBENCH_REGISTER_VARIANT("example_einsum", EinsumRecurrence,
                          "example plugin: batched, with the step written as einsums");
