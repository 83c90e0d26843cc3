// TileGemm: one small matrix product on raw pointers, for kernels that run many of them
// inside a parallel region (flash attention's tiles). It calls the BLAS LibTorch itself
// loaded (the Fortran sgemm_/dgemm_ found in the process at run time, as Debian's LibTorch
// links the system BLAS), and falls back to at::mm_out on tensors wrapping the pointers
// where no such symbol is loaded (a LibTorch with its BLAS linked in privately). Either
// way the product is the one ATen would compute; what the direct call saves is ATen's
// per-call work (views, dispatch, stride checks), several microseconds against a
// [128,64]·[64,128] tile's 2 MFLOP. Inside an OpenMP region OpenBLAS's OpenMP build (the
// one ci/install-deps selects) runs the call on the calling thread; its pthreads build
// may thread a large enough call itself.
//
// Thread-safety: any thread; the symbol lookup happens once, under a static's guard.
#pragma once

#include <cstdint>

namespace seqbench {

// A row-major matrix operand: `data` with `rows`·`columns` values `stride` apart per row,
// read transposed when `transposed` (then it stands for a [columns, rows] matrix).
template <typename scalar_t>
struct MatrixRef {
  const scalar_t* data;
  int64_t rows, columns, stride;
  bool transposed = false;
  int64_t op_rows() const { return transposed ? columns : rows; }
  int64_t op_columns() const { return transposed ? rows : columns; }
};

// c = a·b + beta·c, row-major: a is [m,k], b [k,n] after their transposes, c [m,n] with
// row stride c_stride (written in place). beta 0 ignores c's old values (NaN included).
void TileGemm(MatrixRef<float> a, MatrixRef<float> b, float beta, float* c, int64_t c_stride);
void TileGemm(MatrixRef<double> a, MatrixRef<double> b, double beta, double* c, int64_t c_stride);

// Whether TileGemm calls the BLAS directly (for tests and descriptions).
bool TileGemmCallsBlas();

}  // namespace seqbench
