#include "variants/core/batched_matmul.h"

#include <ATen/Parallel.h>

#include <cstdint>
#include <vector>

#include "variants/core/tile_gemm.h"

namespace seqbench {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Whether the fast path applies: CPU, float32 or float64, rank ≥ 3, equal leading
// dimensions and agreeing inner ones, nothing empty.
bool Supported(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.device().is_cpu() || !b.device().is_cpu() || a.scalar_type() != b.scalar_type())
    return false;
  if (a.scalar_type() != torch::kFloat && a.scalar_type() != torch::kDouble) return false;
  if (a.dim() < 3 || a.dim() != b.dim() || a.size(-1) != b.size(-2)) return false;
  if (a.numel() == 0 || b.numel() == 0) return false;
  for (int64_t d = 0; d + 2 < a.dim(); ++d)
    if (a.size(d) != b.size(d)) return false;
  return true;
}

// A batch of matrix operands as TileGemm reads them: in place where each matrix's last or
// second-last dimension is contiguous (row- or column-major), else from a contiguous copy.
// The leading dimensions' sizes and strides and the data pointer are read once here: At()
// runs once a matrix, up to B·H·T times a call in the step loops.
struct Operand {
  torch::Tensor storage;
  const char* data = nullptr;  // storage's first element
  int64_t element_size = 0;
  std::vector<int64_t> batch_sizes, batch_strides;  // the leading dimensions
  int64_t rows = 0, columns = 0, stride = 0;        // of the row-major matrix in memory
  bool transposed = false;                          // read as that matrix's transpose

  // `x`'s matrices, each read transposed when `read_transposed`.
  Operand(const torch::Tensor& x, bool read_transposed) : storage(x) {
    const int64_t r = x.size(-2), c = x.size(-1);
    bool column_major = false;
    if (x.stride(-1) == 1 && x.stride(-2) >= c) {
      stride = x.stride(-2);
    } else if (x.stride(-2) == 1 && x.stride(-1) >= r) {
      column_major = true;  // in memory: xᵀ, row-major
      stride = x.stride(-1);
    } else {
      storage = x.contiguous();
      stride = c;
    }
    rows = column_major ? c : r;
    columns = column_major ? r : c;
    transposed = column_major != read_transposed;
    data = static_cast<const char*>(storage.data_ptr());
    element_size = static_cast<int64_t>(storage.element_size());
    batch_sizes.assign(storage.sizes().begin(), storage.sizes().end() - 2);
    batch_strides.assign(storage.strides().begin(), storage.strides().end() - 2);
  }

  // Matrix `index` of the batch (the leading dimensions in row-major order).
  template <typename scalar_t>
  MatrixRef<scalar_t> At(int64_t index) const {
    int64_t offset = 0;
    for (size_t d = batch_sizes.size(); d-- > 0;) {
      offset += (index % batch_sizes[d]) * batch_strides[d];
      index /= batch_sizes[d];
    }
    const auto* first = reinterpret_cast<const scalar_t*>(data + offset * element_size);
    return {first, rows, columns, stride, transposed};
  }
};

// c = op(a)·op(b) for every matrix of the batch: a new tensor [...,m,n].
torch::Tensor Multiply(const torch::Tensor& a, bool transpose_a, const torch::Tensor& b,
                       bool transpose_b) {
  const Operand left(a, transpose_a), right(b, transpose_b);
  const int64_t m = transpose_a ? a.size(-1) : a.size(-2);
  const int64_t n = transpose_b ? b.size(-2) : b.size(-1);
  std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end() - 2);
  shape.push_back(m);
  shape.push_back(n);
  auto c = torch::empty(shape, a.options());
  const int64_t count = c.numel() / (m * n);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "BatchedMatmul", [&] {
    scalar_t* out = c.data_ptr<scalar_t>();
    at::parallel_for(0, count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        TileGemm(left.At<scalar_t>(i), right.At<scalar_t>(i), scalar_t(0), out + i * m * n, n);
      }
    });
  });
  return c;
}

class BatchedMatmulFunction : public torch::autograd::Function<BatchedMatmulFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& a,
                               const torch::Tensor& b) {
    ctx->save_for_backward({a, b});
    return Multiply(a, false, b, false);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& a = saved[0];
    const torch::Tensor& b = saved[1];
    const torch::Tensor& d_c = grad_outputs[0];
    torch::Tensor d_a, d_b;
    if (ctx->needs_input_grad(0)) d_a = Multiply(d_c, false, b, true);  // dC·Bᵀ
    if (ctx->needs_input_grad(1)) d_b = Multiply(a, true, d_c, false);  // Aᵀ·dC
    return {d_a, d_b};
  }
};

}  // namespace

torch::Tensor BatchedMatmul(const torch::Tensor& a, const torch::Tensor& b) {
  if (!Supported(a, b)) return torch::matmul(a, b);
  return BatchedMatmulFunction::apply(a, b);
}

}  // namespace seqbench
