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

// Whether the hand-written nodes apply: CPU tensors of one floating type they compile for.
bool HandWritten(const std::vector<torch::Tensor>& tensors) {
  const auto dtype = tensors.front().scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kDouble) return false;
  return std::all_of(tensors.begin(), tensors.end(), [&](const torch::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == dtype;
  });
}

// A contiguous row-major [rows, columns] matrix, read transposed when `transposed`.
template <typename scalar_t>
MatrixRef<scalar_t> Matrix(const scalar_t* data, int64_t rows, int64_t columns,
                           bool transposed = false) {
  return {data, rows, columns, columns, transposed};
}

// ---- The states carried from chunk to chunk.

// The sizes of a ChunkStates call; a task is one (sequence, head) pair.
struct StateGeometry {
  int64_t tasks, chunks, chunk, width;
  explicit StateGeometry(const torch::Tensor& v)
      : tasks(v.size(0) * v.size(1)), chunks(v.size(2)), chunk(v.size(3)), width(v.size(4)) {}
  int64_t area() const { return width * width; }
  int64_t rows() const { return chunk * width; }  // one chunk's keys or values
};

// One task forward: state holds S_0 on entry and S_N on exit; raw: [dh,dh] scratch.
template <typename scalar_t>
void StatesForward(const StateGeometry& geo, const scalar_t* keys, const scalar_t* values,
                   const scalar_t* decay, scalar_t* incoming, scalar_t* state, scalar_t* raw) {
  const int64_t dh = geo.width, area = geo.area();
  for (int64_t n = 0; n < geo.chunks; ++n) {
    std::copy_n(state, area, incoming + n * area);
    TileGemm(Matrix(keys + n * geo.rows(), geo.chunk, dh, true),
             Matrix(values + n * geo.rows(), geo.chunk, dh), scalar_t(0), raw, dh);  // kᵀ·v
    for (int64_t i = 0; i < dh; ++i) {
      const scalar_t d = decay[n * dh + i];
      for (int64_t j = 0; j < dh; ++j)
        state[i * dh + j] = d * (state[i * dh + j] + raw[i * dh + j]);
    }
  }
}

// What one task's backward reads and writes, each at the task's first value.
template <typename scalar_t>
struct StatesBackwardRows {
  const scalar_t *keys, *values, *decay, *incoming, *final_state, *d_incoming;
  scalar_t *d_keys, *d_values, *d_decay, *d_state;  // d_state: ∂L/∂S_N in, ∂L/∂S_0 out
};

// One task backward, chunk by chunk in reverse, with S_n + k_nᵀ·v_n read back as
// S_{n+1}/decay (decay > 0) instead of recomputing the product; d_u: [dh,dh] scratch.
template <typename scalar_t>
void StatesBackward(const StateGeometry& geo, const StatesBackwardRows<scalar_t>& at,
                    scalar_t* d_u) {
  const int64_t dh = geo.width, area = geo.area();
  for (int64_t n = geo.chunks - 1; n >= 0; --n) {
    const scalar_t* next = n + 1 < geo.chunks ? at.incoming + (n + 1) * area : at.final_state;
    for (int64_t i = 0; i < dh; ++i) {
      const scalar_t d = at.decay[n * dh + i];
      scalar_t row_sum = 0;
      for (int64_t j = 0; j < dh; ++j) {
        row_sum += at.d_state[i * dh + j] * next[i * dh + j];
        d_u[i * dh + j] = d * at.d_state[i * dh + j];
      }
      at.d_decay[n * dh + i] = row_sum / d;
    }
    TileGemm(Matrix(at.values + n * geo.rows(), geo.chunk, dh), Matrix(d_u, dh, dh, true),
             scalar_t(0), at.d_keys + n * geo.rows(), dh);  // v·dUᵀ
    TileGemm(Matrix(at.keys + n * geo.rows(), geo.chunk, dh), Matrix(d_u, dh, dh), scalar_t(0),
             at.d_values + n * geo.rows(), dh);  // k·dU
    const scalar_t* d_in = at.d_incoming + n * area;
    for (int64_t e = 0; e < area; ++e) at.d_state[e] = d_u[e] + d_in[e];
  }
}

