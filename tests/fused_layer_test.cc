// The fused pieces of `fused_recurrent` and `packed` against the literal expressions they
// replace, in float64 (exact up to rounding) and float32 (the vector kernels): FusedRmsNorm
// against RmsNorm, and GatedRecurrence (scale, bias, sigmoid, padding by length, the
// recurrence, and one gradient for the whole projection) against SplitProjections, Decay
// and the step loop under autograd, and PackedGatedRecurrence against GatedRecurrence.
// Values and the gradients of every input, a carried initial state included.
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <vector>

#include "variants/core/language_model.h"
#include "variants/simple_rnn/fused_recurrent.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

using Function = std::function<torch::Tensor(const std::vector<torch::Tensor>& leaves)>;

// Runs `function` on fresh leaves of `inputs`, back-propagates a fixed random weighting of
// its output (times `weight_mask`, where defined), and returns {output, gradients...}.
std::vector<torch::Tensor> WithGradients(const std::vector<torch::Tensor>& inputs,
                                         const Function& function,
                                         const torch::Tensor& weight_mask = torch::Tensor()) {
  std::vector<torch::Tensor> leaves;
  for (const auto& t : inputs) leaves.push_back(t.detach().clone().requires_grad_(true));
  const torch::Tensor out = function(leaves);
  torch::manual_seed(12);
  // Drawn in float64 whatever the output's type: float32 draws other numbers.
  torch::Tensor weight = torch::randn(out.sizes(), torch::kFloat64);
  if (weight_mask.defined()) weight = weight * weight_mask;
  (out * weight.to(out.scalar_type())).sum().backward();
  std::vector<torch::Tensor> results{out.detach()};
  for (const auto& leaf : leaves) results.push_back(leaf.grad());
  return results;
}

void RequireClose(const std::vector<torch::Tensor>& ours, const std::vector<torch::Tensor>& theirs,
                  double rtol, double atol) {
  REQUIRE(ours.size() == theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    const torch::Tensor a = ours[i].to(torch::kFloat64), b = theirs[i].to(torch::kFloat64);
    REQUIRE(a.sizes() == b.sizes());
    INFO("result " << i << " max |difference| " << (a - b).abs().max().item<double>());
    CHECK(torch::allclose(a, b, rtol, atol));
  }
}

TEST_CASE("FusedRmsNorm equals RmsNorm, values and gradients", "[fused_layer]") {
  for (const int64_t width : {1, 7, 256, 300}) {
    DYNAMIC_SECTION("D=" << width) {
      torch::manual_seed(3);
      const auto options = torch::TensorOptions().dtype(torch::kFloat64);
      // Rows of very different scales: the 1/rms factor must be per row.
      const torch::Tensor x = torch::randn({3, 5, width}, options) *
                              torch::logspace(-3, 3, 5, 10, options).view({1, 5, 1});
      const torch::Tensor gain = 1 + 0.1 * torch::randn({width}, options);
      const auto fused = [](const std::vector<torch::Tensor>& in) {
        return FusedRmsNorm(in[0], in[1]);
      };
      const auto literal = [](const std::vector<torch::Tensor>& in) {
        return RmsNorm(in[0], in[1]);
      };
      const auto expected = WithGradients({x, gain}, literal);
      RequireClose(WithGradients({x, gain}, fused), expected, 1e-10, 1e-12);
      // float32 against the float64 expression: rounding only.
      RequireClose(WithGradients({x.to(torch::kFloat32), gain.to(torch::kFloat32)}, fused),
                   expected, 1e-4, 1e-4);
    }
  }
}

// Both return [B, T·D + H·dh²]: the outputs, then the final state.
// The literal layer: split, scale, mask, decay and the step loop, from the same projection.
torch::Tensor LiteralMixing(const std::vector<torch::Tensor>& in, int64_t heads,
                            const torch::Tensor& mask) {
  const LayerInputs inputs = SplitProjections(in[0], in[1], heads, mask);
  torch::Tensor state = in[2];
  const torch::Tensor o =
      RecurrenceLoop(inputs.q, inputs.k, inputs.v, Decay(inputs.decay_logits, mask), state);
  return torch::cat({o.flatten(1), state.flatten(1)}, 1);
}

torch::Tensor FusedMixing(const std::vector<torch::Tensor>& in, int64_t heads,
                          const torch::Tensor& lengths) {
  torch::Tensor state = in[2];
  const torch::Tensor o = GatedRecurrence(in[0], in[1], heads, lengths, state);
  return torch::cat({o.flatten(1), state.flatten(1)}, 1);
}

