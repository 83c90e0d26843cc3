// TileGemm (variants/core/tile_gemm.h) against at::mm: every pair of transposes, row
// strides wider than the rows, beta 0 over a result full of NaN (it must not be read) and
// beta 1 accumulating, in float32 and float64, on shapes that are not square.
#include "variants/core/tile_gemm.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <vector>

namespace seqbench {
namespace {

// A [rows, columns] matrix stored in a [rows, stride] buffer (padding columns garbage).
template <typename scalar_t>
struct Stored {
  torch::Tensor buffer, matrix;
  Stored(int64_t rows, int64_t columns, int64_t stride, torch::ScalarType dtype) {
    buffer = torch::randn({rows, stride}, torch::TensorOptions().dtype(dtype));
    matrix = buffer.narrow(1, 0, columns);
  }
  MatrixRef<scalar_t> ref(bool transposed) const {
    return {buffer.data_ptr<scalar_t>(), matrix.size(0), matrix.size(1), buffer.size(1),
            transposed};
  }
  torch::Tensor op(bool transposed) const { return transposed ? matrix.t() : matrix; }
};

template <typename scalar_t>
void CheckProducts(torch::ScalarType dtype, double tolerance) {
  const int64_t m = 7, n = 5, k = 9;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      DYNAMIC_SECTION("a" << (ta ? "ᵀ" : "") << " b" << (tb ? "ᵀ" : "")) {
        torch::manual_seed(1);
        const Stored<scalar_t> a(ta ? k : m, ta ? m : k, 13, dtype);
        const Stored<scalar_t> b(tb ? n : k, tb ? k : n, 11, dtype);
        const auto expected = torch::mm(a.op(ta), b.op(tb));
        // beta 0: c holds NaN everywhere, the padding columns included.
        auto c = torch::full({m, 8}, std::numeric_limits<double>::quiet_NaN(),
                             torch::TensorOptions().dtype(dtype));
        TileGemm(a.ref(ta), b.ref(tb), scalar_t(0), c.data_ptr<scalar_t>(), 8);
        CHECK(torch::allclose(c.narrow(1, 0, n), expected, tolerance, tolerance));
        CHECK(torch::isnan(c.narrow(1, n, 3)).all().item<bool>());  // outside: untouched
        // beta 1: a second product accumulates onto the first.
        TileGemm(a.ref(ta), b.ref(tb), scalar_t(1), c.data_ptr<scalar_t>(), 8);
        CHECK(torch::allclose(c.narrow(1, 0, n), 2 * expected, tolerance, tolerance));
      }
    }
  }
}

TEST_CASE("TileGemm refuses a row stride shorter than its row", "[kernels]") {
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
  // a: 4x4 with stride 3; b fine; then c's stride under n.
  CHECK_THROWS(TileGemm(MatrixRef<float>{a.data(), 4, 4, 3}, MatrixRef<float>{b.data(), 4, 4, 4},
                        0.0f, c.data(), 4));
  CHECK_THROWS(TileGemm(MatrixRef<float>{a.data(), 4, 4, 4}, MatrixRef<float>{b.data(), 4, 4, 4},
                        0.0f, c.data(), 3));
  CHECK_NOTHROW(TileGemm(MatrixRef<float>{a.data(), 4, 4, 4}, MatrixRef<float>{b.data(), 4, 4, 4},
                         0.0f, c.data(), 4));
  CHECK(c[0] == 4.0f);
}

TEST_CASE("TileGemm equals at::mm for every transpose, stride and beta", "[kernels]") {
  INFO("calls the loaded BLAS directly: " << TileGemmCallsBlas());
  SECTION("float32") { CheckProducts<float>(torch::kFloat32, 1e-5); }
  SECTION("float64") { CheckProducts<double>(torch::kFloat64, 1e-12); }
}

}  // namespace
}  // namespace seqbench
