// TileGemm (tile_gemm.h). Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: the Fortran call
// takes the operands swapped, each with its transpose flag as given.
#include "variants/core/tile_gemm.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <climits>

namespace seqbench {
namespace {

template <typename scalar_t>
using FortranGemm = void (*)(const char* transa, const char* transb, const int* m, const int* n,
                             const int* k, const scalar_t* alpha, const scalar_t* a, const int* lda,
                             const scalar_t* b, const int* ldb, const scalar_t* beta, scalar_t* c,
                             const int* ldc);

template <typename scalar_t>
FortranGemm<scalar_t> LoadedGemm(const char* name) {
  return reinterpret_cast<FortranGemm<scalar_t>>(dlsym(RTLD_DEFAULT, name));
}

FortranGemm<float> SingleGemm() {
  static const FortranGemm<float> gemm = LoadedGemm<float>("sgemm_");
  return gemm;
}
FortranGemm<double> DoubleGemm() {
  static const FortranGemm<double> gemm = LoadedGemm<double>("dgemm_");
  return gemm;
}

template <typename scalar_t>
torch::Tensor Wrap(MatrixRef<scalar_t> m) {
  const auto options = torch::TensorOptions().dtype(c10::CppTypeToScalarType<scalar_t>::value);
  auto tensor =
      torch::from_blob(const_cast<scalar_t*>(m.data), {m.rows, m.columns}, {m.stride, 1}, options);
  return m.transposed ? tensor.t() : tensor;
}

// The fallback: ATen's product into a tensor over c.
template <typename scalar_t>
void AtenGemm(MatrixRef<scalar_t> a, MatrixRef<scalar_t> b, scalar_t beta, scalar_t* c,
              int64_t c_stride) {
  auto out = Wrap(MatrixRef<scalar_t>{c, a.op_rows(), b.op_columns(), c_stride});
  if (beta == scalar_t(0)) {
    torch::mm_out(out, Wrap(a), Wrap(b));
  } else {
    out.addmm_(Wrap(a), Wrap(b), beta);
  }
}

template <typename scalar_t>
void Gemm(FortranGemm<scalar_t> gemm, MatrixRef<scalar_t> a, MatrixRef<scalar_t> b, scalar_t beta,
          scalar_t* c, int64_t c_stride) {
  TORCH_CHECK(a.op_columns() == b.op_rows(), "TileGemm: inner sizes differ");
  // A row stride below the row's length would make BLAS refuse the call (OpenBLAS prints
  // and returns, c untouched).
  TORCH_CHECK(a.stride >= a.columns && b.stride >= b.columns && c_stride >= b.op_columns(),
              "TileGemm: a row stride is shorter than its row");
  const int64_t sizes[] = {a.rows, a.columns, b.rows, b.columns, a.stride, b.stride, c_stride};
  bool fits = true;
  for (const int64_t size : sizes) fits = fits && size <= INT_MAX;
  if (gemm == nullptr || !fits) return AtenGemm(a, b, beta, c, c_stride);
  const int m = static_cast<int>(b.op_columns()), n = static_cast<int>(a.op_rows()),
            k = static_cast<int>(a.op_columns());
  const int lda = static_cast<int>(b.stride), ldb = static_cast<int>(a.stride),
            ldc = static_cast<int>(c_stride);
  const char trans_a = b.transposed ? 'T' : 'N', trans_b = a.transposed ? 'T' : 'N';
  const scalar_t one = 1;
  gemm(&trans_a, &trans_b, &m, &n, &k, &one, b.data, &lda, a.data, &ldb, &beta, c, &ldc);
}

}  // namespace

void TileGemm(MatrixRef<float> a, MatrixRef<float> b, float beta, float* c, int64_t c_stride) {
  Gemm(SingleGemm(), a, b, beta, c, c_stride);
}

void TileGemm(MatrixRef<double> a, MatrixRef<double> b, double beta, double* c, int64_t c_stride) {
  Gemm(DoubleGemm(), a, b, beta, c, c_stride);
}

bool TileGemmCallsBlas() { return SingleGemm() != nullptr && DoubleGemm() != nullptr; }

}  // namespace seqbench