class StatesFunction : public torch::autograd::Function<StatesFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& keys_in,
                               const torch::Tensor& values_in, const torch::Tensor& decay_in,
                               const torch::Tensor& initial) {
    const auto keys = keys_in.contiguous(), values = values_in.contiguous();
    const auto decay = decay_in.contiguous();
    const StateGeometry geo(values);
    auto incoming = torch::empty({values.size(0), values.size(1), geo.chunks, geo.width, geo.width},
                                 values.options());
    auto final_state = initial.contiguous().clone();
    AT_DISPATCH_FLOATING_TYPES(values.scalar_type(), "chunk_states", [&] {
      at::parallel_for(0, geo.tasks, 1, [&](int64_t begin, int64_t end) {
        std::vector<scalar_t> raw(geo.area());
        for (int64_t t = begin; t < end; ++t) {
          StatesForward(geo, keys.data_ptr<scalar_t>() + t * geo.chunks * geo.rows(),
                        values.data_ptr<scalar_t>() + t * geo.chunks * geo.rows(),
                        decay.data_ptr<scalar_t>() + t * geo.chunks * geo.width,
                        incoming.data_ptr<scalar_t>() + t * geo.chunks * geo.area(),
                        final_state.data_ptr<scalar_t>() + t * geo.area(), raw.data());
        }
      });
    });
    ctx->save_for_backward({keys, values, decay, incoming, final_state});
    return {incoming, final_state};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &keys = saved[0], &values = saved[1], &decay = saved[2];
    const StateGeometry geo(values);
    const auto dtype = values.scalar_type();
    const auto d_incoming = grad_outputs[0].to(dtype).contiguous();
    auto d_state = grad_outputs[1].to(dtype).contiguous().clone();
    auto d_keys = torch::empty_like(keys), d_values = torch::empty_like(values);
    auto d_decay = torch::empty_like(decay);
    AT_DISPATCH_FLOATING_TYPES(dtype, "chunk_states_backward", [&] {
      at::parallel_for(0, geo.tasks, 1, [&](int64_t begin, int64_t end) {
        std::vector<scalar_t> d_u(geo.area());
        for (int64_t t = begin; t < end; ++t) {
          const int64_t rows = t * geo.chunks * geo.rows(), states = t * geo.chunks * geo.area();
          const StatesBackwardRows<scalar_t> at{
              keys.data_ptr<scalar_t>() + rows,
              values.data_ptr<scalar_t>() + rows,
              decay.data_ptr<scalar_t>() + t * geo.chunks * geo.width,
              saved[3].data_ptr<scalar_t>() + states,
              saved[4].data_ptr<scalar_t>() + t * geo.area(),
              d_incoming.data_ptr<scalar_t>() + states,
              d_keys.data_ptr<scalar_t>() + rows,
              d_values.data_ptr<scalar_t>() + rows,
              d_decay.data_ptr<scalar_t>() + t * geo.chunks * geo.width,
              d_state.data_ptr<scalar_t>() + t * geo.area()};
          StatesBackward(geo, at, d_u.data());
        }
      });
    });
    return {d_keys, d_values, d_decay, d_state};
  }
};

// The same in ATen: the chunks' products batched, one update a chunk, the states stacked.
std::pair<torch::Tensor, torch::Tensor> StatesWithAten(const torch::Tensor& keys,
                                                       const torch::Tensor& values,
                                                       const torch::Tensor& decay,
                                                       torch::Tensor state) {
  const auto raw = BatchedMatmul(keys.transpose(-1, -2), values);  // [B,H,N,dh,dh]
  // Unbound once, so that the backward does not scatter per chunk into full-size buffers.
  const auto raws = raw.unbind(2), decays = decay.unsqueeze(-1).unbind(2);
  std::vector<torch::Tensor> incoming;
  incoming.reserve(raws.size());
  for (size_t n = 0; n < raws.size(); ++n) {
    incoming.push_back(state);
    state = decays[n] * (state + raws[n]);
  }
  return {torch::stack(incoming, 2), state};
}

// ---- The outputs.

// Where one (sequence, head, chunk) task's operands lie, for tensors numbered [B,H,N].
struct OutputTask {
  int64_t b, h, n;
  OutputTask(int64_t task, int64_t heads, int64_t chunks)
      : b(task / (heads * chunks)), h(task / chunks % heads), n(task % chunks) {}
};

// The sizes of a ChunkOutput call.
struct OutputGeometry {
  int64_t batch, heads, chunks, chunk, width;
  explicit OutputGeometry(const torch::Tensor& v)
      : batch(v.size(0)), heads(v.size(1)), chunks(v.size(2)), chunk(v.size(3)), width(v.size(4)) {}
  int64_t tasks() const { return batch * heads * chunks; }
  int64_t model() const { return heads * width; }
  // Task's first value of o (or its gradient): row b·N·C + n·C, column h·dh.
  int64_t output_offset(int64_t task) const {
    const OutputTask at(task, heads, chunks);
    return (at.b * chunks + at.n) * chunk * model() + at.h * width;
  }
};

