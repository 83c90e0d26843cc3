#include "variants/simple_rnn/chunk_kernels.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "variants/core/batched_matmul.h"
#include "variants/core/tile_gemm.h"

namespace seqbench::simple_rnn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Whether the hand-written node applies: CPU tensors of one floating type it compiles for.
bool HandWritten(const std::vector<torch::Tensor>& tensors) {
  const auto dtype = tensors.front().scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kDouble) return false;
  return std::all_of(tensors.begin(), tensors.end(), [&](const torch::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == dtype;
  });
}

// A row-major [rows, columns] matrix `stride` values a row apart, read transposed when
// `transposed`.
template <typename scalar_t>
MatrixRef<scalar_t> Matrix(const scalar_t* data, int64_t rows, int64_t columns,
                           bool transposed = false, int64_t stride = 0) {
  return {data, rows, columns, stride > 0 ? stride : columns, transposed};
}

// The sizes of a call; a task is one (sequence, head) pair, numbered in [B,H] order.
struct ProductGeometry {
  int64_t batch, heads, chunks, chunk, width;
  explicit ProductGeometry(const torch::Tensor& v)
      : batch(v.size(0)), heads(v.size(1)), chunks(v.size(2)), chunk(v.size(3)), width(v.size(4)) {}
  int64_t tasks() const { return batch * heads; }
  int64_t model() const { return heads * width; }
  int64_t area() const { return width * width; }
  int64_t rows() const { return chunk * width; }  // one chunk's [C,dh] operand
  // Where task's chunk n starts in o (or its gradient): row b·N·C + n·C, column h·dh.
  int64_t output_offset(int64_t task, int64_t n) const {
    return ((task / heads * chunks + n) * chunk) * model() + task % heads * width;
  }
};

// Zeroes the entries above the diagonal of a [C,C] matrix: pairs (t, s) with s > t.
template <typename scalar_t>
void KeepCausal(scalar_t* scores, int64_t chunk) {
  for (int64_t t = 0; t < chunk; ++t)
    std::fill(scores + t * chunk + t + 1, scores + (t + 1) * chunk, scalar_t(0));
}

// One task's operands and results, each at the task's first value; `o` and `d_o` at the
// whole tensor's (chunks are placed by output_offset).
template <typename scalar_t>
struct ProductRows {
  const scalar_t *q, *k, *v, *decay;
  scalar_t *incoming, *state;  // forward writes both; backward reads them
  scalar_t* o;
};

// One task forward, chunk by chunk: scores = causal(q·kᵀ); o = scores·v + q·S_n;
// S_{n+1} = diag(decay)·(S_n + kᵀ·v). state holds S_0 on entry, S_N on exit.
template <typename scalar_t>
void ProductsForward(const ProductGeometry& geo, int64_t task, const ProductRows<scalar_t>& at,
                     scalar_t* scores, scalar_t* raw) {
  const int64_t c = geo.chunk, dh = geo.width, ld = geo.model();
  for (int64_t n = 0; n < geo.chunks; ++n) {
    const scalar_t *q = at.q + n * geo.rows(), *k = at.k + n * geo.rows();
    const scalar_t* v = at.v + n * geo.rows();
    std::copy_n(at.state, geo.area(), at.incoming + n * geo.area());
    TileGemm(Matrix(q, c, dh), Matrix(k, c, dh, true), scalar_t(0), scores, c);
    KeepCausal(scores, c);
    scalar_t* out = at.o + geo.output_offset(task, n);
    TileGemm(Matrix(scores, c, c), Matrix(v, c, dh), scalar_t(0), out, ld);
    TileGemm(Matrix(q, c, dh), Matrix<scalar_t>(at.state, dh, dh), scalar_t(1), out, ld);
    TileGemm(Matrix(k, c, dh, true), Matrix(v, c, dh), scalar_t(0), raw, dh);
    for (int64_t i = 0; i < dh; ++i) {
      const scalar_t d = at.decay[n * dh + i];
      scalar_t* s = at.state + i * dh;
      for (int64_t j = 0; j < dh; ++j) s[j] = d * (s[j] + raw[i * dh + j]);
    }
  }
}

// What one task's backward writes, at the task's first value. d_state: ∂L/∂S_N on entry,
// ∂L/∂S_0 on exit.
template <typename scalar_t>
struct ProductGradients {
  scalar_t *d_q, *d_k, *d_v, *d_decay, *d_state;
};

// Scratch of one thread's backward tasks.
template <typename scalar_t>
struct ProductScratch {
  std::vector<scalar_t> scores, d_scores, d_u;
  explicit ProductScratch(const ProductGeometry& geo)
      : scores(geo.chunk * geo.chunk), d_scores(geo.chunk * geo.chunk), d_u(geo.area()) {}
};

