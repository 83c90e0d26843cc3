// BatchedMatmul (variants/core/batched_matmul.h) against torch::matmul: values and both
// gradients, in float32 and float64, for operands laid out as the chunkwise form makes them
// (permuted views read in place, transposed views read column-major, a view that is
// neither and must be copied), one and several leading dimensions, non-square matrices;
// other dtypes and mismatched batches fall back to torch::matmul.
#include "variants/core/batched_matmul.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace seqbench {
namespace {

// BatchedMatmul and torch::matmul on copies of the same leaves: the products and the
// gradients of a weighted sum of them agree.
void CheckAgainstMatmul(const torch::Tensor& a_leaf, const torch::Tensor& b_leaf,
                        const std::function<torch::Tensor(const torch::Tensor&)>& a_view,
                        const std::function<torch::Tensor(const torch::Tensor&)>& b_view,
                        double tolerance) {
  const auto a1 = a_leaf.clone().requires_grad_(), b1 = b_leaf.clone().requires_grad_();
  const auto a2 = a_leaf.clone().requires_grad_(), b2 = b_leaf.clone().requires_grad_();
  const auto ours = BatchedMatmul(a_view(a1), b_view(b1));
  const auto theirs = torch::matmul(a_view(a2), b_view(b2));
  REQUIRE(ours.sizes() == theirs.sizes());
  CHECK(torch::allclose(ours, theirs, tolerance, tolerance));
  const auto weights = torch::randn_like(theirs);
  (ours * weights).sum().backward();
  (theirs * weights).sum().backward();
  CHECK(torch::allclose(a1.grad(), a2.grad(), tolerance, tolerance));
  CHECK(torch::allclose(b1.grad(), b2.grad(), tolerance, tolerance));
}

const auto kSame = [](const torch::Tensor& x) { return x; };

TEST_CASE("BatchedMatmul: values and gradients as torch::matmul's", "[batched_matmul]") {
  for (const auto& [dtype, tolerance] :
       {std::pair<torch::ScalarType, double>{torch::kFloat, 1e-5}, {torch::kDouble, 1e-12}}) {
    const auto options = torch::TensorOptions().dtype(dtype);
    DYNAMIC_SECTION("dtype " << c10::toString(dtype)) {
      torch::manual_seed(3);
      SECTION("contiguous, one and two leading dimensions, not square") {
        CheckAgainstMatmul(torch::randn({6, 7, 5}, options), torch::randn({6, 5, 3}, options),
                           kSame, kSame, tolerance);
        CheckAgainstMatmul(torch::randn({2, 3, 7, 5}, options), torch::randn({2, 3, 5, 4}, options),
                           kSame, kSame, tolerance);
      }
      SECTION("the chunkwise layout: [B,N,C,H,dh] permuted to [B,H,N,C,dh], in place") {
        const auto chunks = [](const torch::Tensor& x) { return x.permute({0, 3, 1, 2, 4}); };
        const auto keys_t = [](const torch::Tensor& x) {
          return x.permute({0, 3, 1, 2, 4}).transpose(-1, -2);  // [B,H,N,dh,C], column-major
        };
        const auto q = torch::randn({2, 3, 4, 2, 6}, options);
        const auto k = torch::randn({2, 3, 4, 2, 6}, options);
        CheckAgainstMatmul(q, k, chunks, keys_t, tolerance);  // scores: q·kᵀ
        CheckAgainstMatmul(k, q, keys_t, chunks, tolerance);  // a state: kᵀ·v
      }
      SECTION("neither row- nor column-major: copied") {
        const auto every_other = [](const torch::Tensor& x) {
          return x.slice(-1, 0, x.size(-1), 2).slice(-2, 0, x.size(-2), 2);
        };
        CheckAgainstMatmul(torch::randn({3, 8, 10}, options), torch::randn({3, 10, 6}, options),
                           every_other, every_other, tolerance);
      }
    }
  }
}

TEST_CASE("BatchedMatmul: other dtypes and shapes go to torch::matmul", "[batched_matmul]") {
  torch::manual_seed(4);
  // bfloat16: no fast path, the same product as torch::matmul's.
  const auto a = torch::randn({2, 3, 4}).to(torch::kBFloat16);
  const auto b = torch::randn({2, 4, 5}).to(torch::kBFloat16);
  CHECK(torch::equal(BatchedMatmul(a, b), torch::matmul(a, b)));
  // A broadcast batch and plain matrices: torch::matmul's semantics.
  const auto x = torch::randn({2, 3, 4}), w = torch::randn({4, 5});
  CHECK(torch::allclose(BatchedMatmul(x, w), torch::matmul(x, w)));
  const auto y = torch::randn({1, 4, 5});
  CHECK(torch::allclose(BatchedMatmul(x, y.expand({2, 4, 5})), torch::matmul(x, y)));
  const auto empty = torch::randn({0, 3, 4});
  CHECK(BatchedMatmul(empty, torch::randn({0, 4, 5})).sizes() == std::vector<int64_t>{0, 3, 5});
}

}  // namespace
}  // namespace seqbench