class OutputFunction : public torch::autograd::Function<OutputFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& scores_in,
                               const torch::Tensor& v_in, const torch::Tensor& decayed_q_in,
                               const torch::Tensor& incoming_in) {
    const auto scores = scores_in.contiguous(), v = v_in.contiguous();
    const auto decayed_q = decayed_q_in.contiguous(), incoming = incoming_in.contiguous();
    const OutputGeometry geo(v);
    const int64_t c = geo.chunk, dh = geo.width, ld = geo.model();
    auto o = torch::empty({geo.batch, geo.chunks * c, ld}, v.options());
    AT_DISPATCH_FLOATING_TYPES(v.scalar_type(), "chunk_output", [&] {
      at::parallel_for(0, geo.tasks(), 1, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          scalar_t* out = o.data_ptr<scalar_t>() + geo.output_offset(t);
          TileGemm(Matrix(scores.data_ptr<scalar_t>() + t * c * c, c, c),
                   Matrix(v.data_ptr<scalar_t>() + t * c * dh, c, dh), scalar_t(0), out, ld);
          TileGemm(Matrix(decayed_q.data_ptr<scalar_t>() + t * c * dh, c, dh),
                   Matrix(incoming.data_ptr<scalar_t>() + t * dh * dh, dh, dh), scalar_t(1), out,
                   ld);
        }
      });
    });
    ctx->save_for_backward({scores, v, decayed_q, incoming});
    return o;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &scores = saved[0], &v = saved[1], &decayed_q = saved[2],
                        &incoming = saved[3];
    const auto d_o = grad_outputs[0].to(v.scalar_type()).contiguous();
    const OutputGeometry geo(v);
    const int64_t c = geo.chunk, dh = geo.width, ld = geo.model();
    auto d_scores = torch::empty_like(scores), d_v = torch::empty_like(v);
    auto d_q = torch::empty_like(decayed_q), d_incoming = torch::empty_like(incoming);
    AT_DISPATCH_FLOATING_TYPES(v.scalar_type(), "chunk_output_backward", [&] {
      at::parallel_for(0, geo.tasks(), 1, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const MatrixRef<scalar_t> grad{d_o.data_ptr<scalar_t>() + geo.output_offset(t), c, dh,
                                         ld};
          const scalar_t* s = scores.data_ptr<scalar_t>() + t * c * c;
          const scalar_t* values = v.data_ptr<scalar_t>() + t * c * dh;
          const scalar_t* q = decayed_q.data_ptr<scalar_t>() + t * c * dh;
          const scalar_t* state = incoming.data_ptr<scalar_t>() + t * dh * dh;
          TileGemm(grad, Matrix(values, c, dh, true), scalar_t(0),
                   d_scores.data_ptr<scalar_t>() + t * c * c, c);  // dO·vᵀ
          TileGemm(Matrix(s, c, c, true), grad, scalar_t(0), d_v.data_ptr<scalar_t>() + t * c * dh,
                   dh);  // scoresᵀ·dO
          TileGemm(grad, Matrix(state, dh, dh, true), scalar_t(0),
                   d_q.data_ptr<scalar_t>() + t * c * dh, dh);  // dO·Sᵀ
          TileGemm(Matrix(q, c, dh, true), grad, scalar_t(0),
                   d_incoming.data_ptr<scalar_t>() + t * dh * dh, dh);  // qᵀ·dO
        }
      });
    });
    return {d_scores, d_v, d_q, d_incoming};
  }
};

}  // namespace

std::pair<torch::Tensor, torch::Tensor> ChunkStates(const torch::Tensor& unscaled_k,
                                                    const torch::Tensor& v,
                                                    const torch::Tensor& decay,
                                                    const torch::Tensor& initial) {
  TORCH_CHECK(
      v.dim() == 5 && unscaled_k.sizes() == v.sizes() && decay.dim() == 4 && initial.dim() == 4,
      "chunk states: keys and values [B,H,N,C,dh], decay [B,H,N,dh], initial [B,H,dh,dh]");
  if (!HandWritten({unscaled_k, v, decay, initial})) {
    return StatesWithAten(unscaled_k, v, decay, initial);
  }
  TORCH_CHECK(decay.min().item<double>() > 0, "chunk states: every chunk decay must be positive");
  const auto outputs = StatesFunction::apply(unscaled_k, v, decay, initial);
  return {outputs[0], outputs[1]};
}

torch::Tensor ChunkOutput(const torch::Tensor& scores, const torch::Tensor& v,
                          const torch::Tensor& decayed_q, const torch::Tensor& incoming) {
  TORCH_CHECK(v.dim() == 5 && scores.dim() == 5 && decayed_q.sizes() == v.sizes(),
              "chunk output: scores [B,H,N,C,C], v and decayed_q [B,H,N,C,dh]");
  if (!HandWritten({scores, v, decayed_q, incoming})) {
    const auto o = BatchedMatmul(scores, v) + BatchedMatmul(decayed_q, incoming);
    return o.permute({0, 2, 3, 1, 4})
        .reshape({v.size(0), v.size(2) * v.size(3), v.size(1) * v.size(4)});
  }
  return OutputFunction::apply(scores, v, decayed_q, incoming);
}

}  // namespace seqbench::simple_rnn