// The state update's backward for chunk n: ∂L/∂decay from S_n + kᵀ·v read back as
// S_{n+1}/decay (decay > 0), d_u = diag(decay)·dS_{n+1}, and the keys' and values' first
// gradient terms kᵀ·v gives them.
template <typename scalar_t>
void StateStepBackward(const ProductGeometry& geo, int64_t n, const ProductRows<scalar_t>& at,
                       const ProductGradients<scalar_t>& d, scalar_t* d_u) {
  const int64_t c = geo.chunk, dh = geo.width;
  const scalar_t* next = n + 1 < geo.chunks ? at.incoming + (n + 1) * geo.area() : at.state;
  for (int64_t i = 0; i < dh; ++i) {
    const scalar_t decay = at.decay[n * dh + i];
    scalar_t row_sum = 0;
    for (int64_t j = 0; j < dh; ++j) {
      row_sum += d.d_state[i * dh + j] * next[i * dh + j];
      d_u[i * dh + j] = decay * d.d_state[i * dh + j];
    }
    d.d_decay[n * dh + i] = row_sum / decay;
  }
  TileGemm(Matrix(at.v + n * geo.rows(), c, dh), Matrix<scalar_t>(d_u, dh, dh, true), scalar_t(0),
           d.d_k + n * geo.rows(), dh);  // v·dUᵀ
  TileGemm(Matrix(at.k + n * geo.rows(), c, dh), Matrix<scalar_t>(d_u, dh, dh), scalar_t(0),
           d.d_v + n * geo.rows(), dh);  // k·dU
}

// One task backward, chunks in reverse: each chunk's state step, then its outputs' terms
// (the scores recomputed), and dS_n = d_u + qᵀ·dO_n.
template <typename scalar_t>
void ProductsBackward(const ProductGeometry& geo, int64_t task, const ProductRows<scalar_t>& at,
                      const scalar_t* d_o, const ProductGradients<scalar_t>& d,
                      ProductScratch<scalar_t>& scratch) {
  const int64_t c = geo.chunk, dh = geo.width, ld = geo.model();
  scalar_t *scores = scratch.scores.data(), *d_scores = scratch.d_scores.data();
  for (int64_t n = geo.chunks - 1; n >= 0; --n) {
    StateStepBackward(geo, n, at, d, scratch.d_u.data());
    const scalar_t *q = at.q + n * geo.rows(), *k = at.k + n * geo.rows();
    const scalar_t *v = at.v + n * geo.rows(), *state = at.incoming + n * geo.area();
    const auto grad = Matrix(d_o + geo.output_offset(task, n), c, dh, false, ld);
    scalar_t *d_q = d.d_q + n * geo.rows(), *d_k = d.d_k + n * geo.rows();
    TileGemm(Matrix(q, c, dh), Matrix(k, c, dh, true), scalar_t(0), scores, c);
    KeepCausal(scores, c);
    TileGemm(grad, Matrix(v, c, dh, true), scalar_t(0), d_scores, c);  // dO·vᵀ
    KeepCausal(d_scores, c);
    TileGemm(Matrix<scalar_t>(scores, c, c, true), grad, scalar_t(1), d.d_v + n * geo.rows(),
             dh);                                                       // += scoresᵀ·dO
    TileGemm(grad, Matrix(state, dh, dh, true), scalar_t(0), d_q, dh);  // dO·S_nᵀ
    TileGemm(Matrix<scalar_t>(d_scores, c, c), Matrix(k, c, dh), scalar_t(1), d_q, dh);
    TileGemm(Matrix<scalar_t>(d_scores, c, c, true), Matrix(q, c, dh), scalar_t(1), d_k, dh);
    std::copy_n(scratch.d_u.data(), geo.area(), d.d_state);
    TileGemm(Matrix(q, c, dh, true), grad, scalar_t(1), d.d_state, dh);  // += qᵀ·dO
  }
}

