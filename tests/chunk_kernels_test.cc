// scan's hand-written chunk nodes (variants/simple_rnn/chunk_operands.h, chunk_kernels.h)
// against the step loop they replace: from one fused projection, the outputs, the final
// state and the gradients of all three inputs agree in float64, for ragged batches (a
// sequence of length 1 among them), T not a multiple of the chunk, chunks of one position
// and chunks longer than the sequence, decays near 0 and near 1.
#include "variants/simple_rnn/chunk_kernels.h"

#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "variants/simple_rnn/chunkwise.h"
#include "variants/simple_rnn/model.h"

namespace seqbench::simple_rnn {
namespace {

struct Shape {
  int64_t heads, width, chunk;
  std::vector<int64_t> lengths;  // T is the longest
  double gate_bias;              // b_g's value: sigmoid(6) ≈ 0.998, sigmoid(−3) ≈ 0.05
};

// The same layer through the step loop: split, scale, mask and decay by ATen, then one
// RecurrenceStep a position. Returns o: [B,T,D]; state carried in and out.
torch::Tensor StepLoopOf(const torch::Tensor& projected, const torch::Tensor& b_g,
                         const torch::Tensor& lengths, int64_t heads, torch::Tensor& state) {
  const int64_t batch = projected.size(0), length = projected.size(1);
  const auto mask = torch::arange(length).unsqueeze(0) < lengths.unsqueeze(1);
  const LayerInputs in = SplitProjections(projected, b_g, heads, mask);
  return RecurrenceLoop(in.q, in.k, in.v, Decay(in.decay_logits, mask), state)
      .reshape({batch, length, -1});
}

struct Leaves {
  torch::Tensor projected, b_g, initial;
  Leaves Copy() const {
    return {projected.clone().requires_grad_(), b_g.clone().requires_grad_(),
            initial.clone().requires_grad_()};
  }
};

void CheckAgainstStepLoop(const Shape& shape) {
  torch::manual_seed(7);
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const int64_t batch = static_cast<int64_t>(shape.lengths.size());
  const int64_t length = *std::max_element(shape.lengths.begin(), shape.lengths.end());
  const int64_t model = shape.heads * shape.width;
  const auto lengths = torch::tensor(shape.lengths, torch::kInt64);
  const Leaves leaves{
      torch::randn({batch, length, 4 * model}, options),
      torch::full({model}, shape.gate_bias, options) + 0.1 * torch::randn({model}, options),
      torch::randn({batch, shape.heads, shape.width, shape.width}, options)};
  const Leaves ours = leaves.Copy(), theirs = leaves.Copy();
  torch::Tensor our_state = ours.initial, their_state = theirs.initial;
  const auto o = ChunkwiseFromProjections(ours.projected, ours.b_g, shape.heads, lengths, our_state,
                                          shape.chunk);
  const auto expected = StepLoopOf(theirs.projected, theirs.b_g, lengths, shape.heads, their_state);
  REQUIRE(o.sizes() == expected.sizes());
  CHECK(torch::allclose(o, expected, 1e-9, 1e-10));
  CHECK(torch::allclose(our_state, their_state, 1e-9, 1e-10));
  // A weighted sum of outputs and final state, so that every gradient path is exercised.
  const auto w_o = torch::randn_like(expected), w_s = torch::randn_like(their_state);
  ((o * w_o).sum() + (our_state * w_s).sum()).backward();
  ((expected * w_o).sum() + (their_state * w_s).sum()).backward();
  CHECK(torch::allclose(ours.projected.grad(), theirs.projected.grad(), 1e-8, 1e-10));
  CHECK(torch::allclose(ours.b_g.grad(), theirs.b_g.grad(), 1e-8, 1e-10));
  CHECK(torch::allclose(ours.initial.grad(), theirs.initial.grad(), 1e-8, 1e-10));
}

TEST_CASE("scan's chunk nodes equal the step loop, values and gradients", "[scan][kernels]") {
  const std::vector<Shape> shapes = {
      {2, 4, 4, {10, 7, 1}, 2.0},  // ragged, T = 10 not a multiple of 4, a length of 1
      {1, 3, 1, {8, 5}, 0.0},      // chunks of one position
      {2, 4, 16, {6, 6}, 0.0},     // one chunk longer than the sequence, no padding
      {2, 8, 8, {16, 9}, 6.0},     // decays near 1
      {3, 2, 4, {12, 12}, -3.0},   // decays near 0: e^{-3·4} per chunk, within range
  };
  for (const Shape& shape : shapes) {
    DYNAMIC_SECTION("H=" << shape.heads << " dh=" << shape.width << " C=" << shape.chunk
                         << " T=" << shape.lengths.front() << " bias=" << shape.gate_bias) {
      CheckAgainstStepLoop(shape);
    }
  }
}

TEST_CASE("ChunkProducts refuses a chunk decay of 0", "[scan][kernels]") {
  // Backward reads S_n + kᵀv back as S_{n+1}/decay: a zero decay would divide by 0.
  const auto keys = torch::randn({1, 1, 2, 3, 4}, torch::kFloat64);
  auto decay = torch::rand({1, 1, 2, 4}, torch::kFloat64) + 0.5;
  decay[0][0][1][2] = 0.0;
  CHECK_THROWS(ChunkProducts(keys, keys, keys, decay, torch::zeros({1, 1, 4, 4}, torch::kFloat64)));
  decay[0][0][1][2] = 1e-300;
  CHECK_NOTHROW(
      ChunkProducts(keys, keys, keys, decay, torch::zeros({1, 1, 4, 4}, torch::kFloat64)));
}

}  // namespace
}  // namespace seqbench::simple_rnn