// FusedMixing on the packed rows of the same projection: gathered from the padded leaf
// (so that the gradients land where FusedMixing's do) and the outputs put back on the grid.
torch::Tensor PackedMixing(const std::vector<torch::Tensor>& in, int64_t heads,
                           const torch::Tensor& lengths, const torch::Tensor& mask) {
  const torch::Tensor rows = mask.reshape({-1}).nonzero().reshape({-1});
  const torch::Tensor packed = in[0].reshape({-1, in[0].size(-1)}).index_select(0, rows);
  torch::Tensor state = in[2];
  const torch::Tensor o = PackedGatedRecurrence(packed, in[1], heads, lengths, state);  // [N,D]
  const torch::Tensor grid =
      torch::zeros({mask.numel(), o.size(1)}, o.options()).index_copy(0, rows, o);
  return torch::cat({grid.reshape({mask.size(0), -1}), state.flatten(1)}, 1);
}

struct MixingShape {
  int64_t heads, width;
  torch::ScalarType dtype;
  double rtol, atol;
};

TEST_CASE("GatedRecurrence equals the masked step loop from the same projections",
          "[fused_layer][kernels]") {
  // dh = 8 takes the loops; float32 at dh = 64 the vector kernels.
  for (const MixingShape shape : {MixingShape{2, 8, torch::kFloat64, 1e-10, 1e-12},
                                  MixingShape{2, 64, torch::kFloat32, 1e-4, 1e-5}}) {
    DYNAMIC_SECTION("dh=" << shape.width) {
      const int64_t batch = 3, steps = 37, model = shape.heads * shape.width;
      // Lengths at both ends: one step, all 37 (two whole backward segments and a part).
      const torch::Tensor lengths = torch::tensor({1, 37, 20}, torch::kInt64);
      const torch::Tensor mask = torch::arange(steps).unsqueeze(0) < lengths.unsqueeze(1);
      torch::manual_seed(5);
      const auto options = torch::TensorOptions().dtype(torch::kFloat64);
      const torch::Tensor projected = torch::randn({batch, steps, 4 * model}, options);
      const torch::Tensor b_g = torch::randn({model}, options) + 3;
      const torch::Tensor initial =
          0.1 * torch::randn({batch, shape.heads, shape.width, shape.width}, options);
      // Padding's outputs are unspecified: only real positions and the final state weigh.
      const torch::Tensor real =
          mask.unsqueeze(-1).expand({batch, steps, model}).reshape({batch, -1});
      const torch::Tensor weigh =
          torch::cat({real.to(torch::kFloat64),
                      torch::ones({batch, shape.heads * shape.width * shape.width}, options)},
                     1);
      auto literal = WithGradients(
          {projected, b_g, initial},
          [&](const std::vector<torch::Tensor>& in) {
            return LiteralMixing(in, shape.heads, mask);
          },
          weigh);
      auto fused = WithGradients(
          {projected.to(shape.dtype), b_g.to(shape.dtype), initial.to(shape.dtype)},
          [&](const std::vector<torch::Tensor>& in) {
            return FusedMixing(in, shape.heads, lengths);
          },
          weigh);
      // Where they differ by design: padding's outputs are 0 here, anything there.
      const torch::Tensor outputs = fused[0].slice(1, 0, steps * model);
      CHECK(outputs.masked_select(~real).abs().max().item<double>() == 0);
      // No gradient reaches a padding position's projection.
      CHECK(fused[1].masked_select(~mask.unsqueeze(-1)).abs().max().item<double>() == 0);
      // Packed: the same kernels on the same rows (only b_g's sum runs in another order).
      const auto packed = WithGradients(
          {projected.to(shape.dtype), b_g.to(shape.dtype), initial.to(shape.dtype)},
          [&](const std::vector<torch::Tensor>& in) {
            return PackedMixing(in, shape.heads, lengths, mask);
          },
          weigh);
      RequireClose(packed, fused, shape.rtol, shape.atol);
      fused[0] = fused[0].to(torch::kFloat64) * weigh;
      literal[0] = literal[0] * weigh;
      RequireClose(fused, literal, shape.rtol, shape.atol);
    }
  }
}

}  // namespace
}  // namespace seqbench::simple_rnn