class ProductsFunction : public torch::autograd::Function<ProductsFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in,
                               const torch::Tensor& decay_in, const torch::Tensor& initial) {
    const auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
    const auto decay = decay_in.contiguous();
    const ProductGeometry geo(v);
    auto incoming =
        torch::empty({geo.batch, geo.heads, geo.chunks, geo.width, geo.width}, v.options());
    auto final_state = initial.contiguous().clone();
    auto o = torch::empty({geo.batch, geo.chunks * geo.chunk, geo.model()}, v.options());
    AT_DISPATCH_FLOATING_TYPES(v.scalar_type(), "chunk_products", [&] {
      at::parallel_for(0, geo.tasks(), 1, [&](int64_t begin, int64_t end) {
        std::vector<scalar_t> scores(geo.chunk * geo.chunk), raw(geo.area());
        for (int64_t t = begin; t < end; ++t) {
          const int64_t rows = t * geo.chunks * geo.rows();
          const ProductRows<scalar_t> at{
              q.data_ptr<scalar_t>() + rows,
              k.data_ptr<scalar_t>() + rows,
              v.data_ptr<scalar_t>() + rows,
              decay.data_ptr<scalar_t>() + t * geo.chunks * geo.width,
              incoming.data_ptr<scalar_t>() + t * geo.chunks * geo.area(),
              final_state.data_ptr<scalar_t>() + t * geo.area(),
              o.data_ptr<scalar_t>()};
          ProductsForward(geo, t, at, scores.data(), raw.data());
        }
      });
    });
    ctx->save_for_backward({q, k, v, decay, incoming, final_state});
    return {o, final_state};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &decay = saved[3];
    const ProductGeometry geo(v);
    const auto dtype = v.scalar_type();
    const auto d_o = grad_outputs[0].to(dtype).contiguous();
    auto d_state = grad_outputs[1].to(dtype).contiguous().clone();
    auto d_q = torch::empty_like(q), d_k = torch::empty_like(k), d_v = torch::empty_like(v);
    auto d_decay = torch::empty_like(decay);
    AT_DISPATCH_FLOATING_TYPES(dtype, "chunk_products_backward", [&] {
      at::parallel_for(0, geo.tasks(), 1, [&](int64_t begin, int64_t end) {
        ProductScratch<scalar_t> scratch(geo);
        for (int64_t t = begin; t < end; ++t) {
          const int64_t rows = t * geo.chunks * geo.rows(), decays = t * geo.chunks * geo.width;
          const ProductRows<scalar_t> at{
              q.data_ptr<scalar_t>() + rows,
              k.data_ptr<scalar_t>() + rows,
              v.data_ptr<scalar_t>() + rows,
              decay.data_ptr<scalar_t>() + decays,
              saved[4].data_ptr<scalar_t>() + t * geo.chunks * geo.area(),
              saved[5].data_ptr<scalar_t>() + t * geo.area(),
              nullptr};
          const ProductGradients<scalar_t> grads{
              d_q.data_ptr<scalar_t>() + rows, d_k.data_ptr<scalar_t>() + rows,
              d_v.data_ptr<scalar_t>() + rows, d_decay.data_ptr<scalar_t>() + decays,
              d_state.data_ptr<scalar_t>() + t * geo.area()};
          ProductsBackward(geo, t, at, d_o.data_ptr<scalar_t>(), grads, scratch);
        }
      });
    });
    return {d_q, d_k, d_v, d_decay, d_state};
  }
};

// The same in ATen: batched products, one state update a chunk, the states stacked.
std::pair<torch::Tensor, torch::Tensor> ProductsWithAten(const torch::Tensor& q,
                                                         const torch::Tensor& k,
                                                         const torch::Tensor& v,
                                                         const torch::Tensor& decay,
                                                         torch::Tensor state) {
  const int64_t chunk = v.size(3);
  const auto causal = torch::ones({chunk, chunk}, v.options().dtype(torch::kBool)).tril();
  const auto scores = BatchedMatmul(q, k.transpose(-1, -2)).masked_fill_(~causal, 0.0);
  const auto raw = BatchedMatmul(k.transpose(-1, -2), v);  // [B,H,N,dh,dh]
  // Unbound once, so that the backward does not scatter per chunk into full-size buffers.
  const auto raws = raw.unbind(2), decays = decay.unsqueeze(-1).unbind(2);
  std::vector<torch::Tensor> incoming;
  incoming.reserve(raws.size());
  for (size_t n = 0; n < raws.size(); ++n) {
    incoming.push_back(state);
    state = decays[n] * (state + raws[n]);
  }
  const auto o = BatchedMatmul(scores, v) + BatchedMatmul(q, torch::stack(incoming, 2));
  return {o.permute({0, 2, 3, 1, 4}).reshape({v.size(0), v.size(2) * v.size(3), -1}), state};
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> ChunkProducts(const torch::Tensor& decayed_q,
                                                      const torch::Tensor& unscaled_k,
                                                      const torch::Tensor& v,
                                                      const torch::Tensor& decay,
                                                      const torch::Tensor& initial) {
  TORCH_CHECK(v.dim() == 5 && unscaled_k.sizes() == v.sizes() && decayed_q.sizes() == v.sizes() &&
                  decay.dim() == 4 && initial.dim() == 4,
              "chunk products: q, k and v [B,H,N,C,dh], decay [B,H,N,dh], initial [B,H,dh,dh]");
  if (!HandWritten({decayed_q, unscaled_k, v, decay, initial})) {
    return ProductsWithAten(decayed_q, unscaled_k, v, decay, initial);
  }
  TORCH_CHECK(decay.min().item<double>() > 0, "chunk products: every chunk decay must be positive");
  const auto outputs = ProductsFunction::apply(decayed_q, unscaled_k, v, decay, initial);
  return {outputs[0], outputs[1]};
}

}  // namespace seqbench::simple_rnn
