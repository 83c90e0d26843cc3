// An out-of-tree variant, the template a plugin author copies (with CMakeLists.txt beside
// it): `batched`, with the recurrence step written as einsums. Built as a module against
// an installed seqbench (find_package(seqbench)) and loaded with `seqbench --plugin`;
// `seqbench verify` holds it to the family's reference and to the O(T) check, as ctest
// holds the built-in variants (tests/cli/install_test.sh builds it so; the unit tests load
// the in-tree build of this same file).
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
      // [B,T,H,dh] each, unbound once into T steps of [B,H,dh]: a per-step select() in an
      // autograd loop would make backward scatter into a zero tensor of the whole input at
      // every step (O(T²) time and memory).
      const auto qs = in.q.unbind(1), ks = in.k.unbind(1), vs = in.v.unbind(1),
                 gs = Decay(in.decay_logits, mask).unbind(1);
      std::vector<torch::Tensor> outputs;
      for (size_t t = 0; t < qs.size(); ++t) {
        state = torch::einsum("bhi,bhij->bhij", {gs[t], state}) +
                torch::einsum("bhi,bhj->bhij", {ks[t], vs[t]});
        outputs.push_back(torch::einsum("bhi,bhij->bhj", {qs[t], state}));
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
